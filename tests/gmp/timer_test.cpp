// tests/gmp/timer_test.cpp — runtime timers (gmp/timer.cpp): per-P heaps
// run by the scheduler. Deadline order, never early, stop/reset results,
// periodic timers, stop/reset racing with the firing (no double fire, no
// lost fire: every arming ends in exactly one of fired / stopped / replaced),
// resets that only move a timer later (the lock-free path),
// timers of idle Ps (also beyond the spinning limit), and an earlier timer breaking a long blocking poll.
//
// Timer objects outlive gort::run (a run abandons queued timers and touches
// them at tear-down). Callbacks run in scheduler context: they only count,
// record and ready goroutines (Event::set).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "gort/preempt.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::nanotime;
using namespace std::chrono_literals;

constexpr int64_t kMs = 1000 * 1000;

// A timer whose callback counts, remembers when it ran and sets an Event.
struct Probe {
  internal::Timer t;
  std::atomic<int> fired{0};
  std::atomic<int> early{0};      // ran before `due`
  std::atomic<int64_t> due{0};    // the first deadline armed by arm(), 0: unchecked
  std::atomic<int> concurrent{0}; // ran while already running
  std::atomic<bool> in_f{false};
  std::atomic<int64_t> fired_at{0};
  std::atomic<int> order{-1};
  std::atomic<int>* order_counter = nullptr;
  // The claim's seq f was given, and calls where it differed from
  // timer_seq (a stop or reset came after the claim).
  std::atomic<uint32_t> last_seq{0};
  std::atomic<int> stale{0};
  Event ev;
  Countdown* cd = nullptr;

  Probe() {
    t.arg = this;
    t.f = [](internal::Timer* t, int64_t now, uint32_t seq) {
      auto* self = static_cast<Probe*>(t->arg);
      if (self->in_f.exchange(true)) self->concurrent++;
      self->last_seq = seq;
      if (internal::timer_seq(t) != seq) self->stale++;
      // Not t->when: a periodic timer is re-armed before f runs, and a
      // reset may race with f.
      int64_t when = self->due.load();
      if (when != 0 && (now < when || nanotime() < when)) self->early++;
      self->fired_at = nanotime();
      if (self->order_counter != nullptr) self->order = self->order_counter->fetch_add(1);
      self->fired++;
      self->in_f = false;
      self->ev.set();
      if (self->cd != nullptr) self->cd->done();
    };
  }
};

// timer_add that remembers the deadline for the early check.
void arm(Probe& p, int64_t when, int64_t period) {
  p.due = when;
  internal::timer_add(&p.t, when, period);
}

class Timer : public ProcsTest {};
INSTANTIATE_TEST_SUITE_P(Procs, Timer, ::testing::Values(1, 2, 4), procs_name);

// On one P a single M runs the heap: callbacks come strictly in deadline
// order. The timers are added inside NoPreempt so none runs before the last
// one is in.
TEST(TimerOneP, FiresInDeadlineOrder) {
  constexpr int kTimers = 300;
  std::vector<std::unique_ptr<Probe>> probes;
  for (int i = 0; i < kTimers; i++) probes.push_back(std::make_unique<Probe>());
  std::atomic<int> order{0};
  std::vector<int64_t> whens(kTimers);
  run_checked(1, [&] {
    Countdown cd(kTimers);
    std::vector<int> idx(kTimers);
    std::iota(idx.begin(), idx.end(), 0);
    std::shuffle(idx.begin(), idx.end(), std::mt19937(42));
    {
      gort::NoPreempt np;
      int64_t base = nanotime() + 20 * kMs;
      for (int i : idx) {
        Probe& p = *probes[static_cast<size_t>(i)];
        p.order_counter = &order;
        p.cd = &cd;
        whens[static_cast<size_t>(i)] = base + int64_t{i} * 50 * 1000;  // 50 µs apart
        arm(p, whens[static_cast<size_t>(i)], 0);
      }
    }
    cd.wait();
  });
  for (int i = 0; i < kTimers; i++) {
    const Probe& p = *probes[static_cast<size_t>(i)];
    EXPECT_EQ(p.fired.load(), 1) << "timer " << i;
    EXPECT_EQ(p.order.load(), i) << "timer " << i << " fired out of deadline order";
    EXPECT_EQ(p.early.load(), 0) << "timer " << i;
  }
}

TEST_P(Timer, EveryTimerFiresOnceAndNeverEarly) {
  constexpr int kTimers = 500;
  std::vector<std::unique_ptr<Probe>> probes;
  for (int i = 0; i < kTimers; i++) probes.push_back(std::make_unique<Probe>());
  run_test([&] {
    Countdown cd(kTimers);
    std::mt19937 rng(7);
    // From several goroutines, so they land in several Ps' heaps.
    Countdown adders(4);
    for (int a = 0; a < 4; a++) {
      gort::go([&, a] {
        for (int i = a; i < kTimers; i += 4) {
          Probe& p = *probes[static_cast<size_t>(i)];
          p.cd = &cd;
          arm(p, nanotime() + int64_t{i % 50} * 200 * 1000, 0);
          if (i % 16 == 0) gort::yield();
        }
        adders.done();
      });
    }
    adders.wait();
    cd.wait();
  });
  int early = 0, wrong = 0, overlap = 0;
  for (auto& p : probes) {
    early += p->early.load();
    overlap += p->concurrent.load();
    if (p->fired.load() != 1) wrong++;
    EXPECT_FALSE(internal::timer_active(&p->t));
  }
  EXPECT_EQ(wrong, 0) << "timers that did not fire exactly once";
  EXPECT_EQ(early, 0) << "callbacks that ran before their deadline";
  EXPECT_EQ(overlap, 0);
}

TEST_P(Timer, StopAndResetResults) {
  auto a = std::make_unique<Probe>();
  auto b = std::make_unique<Probe>();
  auto c = std::make_unique<Probe>();
  run_test([&] {
    // Stopping an idle (never added) timer.
    EXPECT_FALSE(internal::timer_stop(&a->t));
    // Stopping a pending one: true, and it never fires.
    arm(*a, nanotime() + 10 * kMs, 0);
    EXPECT_TRUE(internal::timer_active(&a->t));
    EXPECT_TRUE(internal::timer_stop(&a->t));
    EXPECT_FALSE(internal::timer_active(&a->t));
    EXPECT_FALSE(internal::timer_stop(&a->t)) << "a second stop must report nothing stopped";
    // After firing: false.
    arm(*b, nanotime() + 1 * kMs, 0);
    b->ev.wait();
    EXPECT_TRUE(eventually([&] { return !internal::timer_active(&b->t); }));
    EXPECT_FALSE(internal::timer_stop(&b->t));
    // Reset of an expired timer re-arms it (reports it was not pending).
    b->ev.reset();
    EXPECT_FALSE(internal::timer_reset(&b->t, nanotime() + 1 * kMs, 0));
    b->ev.wait();
    EXPECT_EQ(b->fired.load(), 2);
    // Reset of a pending timer: true; it fires once, at the new time.
    int64_t t0 = nanotime();
    arm(*c, t0 + 2000 * kMs, 0);
    int64_t new_when = nanotime() + 5 * kMs;
    c->due = new_when;
    EXPECT_TRUE(internal::timer_reset(&c->t, new_when, 0));
    c->ev.wait();
    EXPECT_GE(c->fired_at.load(), new_when);
    EXPECT_LT(c->fired_at.load() - t0, 1000 * kMs) << "the reset did not move the timer earlier";
    // Past the stopped timer's deadline (and then some): still nothing.
    gort::sleep(absl::Milliseconds(15));
    EXPECT_EQ(a->fired.load(), 0) << "a stopped timer fired";
    EXPECT_TRUE(eventually([&] { return !internal::timer_active(&c->t); }));
    EXPECT_EQ(c->fired.load(), 1) << "a reset timer fired for its old and its new deadline";
  });
}

// gmp/timer.hpp, "Stale firings": f is given the timer's seq as of its
// claim; adds, stops and resets change it (a stop of an idle timer too),
// a lock-free reset later does not, and a periodic timer's ticks share it.
TEST_P(Timer, SeqChangesWithEveryStopAndReset) {
  auto p = std::make_unique<Probe>();
  auto q = std::make_unique<Probe>();
  run_test([&] {
    uint32_t s0 = internal::timer_seq(&p->t);
    arm(*p, nanotime() + 1 * kMs, 0);
    EXPECT_NE(internal::timer_seq(&p->t), s0) << "add";
    p->ev.wait();
    EXPECT_EQ(p->last_seq.load(), internal::timer_seq(&p->t));
    EXPECT_EQ(p->stale.load(), 0);
    // Idle (expired): stop returns false but still counts, so that a firing
    // claimed before it can tell.
    EXPECT_TRUE(eventually([&] { return !internal::timer_active(&p->t); }));
    uint32_t s1 = internal::timer_seq(&p->t);
    EXPECT_FALSE(internal::timer_stop(&p->t));
    EXPECT_NE(internal::timer_seq(&p->t), s1) << "stop of an idle timer";
    // A queued one-shot timer moved later (lock-free): its arming goes on.
    p->ev.reset();
    arm(*p, nanotime() + 40 * kMs, 0);
    uint32_t s2 = internal::timer_seq(&p->t);
    int64_t later = nanotime() + 50 * kMs;
    p->due = later;
    EXPECT_TRUE(internal::timer_reset(&p->t, later, 0));
    EXPECT_EQ(internal::timer_seq(&p->t), s2) << "a reset that only moves the timer later";
    p->ev.wait();
    EXPECT_EQ(p->last_seq.load(), s2);
    // Moved earlier: the locked path, a new seq.
    p->ev.reset();
    arm(*p, nanotime() + 2000 * kMs, 0);
    uint32_t s3 = internal::timer_seq(&p->t);
    p->due = 0;
    EXPECT_TRUE(internal::timer_reset(&p->t, nanotime() + 1 * kMs, 0));
    EXPECT_NE(internal::timer_seq(&p->t), s3);
    p->ev.wait();
    EXPECT_EQ(p->stale.load(), 0);
    // Periodic: ticks share the seq; a reset changes it for later ticks.
    arm(*q, nanotime() + 1 * kMs, 1 * kMs);
    uint32_t s4 = internal::timer_seq(&q->t);
    EXPECT_TRUE(eventually([&] { return q->fired.load() >= 3; }));
    EXPECT_EQ(q->last_seq.load(), s4);
    EXPECT_TRUE(internal::timer_reset(&q->t, nanotime() + 1 * kMs, 1 * kMs));
    uint32_t s5 = internal::timer_seq(&q->t);
    EXPECT_NE(s5, s4);
    int n = q->fired.load();
    EXPECT_TRUE(eventually([&] { return q->fired.load() >= n + 3; }));
    // A tick claimed before the reset may finish late, on an M the kernel
    // descheduled (several Ps, the race detector), and leave s4 behind; the
    // ticks after it carry s5.
    EXPECT_TRUE(eventually([&] { return q->last_seq.load() == s5; }));
    EXPECT_TRUE(internal::timer_stop(&q->t));
    EXPECT_NE(internal::timer_seq(&q->t), s5);
  });
}

// The window the seq exists for: f has been claimed (a one-shot timer is
// already idle) when the owner stops the timer. stop returns false, and f,
// released only then, sees that its seq is stale. f holds its M until a
// plain thread has stopped the timer: nothing else needs an M meanwhile
// (an M that runs timers while it looks for work counts as spinning, so
// goroutines f would ready wait for f, as in Go).
TEST(TimerSeq, StopAfterTheClaimMakesTheFiringStale) {
  struct Held {
    internal::Timer t;
    std::atomic<bool> in_f{false};
    std::atomic<bool> release{false};
    std::atomic<int> stale{-1};
  };
  auto h = std::make_unique<Held>();
  h->t.arg = h.get();
  h->t.f = [](internal::Timer* t, int64_t, uint32_t seq) {
    auto* self = static_cast<Held*>(t->arg);
    self->in_f = true;
    auto limit = std::chrono::steady_clock::now() + 20s;
    while (!self->release.load() && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
    self->stale = internal::timer_seq(t) != seq ? 1 : 0;
  };
  std::atomic<int> stopped{-1};
  run_checked(2, [&] {
    std::thread owner([&] {
      auto limit = std::chrono::steady_clock::now() + 20s;
      while (!h->in_f.load() && std::chrono::steady_clock::now() < limit) std::this_thread::sleep_for(100us);
      stopped = internal::timer_stop(&h->t) ? 1 : 0;
      h->release = true;
    });
    internal::timer_add(&h->t, nanotime() + 1 * kMs, 0);
    gort::blocking([&] { owner.join(); });
    EXPECT_TRUE(h->in_f.load()) << "the timer never fired";
    EXPECT_EQ(stopped.load(), 0) << "the firing was already claimed";
    EXPECT_TRUE(eventually([&] { return h->stale.load() >= 0; }, 20s));
    EXPECT_EQ(h->stale.load(), 1) << "f did not see the stop that came after its claim";
  });
}

// Between making a claimed one-shot timer idle and settling its modwhen,
// the runner holds only its own heap's lock. The owner may meanwhile re-arm
// the timer (a plain thread: on P 0's heap), move it earlier (the locked
// path) and push it an hour later (the lock-free path, which only writes
// modwhen). The runner must not undo that push: the timer stays queued and
// does not fire at the earlier time (it did once, when the runner stored a
// plain 0, and a timer channel received a value from before a reset).
struct PushAfterClaim {
  Probe probe;
  std::atomic<bool> done{false};
  std::atomic<bool> pushed{false};
};
// Atomic: the hook reads it on the runner's thread (the race build checks
// the tests, not the runtime's own synchronisation).
std::atomic<PushAfterClaim*> push_after_claim{nullptr};

TEST(TimerSeq, APushLaterJustAfterAClaimSurvivesTheRunner) {
  auto state = std::make_unique<PushAfterClaim>();
  push_after_claim.store(state.get());
  internal::timers_claimed_hook_for_test([](internal::Timer* t, internal::P* running) {
    PushAfterClaim* s = push_after_claim.load();
    // P 0's heap is where the owner re-arms it: its lock must be free.
    if (s == nullptr || t != &s->probe.t || running == internal::sched.allp[0] || s->done.load()) return;
    std::thread owner([s, t] {
      internal::timer_reset(t, nanotime() + 3600 * 1000 * kMs, 0);  // idle: re-added
      internal::timer_reset(t, nanotime() + 1 * kMs, 0);            // earlier: locked path
      bool queued = internal::timer_reset(t, nanotime() + 3600 * 1000 * kMs, 0);
      s->pushed = queued && t->modwhen.load() != 0;
    });
    owner.join();
    s->done = true;
  });
  run_checked(2, [&] {
    // Arm from goroutines until one firing is claimed on P 1's heap.
    for (int attempt = 0; attempt < 400 && !state->done.load(); attempt++) {
      int before = state->probe.fired.load();
      Countdown armed(1);
      gort::go([&] {
        internal::timer_add(&state->probe.t, nanotime() + kMs / 10, 0);
        armed.done();
      });
      armed.wait();
      ASSERT_TRUE(eventually([&] { return state->probe.fired.load() > before; }));
    }
    ASSERT_TRUE(state->done.load()) << "no firing was claimed on P 1's heap";
    EXPECT_TRUE(state->pushed.load()) << "the last reset did not take the lock-free path";
    int fired = state->probe.fired.load();
    gort::sleep(absl::Milliseconds(50));
    EXPECT_EQ(state->probe.fired.load(), fired) << "the push an hour later was undone: it fired at the earlier time";
    EXPECT_TRUE(internal::timer_stop(&state->probe.t)) << "the timer is no longer queued for the hour";
  });
  internal::timers_claimed_hook_for_test(nullptr);
  push_after_claim.store(nullptr);
}

TEST_P(Timer, PeriodicTimerFiresUntilStopped) {
  auto p = std::make_unique<Probe>();
  run_test([&] {
    int64_t start = nanotime();
    arm(*p, start + 1 * kMs, 1 * kMs);
    EXPECT_TRUE(eventually([&] { return p->fired.load() >= 5; }));
    // Never faster than its period: the 5th tick is due at start + 5 ms.
    EXPECT_GE(nanotime() - start, 5 * kMs);
    // A periodic timer is always queued (re-armed before each call of f).
    EXPECT_TRUE(internal::timer_stop(&p->t));
    EXPECT_FALSE(internal::timer_active(&p->t));
    // A call claimed before stop may still be on its way, however long its
    // M is descheduled (a loaded machine, the race detector): at most one.
    int n = p->fired.load();
    gort::sleep(absl::Milliseconds(20));
    EXPECT_LE(p->fired.load(), n + 1) << "a stopped periodic timer kept firing";
    EXPECT_EQ(p->early.load(), 0);
    EXPECT_EQ(p->concurrent.load(), 0);
  });
}

// Each timer is owned by one goroutine, which re-arms, stops and resets it
// at random while the scheduler fires it. Every arming (add or reset) must
// end in exactly one of: fired, stopped (stop returned true) or replaced
// (reset returned true).
TEST_P(Timer, StopAndResetRacingWithFiring) {
  constexpr int kTimers = 16;
  constexpr int kOps = 3000;
  std::vector<std::unique_ptr<Probe>> probes;
  for (int i = 0; i < kTimers; i++) probes.push_back(std::make_unique<Probe>());
  std::vector<int64_t> arms(kTimers), stops(kTimers), replaced(kTimers);
  run_test([&] {
    Countdown cd(kTimers);
    for (int i = 0; i < kTimers; i++) {
      gort::go([&, i] {
        Probe& p = *probes[static_cast<size_t>(i)];
        uint64_t rng = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1);
        for (int k = 0; k < kOps; k++) {
          rng ^= rng << 13;
          rng ^= rng >> 7;
          rng ^= rng << 17;
          int64_t delay = static_cast<int64_t>(rng % 100) * 1000;  // 0-100 µs
          switch ((rng >> 20) % 5) {
            case 0:
            case 1:
              arms[static_cast<size_t>(i)]++;
              if (internal::timer_reset(&p.t, nanotime() + delay, 0)) replaced[static_cast<size_t>(i)]++;
              break;
            case 2:
              if (internal::timer_stop(&p.t)) stops[static_cast<size_t>(i)]++;
              break;
            case 3:
              gort::yield();
              break;
            case 4: {
              auto end = nanotime() + delay / 4;
              while (nanotime() < end) {
              }
              break;
            }
          }
        }
        cd.done();
      });
    }
    cd.wait();
    // Let the last armings fire, and their callbacks return.
    EXPECT_TRUE(eventually([&] {
      for (size_t u = 0; u < probes.size(); u++) {
        if (probes[u]->fired.load() + stops[u] + replaced[u] != arms[u]) return false;
      }
      return true;
    }));
  });
  int64_t total_fired = 0, total_stops = 0, total_replaced = 0;
  for (int i = 0; i < kTimers; i++) {
    const Probe& p = *probes[static_cast<size_t>(i)];
    size_t u = static_cast<size_t>(i);
    total_fired += p.fired.load();
    total_stops += stops[u];
    total_replaced += replaced[u];
    EXPECT_EQ(p.fired.load() + stops[u] + replaced[u], arms[u])
        << "timer " << i << ": " << arms[u] << " armings, " << p.fired.load() << " fired, " << stops[u]
        << " stopped, " << replaced[u] << " replaced";
    // Not checked here: `concurrent` (a re-armed one-shot timer may fire on
    // another M while its previous f still runs, as in Go).
  }
  // Each outcome happened often enough for the races to matter.
  EXPECT_GT(total_fired, 100);
  EXPECT_GT(total_stops, 100);
  EXPECT_GT(total_replaced, 100);
}

// A queued one-shot timer moved later takes the lock-free path (modwhen):
// it stays at its old place in the heap, and when that comes due the runner
// must move it, not fire it. It fires once, at the last time asked for.
TEST_P(Timer, ResetLaterFiresOnceAtTheLastTime) {
  auto p = std::make_unique<Probe>();
  run_test([&] {
    int64_t t0 = nanotime();
    arm(*p, t0 + 40 * kMs, 0);
    int64_t last = 0;
    for (int i = 1; i <= 4; i++) {
      last = t0 + (40 + 10 * i) * kMs;
      p->due = last;
      EXPECT_TRUE(internal::timer_reset(&p->t, last, 0));
      EXPECT_EQ(p->t.modwhen.load(), last) << "push " << i << " did not take the lock-free path";
    }
    p->ev.wait();
    EXPECT_GE(p->fired_at.load(), last) << "fired at an earlier, replaced time";
    EXPECT_EQ(p->early.load(), 0);
    EXPECT_TRUE(eventually([&] { return !internal::timer_active(&p->t); }));
    gort::sleep(absl::Milliseconds(20));
    EXPECT_EQ(p->fired.load(), 1);
    EXPECT_EQ(p->t.modwhen.load(), 0);
  });
}

// Stop and an earlier reset after lock-free pushes: the pending later time
// is forgotten.
TEST_P(Timer, StopOrResetEarlierAfterAPushLater) {
  auto a = std::make_unique<Probe>();
  auto b = std::make_unique<Probe>();
  run_test([&] {
    int64_t t0 = nanotime();
    arm(*a, t0 + 20 * kMs, 0);
    EXPECT_TRUE(internal::timer_reset(&a->t, t0 + 30 * kMs, 0));
    EXPECT_TRUE(internal::timer_stop(&a->t));
    EXPECT_FALSE(internal::timer_active(&a->t));

    arm(*b, t0 + 500 * kMs, 0);
    EXPECT_TRUE(internal::timer_reset(&b->t, t0 + 900 * kMs, 0));  // lock-free
    int64_t early = nanotime() + 5 * kMs;
    b->due = early;
    EXPECT_TRUE(internal::timer_reset(&b->t, early, 0));  // earlier: the locked path
    b->ev.wait();
    EXPECT_LT(b->fired_at.load() - t0, 400 * kMs) << "the earlier reset was lost";
    EXPECT_EQ(b->early.load(), 0);
    gort::sleep(absl::Milliseconds(40));
    EXPECT_EQ(a->fired.load(), 0) << "a stopped timer fired at its pushed-back time";
    EXPECT_EQ(b->fired.load(), 1);
  });
}

// Lock-free pushes racing with the firing on every P count: each arming
// ends exactly once, fired or replaced (a push that returned true kept the
// old arming from firing; one that returned false re-armed an expired
// timer).
TEST_P(Timer, ResetLaterRacingWithFiring) {
  constexpr int kTimers = 8;
  constexpr int kOps = 2000;
  std::vector<std::unique_ptr<Probe>> probes;
  for (int i = 0; i < kTimers; i++) probes.push_back(std::make_unique<Probe>());
  std::vector<int64_t> arms(kTimers), replaced(kTimers), lockfree(kTimers);
  run_test([&] {
    Countdown cd(kTimers);
    for (int i = 0; i < kTimers; i++) {
      gort::go([&, i] {
        size_t u = static_cast<size_t>(i);
        Probe& p = *probes[u];
        uint64_t rng = 0xD1B54A32D192ED03ull * static_cast<uint64_t>(i + 1);
        int64_t target = 0;
        for (int k = 0; k < kOps; k++) {
          rng ^= rng << 13;
          rng ^= rng >> 7;
          rng ^= rng << 17;
          int64_t step = static_cast<int64_t>(rng % 40) * 1000;  // 0-40 µs
          if ((rng >> 24) % 3 != 0) {
            // Mostly later than the last arming (the lock-free path);
            // otherwise from now, which may be earlier (the locked path).
            int64_t now = nanotime();
            target = ((rng >> 30) % 4 != 0 ? std::max(target, now) : now) + step;
            arms[u]++;
            if (internal::timer_reset(&p.t, target, 0)) replaced[u]++;
            if (p.t.modwhen.load() == target) lockfree[u]++;
          } else {
            auto end = nanotime() + 2 * step;
            while (nanotime() < end) {
            }
            gort::yield();  // the scheduler runs due timers
          }
        }
        cd.done();
      });
    }
    cd.wait();
    EXPECT_TRUE(eventually([&] {
      for (size_t u = 0; u < probes.size(); u++) {
        if (probes[u]->fired.load() + replaced[u] != arms[u]) return false;
      }
      return true;
    }));
  });
  int64_t total_fired = 0, total_lockfree = 0;
  for (size_t u = 0; u < probes.size(); u++) {
    total_fired += probes[u]->fired.load();
    total_lockfree += lockfree[u];
    EXPECT_EQ(probes[u]->fired.load() + replaced[u], arms[u])
        << "timer " << u << ": " << arms[u] << " armings, " << probes[u]->fired.load() << " fired, "
        << replaced[u] << " replaced";
  }
  EXPECT_GT(total_fired, 100);
  EXPECT_GT(total_lockfree, 100);
}

// Timers live in the heap of the P that added them. Here they are added on
// every P, then every goroutine parks: each P's M may go idle, and the
// timers must still fire (served by the M that waits in the poller or by
// another P's M).
TEST(TimerIdleP, TimersOfIdlePsStillFire) {
  for (int procs : {2, 4}) {
    constexpr int kGoroutines = 16;
    std::vector<std::unique_ptr<Probe>> probes;
    for (int i = 0; i < kGoroutines; i++) probes.push_back(std::make_unique<Probe>());
    std::set<int> ps;
    std::mutex ps_mu;
    std::set<int> running;  // Ps seen running these goroutines
    run_checked(procs, [&] {
      Countdown cd(kGoroutines);
      for (int i = 0; i < kGoroutines; i++) {
        gort::go([&, i] {
          // Busy until at least two Ps run these goroutines, so that the
          // timers go to more than one heap. Not a fixed time: on a loaded
          // machine the second P's thread may get no CPU for a long while.
          auto start = nanotime();
          for (;;) {
            size_t seen;
            {
              std::lock_guard<std::mutex> lock(ps_mu);
              // Preemption may move this goroutine between the loads; a
              // stale M's P may be null by then.
              internal::P* on = __atomic_load_n(&internal::getg()->m->p, __ATOMIC_RELAXED);
              if (on != nullptr) running.insert(on->id);
              seen = running.size();
            }
            int64_t now = nanotime();
            if ((seen >= 2 && now - start >= 5 * kMs) || now - start >= 20000 * kMs) break;
          }
          Probe& p = *probes[static_cast<size_t>(i)];
          arm(p, nanotime() + 30 * kMs, 0);
          internal::P* on = __atomic_load_n(&p.t.p, __ATOMIC_ACQUIRE);
          {
            std::lock_guard<std::mutex> lock(ps_mu);
            if (on != nullptr) ps.insert(on->id);
          }
          p.ev.wait();  // everybody parks
          cd.done();
        });
      }
      cd.wait();
    });
    for (auto& p : probes) EXPECT_EQ(p->fired.load(), 1) << procs << " P";
    EXPECT_GE(ps.size(), 2u) << procs << " P: the timers all went to one P; the test proved less";
  }
}

// A timer due on an idle P must fire even when the M that finds nothing may
// not steal: 2 * nmspinning >= busy Ps, because the M woken to spin has not
// got a CPU yet. Here that spinner is counted and never comes (one more in
// nmspinning, for at most 2 s). Before, the M with the other P gave its P
// back without looking at the idle P's timers, its poll returned at once
// for that timer, it took its P again and went round until the spinner came:
// 3.8 ms in the sleepers benchmark, the whole 2 s here.
TEST(TimerIdleP, TimersOfAnIdlePFireBeyondTheSpinningLimit) {
  constexpr int kRounds = 10;
  std::vector<std::unique_ptr<Probe>> probes;
  for (int i = 0; i < kRounds; i++) probes.push_back(std::make_unique<Probe>());
  int late = 0;
  int apart = 0;  // rounds where the timer went to the P the spinner did not hold
  int64_t worst = 0;
  run_checked(2, [&] {
    for (int r = 0; r < kRounds; r++) {
      Probe& probe = *probes[static_cast<size_t>(r)];
      std::atomic<bool> armed{false};
      std::atomic<bool> fake_spinner{false};
      std::atomic<int> spinner_p{-1};
      std::atomic<int64_t> due{0};
      Countdown cd(2);
      auto my_p = [] {
        internal::P* on = __atomic_load_n(&internal::getg()->m->p, __ATOMIC_RELAXED);
        return on == nullptr ? -1 : on->id;
      };
      // Holds one P until the timer is armed on the other and its goroutine
      // has parked, so that this P is the last one to go idle: the one the
      // poller's M takes when it wakes.
      gort::go([&] {
        while (!armed.load()) spinner_p = my_p();
        int64_t t = nanotime();
        while (nanotime() - t < 2 * kMs) {
        }
        cd.done();
      });
      gort::go([&] {
        // Onto the other P (by a steal or after a preemption of the spinner).
        int64_t start = nanotime();
        while (nanotime() - start < 20000 * kMs) {
          int s = spinner_p.load();
          if (s >= 0 && my_p() >= 0 && my_p() != s) break;
          gort::yield();
        }
        int here = my_p();
        internal::sched.nmspinning.fetch_add(1);
        fake_spinner = true;
        due = nanotime() + 20 * kMs;
        arm(probe, due.load(), 0);
        if (here != spinner_p.load()) apart++;
        armed = true;
        probe.ev.wait();
        cd.done();
      });
      // The spinner that never comes leaves after 2 s at most.
      std::thread undo([&] {
        while (!fake_spinner.load()) std::this_thread::yield();
        eventually([&] { return probe.fired.load() != 0; }, std::chrono::seconds(2));
        internal::sched.nmspinning.fetch_sub(1);
      });
      cd.wait();
      undo.join();
      int64_t lateness = probe.fired_at.load() - due.load();
      worst = std::max(worst, lateness);
      if (lateness > 500 * kMs) late++;
    }
  });
  for (auto& p : probes) EXPECT_EQ(p->fired.load(), 1);
  EXPECT_EQ(late, 0) << late << " of " << kRounds
                     << " timers of an idle P waited for the spinner that never came (worst " << worst / kMs
                     << " ms)";
  EXPECT_GE(apart, kRounds / 2) << "the timer went to the spinner's P in most rounds: the test proved less";
}

// The only M blocks in the poller until a 10 s timer; then a plain thread
// adds a 10 ms timer, which must fire long before the poll's old timeout.
// With `lose_wakeup`, the adder's wake-up is lost (a test hook skips it),
// and a goroutine inside blocking() keeps sysmon at its paced rounds (it
// sleeps deep only while nothing runs at all, and then no longer than the
// next timer it knew of).
void earlier_timer_ends_a_long_poll(int procs, bool lose_wakeup) {
  auto long_timer = std::make_unique<Probe>();
  auto short_timer = std::make_unique<Probe>();
  std::atomic<int64_t> added_at{0};
  std::atomic<bool> poller_was_blocked{false};
  run_checked(procs, [&] {
    arm(*long_timer, nanotime() + 10000 * kMs, 0);
    std::atomic<bool> release{false};
    gort::WaitGroup released;  // joined before `release` goes out of scope
    if (lose_wakeup) {
      released.add(1);
      gort::go([&] {
        gort::blocking([&] {
          while (!release.load()) ::usleep(1000);
        });
        released.done();
      });
    }
    std::thread adder([&] {
      // Wait until an M sleeps in the poller with the 10 s timeout.
      poller_was_blocked = eventually([] {
        int64_t until = internal::sched.poll_until.load();
        return until != 0 && until - nanotime() > 5000 * kMs;
      });
      if (lose_wakeup) internal::timers_skip_poller_wake_for_test(true);
      added_at = nanotime();
      arm(*short_timer, added_at.load() + 10 * kMs, 0);
      internal::timers_skip_poller_wake_for_test(false);
    });
    short_timer->ev.wait();
    release = true;
    released.wait();
    adder.join();
    EXPECT_TRUE(internal::timer_stop(&long_timer->t)) << "the 10 s timer is gone";
  });
  EXPECT_TRUE(poller_was_blocked.load()) << procs << " P: no M blocked in the poller";
  EXPECT_EQ(short_timer->fired.load(), 1);
  EXPECT_EQ(long_timer->fired.load(), 0);
  // Generous: the point is "not after the 10 s timeout".
  EXPECT_LT(short_timer->fired_at.load() - added_at.load(), 5000 * kMs)
      << procs << " P: the earlier timer waited for the poll's old timeout";
}

// A goroutine sleeps (its timer goes to its P's heap) and its P then runs a
// goroutine that never yields (no slice ends in this configuration), while
// the other P idles: the idle P's M must serve the timer (Go's
// wakeNetPoller gets an M into the poller), not the busy P once it next
// schedules. The spinner gives up after 300 ms, so a missed timer shows
// as a sleep that long instead of a hang.
TEST(TimerBusyP, TimerOnABusyPFiresWhileAnotherPIdles) {
  constexpr int kRounds = 40;
  int late = 0;
  int64_t worst = 0;
  run_checked(unpreempted_cfg(2), [&] {
    for (int r = 0; r < kRounds; r++) {
      std::atomic<bool> stop{false};
      Countdown cd(1);
      gort::go([&] {
        int64_t start = nanotime();
        while (!stop.load(std::memory_order_relaxed) && nanotime() - start < 300 * kMs) {
        }
        cd.done();
      });
      int64_t t0 = nanotime();
      gort::sleep(absl::Milliseconds(2));
      int64_t slept = nanotime() - t0;
      stop.store(true);
      cd.wait();
      worst = std::max(worst, slept);
      if (slept > 100 * kMs) late++;
    }
  });
  EXPECT_EQ(late, 0) << late << " of " << kRounds << " 2 ms sleeps waited for the spinner (worst "
                     << worst / kMs << " ms)";
}

// Adding the earlier timer breaks the poll.
TEST(TimerPoll, EarlierTimerFromAPlainThreadBreaksALongPoll) {
  for (int procs : {1, 2}) earlier_timer_ends_a_long_poll(procs, false);
}

// With that wake-up lost, sysmon sees the overdue timer and breaks the
// poll. Before, it started an M for an overdue timer only when nobody was
// polling, and the timer waited for the poll's 10 s timeout.
TEST(TimerPoll, SysmonBreaksAPollThatMissedAnEarlierTimer) {
  for (int procs : {1, 2}) earlier_timer_ends_a_long_poll(procs, true);
}

}  // namespace
}  // namespace gort::test

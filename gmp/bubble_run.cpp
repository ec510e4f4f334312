// gmp/bubble_run.cpp — a synctest bubble's driver, on its root goroutine
// (Go's synctestRun), and synctest::wait (Go's synctestWait). See
// bubble.hpp for the counts the loop relies on.
//
// The root's loop:
//
//   run the timers due at `now`                      (bubble_timers_run)
//   park (durable), unless every member is blocked already
//   woken: all members durably blocked, or the last one exited
//     no timer left, or main has exited  -> done
//     else now = the next timer's `when` -> again
//
// The root is woken only by maybe_wake (bubble.cpp), so each time it runs
// every other member is durably blocked or gone: moving the clock then is
// what Go's fake time means.
#include <atomic>

#include "gmp/bubble.hpp"
#include "gmp/os/clock.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gort/detail/race.hpp"
#include "gort/runtime.hpp"

namespace gort::internal {

namespace {

std::atomic<uint64_t> bubble_gen{0};

// The root's park (Go's synctestidle_c): parks unless it is the last
// activity left, in which case it goes round again at once.
bool idle_unlock(G* g, void*) {
  Bubble* b = g->bubble;
  MutexLock lock(b->mu);
  if (b->running == 0 && b->active == 1) return false;
  b->active--;
  return true;
}

// synctest::wait's park (Go's synctestwait_c).
bool wait_unlock(G* g, void*) {
  Bubble* b = g->bubble;
  MutexLock lock(b->mu);
  if (b->running == 0 && b->active == 0) fatal("synctest: running == 0 && active == 0 in wait");
  b->waiter = g;
  return true;
}

}  // namespace

Bubble* bubble_begin(bool fake_std_clocks) {
  G* g = getg();
  if (g == nullptr) throw panic_error("synctest.test: not called on a goroutine (call it inside gort::run)");
  if (g->bubble != nullptr) throw panic_error("synctest.Run called from within a synctest bubble");
  auto* b = new Bubble;
  b->id = bubble_gen.fetch_add(1, std::memory_order_relaxed) + 1;
  b->root = g;
  b->mono_base = nanotime();
  b->fake_std_clocks = fake_std_clocks;
  g->bubble = b;  // the root's reference is refs' initial 1
  return b;
}

const char* bubble_run(Bubble* b) {
  G* root = getg();
  if (root != b->root) fatal("synctest: bubble_run off its root");
  b->mu.lock();
  b->active++;
  for (;;) {
    b->mu.unlock();
    bubble_timers_run(b);
    park(&idle_unlock, nullptr, WaitReason::kSynctestRun);
    b->mu.lock();
    if (b->active < 0) fatal("synctest: bubble active < 0");
    int64_t next = b->timer0.load(std::memory_order_acquire);
    if (next == 0) break;
    int64_t now = b->now.load(std::memory_order_relaxed);
    if (next < now) fatal("synctest: time went backwards");
    // Time stops once the bubble's main goroutine has exited.
    if (b->done) break;
    b->now.store(next, std::memory_order_release);
  }
  int32_t total = b->total;
  bool done = b->done;
  // The root keeps the active count of its last wake-up for good: members
  // left blocked may still wake (by something outside the bubble) and
  // block again, and nothing may ready the root for them any more.
  b->mu.unlock();
  bubble_timers_drop(b);
  b->ended.store(true, std::memory_order_release);
  // Every member's exit happens before test returns.
  race_acquire(b);
  if (total == 1) return nullptr;
  return done ? "deadlock: main bubble goroutine has exited but blocked goroutines remain"
              : "deadlock: all goroutines in bubble are blocked";
}

void bubble_end(Bubble* b) {
  G* root = getg();
  {
    MutexLock lock(b->mu);
    b->total--;
  }
  root->bubble = nullptr;
  bubble_unref(b);
}

void bubble_wait() {
  G* g = getg();
  Bubble* b = g != nullptr ? g->bubble : nullptr;
  if (b == nullptr) throw panic_error("goroutine is not in a bubble");
  bool busy;
  {
    MutexLock lock(b->mu);
    // `waiting`, not `waiter`: the waiter is recorded only once parked.
    busy = b->waiting;
    b->waiting = true;
  }
  if (busy) throw panic_error("wait already in progress");
  park(&wait_unlock, nullptr, WaitReason::kSynctestWait);
  {
    MutexLock lock(b->mu);
    if (--b->active < 0) fatal("synctest: bubble active < 0");
    b->waiter = nullptr;
    b->waiting = false;
  }
  // The parks of the members now blocked happen before wait returns.
  race_acquire(b);
}

}  // namespace gort::internal

// tests/gmp/blocking_test.cpp — gort::blocking (entersyscall/exitsyscall in
// gmp/syscall.cpp, retake/handoff in preempt/sysmon.cpp): a goroutine blocked
// in the kernel does not stop the others, even on one P; blocking() returns
// f's result (values, references, move-only types) and propagates its
// exceptions, also when the P was handed away meanwhile; the hand-off and
// the reacquisition survive stress; the blocked thread is never hit by the
// preemption signal; and on a plain thread blocking() just calls f. A
// goroutine queued globally by an M without a P or by a plain thread is
// never stranded beside an idle P.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmp/sched.hpp"
#include "gort/chan.hpp"
#include "gort/preempt.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;

// The P the calling goroutine runs on is really its own.
bool owns_p() {
  internal::M* m = internal::getm();
  internal::P* p = m->p;
  return p != nullptr && p->m == m && p->status.load() == internal::PStatus::kRunning &&
         !m->in_blocking.load();
}

class Blocking : public ProcsTest {};
INSTANTIATE_TEST_SUITE_P(Procs, Blocking, ::testing::Values(1, 2, 4), procs_name);

TEST(BlockingOneP, OthersKeepRunningWhileAGoroutineBlocksInTheKernel) {
  std::atomic<int64_t> progress{0};
  std::atomic<int64_t> ticks{0};
  std::atomic<int64_t> progress_during{-1}, ticks_during{-1};
  std::atomic<int> result{0};
  run_checked(1, [&] {
    auto stop = gort::make_chan<int>();
    gort::WaitGroup wg;
    wg.add(3);
    // A goroutine that makes progress by yielding and sleeping.
    gort::go([&] {
      for (;;) {
        bool stopped = false;
        gort::select(gort::on_recv(stop, [&](auto) { stopped = true; }), gort::on_default());
        if (stopped) break;
        progress++;
        gort::sleep(absl::Microseconds(200));
      }
      wg.done();
    });
    // A ticker.
    gort::go([&] {
      auto t = gort::new_ticker(absl::Milliseconds(5));
      bool stopped = false;
      while (!stopped) {
        gort::select(gort::on_recv(t.chan(), [&](auto) { ticks++; }),
                     gort::on_recv(stop, [&](auto) { stopped = true; }));
      }
      t.stop();
      wg.done();
    });
    gort::go([&] {
      result = gort::blocking([&] {
        int64_t p0 = progress.load(), t0 = ticks.load();
        ::usleep(300000);  // the only P must go elsewhere meanwhile
        progress_during = progress.load() - p0;
        ticks_during = ticks.load() - t0;
        return 42;
      });
      EXPECT_TRUE(owns_p());
      stop.close();
      wg.done();
    });
    wg.wait();
  });
  EXPECT_EQ(result.load(), 42);
  EXPECT_GT(progress_during.load(), 0) << "no goroutine ran during a 300 ms blocking() call on 1 P";
  EXPECT_GT(ticks_during.load(), 0) << "the ticker did not tick during a 300 ms blocking() call";
  std::fprintf(stderr, "[info] during 300 ms in blocking(): %lld steps of progress, %lld ticks of 5 ms\n",
               static_cast<long long>(progress_during.load()), static_cast<long long>(ticks_during.load()));
}

TEST_P(Blocking, ReturnsTheCallablesResult) {
  run_test([] {
    EXPECT_EQ(gort::blocking([] { return 7; }), 7);
    EXPECT_EQ(gort::blocking([] { return std::string("kernel"); }), "kernel");
    auto up = gort::blocking([] { return std::make_unique<int>(5); });
    ASSERT_NE(up, nullptr);
    EXPECT_EQ(*up, 5);
    int x = 1;
    int& r = gort::blocking([&]() -> int& { return x; });
    EXPECT_EQ(&r, &x);
    bool ran = false;
    gort::blocking([&] { ran = true; });  // void
    EXPECT_TRUE(ran);
    // After a long call too (the P was probably retaken and handed off).
    EXPECT_EQ(gort::blocking([] {
                ::usleep(20000);
                return 9;
              }),
              9);
    EXPECT_TRUE(owns_p());
    EXPECT_EQ(internal::sched.nblocking.load(), 0);
  });
}

TEST_P(Blocking, PropagatesExceptions) {
  run_test([this] {
    // Fast path: the P is still ours when f throws.
    EXPECT_THROW(gort::blocking([]() -> int { throw std::runtime_error("fast"); }), std::runtime_error);
    EXPECT_TRUE(owns_p());
    // Slow path: other goroutines keep every P busy, so by the time f throws
    // our P has been handed to another thread; reacquiring one happens
    // while the exception is in flight (and may move us to another thread).
    std::atomic<bool> busy{true};
    Countdown spinners(procs());
    for (int i = 0; i < procs(); i++) {
      gort::go([&] {
        while (busy.load()) gort::yield();
        spinners.done();
      });
    }
    for (int i = 0; i < 5; i++) {
      std::string what;
      try {
        gort::blocking([i] {
          ::usleep(10000);
          throw std::runtime_error("slow " + std::to_string(i));
        });
      } catch (const std::runtime_error& e) {
        what = e.what();
        EXPECT_EQ(std::uncaught_exceptions(), 0);
        EXPECT_NE(std::current_exception(), nullptr);
      }
      EXPECT_EQ(what, "slow " + std::to_string(i));
      EXPECT_EQ(std::current_exception(), nullptr);
      EXPECT_TRUE(owns_p());
    }
    busy = false;
    spinners.wait();
    EXPECT_EQ(internal::sched.nblocking.load(), 0);
  });
}

TEST(BlockingPlainThread, JustCallsF) {
  // Outside the runtime.
  EXPECT_EQ(gort::blocking([] { return 11; }), 11);
  EXPECT_THROW(gort::blocking([] { throw std::logic_error("x"); }), std::logic_error);
  // On a plain thread while the runtime runs.
  run_checked(2, [] {
    std::atomic<int> got{0};
    std::atomic<bool> threw{false};
    std::thread t([&] {
      got = gort::blocking([] {
        ::usleep(5000);
        return 12;
      });
      try {
        gort::blocking([] { throw std::logic_error("y"); });
      } catch (const std::logic_error&) {
        threw = true;
      }
      EXPECT_EQ(internal::sched.nblocking.load(), 0) << "a plain thread entered the runtime's blocking state";
    });
    t.join();
    EXPECT_EQ(got.load(), 12);
    EXPECT_TRUE(threw.load());
  });
}

// With the preemption signal flying at the goroutines beside it, a call
// inside blocking() is never interrupted (EINTR) by it. (Also: the caller
// must get its P back from the spinners, which needs them preempted; a
// watchdog stops them after 10 s if that never happens.)
TEST(BlockingOneP, CallIsNotInterruptedByThePreemptionSignal) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<int> eintr{0}, timeouts{0};
  std::atomic<uint32_t> spinner_preempts{0};
  std::atomic<bool> spinning{true};
  Watchdog dog(10s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
    Countdown cd(3);
    for (int s = 0; s < 2; s++) {
      gort::go([&] {
        spin_while(spinning);
        spinner_preempts += internal::getg()->async_preempts;
        cd.done();
      });
    }
    gort::go([&] {
      for (int i = 0; i < 4; i++) {
        int r = gort::blocking([] { return ::poll(nullptr, 0, 100); });
        if (r == 0) timeouts++;
        if (r < 0 && errno == EINTR) eintr++;
      }
      spinning = false;
      cd.done();
    });
    cd.wait();
  });
  dog.disarm();
  EXPECT_EQ(eintr.load(), 0) << "poll() inside blocking() was interrupted by a signal";
  EXPECT_EQ(timeouts.load(), 4);
  EXPECT_FALSE(dog.fired()) << "the caller never got a P back from two call-free spinners on 1 P "
                               "(they were not preempted; see Preempt.ThreadsStartedBySysmon...)";
  if (gort::async_preemption_available()) {
    EXPECT_GT(spinner_preempts.load(), 0u) << "the spinners were not preempted";
  }
}

// A goroutine that ran past its slice inside NoPreempt has a pending
// (cooperative) preemption request when it enters blocking(). f then does
// something that never parks but passes a gort cooperative preemption
// point (a send on a buffered channel with room, WaitGroup::done). f must
// run to completion on the calling thread ("runs f() on this thread"):
// honouring the request there would switch goroutines on a thread that is
// outside the scheduler, with a P that sysmon may hand to someone else.
TEST(BlockingOneP, PendingPreemptRequestIsNotHonouredInsideF) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = [] {
    for (int procs : {1, 2}) {
      std::atomic<int> same_thread{0}, rounds_done{0};
      std::atomic<int> flagged{0};
      std::atomic<int> lost_p{0};
      std::atomic<int> ran_on_blocked_thread{0}, left_blocking{0};
      gort::Config cfg;
      cfg.procs = procs;
      cfg.time_slice = absl::Milliseconds(1);
      ResourceSnapshot before;
      gort::run(
          [&] {
            std::atomic<bool> busy{true};
            // The thread currently inside f: no goroutine may run on it.
            std::atomic<internal::M*> in_f{nullptr};
            Countdown others(procs);
            for (int i = 0; i < procs; i++) {
              gort::go([&] {
                while (busy.load()) {
                  if (current_m() == in_f.load()) ran_on_blocked_thread++;
                  gort::yield();
                }
                others.done();
              });
            }
            auto ch = gort::make_chan<int>(100);
            gort::WaitGroup wg;
            for (int r = 0; r < 5; r++) {
              {
                gort::NoPreempt np;
                auto end = std::chrono::steady_clock::now() + 20ms;
                while (std::chrono::steady_clock::now() < end) {
                }
              }
              if (internal::getg()->preempt.load()) flagged++;
              wg.add(1);
              gort::blocking([&] {
                internal::M* m0 = internal::getm();
                in_f = m0;
                ch.send(r);
                wg.done();
                if (internal::getm() == m0) same_thread++;
                if (!internal::getm()->in_blocking.load()) left_blocking++;
                in_f = nullptr;
              });
              if (!owns_p()) lost_p++;
              rounds_done++;
            }
            wg.wait();
            busy = false;
            others.wait();
            EXPECT_EQ(internal::sched.nblocking.load(), 0);
          },
          cfg);
      expect_no_leaks(before);
      EXPECT_EQ(rounds_done.load(), 5) << procs << " P";
      EXPECT_EQ(same_thread.load(), 5) << procs << " P: f moved to another thread in the middle";
      EXPECT_EQ(lost_p.load(), 0) << procs << " P";
      EXPECT_EQ(ran_on_blocked_thread.load(), 0)
          << procs << " P: other goroutines ran on the thread that was inside f";
      EXPECT_EQ(left_blocking.load(), 0) << procs << " P: f continued outside blocking()";
      EXPECT_GT(flagged.load(), 0) << procs << " P: sysmon never flagged the 20 ms NoPreempt loop; "
                                      "the test proved nothing";
    }
  };
  GORT_EXPECT_SUBPROCESS_OK(60, reporting(child));
}

// Many goroutines on 2 Ps calling blocking() with short and long durations
// while others compute and talk over channels: every call completes, every
// count is right, and after each call the goroutine owns the P it runs on.
// It also covers the ABA case that once broke releasep: a P retaken from one
// blocking() call, handed off, and in blocking() again under another M when
// the first call returns.
TEST(BlockingStress, HandoffAndReacquireRaces) {
  auto child = [] {
    constexpr int kCallers = 48;
    constexpr int kCalls = 25;
    std::atomic<int64_t> sum{0};
    std::atomic<int64_t> not_owner{0};
    std::atomic<int64_t> ping_pongs{0};
    run_checked(2, [&] {
      gort::WaitGroup wg;
      wg.add(kCallers);
      for (int c = 0; c < kCallers; c++) {
        gort::go([&, c] {
          uint64_t rng = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(c + 1);
          for (int k = 0; k < kCalls; k++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            static constexpr int kDurationsUs[] = {0, 0, 5, 30, 200, 1000, 3000};
            int us = kDurationsUs[rng % 7];
            int v = gort::blocking([us, c, k] {
              if (us > 0) ::usleep(static_cast<useconds_t>(us));
              return c * 1000 + k;
            });
            sum += v;
            if (!owns_p()) not_owner++;
            if (k % 5 == 4) gort::yield();
          }
          wg.done();
        });
      }
      // Channel traffic beside the callers.
      auto ping = gort::make_chan<int>();
      auto pong = gort::make_chan<int>();
      // Joined before ping and pong go out of scope (it uses them by
      // reference until its last close).
      gort::WaitGroup server;
      server.add(1);
      gort::go([&] {
        for (;;) {
          auto v = ping.recv();
          if (!v) break;
          pong.send(*v + 1);
        }
        pong.close();
        server.done();
      });
      std::atomic<bool> done{false};
      gort::WaitGroup pinger;
      pinger.add(1);
      gort::go([&] {
        int v = 0;
        // At least once: the callers may all be done before this runs (it
        // did in the race detector's build, where each spawn is slow).
        do {
          ping.send(v);
          v = *pong.recv();
          ping_pongs++;
        } while (!done.load());
        ping.close();
        pinger.done();
      });
      wg.wait();
      done = true;
      pinger.wait();
      server.wait();
    });
    int64_t expect = 0;
    for (int c = 0; c < kCallers; c++) {
      for (int k = 0; k < kCalls; k++) expect += c * 1000 + k;
    }
    EXPECT_EQ(sum.load(), expect);
    EXPECT_EQ(not_owner.load(), 0) << "a goroutine came back from blocking() without owning its P";
    EXPECT_GT(ping_pongs.load(), 0);
  };
  GORT_EXPECT_SUBPROCESS_OK(120, reporting(child));
}

// f may start goroutines and wake parked ones (neither parks the caller,
// and gort::go is callable from any thread). While f runs, its P may have
// been handed to another thread, so doing either through "this thread's P"
// races with that P's new owner (a P's run queue has a single producer, its
// created/exited counters are plain read-modify-writes). One caller only,
// so that the P cannot come back to blocking() from another goroutine
// (that is HandoffAndReacquireRaces' bug); the P's new owner is kept busy
// spawning and yielding.
TEST(BlockingStress, CallableMayStartAndWakeGoroutines) {
  auto child = [] {
    for (int procs : {1, 2}) {
      constexpr int kCalls = stress_size(300);
      constexpr int kSpawnsPerCall = 8;
      std::atomic<int64_t> children_ran{0};
      std::atomic<int64_t> woken{0};
      std::atomic<int64_t> churn{0};
      run_checked(procs, [&] {
        gort::WaitGroup children;
        children.add(kCalls * kSpawnsPerCall);
        std::atomic<bool> stop_churn{false};
        gort::WaitGroup churners;
        churners.add(2);
        for (int i = 0; i < 2; i++) {
          gort::go([&] {
            while (!stop_churn.load()) {
              gort::go([&] { churn++; });
              gort::yield();
            }
            churners.done();
          });
        }
        for (int k = 0; k < kCalls; k++) {
          // A waiter that f wakes up.
          auto ch = gort::make_chan<int>(1);
          gort::WaitGroup waiter;
          waiter.add(1);
          gort::go([&, ch] {
            if (ch.recv()) woken++;
            waiter.done();
          });
          gort::blocking([&, ch, k] {
            ::usleep(static_cast<useconds_t>(100 + 100 * (k % 4)));
            for (int s = 0; s < kSpawnsPerCall; s++) {
              gort::go([&] {
                children_ran++;
                children.done();
              });
            }
            ch.send(1);  // buffered with room: never parks; readies the waiter
          });
          waiter.wait();
        }
        children.wait();
        stop_churn = true;
        churners.wait();
      });
      EXPECT_EQ(children_ran.load(), int64_t{kCalls} * kSpawnsPerCall) << procs << " P";
      EXPECT_EQ(woken.load(), int64_t{kCalls}) << procs << " P";
    }
  };
  GORT_EXPECT_SUBPROCESS_OK(120, reporting(child));
}

// A goroutine that calls blocking() in a loop takes its P back in
// exitsyscall's fast path after every short call, so the P's syscall tick
// changes between any two looks by sysmon. On 1 P, what waits on the run
// queue must still run: sysmon retakes a P that has not scheduled for a
// slice whatever the tick (Go's sysretake). Before that, the queued
// goroutine never ran and the program hung.
TEST(BlockingOneP, LoopOfShortCallsDoesNotStarveTheRunQueue) {
  auto child = [] {
    for (int round = 0; round < 3; round++) {
      std::atomic<bool> stop{false};
      std::atomic<int64_t> calls{0};
      run_checked(1, [&] {
        WaitGroup wg;
        wg.add(1);
        gort::go([&] {
          while (!stop.load()) {
            gort::blocking([] { ::usleep(300); });
            calls++;
          }
          wg.done();
        });
        // Let the looper start and settle into its loop, and sysmon back
        // off to its longest sleep (nothing it sees counts as activity):
        // then every look finds a new syscall tick. Main's own wake-up is
        // already queued behind the looper.
        gort::sleep(absl::Milliseconds(300));
        Event ran;
        gort::go([&] { ran.set(); });  // queued behind the looper
        ran.wait();
        stop = true;
        wg.wait();
      });
      EXPECT_GE(calls.load(), 20);
    }
  };
  GORT_EXPECT_SUBPROCESS_OK(60, reporting(child));
}

// A goroutine back from blocking() whose P was handed away, with no P free,
// queues itself on the global run queue and its M goes to sleep. A P may
// fall idle right after that look, given up by an M that was still counted
// as spinning (so a plain wakep() starts nobody) and past its last look at
// the global queue. Then the goroutine must still run: once it waited for
// ever while the only other M blocked in the poller, and the program hung
// (seen as Procs/OsFile.FifoOpensBothEnds stalling). Each round here waits
// for every caller, so one lost caller hangs the round; the watchdog ends
// the child.
TEST(BlockingStress, ReturnWithNoPFreeIsNeverLost) {
  auto child = [] {
    for (int procs : {1, 2, 3}) {
      constexpr int kRounds = stress_size(1000);
      const int callers = procs + 1;
      std::atomic<int64_t> calls{0};
      run_checked(procs, [&] {
        for (int r = 0; r < kRounds; r++) {
          gort::WaitGroup wg;
          wg.add(callers);
          for (int c = 0; c < callers; c++) {
            gort::go([&, r, c] {
              // Uneven lengths, so that the returns are spread over the
              // moments when the Ps are being retaken and handed off.
              int us = 20 + ((r * 7 + c * 13) % 11) * 30;
              gort::blocking([us] { ::usleep(static_cast<useconds_t>(us)); });
              calls++;
              wg.done();
            });
          }
          wg.wait();
        }
      });
      EXPECT_EQ(calls.load(), int64_t{kRounds} * callers) << procs << " Ps";
    }
  };
  GORT_EXPECT_SUBPROCESS_OK(60, reporting(child));
}

// The same for a goroutine readied by a plain thread, which has no P and
// queues it on the global queue: a ping-pong between a std::thread and a
// goroutine, where each wake-up is the only work there is.
TEST(BlockingStress, GoroutineReadiedByAPlainThreadIsNeverLost) {
  auto child = [] {
    for (int procs : {1, 2}) {
      constexpr int kRounds = stress_size(3000);
      std::atomic<int64_t> pongs{0};
      run_checked(procs, [&] {
        auto ping = gort::make_chan<int>();
        auto pong = gort::make_chan<int>();
        std::thread t([&] {
          for (int r = 0; r < kRounds; r++) {
            ping.send(r);
            if (pong.recv() == r) pongs++;
          }
          ping.close();
        });
        // The goroutine sleeps a little at times, so that its P is going
        // idle when the plain thread's next send comes.
        while (auto v = ping.recv()) {
          if (*v % 3 == 0) gort::blocking([] { ::usleep(30); });
          pong.send(*v);
        }
        gort::blocking([&] { t.join(); });
      });
      EXPECT_EQ(pongs.load(), int64_t{kRounds}) << procs << " Ps";
    }
  };
  GORT_EXPECT_SUBPROCESS_OK(60, reporting(child));
}

}  // namespace
}  // namespace gort::test

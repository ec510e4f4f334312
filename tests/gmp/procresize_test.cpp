// tests/gmp/procresize_test.cpp — gort::set_procs (Go's GOMAXPROCS(n)) and
// the stop of the world under it (gmp/procresize.cpp): the count changes and
// is returned, every goroutine, timer and queued G of a removed P carries
// on elsewhere, nothing is lost or leaked, and it works while goroutines
// spin, block in blocking(), exchange messages and spawn — from goroutines
// and plain threads, several at once.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gmp/sched.hpp"
#include "gort/chan.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;

TEST(SetProcs, ChangesTheCountAndReturnsThePrevious) {
  run_checked(2, [] {
    EXPECT_EQ(gort::procs(), 2);
    EXPECT_EQ(gort::set_procs(4), 2);
    EXPECT_EQ(gort::procs(), 4);
    EXPECT_EQ(gort::runtime_stats().procs, 4);
    EXPECT_EQ(gort::set_procs(1), 4);
    EXPECT_EQ(gort::procs(), 1);
    // n < 1 only asks, as GOMAXPROCS(0).
    EXPECT_EQ(gort::set_procs(0), 1);
    EXPECT_EQ(gort::set_procs(-7), 1);
    EXPECT_EQ(gort::procs(), 1);
    EXPECT_EQ(gort::set_procs(1), 1);
    // Clamped to 1024 Ps, as Go clamps to _MaxGomaxprocs.
    EXPECT_EQ(gort::set_procs(5000), 1);
    EXPECT_EQ(gort::procs(), 1024);
    EXPECT_EQ(gort::set_procs(3), 1024);
    EXPECT_EQ(gort::procs(), 3);
    // Ps beyond the count are dead, kept for reuse.
    EXPECT_EQ(internal::sched.allp.allocated(), 1024);
    EXPECT_EQ(internal::sched.allp[5]->status.load(), internal::PStatus::kDead);
  });
}

TEST(SetProcs, OutsideTheRuntimePanics) {
  EXPECT_THROW(gort::set_procs(2), gort::panic_error);
  EXPECT_EQ(gort::procs(), 0);
}

TEST(SetProcs, FromAPlainThread) {
  run_checked(2, [] {
    int prev = -1;
    std::thread t([&] { prev = gort::set_procs(3); });
    // The goroutine that does it for the thread needs a P: ours yields.
    while (gort::procs() != 3) gort::yield();
    t.join();
    EXPECT_EQ(prev, 2);
  });
}

// More Ps are used: goroutines that each spin a while end up on as many
// threads at once as there are Ps.
TEST(SetProcs, AddedPsRunGoroutines) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  run_checked(1, [] {
    EXPECT_EQ(gort::set_procs(3), 1);
    std::atomic<int> running{0};
    std::atomic<int> most{0};
    Countdown cd(3);
    for (int i = 0; i < 3; i++) {
      gort::go([&] {
        int now = ++running;
        int m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        // Stay until all three have been seen together (or give up).
        auto until = std::chrono::steady_clock::now() + 5s;
        while (most.load() < 3 && std::chrono::steady_clock::now() < until) {
          spin_for(std::chrono::microseconds(100));
        }
        --running;
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(most.load(), 3) << "3 Ps never ran 3 goroutines at once";
  });
}

// Goroutines queued on, and timers armed on, the Ps that go away still run
// and fire.
TEST(SetProcs, RemovedPsHandOverGoroutinesAndTimers) {
  run_checked(4, [] {
    constexpr int kSleepers = 400;
    std::atomic<int> woke{0};
    Countdown cd(kSleepers);
    for (int i = 0; i < kSleepers; i++) {
      gort::go([&, i] {
        gort::sleep(absl::Milliseconds(20 + i % 30));
        woke++;
        cd.done();
      });
    }
    // Timers armed on P 1–3 as well: after_func timers from goroutines
    // spread by stealing.
    std::atomic<int> fired{0};
    std::vector<gort::Timer> timers;
    gort::Mutex mu;
    Countdown armed(40);
    for (int i = 0; i < 40; i++) {
      gort::go([&] {
        gort::Timer t = gort::after_func(absl::Milliseconds(30), [&] { fired++; });
        {
          std::lock_guard<gort::Mutex> lock(mu);
          timers.push_back(std::move(t));
        }
        armed.done();
      });
    }
    armed.wait();
    EXPECT_EQ(gort::set_procs(1), 4);
    cd.wait();
    EXPECT_EQ(woke.load(), kSleepers);
    EXPECT_TRUE(eventually([&] { return fired.load() == 40; }, 10s)) << fired.load() << " of 40 fired";
    EXPECT_EQ(gort::num_goroutine(), 1);
  });
}

// The stress case, in a child with a watchdog: ping-pong pairs, spawners,
// sleepers, a spinner and a goroutine inside blocking() while two
// goroutines and a plain thread resize between 1 and 4 Ps over and over.
// The hazard: a stop of the world that never completes, because a
// goroutine calling blocking() in a loop keeps its P and that P's run queue
// starves. sysmon retakes a P in blocking() that has not scheduled for
// a slice (preempt/sysmon.cpp, Go's sysretake; the small case is
// BlockingOneP.LoopOfShortCallsDoesNotStarveTheRunQueue).
TEST(SetProcs, ResizeUnderLoad) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = [] {
    for (int start : {1, 4}) {
      std::atomic<int64_t> msgs{0};
      std::atomic<int64_t> spawned{0};
      std::atomic<int64_t> slept{0};
      std::atomic<bool> stop{false};
      run_checked(start, [&] {
        WaitGroup wg;
        constexpr int kPairs = 4;
        constexpr int kRounds = 2000;
        for (int i = 0; i < kPairs; i++) {
          auto ping = make_chan<int>();
          auto pong = make_chan<int>();
          wg.add(2);
          gort::go([&, ping, pong] {
            for (int k = 0; k < kRounds; k++) {
              ping.send(k);
              EXPECT_EQ(pong.recv().value_or(-1), k);
            }
            wg.done();
          });
          gort::go([&, ping, pong] {
            for (int k = 0; k < kRounds; k++) {
              pong.send(ping.recv().value_or(-1));
              msgs++;
            }
            wg.done();
          });
        }
        wg.add(1);
        gort::go([&] {
          WaitGroup kids;
          for (int k = 0; k < 3000; k++) {
            kids.add(1);
            gort::go([&] {
              spawned++;
              kids.done();
            });
          }
          kids.wait();
          wg.done();
        });
        wg.add(1);
        gort::go([&] {
          for (int k = 0; k < 100; k++) {
            gort::sleep(absl::Microseconds(300));
            slept++;
          }
          wg.done();
        });
        wg.add(1);
        gort::go([&] {
          while (!stop.load()) spin_for(std::chrono::microseconds(200));
          wg.done();
        });
        wg.add(1);
        gort::go([&] {
          while (!stop.load()) {
            gort::blocking([] { ::usleep(500); });
          }
          wg.done();
        });
        WaitGroup resizers;
        for (int r = 0; r < 2; r++) {
          resizers.add(1);
          gort::go([&, r] {
            for (int k = 0; k < 15; k++) {
              int n = 1 + (k + r) % 4;
              int prev = gort::set_procs(n);
              EXPECT_GE(prev, 1);
              EXPECT_LE(prev, 4);
              gort::sleep(absl::Microseconds(200));
            }
            resizers.done();
          });
        }
        std::thread plain([] {
          for (int k = 0; k < 10; k++) {
            gort::set_procs(1 + k % 3);
            std::this_thread::sleep_for(1ms);
          }
        });
        resizers.wait();
        plain.join();
        stop = true;
        wg.wait();
        EXPECT_EQ(msgs.load(), kPairs * kRounds);
        EXPECT_EQ(spawned.load(), 3000);
        EXPECT_EQ(slept.load(), 100);
      });
    }
  };
  GORT_EXPECT_SUBPROCESS_OK(120, reporting(child));
}

}  // namespace
}  // namespace gort::test

// tests/stdlib/sync/waitgroup_test.cpp — gort::WaitGroup (stdlib/sync/waitgroup.cpp):
// fan-in, several waiters, reuse, the negative-counter panic, plain threads.
#include <cstdint>
#include <thread>
#include <vector>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::eventually;
using gort::test::KeepAwake;
using gort::test::panic_message;
using gort::test::Parked;
using gort::test::WaitReason;

class WaitGroup : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(WaitGroup);

TEST_P(WaitGroup, FanInOfOneHundredThousandGoroutines) {
  run_test([] {
    constexpr int kGoroutines = gort::test::race_scaled(100000);
    gort::WaitGroup wg;
    std::atomic<int64_t> sum{0};
    std::atomic<int> finished{0};
    wg.add(kGoroutines);
    for (int i = 0; i < kGoroutines; i++) {
      gort::go([&, i] {
        sum += i;
        finished++;
        wg.done();
      });
    }
    wg.wait();
    // wait returned only after every done(), so every increment is visible.
    EXPECT_EQ(finished.load(), kGoroutines);
    EXPECT_EQ(sum.load(), int64_t{kGoroutines} * (kGoroutines - 1) / 2);
  });
}

// add(1) before each go, done() from goroutines that themselves spawn.
TEST_P(WaitGroup, NestedAdds) {
  run_test([] {
    gort::WaitGroup wg;
    std::atomic<int> leaves{0};
    for (int i = 0; i < 50; i++) {
      wg.add(1);
      gort::go([&] {
        for (int k = 0; k < 20; k++) {
          wg.add(1);  // the counter is still > 0: allowed while wait() runs
          gort::go([&] {
            leaves++;
            wg.done();
          });
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(leaves.load(), 50 * 20);
  });
}

TEST_P(WaitGroup, WaitOnZeroReturnsAtOnce) {
  run_test([] {
    gort::WaitGroup wg;
    wg.wait();
    wg.add(3);
    wg.add(-3);
    wg.wait();
    SUCCEED();
  });
}

// Every waiter stays parked until the counter reaches zero, then all go.
TEST_P(WaitGroup, SeveralWaitersAreAllReleased) {
  run_test([] {
    constexpr int kWaiters = 10;
    gort::WaitGroup wg;
    wg.add(2);
    std::vector<Parked> parked(kWaiters);
    std::atomic<int> released{0};
    Countdown cd(kWaiters);
    for (int i = 0; i < kWaiters; i++) {
      gort::go([&, i] {
        parked[static_cast<size_t>(i)].mark();
        wg.wait();
        released++;
        cd.done();
      });
    }
    for (auto& p : parked) EXPECT_TRUE(p.wait(WaitReason::kSyncWaitGroup));
    wg.done();
    // One done() of two: nobody may leave yet.
    for (int i = 0; i < 100; i++) gort::yield();
    EXPECT_EQ(released.load(), 0);
    for (auto& p : parked) EXPECT_TRUE(p.now(WaitReason::kSyncWaitGroup));
    wg.done();
    cd.wait();
    EXPECT_EQ(released.load(), kWaiters);
  });
}

// A WaitGroup may be reused once wait() has returned.
TEST_P(WaitGroup, ReuseAfterWaitReturns) {
  run_test([] {
    gort::WaitGroup wg;
    for (int round = 0; round < 200; round++) {
      int n = 1 + round % 17;
      std::atomic<int> done{0};
      wg.add(n);
      for (int i = 0; i < n; i++) {
        gort::go([&] {
          if (round % 3 == 0) gort::yield();
          done++;
          wg.done();
        });
      }
      wg.wait();
      EXPECT_EQ(done.load(), n) << "round " << round;
    }
  });
}

TEST_P(WaitGroup, NegativeCounterPanics) {
  run_test([] {
    {
      gort::WaitGroup wg;
      EXPECT_EQ(panic_message([&] { wg.done(); }), "sync: negative WaitGroup counter");
    }
    {
      gort::WaitGroup wg;
      wg.add(2);
      EXPECT_EQ(panic_message([&] { wg.add(-3); }), "sync: negative WaitGroup counter");
    }
    {
      gort::WaitGroup wg;
      wg.add(1);
      wg.done();
      std::string what;
      Countdown cd(1);
      gort::go([&] {
        what = panic_message([&] { wg.done(); });
        cd.done();
      });
      cd.wait();
      EXPECT_EQ(what, "sync: negative WaitGroup counter");
    }
  });
}

// A plain thread may wait, and may call done.
TEST_P(WaitGroup, PlainThreads) {
  run_test([] {
    KeepAwake awake;
    gort::WaitGroup wg;
    std::atomic<int> work{0};
    wg.add(10);
    for (int i = 0; i < 5; i++) {
      gort::go([&] {
        work++;
        wg.done();
      });
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < 5; i++) {
      threads.emplace_back([&] {
        work++;
        wg.done();
      });
    }
    auto waited = gort::make_chan<int>(1);
    std::thread waiter([&] {
      wg.wait();
      waited.send(work.load());
    });
    wg.wait();
    EXPECT_EQ(work.load(), 10);
    EXPECT_EQ(waited.recv(), std::optional<int>(10));
    for (auto& t : threads) t.join();
    waiter.join();
  });
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/sync/cond_test.cpp — gort::Cond (gort/sync.hpp, NotifyList in
// stdlib/sync/sema.cpp): signal wakes one waiter (the oldest), broadcast wakes
// all, wait relocks, producer/consumer with wait in a loop.
#include <cstdint>
#include <deque>
#include <vector>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::eventually;
using gort::test::Parked;
using gort::test::WaitReason;

class Cond : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Cond);

// Each signal wakes exactly one waiter: after k signals, at most k have
// woken (a signal that woke two would push the count past k), and each
// signal's wake-up does arrive.
TEST_P(Cond, SignalWakesOne) {
  run_test([] {
    constexpr int kWaiters = 8;
    gort::Mutex mu;
    gort::Cond cond(mu);
    int woken = 0;  // guarded by mu
    std::vector<Parked> parked(kWaiters);
    Countdown cd(kWaiters);
    for (int i = 0; i < kWaiters; i++) {
      gort::go([&, i] {
        mu.lock();
        parked[static_cast<size_t>(i)].mark();
        cond.wait();
        woken++;
        mu.unlock();
        cd.done();
      });
    }
    for (auto& p : parked) EXPECT_TRUE(p.wait(WaitReason::kSyncCond));
    auto woken_now = [&] {
      std::lock_guard g(mu);
      return woken;
    };
    for (int k = 1; k <= kWaiters; k++) {
      cond.signal();
      EXPECT_TRUE(eventually([&] { return woken_now() >= k; })) << "signal " << k << " woke nobody";
      for (int i = 0; i < 50; i++) gort::yield();
      EXPECT_EQ(woken_now(), k) << "signal " << k << " woke more than one waiter";
      // The ones not woken yet are still parked on the Cond.
      int still = 0;
      for (auto& p : parked) still += p.now(WaitReason::kSyncCond) ? 1 : 0;
      EXPECT_LE(still, kWaiters - k);
    }
    cd.wait();
  });
}

// Go's TestCondSignalGenerations: signal wakes the goroutine that has waited
// longest.
TEST_P(Cond, SignalWakesTheOldestWaiter) {
  run_test([] {
    constexpr int kWaiters = 20;
    gort::Mutex mu;
    gort::Cond cond(mu);
    auto woke = gort::make_chan<int>(kWaiters);
    for (int i = 0; i < kWaiters; i++) {
      Parked p;
      gort::go([&, i, woke] {
        mu.lock();
        p.mark();
        cond.wait();
        mu.unlock();
        woke.send(i);
      });
      // Start the next waiter only once this one waits: tickets in order.
      EXPECT_TRUE(p.wait(WaitReason::kSyncCond));
    }
    for (int i = 0; i < kWaiters; i++) {
      cond.signal();
      EXPECT_EQ(woke.recv(), std::optional<int>(i));
    }
  });
}

// 50 waiters, and 5,000: the detached queue is walked back to front into
// the wake list (WakeList::push_detached), past its inline slots and
// several growths. Every waiter is woken once.
TEST_P(Cond, BroadcastWakesAll) {
  run_test([] {
    for (int waiters : {50, 5000}) {
      gort::Mutex mu;
      gort::Cond cond(mu);
      bool go_flag = false;  // guarded by mu
      std::vector<Parked> parked(static_cast<size_t>(waiters));
      std::vector<std::atomic<int>> woken(static_cast<size_t>(waiters));
      Countdown cd(waiters);
      for (int i = 0; i < waiters; i++) {
        gort::go([&, i] {
          {
            std::unique_lock lock(mu);
            parked[static_cast<size_t>(i)].mark();
            while (!go_flag) cond.wait();
            woken[static_cast<size_t>(i)]++;
          }
          cd.done();  // after the unlock: the next round's mu may take mu's place
        });
      }
      for (auto& p : parked) EXPECT_TRUE(p.wait(WaitReason::kSyncCond));
      {
        std::lock_guard g(mu);
        go_flag = true;
        cond.broadcast();
      }
      cd.wait();
      for (int i = 0; i < waiters; i++) {
        EXPECT_EQ(woken[static_cast<size_t>(i)].load(), 1) << "waiter " << i << " of " << waiters;
      }
    }
  });
}

// signal and broadcast wake only goroutines already waiting: a later
// waiter is not woken by an earlier notification.
TEST_P(Cond, NotificationsAreNotStored) {
  run_test([] {
    gort::Mutex mu;
    gort::Cond cond(mu);
    cond.signal();
    cond.broadcast();
    Parked p;
    std::atomic<bool> woke{false};
    Countdown cd(1);
    gort::go([&] {
      mu.lock();
      p.mark();
      cond.wait();
      woke = true;
      mu.unlock();
      cd.done();
    });
    EXPECT_TRUE(p.wait(WaitReason::kSyncCond));
    for (int i = 0; i < 100; i++) gort::yield();
    EXPECT_FALSE(woke.load());
    EXPECT_TRUE(p.now(WaitReason::kSyncCond));
    cond.signal();
    cd.wait();
    EXPECT_TRUE(woke.load());
  });
}

// wait() returns with the mutex locked again, and releases it while parked.
TEST_P(Cond, WaitUnlocksWhileParkedAndRelocks) {
  run_test([] {
    gort::Mutex mu;
    gort::Cond cond(mu);
    EXPECT_EQ(&cond.mutex(), &mu);
    Parked p;
    bool held_after_wait = false;
    Countdown cd(1);
    gort::go([&] {
      mu.lock();
      p.mark();
      cond.wait();
      held_after_wait = !mu.try_lock();
      mu.unlock();
      cd.done();
    });
    EXPECT_TRUE(p.wait(WaitReason::kSyncCond));
    EXPECT_TRUE(mu.try_lock()) << "the mutex is still held by the waiting goroutine";
    cond.signal();  // signalling with the mutex held is allowed
    mu.unlock();
    cd.wait();
    EXPECT_TRUE(held_after_wait);
  });
}

// A bounded queue with two conditions, waits in loops.
TEST_P(Cond, ProducerConsumer) {
  run_test([] {
    constexpr int kProducers = 4;
    constexpr int kConsumers = 4;
    constexpr int kEach = 2000;
    constexpr size_t kCapacity = 8;
    gort::Mutex mu;
    gort::Cond not_empty(mu), not_full(mu);
    std::deque<int> queue;  // guarded by mu
    int producers_left = kProducers;
    std::atomic<int64_t> sum{0};
    std::atomic<int> count{0};
    std::atomic<int> overfull{0};
    Countdown cd(kProducers + kConsumers);
    for (int p = 0; p < kProducers; p++) {
      gort::go([&, p] {
        for (int i = 0; i < kEach; i++) {
          std::unique_lock lock(mu);
          while (queue.size() >= kCapacity) not_full.wait();
          queue.push_back(p * kEach + i);
          if (queue.size() > kCapacity) overfull++;
          not_empty.signal();
        }
        std::unique_lock lock(mu);
        if (--producers_left == 0) not_empty.broadcast();
        cd.done();
      });
    }
    for (int c = 0; c < kConsumers; c++) {
      gort::go([&] {
        for (;;) {
          std::unique_lock lock(mu);
          while (queue.empty() && producers_left > 0) not_empty.wait();
          if (queue.empty()) break;
          int v = queue.front();
          queue.pop_front();
          not_full.signal();
          lock.unlock();
          sum += v;
          count++;
        }
        cd.done();
      });
    }
    cd.wait();
    int64_t n = kProducers * kEach;
    EXPECT_EQ(count.load(), n);
    EXPECT_EQ(sum.load(), n * (n - 1) / 2);
    EXPECT_EQ(overfull.load(), 0);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

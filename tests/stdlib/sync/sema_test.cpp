// tests/stdlib/sync/sema_test.cpp — internal::Sema (stdlib/sync/sema.cpp), the queue
// under every sync type: a release before the acquire is kept, FIFO and
// LIFO queueing, hand-off, and no lost wake-up when releases race with
// waiters that are between counting themselves in nwait and parking.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gort/detail/sema.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::internal::Handoff;
using gort::internal::QueueAt;
using gort::internal::Sema;
using gort::test::Countdown;
using gort::test::Parked;
using gort::test::WaitReason;

constexpr auto kReason = static_cast<uint8_t>(WaitReason::kSyncMutex);

class SemaTest : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(SemaTest);

TEST_P(SemaTest, ReleaseBeforeAcquireIsKept) {
  run_test([] {
    Sema s;
    EXPECT_FALSE(s.try_acquire());
    s.release(Handoff::kNo);
    s.release(Handoff::kNo);
    s.acquire(QueueAt::kBack, kReason);  // does not park
    EXPECT_TRUE(s.try_acquire());
    EXPECT_FALSE(s.try_acquire());
    EXPECT_EQ(s.waiters(), 0u);
  });
}

// Parked waiters are woken in queue order: FIFO, except that a LIFO waiter
// goes to the front.
TEST_P(SemaTest, QueueOrder) {
  run_test([] {
    Sema s;
    std::vector<int> order;  // appended under the "lock" the sema forms
    Parked p[3];
    Countdown cd(3);
    auto waiter = [&](int id, QueueAt at) {
      gort::go([&, id, at] {
        p[id].mark();
        s.acquire(at, kReason);
        // The runtime's semaphore orders nothing for the race detector (as
        // Go's semacquire); the test says what it relies on.
        gort::internal::race_acquire(&s);
        order.push_back(id);
        gort::internal::race_release(&s);
        s.release(Handoff::kNo);  // pass the baton to the next waiter
        cd.done();
      });
      EXPECT_TRUE(p[id].wait(WaitReason::kSyncMutex));
    };
    waiter(0, QueueAt::kBack);
    waiter(1, QueueAt::kBack);
    waiter(2, QueueAt::kFront);  // jumps the queue
    EXPECT_EQ(s.waiters(), 3u);
    s.release(Handoff::kNo);
    cd.wait();
    s.acquire(QueueAt::kBack, kReason);  // the last baton
    EXPECT_EQ(order, (std::vector<int>{2, 0, 1}));
  });
}

// With hand-off the count goes to the woken waiter directly: a try_acquire
// right after release cannot take it.
TEST_P(SemaTest, HandoffGivesTheCountToTheWaiter) {
  run_test([] {
    Sema s;
    Parked p;
    Countdown cd(1);
    gort::go([&] {
      p.mark();
      s.acquire(QueueAt::kBack, kReason);
      cd.done();
    });
    EXPECT_TRUE(p.wait(WaitReason::kSyncMutex));
    s.release(Handoff::kYes);
    EXPECT_FALSE(s.try_acquire());
    cd.wait();
    EXPECT_FALSE(s.try_acquire());
  });
}

// Producers release and consumers acquire (parking, or polling with
// try_acquire) as fast as they can on every P, so releases keep racing with
// waiters that have counted themselves in nwait but not yet parked. A lost
// wake-up leaves a consumer parked with the count positive: it never
// finishes and the deadlock detector ends the test. Everything released is
// acquired exactly once.
TEST_P(SemaTest, NoLostWakeupStress) {
  run_test([] {
    constexpr int kProducers = 8;
    constexpr int kConsumers = 16;
    constexpr int kPerProducer = 20000;
    constexpr int64_t kTotal = int64_t{kProducers} * kPerProducer;
    static_assert(kTotal % kConsumers == 0);
    Sema s;
    std::atomic<int64_t> polled{0};
    Countdown cd(kProducers + kConsumers);
    for (int i = 0; i < kProducers; i++) {
      gort::go([&, i] {
        for (int k = 0; k < kPerProducer; k++) {
          s.release(Handoff::kNo);
          if ((k + i) % 64 == 0) gort::yield();
        }
        cd.done();
      });
    }
    for (int i = 0; i < kConsumers; i++) {
      gort::go([&, i] {
        for (int64_t k = 0; k < kTotal / kConsumers; k++) {
          if ((k + i) % 3 == 0 && s.try_acquire()) {
            polled.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
          s.acquire((k + i) % 5 == 0 ? QueueAt::kFront : QueueAt::kBack, kReason);
        }
        cd.done();
      });
    }
    cd.wait();
    EXPECT_FALSE(s.try_acquire()) << "more released than acquired";
    EXPECT_EQ(s.waiters(), 0u);
  });
}

// Plain threads wait in the same queue as goroutines (gmp/sudog.hpp): they
// are counted as waiters, keep their place in the FIFO, and sleep until a
// release wakes them (no polling).
//
// A waiter counts itself in waiters() under the sema's lock before it looks
// at the count one last time and queues: one that is counted but has not
// looked yet takes a release meant for the head of the queue (as it should:
// it was not queued), and the head re-queues at the back. So the test
// cannot release on "waiters() == 3" alone. Each waiter queues before it
// lets go of the lock the next one counts itself under, so a last waiter,
// a goroutine seen parked, proves the three before it queued.
TEST_P(SemaTest, PlainThreadsQueueInOrderWithGoroutines) {
  run_test([] {
    Sema s;
    std::vector<int> order;
    gort::test::WordLock mu;
    auto record = [&](int who) {
      mu.lock();
      order.push_back(who);
      mu.unlock();
    };
    auto thread_waiter = [&](int who) {
      return std::thread([&, who] {
        s.acquire(QueueAt::kBack, kReason);
        record(who);
      });
    };
    Countdown done(2);
    Parked last;
    auto goroutine_waiter = [&](int who, Parked* parked) {
      gort::go([&, who, parked] {
        if (parked != nullptr) parked->mark();
        s.acquire(QueueAt::kBack, kReason);
        record(who);
        done.done();
      });
    };
    std::thread first = thread_waiter(1);
    ASSERT_TRUE(gort::test::eventually([&] { return s.waiters() == 1; })) << "the thread did not queue";
    goroutine_waiter(2, nullptr);
    ASSERT_TRUE(gort::test::eventually([&] { return s.waiters() == 2; }));
    std::thread third = thread_waiter(3);
    ASSERT_TRUE(gort::test::eventually([&] { return s.waiters() == 3; }));
    goroutine_waiter(4, &last);
    ASSERT_TRUE(last.wait(WaitReason::kSyncMutex));
    EXPECT_EQ(s.waiters(), 4u);
    for (int i = 0; i < 4; i++) {
      size_t want = static_cast<size_t>(i) + 1;
      s.release(Handoff::kNo);
      EXPECT_TRUE(gort::test::eventually([&] {
        mu.lock();
        size_t n = order.size();
        mu.unlock();
        return n == want;
      }));
    }
    done.wait();
    first.join();
    third.join();
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4})) << "served out of queue order";
    EXPECT_EQ(s.waiters(), 0u);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/net/fd_mutex_test.cpp — internal::FdMutex (stdlib/net/fd_mutex.cpp),
// the word behind every NetFD: references, the closed bit, and the read
// and write locks; waiters that close wakes; exactly one caller learns that
// it dropped the last reference, however close races with the lock
// holders and waiters; and the misuse errors.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "stdlib/net/fd_mutex.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::internal::FdMutex;
using gort::test::Parked;
using gort::test::WaitReason;

constexpr uint64_t refs(uint64_t s) { return (s & FdMutex::kRefMask) / FdMutex::kRef; }

class FdMutexTest : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(FdMutexTest);

TEST(FdMutex, RefsAndClose) {
  FdMutex mu;
  EXPECT_TRUE(mu.incref());
  EXPECT_TRUE(mu.incref());
  EXPECT_EQ(refs(mu.state()), 2u);
  EXPECT_FALSE(mu.decref());
  EXPECT_FALSE(mu.closed());
  EXPECT_TRUE(mu.incref_and_close());
  EXPECT_TRUE(mu.closed());
  EXPECT_FALSE(mu.incref_and_close()) << "a second close";
  EXPECT_FALSE(mu.incref()) << "no new reference once closed";
  bool last = true;
  EXPECT_FALSE(mu.rwlock(true, &last)) << "no lock once closed";
  EXPECT_FALSE(last) << "a failed first attempt holds no reference";
  EXPECT_EQ(refs(mu.state()), 2u);
  EXPECT_FALSE(mu.decref()) << "the closer's reference is still there";
  EXPECT_TRUE(mu.decref()) << "the last reference of a closed FdMutex";
  EXPECT_EQ(mu.state(), FdMutex::kClosed);
}

TEST(FdMutex, LockTakesAReferenceAndSidesAreIndependent) {
  FdMutex mu;
  bool last = false;
  ASSERT_TRUE(mu.rwlock(true, &last));
  ASSERT_TRUE(mu.rwlock(false, &last)) << "the write lock is free while the read lock is held";
  EXPECT_EQ(mu.state() & (FdMutex::kRLock | FdMutex::kWLock), FdMutex::kRLock | FdMutex::kWLock);
  EXPECT_EQ(refs(mu.state()), 2u);
  EXPECT_FALSE(mu.rwunlock(true));
  EXPECT_FALSE(mu.rwunlock(false));
  EXPECT_EQ(mu.state(), 0u);
  // The lock holder's reference keeps a closed FdMutex until it unlocks.
  ASSERT_TRUE(mu.rwlock(false, &last));
  ASSERT_TRUE(mu.incref_and_close());
  EXPECT_FALSE(mu.decref());
  EXPECT_TRUE(mu.rwunlock(false)) << "the unlock dropped the last reference";
}

TEST(FdMutex, TooManyReferencesPanicsWithGosText) {
  FdMutex mu;
  const uint64_t max = FdMutex::kRefMask / FdMutex::kRef;
  for (uint64_t i = 0; i < max; i++) ASSERT_TRUE(mu.incref());
  EXPECT_EQ(gort::test::panic_message([&] { (void)mu.incref(); }),
            "too many concurrent operations on a single file or socket (max 1048575)");
  EXPECT_EQ(refs(mu.state()), max) << "the failed incref changed nothing";
  bool last;
  EXPECT_EQ(gort::test::panic_message([&] { (void)mu.rwlock(true, &last); }),
            "too many concurrent operations on a single file or socket (max 1048575)");
  EXPECT_EQ(mu.state() & FdMutex::kRLock, 0u);
}

TEST(FdMutexDeathTest, UnlockOfAnUnlockedSideIsFatal) {
  EXPECT_EXIT(
      {
        FdMutex mu;
        bool last;
        if (!mu.rwlock(true, &last)) _exit(1);
        (void)mu.rwunlock(false);  // the write lock was never taken
      },
      ::testing::ExitedWithCode(2), "fatal error: inconsistent poll.fdMutex");
  EXPECT_EXIT(
      {
        FdMutex mu;
        (void)mu.decref();
      },
      ::testing::ExitedWithCode(2), "fatal error: inconsistent poll.fdMutex");
}

// Each side excludes itself: goroutines on every P increment a plain
// counter under the read lock and another under the write lock.
TEST_P(FdMutexTest, EachLockExcludesItsOwnSide) {
  run_test([] {
    FdMutex mu;
    constexpr int kGoroutines = 8;
    constexpr int kRounds = 2000;
    int64_t reads = 0, writes = 0;  // guarded by the read / write lock
    gort::WaitGroup wg;
    for (int i = 0; i < kGoroutines; i++) {
      wg.add(1);
      gort::go([&, i] {
        const bool read = i % 2 == 0;
        int64_t& counter = read ? reads : writes;
        for (int r = 0; r < kRounds; r++) {
          bool last;
          ASSERT_TRUE(mu.rwlock(read, &last));
          int64_t v = counter;
          if (r % 16 == 0) gort::yield();  // others queue meanwhile
          counter = v + 1;
          ASSERT_FALSE(mu.rwunlock(read));
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(reads, int64_t{kGoroutines / 2} * kRounds);
    EXPECT_EQ(writes, int64_t{kGoroutines / 2} * kRounds);
    EXPECT_EQ(mu.state(), 0u) << "no lock, reference or waiter left";
  });
}

// Close wakes the goroutines queued for a lock: they fail, and the one of
// the holder, the closer and the waiters that drops the last reference is
// told so exactly once.
TEST_P(FdMutexTest, CloseWakesQueuedWaitersAndTheLastReferenceIsReportedOnce) {
  run_test([] {
    FdMutex mu;
    bool last = false;
    ASSERT_TRUE(mu.rwlock(true, &last));
    constexpr int kWaiters = 3;
    Parked parked[kWaiters];
    std::atomic<int> failed{0}, lasts{0};
    gort::WaitGroup wg;
    for (int i = 0; i < kWaiters; i++) {
      wg.add(1);
      gort::go([&, i] {
        parked[i].mark();
        bool l = false;
        if (!mu.rwlock(true, &l)) failed.fetch_add(1);
        if (l) lasts.fetch_add(1);
        wg.done();
      });
    }
    for (auto& p : parked) EXPECT_TRUE(p.wait(WaitReason::kSemacquire));
    EXPECT_EQ((mu.state() & FdMutex::kRWaitMask) / FdMutex::kRWait, uint64_t{kWaiters});
    ASSERT_TRUE(mu.incref_and_close());
    EXPECT_EQ(mu.state() & FdMutex::kRWaitMask, 0u) << "close takes the waiters' counts";
    wg.wait();
    EXPECT_EQ(failed.load(), kWaiters);
    EXPECT_EQ(lasts.load(), 0) << "the holder and the closer still hold references";
    EXPECT_FALSE(mu.decref());
    EXPECT_TRUE(mu.rwunlock(true)) << "the holder's unlock drops the last reference";
  });
}

// The race of close against lock holders, waiters and plain references, on
// several Ps: every round, exactly one caller learns that it dropped the
// last reference (NetFD's destroy), and the word is left closed with
// nothing held. The memory goes only after every caller has returned, as a
// NetFD's owner frees it in release().
TEST_P(FdMutexTest, CloseRacingWithEveryCallReportsTheLastReferenceOnce) {
  run_test([] {
    constexpr int kRounds = 300;
    constexpr int kCallers = 6;
    for (int round = 0; round < kRounds; round++) {
      auto mu = std::make_unique<FdMutex>();
      std::atomic<int> lasts{0};
      auto dropped = [&](bool last) {
        if (last) lasts.fetch_add(1);
      };
      gort::WaitGroup wg;
      for (int i = 0; i < kCallers; i++) {
        wg.add(1);
        gort::go([&, i] {
          const bool read = i % 3 == 0;
          if (i % 3 == 2) {
            if (mu->incref()) {
              gort::yield();
              dropped(mu->decref());
            }
          } else {
            bool last = false;
            if (mu->rwlock(read, &last)) {
              gort::yield();  // the others queue for the lock meanwhile
              dropped(mu->rwunlock(read));
            } else {
              dropped(last);
            }
          }
          wg.done();
        });
      }
      for (int y = 0; y < round % 4; y++) gort::yield();
      ASSERT_TRUE(mu->incref_and_close());
      dropped(mu->decref());
      wg.wait();
      EXPECT_EQ(lasts.load(), 1) << "round " << round;
      EXPECT_EQ(mu->state(), FdMutex::kClosed) << "round " << round;
    }
  });
}

}  // namespace
}  // namespace gort_stdlib_test

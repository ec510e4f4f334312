// tests/gmp/lockrank_test.cpp — the lock order checked at run time
// (gmp/lockrank.cpp, the table in gort/detail/word_lock.hpp): a lock taken
// out of order, or a second lock of a rank that does not nest, is a fatal
// error naming both; a release of a lock never taken is one too; in-order
// and nesting acquisitions pass, on plain threads and in goroutines, with
// ranks released out of order. Only in a build with -Dlock_rank=true (the
// test suite's); elsewhere the checks compile to nothing and the suite says
// it skipped.
#include <string>
#include <thread>
#include <vector>

#include "gmp/lock.hpp"
#include "gort/chan.hpp"
#include "gort/sync.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::LockRank;
using internal::MutexLock;
using internal::RuntimeMutex;
using internal::WordLock;

#ifdef GORT_LOCK_RANK
#define SKIP_WITHOUT_LOCK_RANK()
#else
#define SKIP_WITHOUT_LOCK_RANK() GTEST_SKIP() << "built without -Dlock_rank=true"
#endif

TEST(LockRank, InOrderAndNestingPass) {
  SKIP_WITHOUT_LOCK_RANK();
  WordLock<LockRank::kCancelNode> parent, child;
  WordLock<LockRank::kChan> a, b, c;
  RuntimeMutex<LockRank::kSched> sched;
  WordLock<LockRank::kTimerHeap> heap;
  parent.lock();
  child.lock();  // cancel nodes nest
  a.lock();
  b.lock();  // channels nest (select)
  c.lock();
  sched.lock();
  heap.lock();
  // Released out of order: the checker finds each by rank.
  b.unlock();
  sched.unlock();
  a.unlock();
  heap.unlock();
  c.unlock();
  child.unlock();
  parent.unlock();
  // And again from scratch: nothing is left held.
  {
    MutexLock hold(heap);
  }
  MutexLock hold(parent);
}

TEST(LockRank, OutOfOrderIsFatalNamingBoth) {
  SKIP_WITHOUT_LOCK_RANK();
  EXPECT_EXIT(
      {
        WordLock<LockRank::kTimerHeap> heap;
        WordLock<LockRank::kChan> ch;
        heap.lock();
        ch.lock();
      },
      ::testing::ExitedWithCode(2),
      "fatal error: lock ordering problem: taking Chan \\(rank [0-9]+, 0x[0-9a-f]+\\) while holding TimerHeap");
}

TEST(LockRank, SecondLockOfARankThatDoesNotNestIsFatal) {
  SKIP_WITHOUT_LOCK_RANK();
  EXPECT_EXIT(
      {
        RuntimeMutex<LockRank::kSched> one;
        RuntimeMutex<LockRank::kSched> two;
        one.lock();
        two.lock();
      },
      ::testing::ExitedWithCode(2), "lock ordering problem: taking Sched .* while holding Sched");
}

TEST(LockRank, ReleaseWithoutAcquireIsFatal) {
  SKIP_WITHOUT_LOCK_RANK();
  EXPECT_EXIT(
      {
        internal::lockrank_release(LockRank::kPollDesc, nullptr);
      },
      ::testing::ExitedWithCode(2), "lock rank release without matching lock acquire: PollDesc");
}

TEST(LockRank, CheckedInGoroutinesAcrossParks) {
  SKIP_WITHOUT_LOCK_RANK();
  // Channels, a select and a mutex between several Ps: parks release their
  // channel's lock on the next context; a leftover or a miscount would
  // end the process.
  gort::run(
      [] {
        auto a = gort::make_chan<int>();
        auto b = gort::make_chan<int>(4);
        gort::Mutex mu;
        int sum = 0;
        gort::WaitGroup wg;
        for (int i = 0; i < 8; i++) {
          wg.add(1);
          gort::go([&] {
            for (int j = 0; j < 200; j++) {
              gort::select(gort::on_send(a, j), gort::on_send(b, j));
              std::lock_guard<gort::Mutex> lock(mu);
              sum++;
            }
            wg.done();
          });
        }
        for (int j = 0; j < 8 * 200; j++) {
          gort::select(gort::on_recv(a), gort::on_recv(b));
        }
        wg.wait();
        EXPECT_EQ(sum, 8 * 200);
      },
      [] {
        gort::Config cfg;
        cfg.procs = 4;
        return cfg;
      }());
}

TEST(LockRank, OutOfOrderInAGoroutineIsFatal) {
  SKIP_WITHOUT_LOCK_RANK();
  EXPECT_EXIT(
      {
        gort::run([] {
          auto done = gort::make_chan<int>();
          gort::go([&] {
            RuntimeMutex<LockRank::kStackPool> pool;
            WordLock<LockRank::kTimer> timer;
            MutexLock a(pool);
            MutexLock b(timer);
          });
          done.recv();
        });
      },
      ::testing::ExitedWithCode(2), "lock ordering problem: taking Timer .* while holding StackPool");
}

}  // namespace
}  // namespace gort::test

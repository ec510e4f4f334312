// tests/stdlib/sync/rwmutex_test.cpp — gort::RWMutex (stdlib/sync/mutex.cpp): shared
// readers, exclusive writers, writer preference, try_lock/try_lock_shared,
// the standard adapters and the fatal errors of misuse.
#include <chrono>
#include <concepts>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::eventually;
using gort::test::Parked;
using gort::test::WaitReason;
using Clock = std::chrono::steady_clock;

class RWMutex : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(RWMutex);

// Readers hold the lock at the same time: each one waits, holding it, until
// all of them are inside. If readers excluded each other this could never
// happen (each wait is bounded, so that shows up as a failure).
TEST_P(RWMutex, ReadersShareTheLock) {
  run_test([] {
    constexpr int kReaders = 8;
    gort::RWMutex mu;
    std::atomic<int> inside{0};
    std::atomic<int> saw_all{0};
    Countdown cd(kReaders);
    for (int i = 0; i < kReaders; i++) {
      gort::go([&] {
        mu.lock_shared();
        inside++;
        if (eventually([&] { return inside.load() == kReaders; })) saw_all++;
        mu.unlock_shared();
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(saw_all.load(), kReaders);
    // Everyone left: a writer gets in.
    EXPECT_TRUE(mu.try_lock());
    mu.unlock();
  });
}

// Writers exclude readers and other writers; readers see a stable value.
TEST_P(RWMutex, WriterIsExclusive) {
  run_test([] {
    constexpr int kWriters = 4;
    constexpr int kWrites = 300;
    constexpr int kReaders = 8;
    constexpr int kReads = 1000;
    gort::RWMutex mu;
    int64_t value = 0;  // guarded by mu
    std::atomic<int> readers_inside{0}, writers_inside{0};
    std::atomic<int> violations{0}, torn_reads{0};
    Countdown cd(kWriters + kReaders);
    for (int w = 0; w < kWriters; w++) {
      gort::go([&, w] {
        for (int i = 0; i < kWrites; i++) {
          mu.lock();
          if (writers_inside.fetch_add(1) != 0 || readers_inside.load() != 0) violations++;
          int64_t v = value;
          if ((i + w) % 4 == 0) gort::yield();
          value = v + 1;
          writers_inside.fetch_sub(1);
          mu.unlock();
        }
        cd.done();
      });
    }
    for (int r = 0; r < kReaders; r++) {
      gort::go([&, r] {
        for (int i = 0; i < kReads; i++) {
          mu.lock_shared();
          readers_inside++;
          if (writers_inside.load() != 0) violations++;
          int64_t v1 = value;
          if ((i + r) % 4 == 0) gort::yield();
          int64_t v2 = value;
          if (v1 != v2) torn_reads++;
          readers_inside--;
          mu.unlock_shared();
        }
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(violations.load(), 0);
    EXPECT_EQ(torn_reads.load(), 0);
    std::shared_lock lock(mu);
    EXPECT_EQ(value, int64_t{kWriters} * kWrites);
  });
}

// Goroutines and plain threads, writers and readers, on one RWMutex. The
// writers hand the lock to each other often, so the next writer regularly
// takes the inner Mutex before the last one has given the readers their
// count back, and waits for it: by yielding in a goroutine, by sched_yield
// on a plain thread.
TEST_P(RWMutex, WritersAndReadersOnPlainThreadsToo) {
  run_test([] {
    gort::test::KeepAwake awake;
    constexpr int kIters = 3000;
    gort::RWMutex mu;
    int64_t counter = 0;  // guarded by mu
    std::atomic<int> writers_inside{0}, readers_inside{0}, violations{0};
    auto write = [&](int i) {
      mu.lock();
      if (writers_inside.fetch_add(1) != 0 || readers_inside.load() != 0) violations++;
      int64_t v = counter;
      if (i % 16 == 0) {
        if (gort::in_goroutine()) gort::yield(); else std::this_thread::yield();
      }
      counter = v + 1;
      writers_inside.fetch_sub(1);
      mu.unlock();
    };
    auto read = [&] {
      mu.lock_shared();
      readers_inside++;
      if (writers_inside.load() != 0) violations++;
      readers_inside--;
      mu.unlock_shared();
    };
    auto body = [&] {
      for (int i = 0; i < kIters; i++) {
        write(i);
        read();
      }
    };
    gort::test::on_threads_and_goroutines(body);
    EXPECT_EQ(violations.load(), 0);
    std::shared_lock lock(mu);
    EXPECT_EQ(counter, 4 * kIters);
  });
}

// Readers keep arriving, their critical sections overlapping, so the reader
// count need never drop to zero on its own. A writer that asks for the lock
// blocks new readers and gets in once the current ones leave. Bounded: the
// readers give up after 20 s, which fails the test.
TEST_P(RWMutex, WriterNotStarvedByContinuousReaders) {
  run_test([] {
    constexpr int kReaders = 6;
    gort::RWMutex mu;
    std::atomic<bool> writer_done{false};
    std::atomic<bool> readers_gave_up{false};
    std::atomic<int64_t> reads{0};
    std::atomic<int> readers_inside{0};
    std::atomic<int> readers_inside_writer{-1};
    Countdown cd(kReaders + 1);
    auto deadline = Clock::now() + std::chrono::seconds(20);
    for (int r = 0; r < kReaders; r++) {
      gort::go([&] {
        while (!writer_done.load()) {
          if (Clock::now() > deadline) {
            readers_gave_up = true;
            break;
          }
          mu.lock_shared();
          readers_inside++;
          reads++;
          for (int k = 0; k < 3; k++) gort::yield();  // overlap with the others
          readers_inside--;
          mu.unlock_shared();
        }
        cd.done();
      });
    }
    gort::go([&] {
      // Let the reader stream get going first.
      eventually([&] { return reads.load() > 200; });
      mu.lock();
      readers_inside_writer = readers_inside.load();
      mu.unlock();
      writer_done = true;
      cd.done();
    });
    cd.wait();
    EXPECT_FALSE(readers_gave_up.load()) << "the writer did not get in within 20 s";
    EXPECT_TRUE(writer_done.load());
    EXPECT_EQ(readers_inside_writer.load(), 0) << "readers were inside while the writer held the lock";
  });
}

// A pending writer blocks new readers (writer preference): they get in only
// after the writer has had its turn.
TEST_P(RWMutex, PendingWriterGoesBeforeNewReaders) {
  run_test([] {
    gort::RWMutex mu;
    gort::Mutex log_mu;
    std::vector<std::string> log;
    auto note = [&](std::string s) {
      std::lock_guard g(log_mu);
      log.push_back(std::move(s));
    };
    Countdown cd(2);
    Parked writer, reader;
    mu.lock_shared();  // main is a reader
    gort::go([&] {
      writer.mark();
      mu.lock();
      note("writer");
      mu.unlock();
      cd.done();
    });
    EXPECT_TRUE(writer.wait(WaitReason::kSyncRWMutex));
    gort::go([&] {
      reader.mark();
      mu.lock_shared();
      note("reader");
      mu.unlock_shared();
      cd.done();
    });
    EXPECT_TRUE(reader.wait(WaitReason::kSyncRWMutex)) << "a new reader got in past a pending writer";
    EXPECT_FALSE(mu.try_lock_shared());
    EXPECT_FALSE(mu.try_lock());
    note("main unlocks");
    mu.unlock_shared();
    cd.wait();
    EXPECT_EQ(log, (std::vector<std::string>{"main unlocks", "writer", "reader"}));
  });
}

// Readers blocked behind a writer are all released by its unlock.
TEST_P(RWMutex, WriterUnlockReleasesAllWaitingReaders) {
  run_test([] {
    constexpr int kReaders = 20;
    gort::RWMutex mu;
    std::vector<Parked> parked(kReaders);
    std::atomic<int> got{0};
    Countdown cd(kReaders);
    mu.lock();
    for (int i = 0; i < kReaders; i++) {
      gort::go([&, i] {
        parked[static_cast<size_t>(i)].mark();
        mu.lock_shared();
        got++;
        mu.unlock_shared();
        cd.done();
      });
    }
    for (auto& p : parked) EXPECT_TRUE(p.wait(WaitReason::kSyncRWMutex));
    EXPECT_EQ(got.load(), 0);
    mu.unlock();
    cd.wait();
    EXPECT_EQ(got.load(), kReaders);
  });
}

TEST_P(RWMutex, TryLockAndTryLockShared) {
  run_test([] {
    gort::RWMutex mu;
    EXPECT_TRUE(mu.try_lock());
    EXPECT_FALSE(mu.try_lock());
    EXPECT_FALSE(mu.try_lock_shared());
    mu.unlock();

    EXPECT_TRUE(mu.try_lock_shared());
    EXPECT_TRUE(mu.try_lock_shared());  // readers share
    EXPECT_FALSE(mu.try_lock());
    mu.unlock_shared();
    EXPECT_FALSE(mu.try_lock()) << "one reader is still inside";
    mu.unlock_shared();
    EXPECT_TRUE(mu.try_lock());
    mu.unlock();

    // try_lock fails while another writer holds the writers' mutex.
    mu.lock();
    bool other_w = true, other_r = true;
    Countdown cd(1);
    gort::go([&] {
      other_w = mu.try_lock();
      other_r = mu.try_lock_shared();
      cd.done();
    });
    cd.wait();
    EXPECT_FALSE(other_w);
    EXPECT_FALSE(other_r);
    mu.unlock();
    EXPECT_TRUE(mu.try_lock_shared());
    mu.unlock_shared();
  });
}

TEST_P(RWMutex, StandardAdapters) {
  run_test([] {
    gort::RWMutex mu;
    {
      std::shared_lock<gort::RWMutex> r1(mu);
      std::shared_lock<gort::RWMutex> r2(mu, std::try_to_lock);
      EXPECT_TRUE(r2.owns_lock());
      EXPECT_FALSE(mu.try_lock());
    }
    {
      std::unique_lock<gort::RWMutex> w(mu);
      std::shared_lock<gort::RWMutex> r(mu, std::try_to_lock);
      EXPECT_FALSE(r.owns_lock());
    }
    {
      std::lock_guard<gort::RWMutex> w(mu);
      EXPECT_FALSE(mu.try_lock_shared());
    }
    {
      gort::Mutex other;
      std::scoped_lock both(mu, other);
      EXPECT_FALSE(mu.try_lock_shared());
      EXPECT_FALSE(other.try_lock());
    }
    EXPECT_TRUE(mu.try_lock());
    mu.unlock();
  });
}

// Go's RLocker: a Lockable whose lock is a read lock. It meets the
// standard's requirements, and holding it admits other readers and keeps
// writers out until the last read lock, taken through it or not, is gone.
static_assert(std::is_copy_constructible_v<gort::RWMutex::RLocker>);
static_assert(requires(gort::RWMutex::RLocker l) {
  l.lock();
  l.unlock();
  { l.try_lock() } -> std::same_as<bool>;
});

TEST_P(RWMutex, RLockerTakesTheReadSide) {
  run_test([] {
    gort::RWMutex mu;
    auto rl = mu.rlocker();
    EXPECT_EQ(&rl.rwmutex(), &mu);
    {
      std::lock_guard guard(rl);
      // Other readers share it, through the RWMutex or another RLocker.
      EXPECT_TRUE(mu.try_lock_shared());
      mu.unlock_shared();
      auto other = mu.rlocker();
      EXPECT_TRUE(other.try_lock());
      other.unlock();
      // Writers do not get in.
      EXPECT_FALSE(mu.try_lock());
    }
    EXPECT_TRUE(mu.try_lock());
    // A writer holds it: the RLocker waits / fails like lock_shared.
    EXPECT_FALSE(rl.try_lock());
    {
      std::unique_lock<gort::RWMutex::RLocker> r(rl, std::try_to_lock);
      EXPECT_FALSE(r.owns_lock());
    }
    mu.unlock();
    std::unique_lock<gort::RWMutex::RLocker> r(rl);
    EXPECT_TRUE(r.owns_lock());
    EXPECT_FALSE(mu.try_lock());
    r.unlock();
    EXPECT_TRUE(mu.try_lock());
    mu.unlock();
  });
}

// A writer parked behind readers that hold RLockers gets in once the last
// of them unlocks; readers through RLockers and through lock_shared hold it
// together.
TEST_P(RWMutex, RLockerReadersExcludeAWriter) {
  run_test([] {
    constexpr int kReaders = 6;
    gort::RWMutex mu;
    int64_t value = 0;  // guarded by mu
    std::atomic<int> inside{0};
    Countdown readers(kReaders), done(kReaders + 1);
    gort::Chan<int> release = gort::make_chan<int>();
    for (int i = 0; i < kReaders; i++) {
      gort::go([&, i, release] {
        if (i % 2 == 0) {
          auto rl = mu.rlocker();
          std::lock_guard guard(rl);
          inside++;
          readers.done();
          release.recv();
          EXPECT_EQ(value, 0) << "a writer got in while a reader held its RLocker";
          inside--;
        } else {
          std::shared_lock guard(mu);
          inside++;
          readers.done();
          release.recv();
          EXPECT_EQ(value, 0);
          inside--;
        }
        done.done();
      });
    }
    readers.wait();
    Parked writer;
    gort::go([&] {
      writer.mark();
      std::lock_guard guard(mu);
      EXPECT_EQ(inside.load(), 0);
      value = 1;
      done.done();
    });
    EXPECT_TRUE(writer.wait(WaitReason::kSyncRWMutex));
    release.close();
    done.wait();
    EXPECT_EQ(value, 1);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

namespace gort_stdlib_test {
namespace {

using gort::test::procs_cfg;

TEST(RWMutexDeathTest, RLockerUnlockOfUnlockedIsFatal) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::RWMutex mu;
              mu.rlocker().unlock();
            },
            procs_cfg(1));
      },
      ::testing::ExitedWithCode(2), "fatal error: sync: RUnlock of unlocked RWMutex");
}

TEST(RWMutexDeathTest, UnlockOfUnlockedRWMutexIsFatal) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::RWMutex mu;
              mu.unlock();
            },
            procs_cfg(1));
      },
      ::testing::ExitedWithCode(2), "fatal error: sync: Unlock of unlocked RWMutex");
}

TEST(RWMutexDeathTest, UnlockSharedOfUnlockedRWMutexIsFatal) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::RWMutex mu;
              mu.lock_shared();
              mu.unlock_shared();
              mu.unlock_shared();
            },
            procs_cfg(1));
      },
      ::testing::ExitedWithCode(2), "fatal error: sync: RUnlock of unlocked RWMutex");
}

TEST(RWMutexDeathTest, UnlockSharedWhileWriteLockedIsFatal) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::RWMutex mu;
              mu.lock();
              mu.unlock_shared();
            },
            procs_cfg(1));
      },
      ::testing::ExitedWithCode(2), "fatal error: sync: RUnlock of unlocked RWMutex");
}

}  // namespace
}  // namespace gort_stdlib_test

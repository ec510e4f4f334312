// tests/gmp/race/race_test.cpp — the race detector (gort/detail/race.hpp,
// docs/race.md): races between goroutines are reported with both stacks,
// and Go's happens-before edges (spawn, channels, sync, context, timers,
// run's end) keep correctly synchronised programs quiet.
//
// Each program runs in a death-test child (tests/race_testing.hpp): TSan reports on
// stderr and, at exit, turns the status into 66 when it reported anything.
// Only meaningful in a -Db_sanitize=thread build; elsewhere every case is
// skipped.
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gmp/race/race.hpp"
#include "gmp/stack.hpp"
#include "gort/context.hpp"
#include "gort/detail/race.hpp"
#include "gort/gort.hpp"
#include "tests/race_testing.hpp"
#include "tests/testing.hpp"

namespace gort {
namespace {

using test::race_child;

class Race : public test::RaceTest {};

// ---- planted races ----

long g_counter = 0;

__attribute__((noinline)) void bump_counter() { g_counter++; }

TEST_P(Race, UnsynchronisedGoroutinesAreReported) {
  auto body = [] {
    WaitGroup wg;
    for (int i = 0; i < 4; i++) {
      wg.add(1);
      go([&wg] {
        for (int k = 0; k < 200; k++) {
          bump_counter();
          if (k % 20 == 0) yield();
        }
        wg.done();
      });
    }
    wg.wait();
  };
  EXPECT_RACE(procs(), body, "bump_counter", "bump_counter");
}

int g_after_send = 0;
__attribute__((noinline)) void write_after_send() { g_after_send = 1; }
__attribute__((noinline)) int read_after_recv() { return g_after_send; }

// A buffered send does not wait for its receive: what the sender does after
// it is not ordered with what the receiver does after receiving.
TEST_P(Race, WriteAfterBufferedSendIsNotOrderedByIt) {
  auto body = [] {
    auto ch = make_chan<int>(1);
    // Both stay alive until main has seen both accesses: TSan drops a report
    // whose earlier access belongs to a goroutine already gone.
    WaitGroup both;  // orders each with main, not with each other
    auto hold = make_chan<int>();
    both.add(2);
    go([ch, hold, &both] {
      ch.send(1);
      write_after_send();
      both.done();
      (void)hold.recv();
    });
    go([ch, hold, &both] {
      (void)ch.recv();
      for (int i = 0; i < 200; i++) yield();  // let the sender write first, usually
      test::g_race_sink = static_cast<size_t>(read_after_recv());
      both.done();
      (void)hold.recv();
    });
    both.wait();
    hold.close();
  };
  EXPECT_RACE(procs(), body, "write_after_send|read_after_recv", "read_after_recv|write_after_send");
}

int g_result = 0;
__attribute__((noinline)) void write_result_late() { g_result = 42; }
__attribute__((noinline)) int read_result() { return g_result; }

TEST_P(Race, WriteAfterDoneIsReported) {
  auto body = [] {
    WaitGroup wg;
    wg.add(1);
    go([&wg] {
      wg.done();
      write_result_late();
    });
    wg.wait();
    sleep(absl::Milliseconds(20));
    test::g_race_sink = static_cast<size_t>(read_result());
  };
  EXPECT_RACE(procs(), body, "write_result_late|read_result", "read_result|write_result_late");
}

std::map<int, int> g_map;
Mutex g_map_mu;
__attribute__((noinline)) void map_put(int k) {
  std::lock_guard<Mutex> l(g_map_mu);
  g_map[k] = k;
}
__attribute__((noinline)) size_t map_size_unlocked() { return g_map.size(); }

TEST_P(Race, MapReadWithoutItsMutexIsReported) {
  auto body = [] {
    WaitGroup wg;
    wg.add(1);
    go([&wg] {
      for (int k = 0; k < 100; k++) {
        map_put(k);
        if (k % 10 == 0) yield();
      }
      wg.done();
    });
    size_t n = 0;
    for (int k = 0; k < 100; k++) {
      n += map_size_unlocked();
      if (k % 10 == 0) yield();
    }
    wg.wait();
    test::g_race_sink = n;
  };
  EXPECT_RACE(procs(), body, "map_put|map_size_unlocked", "map_size_unlocked|map_put");
}

// ---- the same programs, synchronised: nothing to report ----

TEST_P(Race, CounterUnderMutexIsQuiet) {
  auto body = [] {
    WaitGroup wg;
    Mutex mu;
    for (int i = 0; i < 4; i++) {
      wg.add(1);
      go([&] {
        for (int k = 0; k < 200; k++) {
          {
            std::lock_guard<Mutex> l(mu);
            bump_counter();
          }
          if (k % 20 == 0) yield();
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(g_counter, 800);
  };
  EXPECT_NO_RACE(procs(), body);
}

thread_local int tl_seven = 7;

__attribute__((noinline)) int errno_after_a_failed_close() {
  errno = 0;
  (void)::close(-1);  // libc sets errno (EBADF) where TSan does not look
  return errno;
}

// A thread's TLS (errno, the program's thread_locals) is new memory written
// by TSan when the thread starts; goroutines that move onto threads started
// later (the Ms a burst of goroutines wakes) must not race with that.
TEST_P(Race, ErrnoAndThreadLocalsOnThreadsStartedLaterAreQuiet) {
  auto body = [] {
    WaitGroup wg;
    std::atomic<int> bad{0};
    for (int i = 0; i < 32; i++) {
      wg.add(1);
      go([&] {
        for (int k = 0; k < 20; k++) {
          if (errno_after_a_failed_close() != EBADF || tl_seven != 7) bad.fetch_add(1);
          yield();
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(bad.load(), 0);
  };
  EXPECT_NO_RACE(procs(), body);
}

TEST_P(Race, ValuesHandedOverChannelsAreQuiet) {
  auto body = [] {
    // Buffered: a producer fills slots of a vector and sends the index.
    std::vector<std::string> data(200);
    auto idx = make_chan<int>(8);
    go([&data, idx] {
      for (int i = 0; i < 200; i++) {
        data[static_cast<size_t>(i)] = "value " + std::to_string(i);
        idx.send(i);
      }
      idx.close();
    });
    size_t total = 0;
    for (int i : idx) total += data[static_cast<size_t>(i)].size();
    EXPECT_GT(total, 0u);
    // Unbuffered, both ways: what the receiver did before receiving happens
    // before the send completes.
    auto rendezvous = make_chan<std::vector<int>>();
    int before_recv = 0;
    go([&before_recv, rendezvous] {
      before_recv = 7;
      (void)rendezvous.recv();
    });
    rendezvous.send(std::vector<int>(100, 1));
    EXPECT_EQ(before_recv, 7);
    // Capacity 1 as a semaphore: the k-th receive happens before the
    // (k+1)-th send completes.
    auto sem = make_chan<int>(1);
    int shared = 0;
    WaitGroup wg;
    for (int i = 0; i < 4; i++) {
      wg.add(1);
      go([&] {
        sem.send(0);
        shared++;
        (void)sem.recv();
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(shared, 4);
    // Close before a receive that sees it; select.
    auto closed = make_chan<int>();
    int before_close = 0;
    go([&before_close, closed] {
      before_close = 3;
      closed.close();
    });
    int got = -1;
    select(on_recv(closed, [&](std::optional<int> v) { got = v ? *v : 0; }));
    EXPECT_EQ(got, 0);
    EXPECT_EQ(before_close, 3);
  };
  EXPECT_NO_RACE(procs(), body);
}

TEST_P(Race, SyncPrimitivesAreQuiet) {
  auto body = [] {
    // WaitGroup: writes before done, read after wait.
    std::vector<int> results(8);
    WaitGroup wg;
    for (int i = 0; i < 8; i++) {
      wg.add(1);
      go([&, i] {
        results[static_cast<size_t>(i)] = i;
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(results[7], 7);
    // RWMutex: a writer, then readers.
    RWMutex rw;
    int guarded = 0;
    WaitGroup wg2;
    for (int i = 0; i < 4; i++) {
      wg2.add(1);
      go([&, i] {
        if (i == 0) {
          std::lock_guard<RWMutex> l(rw);
          guarded++;
        } else {
          rw.lock_shared();
          EXPECT_GE(guarded, 0);
          rw.unlock_shared();
        }
        wg2.done();
      });
    }
    wg2.wait();
    // Once: the function's effects before every call's return.
    Once once;
    int init = 0;
    WaitGroup wg3;
    for (int i = 0; i < 4; i++) {
      wg3.add(1);
      go([&] {
        once.call([&] { init = 5; });
        EXPECT_EQ(init, 5);
        wg3.done();
      });
    }
    wg3.wait();
    // Semaphore as a lock.
    Semaphore sem(1);
    int by_sem = 0;
    WaitGroup wg4;
    for (int i = 0; i < 4; i++) {
      wg4.add(1);
      go([&] {
        sem.acquire();
        by_sem++;
        sem.release();
        wg4.done();
      });
    }
    wg4.wait();
    EXPECT_EQ(by_sem, 4);
  };
  EXPECT_NO_RACE(procs(), body);
}

// Cancelled before anyone asked for done(): every such context shares one
// closed channel, so the edge from cancel to the receive that sees it
// closed must come from the context, not from that channel's close.
TEST_P(Race, CancelBeforeTheFirstDoneIsOrderedBeforeTheReceive) {
  auto body = [] {
    auto [ctx, cancel] = with_cancel(background());
    int before_cancel = 0;
    static std::atomic<bool> cancelled{false};
    go([&before_cancel, cancel = cancel] {
      before_cancel = 1;
      cancel();
      cancelled.store(true, std::memory_order_relaxed);  // no edge (relaxed)
    });
    while (!cancelled.load(std::memory_order_relaxed)) yield();
    (void)ctx.done().recv();
    EXPECT_EQ(before_cancel, 1);
  };
  EXPECT_NO_RACE(procs(), body);
}

TEST_P(Race, SpawnContextTimersAndRunEndAreQuiet) {
  static std::vector<int> after_run;
  auto body = [] {
    // go: everything before the spawn happens before the goroutine.
    std::vector<int> prepared(16, 0);
    prepared[3] = 9;
    auto done = make_chan<int>();
    go([&prepared, done] { done.send(prepared[3]); });
    EXPECT_EQ(*done.recv(), 9);
    // Context: cancel happens before err() and done() observed.
    auto [ctx, cancel] = with_cancel(background());
    int before_cancel = 0;
    go([&before_cancel, cancel = cancel] {
      before_cancel = 1;
      cancel();
    });
    (void)ctx.done().recv();
    EXPECT_EQ(before_cancel, 1);
    EXPECT_FALSE(ctx.err().ok());
    // Timers: arming happens before the function / the channel's value.
    int armed = 4;
    auto fired = make_chan<int>(1);
    auto t = after_func(absl::Milliseconds(5), [&armed, fired] { fired.send(armed); });
    EXPECT_EQ(*fired.recv(), 4);
    (void)after(absl::Milliseconds(2)).recv();
    // run's end: what goroutines did comes before run() returns.
    go([] { after_run.push_back(1); });
  };
  EXPECT_EXIT(
      {
        ::alarm(60);
        Config cfg;
        cfg.procs = procs();
        run(body, cfg);
        after_run.push_back(2);
        std::fflush(nullptr);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), ::testing::Not(::testing::HasSubstr("ThreadSanitizer")));
}

// A finished goroutine's fiber is kept a while, then reused: a spawner whose
// goroutines overlap by one or two (the live count swinging up and down)
// reuses fibers instead of creating one per spawn, each of which costs TSan
// ~200 KiB of fresh memory.
TEST_P(Race, FibersAreReusedWhenTheLiveCountSwings) {
  auto body = [] {
    int64_t before = internal::tsan_fibers_created();
    for (int i = 0; i < 3000; i++) {
      WaitGroup wg;
      wg.add(2);
      go([&wg] { wg.done(); });
      go([&wg] { wg.done(); });
      wg.wait();
    }
    int64_t created = internal::tsan_fibers_created() - before;
    // The quarantine of 256 finished fibers and 256 spare ones fill first.
    // (The parent sees only the child's stderr.)
    if (created > 600) std::fprintf(stderr, "%lld fibers created for 6,000 goroutines\n", static_cast<long long>(created));
    EXPECT_LE(created, 600);
  };
  EXPECT_NO_RACE(procs(), body);
}

// ---- recycled stacks ----

// Writes every 64th byte of p[0, n): the caller's array escapes here, so TSan
// records each write (it skips a local array that never escapes).
__attribute__((noinline)) void fill_frame(char* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) p[i] = static_cast<char>(i);
}

// A frame 48 KiB deep: below the pages a shallow goroutine touches.
__attribute__((noinline)) void deep_frame() {
  char frame[48 * 1024];
  fill_frame(frame, sizeof frame);
}

// A new goroutine on a dead one's stack writes where the dead one wrote,
// with nothing ordering the two (the flags are relaxed atomics, which TSan
// does not count as synchronisation): the stack is new memory to the race
// detector (Go's racemalloc in gfget), deep pages included. With one P the
// second goroutine always gets the first one's G and stack.
TEST_P(Race, RecycledStacksAreNewMemory) {
  auto body = [] {
    std::atomic<int> finished{0};
    for (int n = 1; n <= 64; n++) {
      go([&finished] {
        deep_frame();
        finished.fetch_add(1, std::memory_order_relaxed);
      });
      while (finished.load(std::memory_order_relaxed) < n) yield();
      for (int i = 0; i < 3; i++) yield();  // it exits; its G is free
    }
  };
  EXPECT_NO_RACE(procs(), body);
}

// Stacks the pool gives back to the kernel (beyond its warm limit) lose
// TSan's record of them too: the next goroutine on such a stack finds its
// pages absent, and the reset at its start covers only resident pages.
// Here a thread writes into a stack, which the pool then gives back; a
// second thread, unordered with the first, which is still alive, writes
// the same bytes.
TEST_P(Race, StacksGivenBackForgetTheirAccesses) {
  if (procs() != 1) GTEST_SKIP() << "no scheduler involved";
  EXPECT_EXIT(
      {
        ::alarm(60);
        internal::StackPool pool;
        pool.init(64 * 1024);
        const size_t n = internal::StackPool::kWarmLimit + 1;
        std::vector<char*> s(n);
        pool.alloc(s.data(), n);
        for (char*& lo : s) lo = pool.take(lo);
        pool.free(s.data(), n - 1);  // the warm ones
        char* victim = s[n - 1];
        std::atomic<int> stage{0};
        std::thread first([&] {
          fill_frame(victim, pool.stack_size());
          stage.store(1, std::memory_order_relaxed);
          while (stage.load(std::memory_order_relaxed) != 2) usleep(1000);
        });
        while (stage.load(std::memory_order_relaxed) != 1) usleep(1000);
        pool.free(&victim, 1);  // beyond the warm limit: given back
        std::thread second([&] { fill_frame(victim, pool.stack_size()); });
        second.join();
        stage.store(2, std::memory_order_relaxed);
        first.join();
        pool.destroy();
        std::fflush(nullptr);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), ::testing::Not(::testing::HasSubstr("ThreadSanitizer")));
}

// Go 1.19's race detector stops at 8,128 live goroutines; gort at 8,000 (its
// threads share TSan's room), with Go's text, instead of TSan's own failure
// deep in its runtime.
// Slow: TSan clears ~200 KiB for each new fiber (over a minute for 8,128 on
// the 2-core development machine), so it runs when GORT_RACE_SLOW_TESTS=1.
TEST_P(Race, LiveGoroutineLimitIsAFatalErrorWithGosText) {
  if (procs() != 1) GTEST_SKIP() << "one P is enough";
  if (std::getenv("GORT_RACE_SLOW_TESTS") == nullptr) GTEST_SKIP() << "set GORT_RACE_SLOW_TESTS=1 (takes minutes)";
  auto body = [] {
    auto never = make_chan<int>();
    for (int i = 0; i < internal::kRaceLimitGoroutines + 10; i++) go([never] { (void)never.recv(); });
  };
  EXPECT_EXIT(race_child(1, body, 600), ::testing::ExitedWithCode(2),
              std::string("fatal error: ") + internal::kRaceLimitText);
}

GORT_INSTANTIATE_RACE(Race);

}  // namespace
}  // namespace gort

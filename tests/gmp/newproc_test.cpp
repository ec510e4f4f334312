// tests/gmp/newproc_test.cpp — creating goroutines (gmp/newproc.cpp):
// gort::go, ids, counts, closures, recycling of G descriptors.
#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing.hpp"

namespace gort::test {
namespace {

class Newproc : public ProcsTest {};
GORT_INSTANTIATE_PROCS(Newproc);

// A million goroutines on 2 Ps: each runs exactly once (a per-goroutine
// flag), and the count and the checksum of their arguments add up.
TEST(NewprocMillion, EachOfAMillionGoroutinesRunsOnce) {
  constexpr int64_t kGs = 1000000;
  GORT_SKIP_OVER_RACE_LIMIT(kGs);
  std::unique_ptr<std::atomic<uint8_t>[]> ran(new std::atomic<uint8_t>[kGs]);
  for (int64_t i = 0; i < kGs; i++) ran[i].store(0, std::memory_order_relaxed);
  std::atomic<int64_t> count{0};
  std::atomic<int64_t> sum{0};
  run_checked(2, [&] {
    Countdown cd(kGs);
    for (int64_t i = 0; i < kGs; i++) {
      gort::go(
          [&](int64_t k) {
            ran[k].fetch_add(1, std::memory_order_relaxed);
            count.fetch_add(1, std::memory_order_relaxed);
            sum.fetch_add(k, std::memory_order_relaxed);
            cd.done();
          },
          i);
    }
    cd.wait();
  });
  EXPECT_EQ(count.load(), kGs);
  EXPECT_EQ(sum.load(), kGs * (kGs - 1) / 2);
  int64_t not_once = 0;
  for (int64_t i = 0; i < kGs; i++) not_once += ran[i].load() != 1;
  EXPECT_EQ(not_once, 0);
}

// gort::go from plain threads while run is active: the goroutines run, and
// the threads are not goroutines.
TEST_P(Newproc, GoFromPlainThreads) {
  run_test([] {
    constexpr int kThreads = 4;
    constexpr int kPerThread = stress_size(5000);
    Countdown cd(kThreads * kPerThread);
    std::atomic<int64_t> sum{0};
    std::atomic<int> threads_done{0};
    std::atomic<int> not_goroutine{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
      threads.emplace_back([&, t] {
        if (!gort::in_goroutine() && gort::goroutine_id() == 0) not_goroutine.fetch_add(1);
        for (int i = 0; i < kPerThread; i++) {
          gort::go(
              [&](int v) {
                EXPECT_TRUE(gort::in_goroutine());
                sum.fetch_add(v);
                cd.done();
              },
              t * kPerThread + i);
        }
        threads_done.fetch_add(1);
      });
    }
    // Main stays runnable until the threads are done, so the runtime never
    // sees every goroutine blocked while a thread still has work to hand in.
    eventually([&] { return threads_done.load() == kThreads; });
    for (auto& th : threads) th.join();
    cd.wait();
    int64_t n = int64_t{kThreads} * kPerThread;
    EXPECT_EQ(sum.load(), n * (n - 1) / 2);
    EXPECT_EQ(not_goroutine.load(), kThreads);
  });
}

TEST_P(Newproc, ArgumentsAreDecayCopiedOrMoved) {
  run_test([] {
    Countdown cd(3);
    std::string s = "a string long enough to live on the heap, not in SSO";
    auto up = std::make_unique<int>(42);
    const char arr[] = "decays";
    std::string got_s, got_arr;
    int got_up = 0;
    gort::go(
        [&](std::string str, std::unique_ptr<int> p, const char* a) {
          got_s = str;
          got_up = *p;
          got_arr = a;
          cd.done();
        },
        s, std::move(up), arr);
    s = "changed after go";  // the goroutine holds a copy
    // A callable larger than the inline closure storage (heap path).
    struct Big {
      char pad[200];
      std::string* out;
      Countdown* cd;
      void operator()(int x) {
        *out = std::to_string(x) + pad;
        cd->done();
      }
    };
    static_assert(sizeof(Big) > gort::kInlineClosureSize);
    std::string big_out;
    Big big{};
    big.pad[0] = '!';
    big.out = &big_out;
    big.cd = &cd;
    gort::go(big, 7);
    // A plain function pointer with arguments.
    static std::atomic<int> fn_sum{0};
    fn_sum = 0;
    gort::go(
        +[](int a, int b, Countdown* c) {
          fn_sum = a + b;
          c->done();
        },
        20, 22, &cd);
    cd.wait();
    EXPECT_EQ(got_s, "a string long enough to live on the heap, not in SSO");
    EXPECT_EQ(got_up, 42);
    EXPECT_EQ(got_arr, "decays");
    EXPECT_EQ(big_out, "7!");
    EXPECT_EQ(fn_sum.load(), 42);
  });
}

// The closure (callable and arguments) is destroyed exactly once, when the
// goroutine finishes, on both the inline and the heap storage paths.
TEST_P(Newproc, ClosureIsDestroyedWhenGoroutineEnds) {
  run_test([] {
    auto token = std::make_shared<int>(0);
    Countdown cd(2);
    Gate gate;
    gort::go([token, &cd, &gate] {
      gate.wait();
      cd.done();
    });
    struct BigHolder {
      std::shared_ptr<int> t;
      char pad[128] = {};
    };
    gort::go(
        [&cd, &gate](BigHolder h) {
          (void)h;
          gate.wait();
          cd.done();
        },
        BigHolder{token});
    ASSERT_TRUE(eventually([&] { return gate.waiting() == 2; }));
    EXPECT_EQ(token.use_count(), 3);
    gate.open();
    cd.wait();
    EXPECT_TRUE(eventually([&] { return token.use_count() == 1; }));
  });
}

TEST_P(Newproc, GoroutineIdsAreUniqueAndMainIsOne) {
  run_test([] {
    EXPECT_EQ(gort::goroutine_id(), 1);
    EXPECT_TRUE(gort::in_goroutine());
    constexpr int kGs = stress_size(10000);
    WordLock mu;
    std::vector<int64_t> ids;
    Countdown cd(kGs);
    for (int i = 0; i < kGs; i++) {
      gort::go([&] {
        int64_t id = gort::goroutine_id();
        gort::yield();
        EXPECT_EQ(gort::goroutine_id(), id);
        {
          std::lock_guard<WordLock> lock(mu);
          ids.push_back(id);
        }
        cd.done();
      });
    }
    cd.wait();
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "duplicate goroutine id";
    EXPECT_GT(ids.front(), 1);
    EXPECT_EQ(gort::goroutine_id(), 1);
  });
}

TEST(NewprocOutside, IdAndInGoroutineOutsideRun) {
  EXPECT_EQ(gort::goroutine_id(), 0);
  EXPECT_FALSE(gort::in_goroutine());
  EXPECT_EQ(gort::num_goroutine(), 0);
  EXPECT_EQ(gort::procs(), 0);
}

TEST_P(Newproc, NumGoroutineCountsLiveGoroutines) {
  run_test([] {
    EXPECT_EQ(gort::num_goroutine(), 1);
    constexpr int kGs = 300;
    Gate gate;
    Countdown cd(kGs);
    for (int i = 0; i < kGs; i++) {
      gort::go([&] {
        gate.wait();
        cd.done();
      });
    }
    // Counted from creation, started or not.
    EXPECT_EQ(gort::num_goroutine(), kGs + 1);
    ASSERT_TRUE(eventually([&] { return gate.waiting() == kGs; }));
    EXPECT_EQ(gort::num_goroutine(), kGs + 1);
    // Goroutines created by a plain thread count too.
    std::atomic<bool> spawned{false};
    std::thread t([&] {
      gort::go([&] { gate.wait(); });
      spawned.store(true);
    });
    eventually([&] { return spawned.load(); });
    t.join();
    EXPECT_EQ(gort::num_goroutine(), kGs + 2);
    gate.open();
    cd.wait();
    expect_goroutines_settle(1);
    EXPECT_EQ(gort::runtime_stats().goroutines, 1);
  });
}

// Dead Gs are recycled with their stacks: waves of spawns, each smaller
// than the warm limit, do not keep allocating G+stack pairs.
TEST_P(Newproc, DeadGoroutinesAreRecycled) {
  run_test([] {
    constexpr int kWave = stress_size(500);
    static_assert(kWave < internal::StackPool::kWarmLimit);
    int64_t after_first = 0;
    for (int wave = 0; wave < 20; wave++) {
      Gate gate;
      Countdown cd(kWave);
      for (int i = 0; i < kWave; i++) {
        gort::go([&] {
          gate.wait();
          cd.done();
        });
      }
      ASSERT_TRUE(eventually([&] { return gate.waiting() == kWave; }));
      gate.open();
      cd.wait();
      expect_goroutines_settle(1);
      if (wave == 0) after_first = gort::runtime_stats().goroutines_allocated;
    }
    int64_t after_all = gort::runtime_stats().goroutines_allocated;
    EXPECT_GE(after_first, kWave);
    // Per-P free lists may hold a few Gs the next wave's spawning P does not
    // see; a bounded slack, not one more wave per wave.
    EXPECT_LE(after_all, after_first + 64 * gort::procs() + 64);
  });
}

// Go's process ends when main returns, whatever other goroutines are doing;
// spawns racing with that end vanish with it. Here the other goroutines
// keep running until their Ms stop, so a `go` that comes after main
// returned must be dropped quietly (docs/runtime.md, "Shutdown"): the exit
// status is main's, and nothing is printed. The race is lost in one run in
// a few on 2 and 4 Ps, hence the repetitions, each in a fresh process.
TEST(NewprocShutdown, SpawnsRacingMainsReturnAreDropped) {
  for (int procs : {2, 4}) {
    for (int round = 0; round < stress_size(30); round++) {
      auto child = [procs] {
        gort::Config cfg;
        cfg.procs = procs;
        return gort::run(
            [] {
              constexpr int kSpawners = 8;
              Countdown started(kSpawners);
              for (int i = 0; i < kSpawners; i++) {
                gort::go([&started, i] {
                  started.done();
                  for (uint64_t n = 0;; n++) {
                    // Inline closures and, every other time, one too large
                    // for the G (the heap path).
                    if (n % 2 == 0) {
                      gort::go([i] { (void)i; });
                    } else {
                      std::array<char, 2 * kInlineClosureSize> big{};
                      gort::go([big] { (void)big; });
                    }
                  }
                });
              }
              started.wait();
              return 7;
            },
            cfg);
      };
      EXPECT_EXIT(
          {
            ::alarm(30);
            int status = child();
            std::fflush(nullptr);
            ::_exit(status);
          },
          ::testing::ExitedWithCode(7),
          output_that([](const std::string& err) { return err.empty(); }, "prints nothing"))
          << "procs=" << procs << " round=" << round;
    }
  }
}

TEST(NewprocStats, RuntimeStatsDescribeTheRuntime) {
  gort::Config cfg;
  cfg.procs = 3;
  cfg.stack_size = 100 * 1000;
  gort::run(
      [] {
        gort::RuntimeStats st = gort::runtime_stats();
        EXPECT_EQ(st.procs, 3);
        EXPECT_GE(st.threads, 1);
        EXPECT_EQ(st.goroutines, 1);
        EXPECT_GE(st.stack_slabs, 1u);
        // Rounded up to whole pages.
        EXPECT_GE(st.stack_size, 100u * 1000);
        EXPECT_EQ(st.stack_size % static_cast<size_t>(sysconf(_SC_PAGESIZE)), 0u);
        EXPECT_TRUE(std::string(st.stack_guard) == "madvise" ||
                    std::string(st.stack_guard) == "mprotect");
      },
      cfg);
  gort::RuntimeStats after = gort::runtime_stats();
  EXPECT_EQ(after.procs, 0);
  EXPECT_EQ(after.goroutines, 0);
}

}  // namespace
}  // namespace gort::test

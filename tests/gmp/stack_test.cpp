// tests/gmp/stack_test.cpp — goroutine stacks (gmp/stack.cpp): the slab
// pool on its own, then the G at the top of each stack, recycling, release
// and guard mappings under the scheduler.
#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "absl/time/clock.h"
#include "gort/time.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::kGSize;
using internal::kGuardSize;
using internal::StackPool;

size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }


// MADV_GUARD_INSTALL exists from Linux 6.13 on.
bool kernel_has_guard_madvise() { return kernel_at_least(6, 13); }

// What gnew does with what alloc() hands out: take() each entry (an
// unused slot gets its guard here).
void take_all(StackPool& pool, char** s, size_t n) {
  for (size_t i = 0; i < n; i++) s[i] = pool.take(s[i]);
}

TEST(StackPool, SizeIsRoundedToPagesAndAtLeast16K) {
  StackPool pool;
  pool.init(1000);
  EXPECT_EQ(pool.stack_size(), 16u * 1024);
  pool.destroy();
  pool.init(20000);
  EXPECT_EQ(pool.stack_size(), (20000 + page() - 1) / page() * page());
  pool.destroy();
  pool.init(256 * 1024);
  EXPECT_EQ(pool.stack_size(), 256u * 1024);
  pool.destroy();
}

// The fault handler's lookup (fault.cpp): any address of a slab names
// its slot, and whether it is the slot's guard; nothing outside the pool.
TEST(StackPool, FindNamesTheSlotAndGuardOfAnAddress) {
  StackPool pool;
  pool.init(64 * 1024);
  char* s[3];
  pool.alloc(s, 3);
  take_all(pool, s, 3);
  internal::StackSlot slot;
  for (char* lo : s) {
    ASSERT_TRUE(pool.find(lo, &slot));
    EXPECT_EQ(slot.lo, lo);
    EXPECT_FALSE(slot.guard);
    ASSERT_TRUE(pool.find(lo + pool.stack_size() - 1, &slot));
    EXPECT_EQ(slot.lo, lo);
    EXPECT_FALSE(slot.guard);
    ASSERT_TRUE(pool.find(lo - 1, &slot));
    EXPECT_EQ(slot.lo, lo);
    EXPECT_TRUE(slot.guard);
    ASSERT_TRUE(pool.find(lo - kGuardSize, &slot));
    EXPECT_EQ(slot.lo, lo);
    EXPECT_TRUE(slot.guard);
  }
  int local = 0;
  EXPECT_FALSE(pool.find(&local, &slot));
  EXPECT_FALSE(pool.find(&pool, &slot));
  pool.free(s, 3);
  pool.destroy();
  EXPECT_FALSE(pool.find(s[0], &slot)) << "a destroyed pool still claims its slabs";
}

TEST(StackPool, AllocatesDistinctWritableStacksInSlabs) {
  StackPool pool;
  pool.init(64 * 1024);
  const size_t size = pool.stack_size();
  const size_t per_slab = (64u << 20) / (size + kGuardSize);
  std::vector<char*> stacks(per_slab);
  pool.alloc(stacks.data(), stacks.size());
  take_all(pool, stacks.data(), stacks.size());
  EXPECT_EQ(pool.slabs(), 1u);
  std::sort(stacks.begin(), stacks.end());
  for (size_t i = 0; i < stacks.size(); i++) {
    ASSERT_EQ(reinterpret_cast<uintptr_t>(stacks[i]) % page(), 0u);
    if (i > 0) {
      ASSERT_GE(static_cast<size_t>(stacks[i] - stacks[i - 1]), size + kGuardSize);
    }
  }
  // Every byte of a stack is usable.
  std::memset(stacks.front(), 0xab, size);
  std::memset(stacks.back(), 0xcd, size);
  EXPECT_EQ(static_cast<unsigned char>(stacks.front()[size - 1]), 0xab);
  // One more needs a second slab.
  char* extra;
  pool.alloc(&extra, 1);
  extra = pool.take(extra);
  EXPECT_EQ(pool.slabs(), 2u);
  EXPECT_EQ(std::count(stacks.begin(), stacks.end(), extra), 0);
  pool.free(stacks.data(), stacks.size());
  pool.free(&extra, 1);
  pool.destroy();
  EXPECT_EQ(pool.slabs(), 0u);
}

TEST(StackPool, FreedStacksAreReusedBeforeGrowing) {
  StackPool pool;
  pool.init(32 * 1024);
  std::vector<char*> a(1000), b(1000);
  pool.alloc(a.data(), a.size());
  take_all(pool, a.data(), a.size());
  size_t slabs = pool.slabs();
  pool.free(a.data(), a.size());
  pool.alloc(b.data(), b.size());
  take_all(pool, b.data(), b.size());
  EXPECT_EQ(pool.slabs(), slabs);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  pool.free(b.data(), b.size());
  pool.destroy();
}

// Beyond kWarmLimit, freed stacks give their pages back to the kernel
// (MADV_DONTNEED): they read as zeros when handed out again.
TEST(StackPool, StacksBeyondTheWarmLimitAreReturnedToTheKernel) {
  StackPool pool;
  pool.init(16 * 1024);
  const size_t n = StackPool::kWarmLimit + 100;
  std::vector<char*> s(n);
  pool.alloc(s.data(), n);
  take_all(pool, s.data(), n);
  for (char* lo : s) std::memset(lo, 0x5a, pool.stack_size());
  pool.free(s.data(), n);
  std::vector<char*> again(n);
  pool.alloc(again.data(), n);
  take_all(pool, again.data(), n);
  size_t zeroed = 0, dirty = 0;
  for (char* lo : again) {
    bool all_zero = true;
    for (size_t off = 0; off < pool.stack_size(); off += page()) all_zero &= lo[off] == 0;
    if (all_zero) {
      zeroed++;
    } else {
      dirty++;
    }
  }
  EXPECT_EQ(dirty, StackPool::kWarmLimit);
  EXPECT_EQ(zeroed, n - StackPool::kWarmLimit);
  pool.free(again.data(), n);
  pool.destroy();
}

// Released stacks go back in ranges (neighbouring slots merged, guards in
// between included) and in batches: every released stack reads as zeros,
// every kept one keeps its bytes, nothing outside the freed stacks is
// touched, and the guards between merged neighbours still fault.
TEST(StackPool, ReleasedNeighboursAndGapsKeepTheirGuards) {
  StackPool pool;
  pool.init(16 * 1024);
  // Enough for several release batches beyond the warm limit.
  const size_t n = StackPool::kWarmLimit + 3 * StackPool::kFreeBatchMax + 7;
  std::vector<char*> s(n);
  pool.alloc(s.data(), n);
  take_all(pool, s.data(), n);
  for (char* lo : s) std::memset(lo, 0x5a, pool.stack_size());
  // The warm ones first, then every other stack of the rest in shuffled
  // order (gaps between ranges), then the stacks in between (neighbours).
  std::vector<char*> order(s.begin(), s.begin() + StackPool::kWarmLimit);
  std::vector<char*> odd, even;
  for (size_t i = StackPool::kWarmLimit; i < n; i++) (i % 2 ? odd : even).push_back(s[i]);
  std::shuffle(odd.begin(), odd.end(), std::mt19937(1));
  order.insert(order.end(), odd.begin(), odd.end());
  // One stack stays allocated: its neighbours' releases must spare it.
  char* kept = even.back();
  even.pop_back();
  order.insert(order.end(), even.begin(), even.end());
  pool.free(order.data(), order.size());
  for (size_t off = 0; off < pool.stack_size(); off += page()) ASSERT_EQ(kept[off], 0x5a);
  for (size_t i = StackPool::kWarmLimit; i < order.size(); i++) {
    for (size_t off = 0; off < pool.stack_size(); off += page()) ASSERT_EQ(order[i][off], 0) << i;
  }
  for (size_t i = 0; i < StackPool::kWarmLimit; i++) ASSERT_EQ(order[i][0], 0x5a);
  // A guard between two released neighbours.
  char* inner = even[even.size() / 2];
  EXPECT_DEATH(
      {
        volatile char* guard = inner - 1;
        *guard = 1;
      },
      "");
  pool.free(&kept, 1);
  pool.destroy();
}

TEST(StackPool, GuardBelowEachStackFaults) {
  StackPool pool;
  pool.init(64 * 1024);
  char* lo;
  pool.alloc(&lo, 1);
  lo = pool.take(lo);
  lo[0] = 1;  // the lowest usable byte is fine
  expect_guard_below(lo);
  pool.free(&lo, 1);
  pool.destroy();
}

// A P's cache refill (32 stacks) prepares nothing: a slot never used gets
// its guard and its first page only when take() hands it to a G, so a
// process's first `go` pays for one stack, not 32. Entries given back
// untaken are handed out again, and once taken they are guarded.
TEST(StackPool, FreshSlotsArePreparedOnlyWhenTaken) {
  StackPool pool;
  pool.init(64 * 1024);
  constexpr size_t kN = 32;
  char* s[kN];
  const auto before = static_cast<int64_t>(rss_bytes());
  pool.alloc(s, kN);
  const auto after_alloc = static_cast<int64_t>(rss_bytes());
  EXPECT_LT(after_alloc - before, static_cast<int64_t>(12 * page())) << "alloc touched the stacks it handed out";
  pool.free(s, kN);  // untaken: back as they were
  char* again[kN];
  pool.alloc(again, kN);
  EXPECT_EQ(std::set<char*>(s, s + kN), std::set<char*>(again, again + kN));
  take_all(pool, again, kN);
  EXPECT_GE(static_cast<int64_t>(rss_bytes()) - after_alloc, static_cast<int64_t>(kN * page()))
      << "take() did not write each stack's top page";
  for (char* lo : again) ASSERT_EQ(reinterpret_cast<uintptr_t>(lo) % page(), 0u);
  EXPECT_DEATH(
      {
        volatile char* guard = again[kN / 2] - 1;
        *guard = 1;
      },
      "");
  pool.free(again, kN);
  pool.destroy();
}

// The helper that prepares stacks ahead of a burst: it starts only once
// kPrepareStart unprepared slots have gone out, prepares up to
// kPrepareStock fresh slots (each guarded, its top page written), which
// alloc() then hands out first, stops there, and is joined by destroy().
TEST(StackPool, PreparerStocksGuardedStacksAndIsJoined) {
  const int threads_before = settled_thread_count();
  StackPool pool;
  pool.init(64 * 1024);
  EXPECT_FALSE(pool.preparer_wanted());
  std::vector<char*> s(StackPool::kPrepareStart);
  pool.alloc(s.data(), s.size());  // all fresh: handed out unprepared
  ASSERT_TRUE(pool.preparer_wanted());
  std::atomic<int32_t> system_threads{0};
  ASSERT_TRUE(pool.start_preparer(&system_threads));
  EXPECT_EQ(system_threads.load(), 1);
  EXPECT_FALSE(pool.preparer_wanted());                // once per run
  EXPECT_TRUE(pool.start_preparer(&system_threads));  // already running
  EXPECT_EQ(system_threads.load(), 1);
  ASSERT_TRUE(eventually([&] { return pool.prepared_ahead() >= StackPool::kPrepareStock; },
                         std::chrono::seconds(30)));
  // It stops at the stock.
  usleep(50 * 1000);
  EXPECT_EQ(pool.prepared_ahead(), StackPool::kPrepareStock);
  const size_t rss_before = rss_bytes();
  std::vector<char*> ready(StackPool::kPrepareStock);
  pool.alloc(ready.data(), ready.size());
  for (char*& lo : ready) {
    char* taken = pool.take(lo);
    ASSERT_EQ(taken, lo) << "a stocked stack was handed out unprepared";
    lo[64 * 1024 - 1] = 1;  // its top page is already there
  }
  // (The race build's shadow memory grows with the test's own writes.)
  if (!internal::kRaceEnabled) {
    EXPECT_LT(rss_bytes() - std::min(rss_bytes(), rss_before), 8 * page()) << "stocked stacks were not touched";
  }
  EXPECT_DEATH(
      {
        volatile char* guard = ready[StackPool::kPrepareStock / 2] - 1;
        *guard = 1;
      },
      "");
  EXPECT_DEATH(
      {
        volatile char* guard = ready.front() - kGuardSize;
        *guard = 1;
      },
      "");
  // Handing out unprepared slots again wakes it; destroy() joins it even
  // while it works.
  std::vector<char*> more(StackPool::kPrepareStock);
  pool.alloc(more.data(), more.size());
  EXPECT_TRUE(eventually([&] { return pool.prepared_ahead() > StackPool::kPrepareStock; },
                         std::chrono::seconds(30)));
  pool.free(s.data(), s.size());
  pool.free(ready.data(), ready.size());
  pool.free(more.data(), more.size());
  pool.destroy();
  EXPECT_EQ(system_threads.load(), 0);
  EXPECT_EQ(pool.prepared_ahead(), 0u);
  int threads = 0;
  eventually([&] { return (threads = count_threads()) <= threads_before; });
  EXPECT_LE(threads, threads_before) << "the helper thread outlived destroy()";
  // A pool used again starts from scratch.
  pool.init(64 * 1024);
  EXPECT_FALSE(pool.preparer_wanted());
  pool.destroy();
}

// Between bursts the helper sleeps on a Note (Go's notesleep): every
// burst's first unprepared slot wakes it again, however many times it has
// gone back to sleep (a lost wake-up leaves the count short; two wake-ups
// of one sleep are a fatal error), and destroy() wakes it to stop.
TEST(StackPool, PreparerWakesForEveryBurst) {
  StackPool pool;
  pool.init(64 * 1024);
  std::atomic<int32_t> system_threads{0};
  ASSERT_TRUE(pool.start_preparer(&system_threads));
  std::vector<char*> all;
  for (size_t round = 1; round <= 20; round++) {
    ASSERT_TRUE(eventually([&] { return pool.prepared_ahead() >= round * StackPool::kPrepareStock; },
                           std::chrono::seconds(30)))
        << "round " << round << ": the helper was not woken";
    // The stock, and one fresh slot, which wakes it.
    std::vector<char*> burst(StackPool::kPrepareStock + 1);
    pool.alloc(burst.data(), burst.size());
    all.insert(all.end(), burst.begin(), burst.end());
  }
  pool.destroy();
  EXPECT_EQ(system_threads.load(), 0);
}

// A P's refill while the helper runs: what it has prepared, or, with
// nothing ready, kPrepareBatch fresh slots, so that the next refill comes
// soon and finds what it prepared meanwhile. Without the helper: all.
TEST(StackPool, RefillTakesWhatTheHelperPrepared) {
  constexpr size_t kMax = 32;
  StackPool pool;
  pool.init(64 * 1024);
  std::vector<char*> all;
  auto refill = [&](std::vector<char*>* got) {
    got->assign(kMax, nullptr);
    size_t k = pool.refill(got->data(), kMax);
    EXPECT_GE(k, 1u);
    EXPECT_LE(k, kMax);
    got->resize(k);
    return k;
  };
  // take()s every entry; how many were prepared already.
  auto prepared = [&](std::vector<char*>* got) {
    size_t n = 0;
    for (char*& e : *got) {
      char* lo = pool.take(e);
      n += lo == e ? 1 : 0;
      e = lo;
    }
    all.insert(all.end(), got->begin(), got->end());
    return n;
  };
  std::vector<char*> got;
  EXPECT_EQ(refill(&got), kMax) << "no helper: a whole cache";
  EXPECT_EQ(prepared(&got), 0u) << "fresh slots are handed out unprepared";

  std::atomic<int32_t> system_threads{0};
  ASSERT_TRUE(pool.start_preparer(&system_threads));
  ASSERT_TRUE(eventually([&] { return pool.prepared_ahead() >= StackPool::kPrepareStock; },
                         std::chrono::seconds(30)));
  // The stock, a cache at a time, all prepared.
  for (size_t taken = 0; taken < StackPool::kPrepareStock; taken += kMax) {
    EXPECT_EQ(refill(&got), kMax);
    EXPECT_EQ(prepared(&got), kMax);
  }
  // Nothing ready (the helper sleeps: no unprepared slot went out since
  // it filled its stock): a few fresh slots, which wake it.
  EXPECT_EQ(pool.prepared_ahead(), StackPool::kPrepareStock);
  EXPECT_EQ(refill(&got), StackPool::kPrepareBatch);
  EXPECT_EQ(prepared(&got), 0u);
  ASSERT_TRUE(eventually([&] { return pool.prepared_ahead() >= StackPool::kPrepareStock + StackPool::kPrepareBatch; },
                         std::chrono::seconds(30)));
  size_t k = refill(&got);
  EXPECT_EQ(prepared(&got), k) << "a refill with stacks ready took fresh slots";
  pool.free(all.data(), all.size());
  pool.destroy();
  EXPECT_EQ(system_threads.load(), 0);
}

TEST(StackPool, GuardsDoNotSplitMappings) {
  GORT_SKIP_IN_RACE_BUILD("each recycled stack is mapped afresh");
  if (!kernel_has_guard_madvise()) GTEST_SKIP() << "kernel older than 6.13: mprotect guards";
  StackPool pool;
  pool.init(64 * 1024);
  int before = count_maps_lines();
  std::vector<char*> s(20000);
  pool.alloc(s.data(), s.size());
  take_all(pool, s.data(), s.size());
  EXPECT_STREQ(pool.guard_kind(), "madvise");
  EXPECT_TRUE(internal::stack_guard_madvise_supported());
  int during = count_maps_lines();
  // One line per slab at most, not two per stack.
  EXPECT_LE(during - before, static_cast<int>(pool.slabs()) + 16)
      << pool.slabs() << " slabs for " << s.size() << " stacks";
  pool.free(s.data(), s.size());
  pool.destroy();
}

class Stack : public ProcsTest {};
GORT_INSTANTIATE_PROCS(Stack);

// A goroutine can use nearly all of its stack (pages are committed on touch).
__attribute__((noinline)) size_t use_stack(size_t bytes) {
  volatile char buf[4096];
  buf[0] = 1;
  buf[sizeof buf - 1] = 2;
  if (bytes <= sizeof buf) return buf[0];
  return use_stack(bytes - sizeof buf) + buf[sizeof buf - 1];
}

TEST_P(Stack, GoroutineUsesMostOfItsStack) {
  ResourceSnapshot before;
  gort::Config cfg;
  cfg.procs = procs();
  cfg.stack_size = 1024 * 1024;
  gort::run(
      [] {
        Countdown cd(8);
        for (int i = 0; i < 8; i++) {
          gort::go([&] {
            gort::yield();
            // ~800 KiB of frames out of 1 MiB, with switches in the middle.
            EXPECT_GT(use_stack(400 * 1024), 0u);
            gort::yield();
            EXPECT_GT(use_stack(800 * 1024), 0u);
            cd.done();
          });
        }
        cd.wait();
        EXPECT_EQ(gort::runtime_stats().stack_size, 1024u * 1024);
      },
      cfg);
  expect_no_leaks(before);
}

// Waves of goroutines, all parked at once, then all released: stacks are
// recycled, so the number of slabs after the first wave stays put.
TEST_P(Stack, WavesOfGoroutinesKeepStackSlabsBounded) {
  run_test([] {
    // Each wave spans slabs (about 250 stacks each) in the race build too.
    constexpr int kWave = stress_size(5000);
    constexpr int kWaves = internal::kRaceEnabled ? 5 : 15;
    size_t after_first = 0;
    for (int wave = 0; wave < kWaves; wave++) {
      Gate gate;
      Countdown cd(kWave);
      for (int i = 0; i < kWave; i++) {
        gort::go([&] {
          volatile char touch[2048];
          touch[0] = 1;
          gate.wait();
          touch[sizeof touch - 1] = touch[0];
          cd.done();
        });
      }
      ASSERT_TRUE(eventually([&] { return gate.waiting() == kWave; }));
      gate.open();
      cd.wait();
      if (wave == 0) after_first = gort::runtime_stats().stack_slabs;
    }
    size_t after_all = gort::runtime_stats().stack_slabs;
    size_t per_slab = (64u << 20) / (gort::runtime_stats().stack_size + kGuardSize);
    EXPECT_GE(after_first * per_slab, static_cast<size_t>(kWave));
    // Stacks cached on other Ps (64 each) may force one more slab or so; one
    // more slab per wave would be a leak.
    size_t slack = (64 * static_cast<size_t>(gort::procs())) / per_slab + 2;
    EXPECT_LE(after_all, after_first + slack);
  });
}

// Each G lives at the top of its own stack: the usable stack ends right
// below it, and a parked goroutine's G shares the page its top frames use.
TEST_P(Stack, GLivesAtTheTopOfItsStack) {
  run_test([] {
    const size_t size = gort::runtime_stats().stack_size;
    Countdown cd(16);
    std::atomic<int> bad{0};
    for (int i = 0; i < 16; i++) {
      gort::go([&] {
        G* g = internal::getg();
        volatile char local = 0;
        auto* at = const_cast<char*>(&local);
        auto gaddr = reinterpret_cast<uintptr_t>(g);
        bool ok = g->stack_hi == reinterpret_cast<char*>(g) &&
                  g->stack_lo + size == reinterpret_cast<char*>(g) + kGSize &&
                  gaddr % 64 == 0 &&
                  gaddr / page() == (reinterpret_cast<uintptr_t>(g->stack_lo) + size - 1) / page() &&
                  at >= g->stack_lo && at < g->stack_hi;
        if (!ok) bad.fetch_add(1);
        gort::yield();
        // Still true after a switch (the goroutine may be on another M).
        if (internal::getg() != g) bad.fetch_add(1);
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(bad.load(), 0);
    // The main goroutine too.
    G* self = internal::getg();
    EXPECT_EQ(self->stack_hi, reinterpret_cast<char*>(self));
    EXPECT_EQ(self->stack_lo + size, reinterpret_cast<char*>(self) + kGSize);
  });
}

// A dead G is reborn with the stack it died on. On one P the free list is
// LIFO, so a spawn after each exit gets the very same G (and page) back.
TEST(StackRecycle, RecycledGKeepsItsStack) {
  run_checked(1, [] {
    std::set<G*> gs;
    std::set<char*> lows;
    for (int i = 0; i < 100; i++) {
      Countdown cd(1);
      G* seen = nullptr;
      char* lo = nullptr;
      gort::go([&] {
        seen = internal::getg();
        lo = seen->stack_lo;
        cd.done();
      });
      cd.wait();
      gs.insert(seen);
      lows.insert(lo);
    }
    EXPECT_EQ(gs.size(), 1u);
    EXPECT_EQ(lows.size(), 1u);
  });
}

// With several Ps, Gs move between free lists; wherever one is reborn, it
// still has its own stack.
TEST_P(Stack, RecycledGsKeepTheirStacksAcrossPs) {
  run_test([] {
    std::mutex mu;
    std::map<G*, char*> stack_of;
    int reborn = 0, moved = 0;
    for (int wave = 0; wave < 10; wave++) {
      Countdown cd(300);
      for (int i = 0; i < 300; i++) {
        gort::go([&] {
          G* g = internal::getg();
          {
            std::lock_guard<std::mutex> lock(mu);
            auto [it, fresh] = stack_of.emplace(g, g->stack_lo);
            if (!fresh) {
              reborn++;
              if (it->second != g->stack_lo) moved++;
            }
          }
          cd.done();
        });
      }
      cd.wait();
    }
    EXPECT_GT(reborn, 0);
    EXPECT_EQ(moved, 0);
  });
}

// A burst of goroutines that are all alive at once, then all exit: the dead
// G+stack pairs beyond the warm limit are released by the scavenger within
// a few of its periods (out of allg, stacks back to the pool and their pages
// to the kernel), so both the number of pairs and the RSS fall back.
TEST(StackRelease, BurstOfGoroutinesIsReleased) {
  GORT_SKIP_IN_RACE_BUILD("more live goroutines than the detector's 8,000");
#ifdef GORT_ASAN
  // The property is the same for any burst well above kWarmLimit; ASan's
  // shadow of 200,000 touched stacks would cost gigabytes.
  constexpr int kGs = 20000;
#else
  constexpr int kGs = 200000;
#endif
  constexpr int kProcs = 2;
  run_checked(kProcs, [] {
    const size_t before = rss_bytes();
    Gate gate;
    Countdown cd(kGs);
    for (int i = 0; i < kGs; i++) {
      gort::go([&] {
        gate.wait();
        cd.done();
      });
    }
    ASSERT_TRUE(eventually([&] { return gate.waiting() == kGs; }, std::chrono::seconds(60)));
    const int64_t pairs_during = gort::runtime_stats().goroutines_allocated;
    const size_t during = rss_bytes();
    EXPECT_GE(pairs_during, kGs + 1);
    gate.open();
    cd.wait();
    expect_goroutines_settle(1);
    // Main, the global free list (kWarmLimit) and each P's (at most 64).
    const int64_t bound = 1 + static_cast<int64_t>(StackPool::kWarmLimit) + 64 * kProcs;
    int64_t pairs_after = 0;
    // Releasing 200,000 stacks is 200,000 madvise calls with their TLB
    // shootdowns: seconds on a loaded 2-core machine. The property is that
    // they go, not how fast.
    eventually([&] { return (pairs_after = gort::runtime_stats().goroutines_allocated) <= bound; },
               std::chrono::seconds(60));
    EXPECT_LE(pairs_after, bound) << pairs_during << " pairs during the burst";
    const size_t after = rss_bytes();
    RecordProperty("rss_during_MiB", static_cast<int>((during - before) >> 20));
    RecordProperty("rss_after_MiB", static_cast<int>((after > before ? after - before : 0) >> 20));
#ifndef GORT_ASAN
    // Each parked goroutine held at least its top page; what stays is the
    // warm caches (free Gs and the pool's warm stacks), a few MiB. (Under
    // ASan the shadow of the released stacks stays resident.)
    EXPECT_GE(during - before, size_t{kGs} * page() * 3 / 4);
    EXPECT_LE(after > before ? after - before : 0, (during - before) / 8)
        << "before " << before << " during " << during << " after " << after;
#endif
  });
}

// While a P is busy, dead Gs beyond the warm limit are released only once
// they have sat unused for a whole period (a second): a program whose
// goroutines come in waves reuses one wave's stacks for the next instead
// of faulting in again the pages it just gave back. They do go, later.
TEST(StackRelease, DeadGsAreKeptForAPeriodWhilePsAreBusy) {
  GORT_SKIP_IN_RACE_BUILD("more live goroutines than the detector's 8,000");
  static constexpr int kGs = 3 * static_cast<int>(StackPool::kWarmLimit);
  run_checked(2, [] {
    ASSERT_TRUE(burst_of_dead_goroutines(kGs));
    // This goroutine keeps its P busy (it never parks), so the scavenger
    // never finds every P idle.
    auto spin_for = [](absl::Duration d) {
      const absl::Time end = absl::Now() + d;
      while (absl::Now() < end) gort::yield();
    };
    while (gort::num_goroutine() > 1) gort::yield();
    spin_for(absl::Milliseconds(400));
    EXPECT_GE(gort::runtime_stats().goroutines_allocated, int64_t{kGs})
        << "dead Gs released less than a period after they died";
    const int64_t bound = 1 + static_cast<int64_t>(StackPool::kWarmLimit) + 64 * 2;
    int64_t now = 0;
    const absl::Time limit = absl::Now() + absl::Seconds(30);
    while ((now = gort::runtime_stats().goroutines_allocated) > bound && absl::Now() < limit) {
      spin_for(absl::Milliseconds(10));
    }
    EXPECT_LE(now, bound) << "dead Gs beyond the warm limit were never released while a P was busy";
  });
}

// A burst of goroutines on two Ps has fresh stacks prepared ahead by the
// helper thread, on one P it has none (no second CPU to run it on); either
// way every goroutine runs on a working stack, waves of bursts recycle
// them, and the helper is gone when the run ends (run_checked).
TEST(StackPrepare, BurstsArePreparedAheadOnlyWithASecondP) {
  constexpr int kGs = stress_size(3000);
  for (int procs : {1, 2}) {
    size_t prepared = 0;
    run_checked(procs, [&] {
      for (int wave = 0; wave < 3; wave++) {
        Gate gate;
        Countdown cd(kGs);
        std::atomic<int64_t> sum{0};
        for (int i = 0; i < kGs; i++) {
          gort::go([&, i] {
            // Deep enough to fault pages below the prepared top page.
            EXPECT_GT(use_stack(12 * 1024), 0u);
            gate.wait();
            sum.fetch_add(i);
            cd.done();
          });
        }
        ASSERT_TRUE(eventually([&] { return gate.waiting() == kGs; }, std::chrono::seconds(60)));
        gate.open();
        cd.wait();
        EXPECT_EQ(sum.load(), int64_t{kGs} * (kGs - 1) / 2);
      }
      prepared = gort::runtime_stats().stacks_prepared_ahead;
    });
    if (procs == 1) {
      EXPECT_EQ(prepared, 0u);
    } else {
      EXPECT_GT(prepared, 0u) << "no stack of " << kGs << " new goroutines was prepared ahead";
    }
  }
}

// With two Ps the helper starts with the run and stocks prepared stacks
// before the program's first `go` (a program's first goroutines then find
// them ready); with one P there is no second CPU for it and it never runs.
TEST(StackPrepare, ARunWithTwoPsStocksStacksBeforeItsFirstGo) {
  for (int procs : {1, 2}) {
    run_checked(procs, [&] {
      if (procs == 1) {
        gort::sleep(absl::Milliseconds(50));
        EXPECT_EQ(gort::runtime_stats().stacks_prepared_ahead, 0u);
        return;
      }
      ASSERT_TRUE(eventually([] { return gort::runtime_stats().stacks_prepared_ahead >= StackPool::kPrepareStock; },
                             std::chrono::seconds(30)))
          << "nothing prepared ahead of the first go";
      Countdown cd(StackPool::kPrepareStock);
      for (size_t i = 0; i < StackPool::kPrepareStock; i++) {
        gort::go([&] {
          EXPECT_GT(use_stack(12 * 1024), 0u);
          cd.done();
        });
      }
      cd.wait();
    });
  }
}

// 100,000 goroutines parked at the same time, each with its own stack and
// guard: it works, and the guards do not cost a kernel mapping each (with
// one mprotect guard per stack this would need 200,000 VMAs, over the
// default vm.max_map_count of 65,530).
TEST(StackMany, HundredThousandParkedGoroutines) {
  constexpr int kGs = 100000;
  GORT_SKIP_OVER_RACE_LIMIT(kGs);
  int maps_before = count_maps_lines();
  int maps_during = 0;
  size_t slabs = 0;
  std::string guard;
  std::atomic<int64_t> sum{0};
  run_checked(2, [&] {
    Gate gate;
    Countdown cd(kGs);
    for (int i = 0; i < kGs; i++) {
      gort::go([&, i] {
        volatile char touch[1024];
        touch[0] = static_cast<char>(i);
        gate.wait();
        sum.fetch_add(i + touch[0] - static_cast<char>(i));
        cd.done();
      });
    }
    ASSERT_TRUE(eventually([&] { return gate.waiting() == kGs; }, std::chrono::seconds(60)));
    EXPECT_EQ(gort::num_goroutine(), kGs + 1);
    maps_during = count_maps_lines();
    gort::RuntimeStats st = gort::runtime_stats();
    slabs = st.stack_slabs;
    guard = st.stack_guard;
    gate.open();
    cd.wait();
  });
  EXPECT_EQ(sum.load(), int64_t{kGs} * (kGs - 1) / 2);
  size_t per_slab = (64u << 20) / (256u * 1024 + kGuardSize);
  EXPECT_GE(slabs * per_slab, static_cast<size_t>(kGs));
  if (kernel_has_guard_madvise()) {
    EXPECT_EQ(guard, "madvise");
    // At most a line per slab (adjacent slabs may even merge), plus the
    // runtime's threads and signal stacks.
    EXPECT_LE(maps_during - maps_before, static_cast<int>(slabs) + 64)
        << slabs << " slabs; guards split the stack mappings";
  }
  RecordProperty("maps_lines_added", maps_during - maps_before);
  RecordProperty("stack_slabs", static_cast<int>(slabs));
}

}  // namespace
}  // namespace gort::test

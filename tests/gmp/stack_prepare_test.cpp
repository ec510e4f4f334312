// tests/gmp/stack_prepare_test.cpp — how fresh stack slots are prepared
// (gmp/stack.cpp): in groups under one page-table page each, guards and top
// pages committed together, and the same result one slot at a time.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::kGuardSize;
using internal::StackPool;

size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// One page's entry in /proc/self/pagemap: bit 63 present, bit 58 a guard
// marker (Linux 6.15+).
uint64_t pagemap(const void* addr) {
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint64_t e = 0;
  off_t off = static_cast<off_t>(reinterpret_cast<uintptr_t>(addr) / page() * sizeof e);
  if (pread(fd, &e, sizeof e, off) != static_cast<ssize_t>(sizeof e)) e = 0;
  close(fd);
  return e;
}
bool present(const void* addr) { return (pagemap(addr) >> 63) & 1; }
bool guard_marker(const void* addr) { return (pagemap(addr) >> 58) & 1; }

bool tagged(const char* entry) { return (reinterpret_cast<uintptr_t>(entry) & 1) != 0; }

// What a prepared slot looks like: every page of its guard is a guard
// marker, its top page is committed, and the page below the top is not
// (only the top is touched ahead).
void expect_prepared(const char* lo, size_t stack_size) {
  ASSERT_FALSE(tagged(lo));
  ASSERT_EQ(reinterpret_cast<uintptr_t>(lo) % page(), 0u);
  for (size_t off = page(); off <= kGuardSize; off += page()) {
    EXPECT_TRUE(guard_marker(lo - off)) << "no guard " << off << " bytes below the stack at " << static_cast<const void*>(lo);
  }
  EXPECT_TRUE(present(lo + stack_size - 1)) << "top page of the stack at " << static_cast<const void*>(lo) << " not committed";
  EXPECT_FALSE(present(lo + stack_size - page() - 1)) << "more than the top page committed";
}

// The VmFlags line of the mapping that holds addr in /proc/self/smaps.
std::string vm_flags(const void* addr) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  while (std::getline(in, line)) {
    unsigned long lo = 0, hi = 0;
    if (sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = a >= lo && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Slabs never get transparent huge pages: where they are on for all memory
// (`always`), a stack's first touch would commit the 2 MiB around it.
TEST(StackSlab, SlabsAreMarkedNoHugePage) {
  StackPool pool;
  pool.init(256 * 1024);
  char* lo;
  pool.alloc(&lo, 1);
  lo = pool.take(lo);
  const std::string flags = vm_flags(lo);
  ASSERT_FALSE(flags.empty()) << "no mapping for the stack in /proc/self/smaps";
  EXPECT_NE(flags.find(" nh"), std::string::npos) << flags;
  pool.free(&lo, 1);
  pool.destroy();
}

// A group is the slots whose guard and top page share the page-table page
// of the first one's guard: synthetic addresses, no memory involved.
TEST(StackGroup, SlotsUnderOnePageTableGoTogether) {
  constexpr size_t kSpan = 2 << 20;
  constexpr size_t kSize = 256 * 1024;
  constexpr size_t kSlot = kSize + kGuardSize;
  auto lows = [&](uintptr_t first_slot, size_t n) {
    std::vector<char*> v;
    for (size_t i = 0; i < n; i++) v.push_back(reinterpret_cast<char*>(first_slot + i * kSlot + kGuardSize));
    return v;
  };
  // A table's first slot starts a group of the 7 that fit under it (7 ×
  // 272 KiB < 2 MiB < 8 × 272 KiB); the 8th crosses into the next table.
  auto v = lows(64 * kSpan, 8);
  EXPECT_EQ(internal::stack_group_len(v.data(), v.size(), kSize, kSpan), 7u);
  EXPECT_EQ(internal::stack_group_len(v.data(), 3, kSize, kSpan), 3u);
  // A slot whose guard and top lie under different tables goes alone.
  v = lows(65 * kSpan - kSlot / 2, 4);
  EXPECT_EQ(internal::stack_group_len(v.data(), v.size(), kSize, kSpan), 1u);
  // Slots out of address order join while they stay under the table.
  v = lows(64 * kSpan, 3);
  std::swap(v[0], v[2]);
  EXPECT_EQ(internal::stack_group_len(v.data(), v.size(), kSize, kSpan), 3u);
  // Stacks larger than a table: one each.
  v = std::vector<char*>{reinterpret_cast<char*>(64 * kSpan + kGuardSize),
                         reinterpret_cast<char*>(64 * kSpan + kGuardSize + 4 * kSpan)};
  EXPECT_EQ(internal::stack_group_len(v.data(), v.size(), 3 * kSpan, kSpan), 1u);
}

// gnew's path: take_last() on a P's cache of fresh slots. The first takes
// prepare one slot, later ones the next kPrepareBatch at once, rewritten in
// place; every slot handed out ends up guarded with only its top page
// committed, batched or not, whatever the stack size.
class StackTakeLast : public ::testing::TestWithParam<bool> {};

TEST_P(StackTakeLast, PreparesTheNextSlotsOfTheCacheInBatches) {
  if (!kernel_at_least(6, 15)) GTEST_SKIP() << "pagemap shows guard markers from Linux 6.15";
  const bool batched = GetParam();
  for (size_t stack_size : {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20, size_t{3} << 20}) {
    SCOPED_TRACE(stack_size);
    internal::stack_batch_prepare_for_test(batched);
    StackPool pool;
    pool.init(stack_size);
    constexpr size_t kN = 40;
    char* cache[kN];
    pool.alloc(cache, kN);
    for (char* e : cache) ASSERT_TRUE(tagged(e)) << "fresh slots are handed out unprepared";
    std::vector<char*> taken;
    size_t most_at_once = 0;
    for (size_t n = kN; n > 0; n--) {
      size_t before = 0;
      for (size_t i = 0; i < n; i++) before += tagged(cache[i]);
      char* lo = pool.take_last(cache, n);
      ASSERT_EQ(lo, cache[n - 1]);
      size_t after = 0;
      for (size_t i = 0; i < n; i++) after += tagged(cache[i]);
      const size_t prepared = before - after;
      if (n == kN) {
        EXPECT_EQ(prepared, 1u) << "a process's first go prepares one stack";
      }
      EXPECT_LE(prepared, StackPool::kPrepareBatch);
      most_at_once = std::max(most_at_once, prepared);
      expect_prepared(lo, stack_size);
      taken.push_back(lo);
    }
    EXPECT_EQ(most_at_once, StackPool::kPrepareBatch);
    // Slots of 1 MiB and more never share a table: every group is one
    // slot, prepared with plain madvise.
    if (kernel_at_least(6, 13) && stack_size <= (size_t{256} << 10)) {
      EXPECT_EQ(internal::stack_batch_prepare_works(), batched);
    }
    pool.free(taken.data(), taken.size());
    pool.destroy();
  }
  internal::stack_batch_prepare_for_test(true);
}

// A stack from the middle of a batch still stops an overflow at its guard.
TEST_P(StackTakeLast, AnOverflowFromABatchHitsItsGuard) {
  internal::stack_batch_prepare_for_test(GetParam());
  StackPool pool;
  pool.init(64 * 1024);
  constexpr size_t kN = 24;
  char* cache[kN];
  pool.alloc(cache, kN);
  std::vector<char*> taken;
  for (size_t n = kN; n > 0; n--) taken.push_back(pool.take_last(cache, n));
  char* mid = taken[kN - 5];  // prepared by a later, larger batch
  mid[0] = 1;                 // the lowest usable byte is fine
  expect_guard_below(mid);
  pool.free(taken.data(), taken.size());
  pool.destroy();
  internal::stack_batch_prepare_for_test(true);
}

INSTANTIATE_TEST_SUITE_P(Batched, StackTakeLast, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "Batched" : "OneAtATime");
                         });

// The helper's stock comes from the same grouped preparation: all of it
// guarded, top pages committed, under the scheduler with two Ps, and
// goroutines run on it to depth.
TEST(StackTakeLastRun, GoroutinesRunOnBatchedStacks) {
  constexpr int kGs = stress_size(2000);
  run_checked(2, [&] {
    Countdown cd(kGs);
    std::atomic<int64_t> sum{0};
    for (int i = 0; i < kGs; i++) {
      gort::go([&, i] {
        volatile char buf[24 * 1024];
        buf[0] = static_cast<char>(i);
        buf[sizeof buf - 1] = 1;
        sum.fetch_add(i + buf[sizeof buf - 1] - 1);
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(sum.load(), int64_t{kGs} * (kGs - 1) / 2);
  });
  if (kernel_at_least(6, 13)) {
    EXPECT_TRUE(internal::stack_batch_prepare_works());
  }
}

}  // namespace
}  // namespace gort::test

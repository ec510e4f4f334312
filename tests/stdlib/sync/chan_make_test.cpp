// tests/stdlib/sync/chan_make_test.cpp — make_chan (stdlib/sync/chan.cpp chan_make):
// a capacity the process cannot hold panics with Go's `makechan: size out
// of range`, never with std::bad_alloc; a huge buffer costs only the memory
// its values have touched (stdlib/sync/chan_ring.hpp, stamps).
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <fstream>
#include <optional>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::panic_message;

constexpr const char* kOutOfRange = "makechan: size out of range";

struct KiB {
  char bytes[1024];
};

TEST(MakeChan, CapacitiesPastTheBoundPanic) {
  EXPECT_EQ(panic_message([] { gort::make_chan<int>(SIZE_MAX); }), kOutOfRange);
  // Go's make(chan int, n) with a negative n: size_t makes it huge.
  int negative = -1;
  EXPECT_EQ(panic_message([negative] { gort::make_chan<int>(static_cast<size_t>(negative)); }), kOutOfRange);
  int64_t most_negative = INT64_MIN;
  EXPECT_EQ(panic_message([most_negative] { gort::make_chan<int>(static_cast<size_t>(most_negative)); }),
            kOutOfRange);
  EXPECT_EQ(panic_message([] { gort::make_chan<char>(size_t{1} << 62); }), kOutOfRange);
  EXPECT_EQ(panic_message([] { gort::make_chan<KiB>(size_t{1} << 40); }), kOutOfRange);
  // Bytes per slot times capacity wraps around 2^64 to a small number.
  EXPECT_EQ(panic_message([] { gort::make_chan<KiB>((SIZE_MAX / 1032) + 2); }), kOutOfRange);
}

// A capacity inside the bound that the allocator refuses is the same panic.
// RLIMIT_AS makes the refusal certain whatever the overcommit policy; the
// child keeps the limit to itself. (ASan's allocator aborts on such sizes
// instead of failing.)
TEST(MakeChan, AllocationFailureInsideTheBoundPanics) {
#ifdef GORT_ASAN
  GTEST_SKIP() << "ASan's allocator does not fail huge allocations";
#endif
  auto child = [] {
    size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    size_t limit = pages * static_cast<size_t>(sysconf(_SC_PAGESIZE)) + (size_t{1} << 30);
    rlimit rl{limit, limit};
    ASSERT_EQ(setrlimit(RLIMIT_AS, &rl), 0);
    // 16 bytes a slot: 64 GiB and 16 TiB, both under the bound. (gtest
    // does not show a death-test child's failures: say what came instead.)
    for (int shift : {32, 40}) {
      std::string got = panic_message([shift] { gort::make_chan<char>(size_t{1} << shift); });
      if (got != kOutOfRange) std::fprintf(stderr, "make_chan<char>(1 << %d): %s\n", shift, got.c_str());
      EXPECT_EQ(got, kOutOfRange);
    }
    // A capacity that fits still works.
    auto ch = gort::make_chan<int>(1000);
    ch.send(7);
    EXPECT_EQ(ch.recv(), 7);
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

using gort::test::rss_bytes;

constexpr size_t kMiB = size_t{1} << 20;

// Go makes `make(chan int, 1<<30)` in 2.8 s and 345 MB because untouched
// buffer pages are never faulted in. A ring of 1 << 28 ints is 4 GiB of
// address space here (a stamp beside each value): making it, and passing a
// hundred thousand values through it, must leave the process's resident
// memory about where it was. (Before the ring was left unwritten, this
// took 73 s and 4.3 GB.) A memory bound, not a timing one.
void huge_buffer_costs_only_what_is_used() {
  size_t before = rss_bytes();
  {
    auto ch = gort::make_chan<int>(size_t{1} << 28);
    EXPECT_EQ(ch.cap(), size_t{1} << 28);
    EXPECT_EQ(ch.len(), 0u);
    size_t made = rss_bytes();
    EXPECT_LT(made, before + 16 * kMiB) << "making the channel committed its buffer";
    // 100,000 values: 1.6 MB of slots touched.
    for (int i = 0; i < 100000; i++) ch.send(i);
    EXPECT_EQ(ch.len(), 100000u);
    int bad = 0;
    for (int i = 0; i < 100000; i++) bad += ch.recv() != i;
    EXPECT_EQ(bad, 0);
    EXPECT_LT(rss_bytes(), before + 32 * kMiB) << "using the channel committed more than it touched";
    // Values left in it are destroyed with it; a close drains in order.
    for (int i = 0; i < 10; i++) ch.send(i);
    ch.close();
    EXPECT_EQ(ch.recv(), 0);
  }
  // Freed: the mapping went back to the kernel.
  EXPECT_LT(rss_bytes(), before + 32 * kMiB);
}

TEST(MakeChan, HugeBufferCostsOnlyWhatIsUsed) { huge_buffer_costs_only_what_is_used(); }

// The same in a process whose malloc fills what it hands out (glibc's
// MALLOC_PERTURB_, which meson's test runner sets): the ring must not come
// from malloc. The child re-executes this binary and inherits the variable.
TEST(MakeChan, HugeBufferCostsOnlyWhatIsUsedUnderMallocPerturb) {
  const char* old = std::getenv("MALLOC_PERTURB_");
  std::string saved = old != nullptr ? old : "";
  setenv("MALLOC_PERTURB_", "165", 1);
  auto child = [] {
    EXPECT_STREQ(std::getenv("MALLOC_PERTURB_"), "165");
    huge_buffer_costs_only_what_is_used();
  };
  GORT_EXPECT_SUBPROCESS_OK(120, child);
  if (old != nullptr) {
    setenv("MALLOC_PERTURB_", saved.c_str(), 1);
  } else {
    unsetenv("MALLOC_PERTURB_");
  }
}

// Rings mapped on their own (over 256 KiB) start zeroed and unwritten: they must
// still work through many laps, with values whose construction and
// destruction are audited, from several goroutines.
class MakeChanBig : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(MakeChanBig);

TEST_P(MakeChanBig, LargeRingsWorkOverManyLaps) {
  using gort::test::Countdown;
  using gort::test::Tracked;
  Tracked::reset();
  run_test([] {
    // 16 Ki slots of 24 bytes = 384 KiB (mapped); 5 laps of it, 2 senders.
    constexpr size_t kCap = 16 * 1024;
    constexpr int kPerSender = static_cast<int>(kCap) * 5 / 2;
    auto ch = gort::make_chan<Tracked>(kCap);
    Countdown senders(2);
    for (int s = 0; s < 2; s++) {
      gort::go([&, s] {
        for (int i = 0; i < kPerSender; i++) ch.send(Tracked(s * kPerSender + i));
        senders.done();
      });
    }
    int64_t last[2] = {-1, -1};
    bool ordered = true;
    for (int n = 0; n < 2 * kPerSender; n++) {
      std::optional<Tracked> v = ch.recv();
      if (!v) break;
      int s = v->value / kPerSender;
      ordered &= v->value > last[s];
      last[s] = v->value;
    }
    senders.wait();
    EXPECT_TRUE(ordered) << "a sender's values arrived out of order";
    EXPECT_EQ(last[0], kPerSender - 1);
    EXPECT_EQ(last[1], 2 * kPerSender - 1);
    // Left behind in a large ring: destroyed when the last handle goes.
    for (int i = 0; i < 100; i++) ch.send(Tracked(i));
  });
  EXPECT_EQ(Tracked::live.load(), 0);
  EXPECT_EQ(Tracked::misuses.load(), 0);
}

}  // namespace
}  // namespace gort_stdlib_test

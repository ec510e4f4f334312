// tests/stdlib/chan_make_test.cpp — make_chan's capacity bound
// (stdlib/chan.cpp chan_make): a capacity the process cannot hold panics
// with Go's `makechan: size out of range`, never with std::bad_alloc.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <fstream>

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

}  // namespace
}  // namespace gort_stdlib_test

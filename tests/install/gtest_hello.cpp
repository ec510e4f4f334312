// tests/install/gtest_hello.cpp — a GoogleTest program from outside the
// tree, built with `pkg-config --cflags --libs gort-gtest` against the
// installed headers and libraries: a body in the runtime, the Procs
// fixture, a caught leak, and a wait on a goroutine's state.
#include <gort/gort.hpp>
#include <gort/testing.hpp>
#include <gtest/gtest-spi.h>

#include <atomic>

GORT_TEST(Installed, BodyIsTheMainGoroutine) { EXPECT_EQ(gort::goroutine_id(), 1); }

class InstalledProcs : public gort::testing::ProcsTest {};
GORT_INSTANTIATE_PROCS(InstalledProcs);

TEST_P(InstalledProcs, RunsWithTheParameterPs) {
  run_test([&] {
    auto ch = gort::make_chan<int>();
    std::atomic<int64_t> id{0};
    gort::go([&id, ch] {
      id = gort::goroutine_id();
      (void)ch.recv();
    });
    ASSERT_TRUE(gort::testing::eventually([&] { return id.load() != 0; }));
    EXPECT_TRUE(gort::testing::wait_for_state(id.load(), "chan receive"));
    EXPECT_EQ(gort::procs(), procs());
    ch.close();
  });
}

TEST(Installed, LeakedGoroutineFails) {
  gort::testing::RunOptions options;
  options.leaks.timeout = absl::Milliseconds(100);
  auto leaky = [] {
    auto ch = gort::make_chan<int>();
    gort::go([ch] { (void)ch.recv(); });
  };
  EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS(gort::testing::run(leaky, options), "1 goroutine leaked");
}

GORT_TEST_MAIN()

// tests/stdlib/testing/poll_test.cpp — gort::testing::eventually
// (stdlib/testing/poll.cpp): it holds once the predicate does, from a
// thread and from a goroutine that must let another run on its one P, and
// times out saying so (with the predicate's own message when it has one).
#include <atomic>
#include <string>

#include "gort/runtime.hpp"
#include "gort/testing.hpp"
#include "tests/stdlib/testing/failures.hpp"

namespace gort_testing_test {
namespace {

TEST(Eventually, HoldsOnceThePredicateDoes) {
  int polls = 0;
  EXPECT_TRUE(gort::testing::eventually([&] { return ++polls == 3; }));
  EXPECT_EQ(polls, 3);
}

TEST(Eventually, TimesOutSayingHowLongItWaited) {
  ::testing::AssertionResult r = gort::testing::eventually([] { return false; }, absl::Milliseconds(20));
  EXPECT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), "did not hold within 20ms")) << r.message();
}

TEST(Eventually, RepeatsThePredicatesLastMessage) {
  int x = 0;
  ::testing::AssertionResult r = gort::testing::eventually(
      [&]() -> ::testing::AssertionResult {
        if (++x > 1000000) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << "x is " << (x < 10 ? "small" : "still small");
      },
      std::chrono::milliseconds(20));
  EXPECT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), "did not hold within 20ms: x is still small")) << r.message();
}

// On one P the other goroutine runs only if eventually yields.
TEST(Eventually, LetsOtherGoroutinesOnItsPRun) {
  gort::testing::RunOptions options;
  options.config.procs = 1;
  options.config.preempt = false;
  gort::testing::run(
      [] {
        std::atomic<bool> ran{false};
        gort::go([&ran] { ran = true; });
        EXPECT_TRUE(gort::testing::eventually([&] { return ran.load(); }));
      },
      options);
}

}  // namespace
}  // namespace gort_testing_test

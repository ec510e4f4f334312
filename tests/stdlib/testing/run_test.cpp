// tests/stdlib/testing/run_test.cpp — gort::testing::run, GORT_TEST and
// the fixtures (stdlib/testing/run.cpp): bodies run as the main goroutine
// of a run with the Ps asked for; an exception is a test failure; a body
// that stopped early is not checked for leaks.
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "gort/chan.hpp"
#include "gort/runtime.hpp"
#include "gort/testing.hpp"
#include "tests/stdlib/testing/failures.hpp"

namespace gort_testing_test {
namespace {

GORT_TEST(TestingRun, GortTestBodyIsTheMainGoroutine) {
  EXPECT_TRUE(gort::in_goroutine());
  EXPECT_EQ(gort::goroutine_id(), 1);
  EXPECT_GT(gort::procs(), 0);
}

TEST(TestingRun, RunsWithTheConfiguredPs) {
  for (int procs : {1, 3}) {
    gort::testing::RunOptions options;
    options.config.procs = procs;
    int seen = 0;
    gort::testing::run([&] { seen = gort::procs(); }, options);
    EXPECT_EQ(seen, procs);
    EXPECT_EQ(gort::procs(), 0) << "the run is over when run returns";
  }
}

TEST(TestingRun, ParkCheckIsOnByDefault) { EXPECT_TRUE(gort::testing::RunOptions{}.config.park_check); }

TEST(TestingRun, AnExceptionFromTheBodyIsAFatalFailureAtTheCaller) {
  auto failures = failures_of([] { gort::testing::run([] { throw std::runtime_error("boom"); }); });
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_TRUE(failures[0].fatally_failed());
  EXPECT_TRUE(contains(failures[0].message(), "C++ exception with description \"boom\" thrown in the test body."))
      << failures[0].message();
  EXPECT_TRUE(contains(failures[0].file_name(), "run_test.cpp")) << failures[0].file_name();
}

// In a child process, where the failure is the test's own (an intercepted
// one is not: HasFatalFailure would not see it): a body that fails fatally
// and leaves a goroutine parked gets one failure, not a leak report too.
TEST(TestingRun, NoLeakCheckAfterAFatalFailure) {
  EXPECT_EXIT(
      {
        gort::testing::RunOptions options;
        options.leaks.timeout = absl::Milliseconds(100);
        gort::testing::run(
            [] {
              auto ch = gort::make_chan<int>();
              gort::go([ch] { (void)ch.recv(); });
              FAIL() << "stopped early";
            },
            options);
        ::_exit(::testing::Test::HasFatalFailure() && !::testing::Test::HasNonfatalFailure() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

class TestingFixture : public gort::testing::RuntimeTest {
 protected:
  TestingFixture() { options_.config.procs = 2; }
  int seen_ = 0;
};

TEST_F(TestingFixture, RunTestUsesTheFixtureOptions) {
  run_test([&] {
    EXPECT_TRUE(gort::in_goroutine());
    seen_ = gort::procs();
  });
  EXPECT_EQ(seen_, 2);
}

class TestingProcs : public gort::testing::ProcsTest {};
GORT_INSTANTIATE_PROCS(TestingProcs);

TEST_P(TestingProcs, BodyRunsWithTheParameterPs) {
  options_.config.procs = 3;  // the parameter wins
  std::atomic<int> seen{0};
  run_test([&] {
    EXPECT_TRUE(gort::in_goroutine());
    seen = gort::procs();
  });
  EXPECT_EQ(seen.load(), procs());
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  EXPECT_TRUE(name.ends_with("/procs" + std::to_string(procs()))) << name;
}

TEST(TestingProcsName, SaysTheProcs) {
  EXPECT_EQ(gort::testing::procs_name(::testing::TestParamInfo<int>(8, 3)), "procs8");
}

}  // namespace
}  // namespace gort_testing_test

// tests/stdlib/testing/run_test.cpp — gort::testing::run, GORT_TEST and
// the fixtures (stdlib/testing/run.cpp): bodies run as the main goroutine
// of a run with the Ps asked for; an exception is a test failure; a body
// that stopped early is not checked for leaks.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gort/chan.hpp"
#include "gort/runtime.hpp"
#include "gort/synctest.hpp"
#include "gort/testing.hpp"
#include "tests/stdlib/testing/failures.hpp"

namespace gort_testing_test {
namespace {

const char* program_path() {
  static char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  path[n > 0 ? n : 0] = '\0';
  return path;
}

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

// Run only by the next test, in a child process of its own: a failure
// inside a seeded bubble.
TEST(TestingRun, DISABLED_SeededBubbleFails) {
  gort::Config cfg;
  cfg.procs = 1;
  gort::run([] { gort::synctest::test([] { ADD_FAILURE() << "planted"; }, {.seed = 42}); }, cfg);
}

// A failed expectation inside a seeded bubble names the seed (the listener
// GORT_TEST_MAIN installs): this test binary runs the disabled test above
// as a program of its own and reads what it printed.
TEST(TestingRun, AFailureInASeededBubbleNamesTheSeed) {
  std::string cmd = "'" + std::string(program_path()) +
                    "' --gtest_filter=TestingRun.DISABLED_SeededBubbleFails --gtest_also_run_disabled_tests 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << out;  // the planted failure
  EXPECT_NE(out.find("planted"), std::string::npos) << out;
  EXPECT_NE(out.find("synctest: schedule seed 42 (GORT_SCHEDSEED=42 replays it)"), std::string::npos) << out;
}

}  // namespace
}  // namespace gort_testing_test

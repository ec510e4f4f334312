// stdlib/testing/run.cpp — gort::testing::run (a test body as the main
// goroutine of a run of its own, then the leak checks), init() and the
// Procs fixture's names.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "gort/runtime.hpp"
#include "gort/synctest.hpp"
#include "gort/testing.hpp"
#include "stdlib/testing/proc_self.hpp"

namespace gort::testing {
namespace detail {
namespace {

// As gtest treats an exception from TestBody: a fatal failure, unless
// --gtest_catch_exceptions=0 asks for the crash (here: Go's unrecovered
// panic, with the thrower's traceback).
void call_body(absl::FunctionRef<void()> body, const std::source_location& where) {
  if (!GTEST_FLAG_GET(catch_exceptions)) {
    body();
    return;
  }
  try {
    body();
  } catch (const std::exception& e) {
    GTEST_FAIL_AT(where.file_name(), static_cast<int>(where.line()))
        << "C++ exception with description \"" << e.what() << "\" thrown in the test body.";
  } catch (...) {
    GTEST_FAIL_AT(where.file_name(), static_cast<int>(where.line()))
        << "Unknown C++ exception thrown in the test body.";
  }
}

// A failed expectation inside a seeded synctest bubble names the seed that
// replays the schedule (once per test): libgort itself does so only for a
// bubble that throws or deadlocks, as it knows nothing of GoogleTest.
class SeedPrinter : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override { printed_.store(false, std::memory_order_relaxed); }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::optional<uint64_t> seed = gort::synctest::seed();
    if (!seed || printed_.exchange(true, std::memory_order_relaxed)) return;
    std::fprintf(stderr, "synctest: schedule seed %llu (GORT_SCHEDSEED=%llu replays it)\n",
                 static_cast<unsigned long long>(*seed), static_cast<unsigned long long>(*seed));
  }

 private:
  std::atomic<bool> printed_{false};
};

}  // namespace

void run_body(absl::FunctionRef<void()> body, const RunOptions& options, std::source_location where) {
  auto report = [&](const ::testing::AssertionResult& r) {
    if (!r) ADD_FAILURE_AT(where.file_name(), static_cast<int>(where.line())) << r.message();
  };
  // Taken before the run: its threads and fds are then all the runtime's,
  // gone when gort::run returns.
  LeakCheck leaks(options.leaks);
  bool fatal_before = ::testing::Test::HasFatalFailure();
  bool stopped_early = false;
  gort::run(
      [&] {
        call_body(body, where);
        stopped_early = (!fatal_before && ::testing::Test::HasFatalFailure()) || ::testing::Test::IsSkipped();
        // Before main returns: gort::run abandons what is left.
        if (!stopped_early) report(leaks.check_goroutines());
      },
      options.config);
  if (stopped_early) return;
  report(leaks.check_threads());
  report(leaks.check_fds());
}

}  // namespace detail

std::string procs_name(const ::testing::TestParamInfo<int>& info) { return "procs" + std::to_string(info.param); }

void init(int* argc, char** argv) {
  detail::prime_threads();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::testing::InitGoogleTest(argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new detail::SeedPrinter);
}

}  // namespace gort::testing

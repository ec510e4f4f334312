// tests/race_testing.hpp — the race detector's test harness (docs/race.md),
// shared by the suites that plant races and check quiet programs.
//
//   - RaceTest: a ProcsTest (tests/testing.hpp) whose every case skips
//     itself outside a -Db_sanitize=thread build. Suites derive a
//     fixture named Race* from it: the `race` test suite runs `*/Race*.*`.
//   - race_child(procs, body): runs body in gort::run in a death-test child
//     with a watchdog, then exits through exit() (status 1 if an
//     expectation in body failed), where ThreadSanitizer sets the status
//     (66) if it reported anything.
//   - EXPECT_RACE(procs, body, first_fn, second_fn): the program reports a
//     data race whose report names both functions (each a regular
//     expression, alternatives allowed), in that order, and the goroutines
//     as such ("Thread T5 'goroutine 7'"). A function with no instrumented
//     access of its own gets no frame in TSan's stacks: name one that has,
//     or the library function that made the access.
//   - EXPECT_NO_RACE(procs, body): it exits 0 and TSan says nothing.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gort/detail/race.hpp"
#include "gort/gort.hpp"
#include "tests/testing.hpp"

namespace gort::test {

inline constexpr int kRaceReported = 66;  // TSan's exitcode
inline constexpr const char* kDataRace = "WARNING: ThreadSanitizer: data race";

// Where racy reads go, so that the compiler keeps them.
inline volatile size_t g_race_sink;

template <class F>
[[noreturn]] void race_child(int procs, F body, unsigned watchdog_seconds = 60) {
  ::alarm(watchdog_seconds);
  Config cfg;
  cfg.procs = procs;
  run(body, cfg);
  std::fflush(nullptr);
  // An expectation the body failed fails the child (the parent sees only
  // its status and output).
  std::exit(::testing::Test::HasFailure() ? 1 : 0);
}

class RaceTest : public ProcsTest {
 protected:
  void SetUp() override {
    if (!internal::kRaceEnabled) GTEST_SKIP() << "not a -Db_sanitize=thread build (docs/race.md)";
  }
};

// Runs each TEST_P of `Suite` with 1 and 2 Ps.
#define GORT_INSTANTIATE_RACE(Suite) \
  INSTANTIATE_TEST_SUITE_P(Procs, Suite, ::testing::Values(1, 2), ::gort::test::procs_name)

}  // namespace gort::test

#define EXPECT_RACE(procs, body, first_fn, second_fn)                                                   \
  EXPECT_EXIT(::gort::test::race_child(procs, body), ::testing::ExitedWithCode(::gort::test::kRaceReported), \
              std::string(::gort::test::kDataRace) + "(.|\n)*(" + first_fn + ")(.|\n)*(" + second_fn + ")" + \
                  "(.|\n)*Thread T[0-9]+ 'goroutine [0-9]+'")
#define EXPECT_NO_RACE(procs, body)                                                   \
  EXPECT_EXIT(::gort::test::race_child(procs, body), ::testing::ExitedWithCode(0), \
              ::testing::Not(::testing::HasSubstr("ThreadSanitizer")))

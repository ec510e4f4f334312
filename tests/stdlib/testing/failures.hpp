// tests/stdlib/testing/failures.hpp — the failures a piece of code
// reports, from any thread, for the tests of gort/testing.hpp that check
// more of a failure than EXPECT_NONFATAL_FAILURE's one substring.
#pragma once

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gort_testing_test {

// Runs f() with every thread's failures intercepted (goroutines move
// between threads) and returns them instead of failing the test.
template <class F>
std::vector<::testing::TestPartResult> failures_of(F&& f) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &results);
    f();
  }
  std::vector<::testing::TestPartResult> out;
  for (int i = 0; i < results.size(); i++) out.push_back(results.GetTestPartResult(i));
  return out;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace gort_testing_test

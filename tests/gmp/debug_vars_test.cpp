// tests/gmp/debug_vars_test.cpp — GORT_DEBUG's name=value list
// (gmp/debug_vars.cpp).
#include <stdlib.h>

#include "gmp/debug_vars.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::debug_var;

class DebugVars : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("GORT_DEBUG"); }
};

TEST_F(DebugVars, AbsentIsTheDefault) {
  unsetenv("GORT_DEBUG");
  EXPECT_EQ(debug_var("stallreport", 1000), 1000);
  setenv("GORT_DEBUG", "", 1);
  EXPECT_EQ(debug_var("stallreport", 7), 7);
}

TEST_F(DebugVars, NamesInAList) {
  setenv("GORT_DEBUG", "schedtrace=100,stallreport=250,scheddetail=1", 1);
  EXPECT_EQ(debug_var("stallreport", 1000), 250);
  EXPECT_EQ(debug_var("schedtrace", 0), 100);
  EXPECT_EQ(debug_var("scheddetail", 0), 1);
  EXPECT_EQ(debug_var("other", -1), -1);
}

TEST_F(DebugVars, LastOneWinsAndPrefixesDoNotMatch) {
  setenv("GORT_DEBUG", "stallreport=1,stallreportx=5,stallreport=0", 1);
  EXPECT_EQ(debug_var("stallreport", 1000), 0);
  EXPECT_EQ(debug_var("stall", 9), 9);
}

TEST_F(DebugVars, NotAnIntegerIsReportedAndIgnored) {
  setenv("GORT_DEBUG", "stallreport=2000,stallreport=soon,stallreport=", 1);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(debug_var("stallreport", 1000), 2000);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("gort: GORT_DEBUG: stallreport=soon: not an integer; ignored"), std::string::npos) << err;
  EXPECT_NE(err.find("stallreport=: not an integer"), std::string::npos) << err;
}

}  // namespace
}  // namespace gort::test

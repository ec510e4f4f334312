// tests/gmp/os/debugvars_test.cpp — GORT_DEBUG is parsed as Go parses GODEBUG
// (gmp/os/debugvars.cpp).
#include "gmp/os/debugvars.hpp"

#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::debug;
using internal::parse_debugvars;

TEST(DebugVars, NullAndEmptyGiveDefaults) {
  parse_debugvars("schedtrace=5,scheddetail=1");
  parse_debugvars(nullptr);
  EXPECT_EQ(debug.schedtrace, 0);
  EXPECT_EQ(debug.scheddetail, 0);
  parse_debugvars("schedtrace=5");
  parse_debugvars("");
  EXPECT_EQ(debug.schedtrace, 0);
}

TEST(DebugVars, KeyValuePairs) {
  parse_debugvars("schedtrace=1000,scheddetail=1");
  EXPECT_EQ(debug.schedtrace, 1000);
  EXPECT_EQ(debug.scheddetail, 1);
  parse_debugvars("scheddetail=1");
  EXPECT_EQ(debug.schedtrace, 0) << "every parse starts from the defaults";
  EXPECT_EQ(debug.scheddetail, 1);
  parse_debugvars(nullptr);
}

TEST(DebugVars, UnknownKeysAndFieldsWithoutValueAreIgnored) {
  parse_debugvars("gctrace=1,schedtrace=7,madvdontneed,=3,scheddetail");
  EXPECT_EQ(debug.schedtrace, 7);
  EXPECT_EQ(debug.scheddetail, 0);
  parse_debugvars(",,schedtrace=9,,");
  EXPECT_EQ(debug.schedtrace, 9);
  parse_debugvars("SchedTrace=9,schedtrace =9, schedtrace=9");
  EXPECT_EQ(debug.schedtrace, 0) << "keys match exactly, as in Go";
  parse_debugvars(nullptr);
}

TEST(DebugVars, StallReportDefaultsToOneSecondAndZeroTurnsItOff) {
  parse_debugvars(nullptr);
  EXPECT_EQ(debug.stallreport, 1000);
  parse_debugvars("schedtrace=100,stallreport=250,scheddetail=1");
  EXPECT_EQ(debug.stallreport, 250);
  parse_debugvars("stallreport=0,stallreportx=5");
  EXPECT_EQ(debug.stallreport, 0);
  parse_debugvars("stallreport=soon");
  EXPECT_EQ(debug.stallreport, 1000);
  parse_debugvars(nullptr);
}

TEST(DebugVars, MaxprocsSwitchesDefaultToOn) {
  parse_debugvars(nullptr);
  EXPECT_EQ(debug.containermaxprocs, 1);
  EXPECT_EQ(debug.updatemaxprocs, 1);
  parse_debugvars("containermaxprocs=0,updatemaxprocs=0");
  EXPECT_EQ(debug.containermaxprocs, 0);
  EXPECT_EQ(debug.updatemaxprocs, 0);
  parse_debugvars(nullptr);
}

TEST(DebugVars, LastSettingWins) {
  parse_debugvars("schedtrace=5,schedtrace=7");
  EXPECT_EQ(debug.schedtrace, 7);
  // A bad value later does not undo a good one earlier.
  parse_debugvars("schedtrace=5,schedtrace=x");
  EXPECT_EQ(debug.schedtrace, 5);
  parse_debugvars(nullptr);
}

TEST(DebugVars, ValuesAreDecimalInt32AsGoAtoi32) {
  struct Case {
    const char* value;
    bool ok;
    int32_t want;
  };
  const Case cases[] = {
      {"0", true, 0},
      {"42", true, 42},
      {"007", true, 7},
      {"-3", true, -3},
      {"-", true, 0},  // Go's atoi takes a lone sign as 0
      {"2147483647", true, 2147483647},
      {"-2147483648", true, INT32_MIN},
      {"2147483648", false, 0},
      {"-2147483649", false, 0},
      {"99999999999999999999999", false, 0},
      {"", false, 0},
      {"+5", false, 0},
      {"5ms", false, 0},
      {" 5", false, 0},
      {"0x10", false, 0},
      {"1.5", false, 0},
  };
  for (const Case& c : cases) {
    std::string s = std::string("scheddetail=11,schedtrace=") + c.value;
    parse_debugvars(s.c_str());
    EXPECT_EQ(debug.schedtrace, c.ok ? c.want : 0) << "value \"" << c.value << "\"";
    EXPECT_EQ(debug.scheddetail, 11);
  }
  parse_debugvars(nullptr);
}

}  // namespace
}  // namespace gort::test

// tests/main.cpp — the main() of every gort test executable.
//
// Death tests use the "threadsafe" style: the child re-executes the test
// binary instead of forking a process that may have runtime threads.
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  return RUN_ALL_TESTS();
}

// tests/main.cpp — the main() of every gort test executable.
//
// Death tests use the "threadsafe" style: the child re-executes the test
// binary instead of forking a process that may have runtime threads.
// In a race build (docs/race.md) ThreadSanitizer's own thread is started
// first.
#include <gtest/gtest.h>

#include <thread>

#include "gort/detail/race.hpp"

int main(int argc, char** argv) {
  // ThreadSanitizer starts a thread of its own with the process's first
  // pthread_create: start it now, so that the tests that count threads
  // before and after a run do not count it as one the runtime left behind.
  if constexpr (gort::internal::kRaceEnabled) std::thread([] {}).join();
  ::testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  return RUN_ALL_TESTS();
}

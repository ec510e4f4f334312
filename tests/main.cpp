// tests/main.cpp — the main() of every gort test executable: the one
// <gort/testing.hpp> gives users. Death tests use the "threadsafe" style
// (the child re-executes the test binary instead of forking a process that
// may have runtime threads), and in a race build (docs/race.md)
// ThreadSanitizer's own thread is started first, so that the tests that
// count threads before and after a run do not count it as one the runtime
// left behind.
#include "gort/testing.hpp"

GORT_TEST_MAIN()

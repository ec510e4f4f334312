// samples/demo/demo.hpp — what the demo's sections share: a clock, the
// section header, the result check, and each section's entry point.
#pragma once

#include <chrono>
#include <cstdio>

namespace demo {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

inline void header(int n, const char* title) {
  std::printf("\n== %d. %s ==\n", n, title);
  std::fflush(stdout);
}

// Prints one verdict line; the demo test looks for "<what>: ok".
inline bool check(bool ok, const char* what) {
  std::printf("  %s: %s\n", what, ok ? "ok" : "WRONG");
  std::fflush(stdout);
  return ok;
}

// Section 1 (demo.cpp); runs inside gort::run.
bool many_goroutines();
// Section 2 (sieve.cpp); runs inside gort::run.
bool prime_sieve();
// Section 3 (preemption.cpp); runs outside any runtime: it starts `self`
// (this executable) twice as a child with kChildFlag, each child with its
// own one-P runtime, and watches them with a time limit.
bool preemption(const char* self);
inline constexpr const char* kChildFlag = "--preempt-child";
// The child's side of section 3: `preempt` is Config::preempt, `parent` the
// pid of the tour that started it.
int preemption_child(bool preempt, long parent);
// Section 4 (echo.cpp); runs inside gort::run with 2 Ps.
bool echo_server();

}  // namespace demo

// stdlib/testing/poll.cpp — see poll.hpp; and eventually()'s loop.
#include "stdlib/testing/poll.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

#include "gort/testing.hpp"
#include "gort/time.hpp"

namespace gort::testing::detail {

std::chrono::steady_clock::time_point deadline_after(Duration timeout) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point now = Clock::now();
  if (timeout == absl::InfiniteDuration()) return Clock::time_point::max();
  std::chrono::nanoseconds d = absl::ToChronoNanoseconds(timeout);
  if (d > Clock::time_point::max() - now) return Clock::time_point::max();
  return now + d;
}

void pause_between_polls(int round) {
  auto pause = std::min<std::chrono::microseconds>(std::chrono::microseconds(100 << std::min(round, 7)),
                                                   std::chrono::milliseconds(10));
  if (gort::in_goroutine()) {
    gort::sleep(pause);
  } else {
    std::this_thread::sleep_for(pause);
  }
}

::testing::AssertionResult poll_until(bool (*poll)(void* arg, std::string* why), void* arg, Duration timeout) {
  auto deadline = deadline_after(timeout);
  std::string why;
  for (uint32_t i = 1;; i++) {
    if (poll(arg, &why)) return ::testing::AssertionSuccess();
    if (std::chrono::steady_clock::now() > deadline) {
      why.clear();
      if (poll(arg, &why)) return ::testing::AssertionSuccess();
      ::testing::AssertionResult r = ::testing::AssertionFailure();
      r << "the condition did not hold within " << absl::FormatDuration(timeout);
      if (!why.empty()) r << ": " << why;
      return r;
    }
    // In a goroutine, let the others on this P run. Yield the OS thread
    // only now and then: on a loaded machine sched_yield can cost a whole
    // kernel time slice.
    bool g = gort::in_goroutine();
    if (g) gort::yield();
    if (!g || i % 64 == 0) std::this_thread::yield();
  }
}

}  // namespace gort::testing::detail

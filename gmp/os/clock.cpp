// gmp/os/clock.cpp — see clock.hpp.
#include "gmp/os/clock.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include "gmp/os/interpose.hpp"

namespace gort::internal {
namespace {

using ClockGettimeFn = int (*)(clockid_t, timespec*);
GORT_NEXT_SLOT(ClockGettimeFn, clock_gettime)

__attribute__((constructor(101))) void resolve_clock() { (void)GORT_NEXT(clock_gettime); }

}  // namespace

int real_clock_gettime(clockid_t c, timespec* ts) {
  ClockGettimeFn f = next_clock_gettime.load(std::memory_order_acquire);
  // Not GORT_NEXT's lookup on first use: dlsym is not async-signal-safe,
  // and another library's constructor may read the clock before ours runs.
  if (f == nullptr) [[unlikely]] return static_cast<int>(::syscall(SYS_clock_gettime, c, ts));
  return f(c, ts);
}

int64_t nanotime() {
  timespec ts;
  real_clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace gort::internal

// netpoll/hook/clock.cpp — libc's clock reads, interposed: clock_gettime,
// gettimeofday, time (clock.hpp says why and what is never faked).
//
// The fast path, taken by every read outside a faking bubble (programs
// read the clock millions of times a second): one call of
// bubble_std_clock_now, which answers from the thread's current goroutine,
// then the next definition through its slot. No lock, no system call of
// its own; async-signal-safe on every path. glibc has no clock_gettime64
// on x86-64 (its time_t is 64 bits); timespec_get and ftime read the clock
// inside libc, where no interposer sees them: they stay real.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <sys/time.h>
#include <time.h>

#include "gmp/os/interpose.hpp"
#include "netpoll/hook/clock.hpp"
#include "netpoll/hook/fake_clock.hpp"

using ClockGettimeFn = int (*)(clockid_t, timespec*);
using GettimeofdayFn = int (*)(timeval*, void*);
using TimeFn = time_t (*)(time_t*);

namespace {
GORT_NEXT_SLOT(ClockGettimeFn, clock_gettime)
GORT_NEXT_SLOT(GettimeofdayFn, gettimeofday)
GORT_NEXT_SLOT(TimeFn, time)

__attribute__((constructor(101))) void resolve_all() {
  (void)GORT_NEXT(clock_gettime);
  (void)GORT_NEXT(gettimeofday);
  (void)GORT_NEXT(time);
}

// The fake wall time, if the calling goroutine's bubble fakes the standard
// clocks and the read at `ret` may be faked.
inline bool fake_wall(uintptr_t ret, int64_t* unix_ns) {
  int64_t mono_ns;
  return gort::internal::bubble_std_clock_now(unix_ns, &mono_ns) && gort::internal::clock_fake_for_caller(ret);
}

}  // namespace

extern "C" {

GORT_INTERPOSE int clock_gettime(clockid_t c, timespec* ts) noexcept {
  int64_t unix_ns, mono_ns, now;
  if (gort::internal::bubble_std_clock_now(&unix_ns, &mono_ns)) [[unlikely]] {
    if (gort::internal::fake_clock_now(c, unix_ns, mono_ns, &now) &&
        gort::internal::clock_fake_for_caller(reinterpret_cast<uintptr_t>(__builtin_return_address(0)))) {
      *ts = gort::internal::ns_timespec(now);
      return 0;
    }
  }
  return GORT_NEXT(clock_gettime)(c, ts);
}

GORT_INTERPOSE int gettimeofday(timeval* __restrict tv, void* __restrict tz) noexcept {
  int64_t unix_ns;
  if (fake_wall(reinterpret_cast<uintptr_t>(__builtin_return_address(0)), &unix_ns)) [[unlikely]] {
    // The obsolete time zone argument is the kernel's, as it was.
    if (tz != nullptr) {
      timeval scratch;
      GORT_NEXT(gettimeofday)(&scratch, tz);
    }
    timespec ts = gort::internal::ns_timespec(unix_ns);
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
  }
  return GORT_NEXT(gettimeofday)(tv, tz);
}

GORT_INTERPOSE time_t time(time_t* t) noexcept {
  int64_t unix_ns;
  if (fake_wall(reinterpret_cast<uintptr_t>(__builtin_return_address(0)), &unix_ns)) [[unlikely]] {
    time_t s = gort::internal::ns_timespec(unix_ns).tv_sec;
    if (t != nullptr) *t = s;
    return s;
  }
  return GORT_NEXT(time)(t);
}

// libgort's own definitions, bound inside the library whatever the dynamic
// linker puts first under the public names (a sanitizer's interceptor).
__attribute__((visibility("hidden"))) int gort_own_clock_gettime(clockid_t, timespec*) noexcept
    __attribute__((alias("clock_gettime")));
__attribute__((visibility("hidden"))) int gort_own_gettimeofday(timeval* __restrict, void* __restrict) noexcept
    __attribute__((alias("gettimeofday")));
__attribute__((visibility("hidden"))) time_t gort_own_time(time_t*) noexcept __attribute__((alias("time")));

}  // extern "C"

namespace gort::internal {

void clock_hook_entries(void* (&fns)[kClockHooks]) {
  fns[0] = reinterpret_cast<void*>(&gort_own_clock_gettime);
  fns[1] = reinterpret_cast<void*>(&gort_own_gettimeofday);
  fns[2] = reinterpret_cast<void*>(&gort_own_time);
}

}  // namespace gort::internal

// netpoll/hook/sleep.cpp — libc's sleeps, interposed: sleep, usleep,
// nanosleep (std::this_thread::sleep_for), clock_nanosleep (relative and
// TIMER_ABSTIME). On a goroutine they park it on a runtime timer, with
// Go's wait reason `sleep`; on a thread that holds an OS lock the thread
// sleeps with its P handed off; elsewhere they are libc's.
//
// A parked sleep is not interrupted by signals (a goroutine has no signal
// to take): it always sleeps its whole time, returns 0 and leaves `rem`
// alone. A sleep until an absolute CLOCK_REALTIME time is measured against
// the runtime's clock from the moment of the call: a change of the system
// time meanwhile does not move it. Its `now` is read through clock_gettime,
// so that on a goroutine of a bubble that fakes the standard clocks a
// deadline computed from the fake clock is measured against it.
// Each function is defined under its own name: none of the 64-bit
// renames (open -> open64) of _FILE_OFFSET_BITS=64, nor fortify's wrappers.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <time.h>
#include <unistd.h>

#include "gmp/bubble.hpp"
#include "gmp/os/interpose.hpp"
#include "netpoll/hook/fake_clock.hpp"
#include "netpoll/hook/hook.hpp"

using gort::internal::hook::get_errno;
using gort::internal::hook::set_errno;

using SleepFn = unsigned (*)(unsigned);
using UsleepFn = int (*)(useconds_t);
using NanosleepFn = int (*)(const timespec*, timespec*);
using ClockNanosleepFn = int (*)(clockid_t, int, const timespec*, timespec*);

namespace {
GORT_NEXT_SLOT(SleepFn, sleep)
GORT_NEXT_SLOT(UsleepFn, usleep)
GORT_NEXT_SLOT(NanosleepFn, nanosleep)
GORT_NEXT_SLOT(ClockNanosleepFn, clock_nanosleep)

__attribute__((constructor(101))) void resolve_all() {
  (void)GORT_NEXT(sleep);
  (void)GORT_NEXT(usleep);
  (void)GORT_NEXT(nanosleep);
  (void)GORT_NEXT(clock_nanosleep);
}

namespace hook = gort::internal::hook;

constexpr int64_t kMaxNs = int64_t{1} << 62;

int64_t add_sat(int64_t now, int64_t ns) { return ns > kMaxNs - now ? kMaxNs : now + ns; }

int64_t ts_ns(const timespec& ts) {
  if (ts.tv_sec > kMaxNs / 1000000000) return kMaxNs;
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

bool valid(const timespec* ts) { return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000; }

// Parks for ns nanoseconds (kPark), or sleeps the thread with its P handed
// off (kLocked), or returns false: the caller calls libc (kThread).
bool park_for(int64_t ns) {
  switch (hook::mode()) {
    case hook::Mode::kThread:
      return false;
    case hook::Mode::kLocked: {
      if (ns <= 0) return true;
      int64_t until = add_sat(gort::internal::nanotime(), ns);
      hook::in_syscall_block([&] {
        for (int64_t now = gort::internal::nanotime(); now < until; now = gort::internal::nanotime()) {
          timespec t{static_cast<time_t>((until - now) / 1000000000), static_cast<long>((until - now) % 1000000000)};
          gort::internal::sys::nanosleep(&t, nullptr);
        }
        return 0;
      });
      return true;
    }
    case hook::Mode::kPark:
      break;
  }
  if (!hook::may_park()) return false;  // a signal handler sleeps its thread
  // A bubble goroutine sleeps on its fake clock (gmp/bubble.hpp).
  if (ns > 0) hook::sleep_until(add_sat(gort::internal::clock_now(), ns));
  return true;
}

}  // namespace

extern "C" {

GORT_INTERPOSE unsigned sleep(unsigned seconds) {
  if (park_for(int64_t{seconds} * 1000000000)) return 0;
  return GORT_NEXT(sleep)(seconds);
}

GORT_INTERPOSE int usleep(useconds_t us) {
  if (park_for(int64_t{us} * 1000)) return 0;
  return GORT_NEXT(usleep)(us);
}

GORT_INTERPOSE int nanosleep(const timespec* req, timespec* rem) {
  if (hook::mode() == hook::Mode::kThread || req == nullptr || !valid(req) || !park_for(ts_ns(*req))) {
    return GORT_NEXT(nanosleep)(req, rem);
  }
  return 0;
}

GORT_INTERPOSE int clock_nanosleep(clockid_t clock, int flags, const timespec* req, timespec* rem) {
  // The call as libc makes it; an absolute deadline computed from a
  // bubble's fake clock is translated to the kernel's (fake_clock.hpp).
  auto forward = [&] {
    timespec buf;
    const timespec* t = req;
    if (req != nullptr && (flags & TIMER_ABSTIME) != 0) t = gort::internal::real_deadline(clock, req, &buf);
    return GORT_NEXT(clock_nanosleep)(clock, flags, t, rem);
  };
  if (hook::mode() == hook::Mode::kThread || req == nullptr || !valid(req)) return forward();
  switch (clock) {
    case CLOCK_REALTIME:
    case CLOCK_MONOTONIC:
    case CLOCK_BOOTTIME:
    case CLOCK_TAI:
      break;
    default:
      // A CPU-time clock (or one the kernel refuses): as it is, in the
      // system-call protocol.
      return hook::in_syscall_block(forward);
  }
  int64_t ns = ts_ns(*req);
  if ((flags & TIMER_ABSTIME) != 0) {
    timespec now;
    if (clock_gettime(clock, &now) != 0) return get_errno();
    ns -= ts_ns(now);
  }
  if (!park_for(ns)) return forward();
  return 0;
}

}  // extern "C"

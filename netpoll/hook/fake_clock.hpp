// netpoll/hook/fake_clock.hpp — a synctest bubble's fake clock as the
// standard clocks show it, and the way back: absolute deadlines the program
// computed from the fake clock, translated to real time before the kernel
// compares them (docs/testing.md, "The standard clocks").
//
// On a goroutine of a bubble made with Options::fake_std_clocks
// (gmp/bubble_clock.hpp):
//
//   | clock                                          | reads              |
//   |------------------------------------------------|--------------------|
//   | CLOCK_REALTIME, CLOCK_REALTIME_COARSE          | the fake wall time |
//   | CLOCK_MONOTONIC, _MONOTONIC_RAW, _MONOTONIC_COARSE, CLOCK_BOOTTIME | the fake monotonic time |
//   | anything else: CPU-time clocks, CLOCK_TAI, the alarm clocks, dynamic (fd and thread) clocks | real time |
//
// CPU time is not the bubble's to fake; TAI and the alarm clocks are rare
// enough that faking them would only add cases to get wrong.
//
// Why deadlines are translated: a goroutine that computes
// `steady_clock::now() + 50ms` in a bubble holds a fake time point. Handed
// to the kernel as an absolute deadline (pthread_cond_clockwait,
// pthread_mutex_timedlock, sem_timedwait, clock_nanosleep with
// TIMER_ABSTIME, ...) it would be compared with real time: the wall
// deadline lies in 2000 (no wait at all) and the monotonic one wherever the
// fake time has run to. The interposers of those calls pass
// `real_now + (deadline - fake_now)` instead: the same distance, on the
// kernel's clock. The fake clock does not move during such a wait (a
// thread blocked in the kernel is not durably blocked), so the distance is
// also the real wait.
//
// Cost outside a faking bubble: one call of bubble_std_clock_now (a few
// loads). Async-signal-safe.
#pragma once

#include <time.h>

#include <cstdint>
#include <limits>

#include "gmp/bubble_clock.hpp"
#include "gmp/os/clock.hpp"

namespace gort::internal {

// What clock c reads on a goroutine of a faking bubble whose fake wall and
// monotonic times (ns) are unix_ns and mono_ns, in *now; false if c is not
// faked (the table above).
inline bool fake_clock_now(clockid_t c, int64_t unix_ns, int64_t mono_ns, int64_t* now) {
  switch (c) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
      *now = unix_ns;
      return true;
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_RAW:
    case CLOCK_MONOTONIC_COARSE:
    case CLOCK_BOOTTIME:
      *now = mono_ns;
      return true;
    default:
      return false;
  }
}

inline timespec ns_timespec(int64_t ns) {
  int64_t s = ns / 1000000000;
  int64_t r = ns % 1000000000;
  if (r < 0) {  // floor, so that tv_nsec stays in [0, 1e9)
    s--;
    r += 1000000000;
  }
  return timespec{static_cast<time_t>(s), static_cast<long>(r)};
}

// The real-clock deadline as far from real_now as t is from fake_now (both
// ns on t's clock). A result before the clock's epoch is the epoch (already
// passed, for every clock); one beyond timespec's range is its largest
// value (never reached).
inline timespec shift_deadline(const timespec& t, int64_t fake_now, int64_t real_now) {
  __int128 ns = static_cast<__int128>(t.tv_sec) * 1000000000 + t.tv_nsec - fake_now + real_now;
  if (ns <= 0) return timespec{0, 0};
  __int128 s = ns / 1000000000;
  if (s > std::numeric_limits<time_t>::max()) return timespec{std::numeric_limits<time_t>::max(), 999999999};
  return timespec{static_cast<time_t>(s), static_cast<long>(ns % 1000000000)};
}

// An absolute deadline on clock c as the caller computed it, for the
// kernel: t itself, unless the calling goroutine's bubble fakes c; then
// shift_deadline's translation, written to *buf. t is not null (libc
// declares it so for every call here). A malformed t (tv_nsec out of range)
// goes through as it is, for the call to refuse.
inline const timespec* real_deadline(clockid_t c, const timespec* t, timespec* buf) {
  int64_t unix_ns, mono_ns;
  if (!bubble_std_clock_now(&unix_ns, &mono_ns)) [[likely]] return t;
  int64_t fake_now;
  timespec real;
  if (t->tv_nsec < 0 || t->tv_nsec >= 1000000000 || !fake_clock_now(c, unix_ns, mono_ns, &fake_now) ||
      real_clock_gettime(c, &real) != 0) {
    return t;
  }
  *buf = shift_deadline(*t, fake_now, int64_t{real.tv_sec} * 1000000000 + real.tv_nsec);
  return buf;
}

}  // namespace gort::internal

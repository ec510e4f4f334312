// netpoll/hook/clock.hpp — the standard clocks' interposers (clock.cpp)
// and whose reads they never fake (clock_caller.cpp); internal.
//
// libgort defines clock_gettime, gettimeofday and time. On a goroutine of
// a synctest bubble that fakes the standard clocks they answer with its
// fake clock (netpoll/hook/fake_clock.hpp says which clock ids); everywhere
// else they forward to the next definition. std::chrono's steady_clock and
// system_clock read through them (libstdc++ calls clock_gettime).
//
// Never faked, whoever runs them:
//   - the runtime's own clock (nanotime, gmp/os/clock.hpp), which calls
//     the next definition directly;
//   - abseil's reads (clock_caller.cpp): absl::Now() may keep a
//     process-wide sample of the clock (its time_state), which one fake
//     reading would spoil for every thread, and abseil's timed waits hand
//     their deadlines to the kernel. A read whose caller is abseil's code
//     is forwarded; absl::Now() stays real (gort::now() is the bubble's).
//
// Preemption: a goroutine polling the clock spends its time in these
// functions and below them. Their extents are clock ranges of
// preempt/safe_points.cpp (clock_hook_entries): a preemption signal that
// lands in libc or the vDSO under them unwinds through them to the caller.
// One that lands in them is declined, as in all of gort's code: the fake
// path reads the thread's current goroutine, which a migration would make
// another's.
#pragma once

#include <cstdint>

namespace gort::internal {

// clock_gettime, gettimeofday and time as libgort defines them (not
// whatever the dynamic linker finds first under those names).
inline constexpr int kClockHooks = 3;
void clock_hook_entries(void* (&fns)[kClockHooks]);

// Whether a clock function called from return address `ret` may answer
// with the fake clock: false if the caller is abseil's code, or if
// abseil's code could not be found at start-up (then nothing is faked at
// the C level, and the first refusal prints a warning). A caller that is
// another interposer of the same function ahead of libgort (a sanitizer's
// interceptor) is looked through, to its own caller. Asked only on the
// fake path; async-signal-safe.
bool clock_fake_for_caller(uintptr_t ret);

// Whether abseil's code was found (the start-up search of clock_caller.cpp).
bool clock_hook_absl_range_known();

}  // namespace gort::internal

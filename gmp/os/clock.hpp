// gmp/os/clock.hpp — the runtime's clock (Go's nanotime): CLOCK_MONOTONIC
// in nanoseconds, through the vDSO (~20 ns, no system call). Every
// deadline the runtime keeps (timers, sysmon's looks, Note timeouts) is in
// this clock.
//
// It is always the real clock: libgort interposes clock_gettime itself
// (netpoll/hook/clock.cpp), so that a synctest bubble's goroutines see its
// fake clock, and links with -Bsymbolic-functions, so a plain
// clock_gettime call inside libgort would reach that interposer. These go
// to the next definition (libc's, which calls the vDSO) instead.
//
// Thread-safety: any thread, a signal handler included.
#pragma once

#include <time.h>

#include <cstdint>

namespace gort::internal {

int64_t nanotime();

// clock_gettime as libc answers it, whatever a synctest bubble fakes.
// Before the next definition is resolved (a constructor of priority 101,
// before any goroutine can exist) it makes the system call.
int real_clock_gettime(clockid_t c, timespec* ts);

}  // namespace gort::internal

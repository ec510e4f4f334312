// gmp/os/clock.hpp — the runtime's clock (Go's nanotime): CLOCK_MONOTONIC
// in nanoseconds, through the vDSO (~20 ns, no system call). Every
// deadline the runtime keeps (timers, sysmon's looks, Note timeouts) is in
// this clock.
//
// Thread-safety: any thread, a signal handler included.
#pragma once

#include <cstdint>

namespace gort::internal {

int64_t nanotime();

}  // namespace gort::internal

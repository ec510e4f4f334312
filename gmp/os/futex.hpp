// gmp/os/futex.hpp — the futex calls the runtime's sleeps are built on (Go's
// futexsleep and futexwakeup, os_linux.go): the lock word (lock.cpp) and
// Note (note.cpp).
//
// Process-private futexes on a 32-bit word. Both leave errno as they found
// it: they run inside calls whose callers may be reading errno.
// futex_sleep returns at once if *addr != val, and may return early (a
// signal, a spurious wake-up, the timeout): callers loop on their own
// condition.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace gort::internal {

// Sleeps while *addr == val, at most *ts if ts is not null.
inline void futex_sleep(std::atomic<uint32_t>* addr, uint32_t val, const timespec* ts = nullptr) {
  int saved = errno;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT | FUTEX_PRIVATE_FLAG, val, ts,
          nullptr, 0);
  errno = saved;
}

// Wakes up to `cnt` threads sleeping on addr.
inline void futex_wakeup(std::atomic<uint32_t>* addr, uint32_t cnt) {
  int saved = errno;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE | FUTEX_PRIVATE_FLAG, cnt, nullptr,
          nullptr, 0);
  errno = saved;
}

}  // namespace gort::internal

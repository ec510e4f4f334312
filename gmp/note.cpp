// gmp/note.cpp — futex-backed Note.
#include "gmp/note.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "gmp/clock_rand.hpp"
#include "gmp/fatal.hpp"

namespace gort::internal {
namespace {

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op | FUTEX_PRIVATE_FLAG, val, ts,
                 nullptr, 0);
}

}  // namespace

void Note::wakeup() {
  uint32_t old = key_.exchange(1, std::memory_order_acq_rel);
  if (old != 0) fatal("notewakeup: double wakeup");
  int saved = errno;
  futex(&key_, FUTEX_WAKE, 1, nullptr);
  errno = saved;
}

void Note::sleep() {
  int saved = errno;
  while (key_.load(std::memory_order_acquire) == 0) {
    futex(&key_, FUTEX_WAIT, 0, nullptr);  // EINTR and spurious wake-ups loop
  }
  errno = saved;
}

bool Note::sleep_for(int64_t ns) {
  int saved = errno;
  int64_t deadline = nanotime() + ns;
  while (key_.load(std::memory_order_acquire) == 0) {
    int64_t left = deadline - nanotime();
    if (left <= 0) break;
    timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    futex(&key_, FUTEX_WAIT, 0, &ts);
  }
  errno = saved;
  return key_.load(std::memory_order_acquire) != 0;
}

}  // namespace gort::internal

// gmp/note.cpp — futex-backed Note.
#include "gmp/note.hpp"

#include <time.h>

#include "gmp/clock_rand.hpp"
#include "gmp/fatal.hpp"
#include "gmp/futex.hpp"

namespace gort::internal {

void Note::wakeup() {
  uint32_t old = key_.exchange(1, std::memory_order_acq_rel);
  if (old != 0) fatal("notewakeup: double wakeup");
  futex_wakeup(&key_, 1);
}

void Note::sleep() {
  while (key_.load(std::memory_order_acquire) == 0) {
    futex_sleep(&key_, 0);  // EINTR and spurious wake-ups loop
  }
}

bool Note::sleep_for(int64_t ns) {
  int64_t deadline = nanotime() + ns;
  while (key_.load(std::memory_order_acquire) == 0) {
    int64_t left = deadline - nanotime();
    if (left <= 0) break;
    timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    futex_sleep(&key_, 0, &ts);
  }
  return key_.load(std::memory_order_acquire) != 0;
}

}  // namespace gort::internal

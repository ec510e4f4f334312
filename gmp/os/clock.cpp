// gmp/os/clock.cpp — see clock.hpp.
#include "gmp/os/clock.hpp"

#include <time.h>

namespace gort::internal {

int64_t nanotime() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace gort::internal

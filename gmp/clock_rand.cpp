// gmp/clock_rand.cpp — see clock_rand.hpp. Kept out of the scheduler's files
// because everything uses them: timers, the poller, select, sync.Mutex.
#include "gmp/clock_rand.hpp"

#include "gmp/m.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

uint32_t fastrand() {
  M* m = getm();
  uint64_t* s;
  thread_local uint64_t fallback = 0x853c49e6748fea9bull ^ reinterpret_cast<uintptr_t>(&fallback);
  s = m ? &m->fastrand_state : &fallback;
  // xorshift64*
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return static_cast<uint32_t>((x * 0x2545F4914F6CDD1Dull) >> 32);
}

uint32_t fastrandn(uint32_t n) {
  return static_cast<uint32_t>((static_cast<uint64_t>(fastrand()) * n) >> 32);
}

}  // namespace gort::internal

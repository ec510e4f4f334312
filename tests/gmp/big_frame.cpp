// tests/gmp/big_frame.cpp — a frame far larger than a stack guard, built
// without stack-clash protection (tests/meson.build), as Debian GCC builds
// code by default: its first touch lands well below the stack pointer it
// started from, past the running goroutine's guard.
#include "tests/gmp/big_frame.hpp"

namespace gort::test {

__attribute__((noinline)) void big_frame_touch_bottom() {
  volatile char buf[kBigFrameBytes];
  buf[0] = 1;  // the lowest byte: no probe on the pages above it
}

}  // namespace gort::test

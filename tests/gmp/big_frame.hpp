// tests/gmp/big_frame.hpp — see big_frame.cpp.
#pragma once

#include <cstddef>

namespace gort::test {

inline constexpr size_t kBigFrameBytes = 150 * 1024;

// Allocates a kBigFrameBytes local array and writes its lowest byte only.
void big_frame_touch_bottom();

}  // namespace gort::test

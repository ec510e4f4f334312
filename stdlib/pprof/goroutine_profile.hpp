// stdlib/pprof/goroutine_profile.hpp — every live goroutine's stack and
// labels, a record each with the value 1 (goroutine_profile.cpp says how
// they are read and what they may not show).
#pragma once

#include "stdlib/pprof/room.hpp"

#include <vector>

#include "stdlib/pprof/profile_builder.hpp"

namespace gort::internal {

// Blocks the thread while it walks (Sched::lock held); never parks. Empty
// outside gort::run.
std::vector<StackRecord> goroutine_records();

}  // namespace gort::internal

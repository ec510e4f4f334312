// gmp/profiling.cpp — the profilers' switches (gmp/profiling.hpp).
#include "gmp/profiling.hpp"

namespace gort::internal {

Profiling profiling;

}  // namespace gort::internal

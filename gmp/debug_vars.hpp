// gmp/debug_vars.hpp — GORT_DEBUG, Go's GODEBUG for the runtime: a
// comma-separated list of name=value settings, e.g.
// GORT_DEBUG=stallreport=2000. docs/debugging.md lists the names.
#pragma once

#include <cstdint>

namespace gort::internal {

// The integer value of `name` in GORT_DEBUG (the last one if it appears
// more than once), or `def` if it is absent. A value that is not an integer
// is reported on stderr and ignored.
int64_t debug_var(const char* name, int64_t def);

}  // namespace gort::internal

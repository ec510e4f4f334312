// stdlib/pprof/cpu_profile.hpp — GORT_CPUPROFILE=path: a CPU profile of a
// whole gort::run, started before main's body and written when it returns
// (stdlib/run_main.cpp; docs/tracing-and-profiling.md). The profile is the
// run's own: start_cpu_profile fails with "already in use" meanwhile, and
// stop_cpu_profile leaves it alone. Failures are reported on stderr
// ("gort: GORT_CPUPROFILE: ...") and the run goes on.
#pragma once

#include "stdlib/pprof/room.hpp"

namespace gort::internal {

// GORT_CPUPROFILE's value, or null when unset or empty.
const char* cpu_profile_env();
// On the main goroutine, around main's body.
void cpu_profile_env_begin(const char* path);
void cpu_profile_env_end();

}  // namespace gort::internal

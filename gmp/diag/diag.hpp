// gmp/diag/diag.hpp — the diagnostics' entry into a run: the fault
// handlers, tracebacks, Go's unrecovered-panic report and the symbolizer's
// cache, plugged into the scheduler core through SchedHooks (the core
// names nothing of gmp/diag/; stdlib/run_main.cpp wires it, as it wires the
// poller and sysmon).
//
// Thread-safety: called by run_main before the run starts.
#pragma once

#include "gmp/diag/room.hpp"

#include "gmp/sched.hpp"

namespace gort::internal {

// Sets hooks->diag_init and hooks->diag_fini.
void install_diag_hooks(SchedHooks* hooks);

// SIGSEGV/SIGBUS: stack overflow and fatal faults with Go's report
// (fault.cpp); once per process.
void install_fatal_signal_handlers();

}  // namespace gort::internal

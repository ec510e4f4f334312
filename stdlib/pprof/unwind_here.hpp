// stdlib/pprof/unwind_here.hpp — a thread's own frames, fast and without a
// lock: libgcc's _Unwind_Backtrace, for the profiles' samples. Addresses
// come out ready to symbolize: a return address minus one (inside its
// call instruction), an interrupted instruction's address as it is.
//
// Why not gmp/diag/unwind.hpp: its libdw walk needs symbolizer_mutex()
// and takes tens of microseconds, fine for a traceback, not for a signal
// handler 100 times a second per thread nor for every sampled wait. The
// price is libgcc's trust in the stack: it reads what the call frame
// information points at without checking it, so a corrupt stack can fault
// in the walk (libdw's checks every read). unwind_here.cpp says why it is
// safe in a signal handler, and when not.
#pragma once

#include "stdlib/pprof/room.hpp"

#include <cstdint>

namespace gort::internal {

// The calling function's callers, innermost first (the caller of
// unwind_here first), at most `max`; returns how many.
int unwind_here(uintptr_t* out, int max);

// In a signal handler: the frames of the context `uc` (its ucontext_t)
// interrupted, the interrupted instruction first, the handler's own frames
// left out. At least that first one (on x86-64 and AArch64).
int unwind_interrupted(const void* uc, uintptr_t* out, int max);

// Before the first unwind_interrupted: libgcc sets up its tables on first
// use (pthread_once), which a signal handler must not be the one to do.
void unwind_warm_up();

}  // namespace gort::internal

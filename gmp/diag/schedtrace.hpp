// gmp/diag/schedtrace.hpp — Go's scheduler trace (GORT_DEBUG=schedtrace=N).
//
// sysmon calls schedtrace every debug.schedtrace milliseconds. It prints, in
// the format of Go 1.19's runtime.schedtrace, one summary line
//
//   SCHED 1004ms: gomaxprocs=2 idleprocs=0 threads=5 spinningthreads=0 idlethreads=2 runqueue=0 [0 0]
//
// or, when `detailed` (scheddetail=1), that header without the per-P list
// and then one line per P, per M and per G. The values are a snapshot taken
// while everything runs, as Go's are: read without stopping anyone, so they
// need not add up. docs/gdb-and-schedtrace.md explains each field.
#pragma once

#include "gmp/diag/room.hpp"

#include <cstdint>
#include <string>

namespace gort::internal {

// Appends the trace text for the time `now` (nanotime) of a run whose
// first trace was at `start` to *out. Takes Sched::lock and each P's timer
// lock; call it from a thread that holds no runtime lock (sysmon).
void schedtrace_format(int64_t start, int64_t now, bool detailed, std::string* out);

// Formats the trace and writes it to stderr (outside every lock: a slow
// stderr must not stall the scheduler).
void schedtrace(int64_t start, int64_t now, bool detailed);

}  // namespace gort::internal

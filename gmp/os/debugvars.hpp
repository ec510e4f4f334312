// gmp/os/debugvars.hpp — GORT_DEBUG, the runtime's debugging switches (Go's
// GODEBUG, parsed as Go's parsedebugvars does).
//
// GORT_DEBUG is a comma-separated list of key=value settings, e.g.
// `GORT_DEBUG=schedtrace=1000,scheddetail=1`. A value is a decimal int32;
// a setting with a value that does not parse, a field without `=`, and an
// unknown key are ignored; a key given twice keeps its last value. The
// variable is read once per gort::run, before any goroutine starts, and the
// settings hold for that run. See docs/gdb-and-schedtrace.md.
#pragma once

#include <cstdint>

namespace gort::internal {

struct DebugVars {
  // Every this many milliseconds sysmon prints Go's one-line `SCHED`
  // summary to stderr (0: never).
  int32_t schedtrace = 0;
  // With schedtrace: print the detailed form, one line per P, M and G.
  int32_t scheddetail = 0;
  // sysmon reports a goroutine that keeps its P, or an M the kernel keeps
  // blocked outside blocking(), for this many milliseconds (0: never;
  // preempt/stall.cpp, docs/debugging.md).
  int32_t stallreport = 1000;
  // 0: the default number of Ps ignores the cgroup's CPU limit (Go's
  // containermaxprocs).
  int32_t containermaxprocs = 1;
  // 0: sysmon does not follow changes of the default number of Ps (Go's
  // updatemaxprocs).
  int32_t updatemaxprocs = 1;
  // 0: libc's blocking calls are left alone (Config::hook_libc;
  // netpoll/hook/, docs/blocking-libraries.md).
  int32_t hooklibc = 1;
  // 1: every gort call that may park checks park's OS-lock rule whether or
  // not it parks this time
  // (preempt_check_may_park, gmp/lock.hpp).
  int32_t parkcheck = 0;
};

// Written by run() before any other runtime thread exists; read-only while
// the runtime runs.
extern DebugVars debug;

// Resets `debug` to its defaults and applies the settings in `s` (null:
// none).
void parse_debugvars(const char* s);

}  // namespace gort::internal

// gmp/diag/fatal.hpp — how the runtime dies, as Go's throw, fatal,
// fatalpanic and checkdead print it, each with Go's traceback
// (docs/debugging.md). fatal() and fatal_user() are declared in the leaf
// gmp/os/fatal.hpp, which every room may include; this header adds the
// report's parts for the diagnostics and the layers above the core.
#pragma once

#include "gmp/diag/room.hpp"

#include <cstdint>

#include "gmp/diag/unwind.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/sched.hpp"

namespace gort::internal {

struct G;

// What a dying process prints: the message, the goroutine that died (or
// the runtime's own stack), then, per GORT_TRACEBACK or always for fatal
// errors, every other goroutine. Go's dopanic_m.
struct Death {
  // The message, in pieces printed one after the other (null ends it).
  const char* text[4] = {};
  // Go's throw: the runtime's frames are shown whatever the level.
  bool runtime_error = false;
  // Every goroutine, whatever GORT_TRACEBACK says (fatal errors).
  bool all = false;
  // The goroutine that died, printed first as [running], from `regs`.
  G* g = nullptr;
  // Otherwise, the calling thread's own stack as "runtime stack:".
  bool runtime_stack = false;
  bool have_regs = false;
  UnwindRegs regs;
  StackView view;
  FirstPc first_pc = FirstPc::kInterrupted;
  int skip = 0;
  bool cut_at_throw = false;
  // The caller holds Sched::lock.
  bool sched_locked = false;
  // Called from a signal handler: stdout is not flushed (its lock may be
  // held by the interrupted code).
  bool in_signal_handler = false;
};
[[noreturn]] void die(Death* d);

// Ends the process with `code` at once (exit_group), past the exit hooks
// of the sanitizer runtimes: in the race detector's build TSan's _exit
// takes locks that a faulting or stopped thread may hold, and hung there,
// and it would turn a fatal error's status 2 into its own 66.
[[noreturn]] void exit_now(int code);

// Whether this thread is printing a dying process's traceback (a fault now
// is a fault of the traceback itself).
bool dying_on_this_thread();

// Whether some thread has begun printing a dying process's report: sysmon's
// own reports (stall.cpp) then keep quiet rather than cut into it.
bool process_dying();

// Installs the handler that reports an exception escaping a goroutine as
// Go's unrecovered panic (panic.cpp); once per process.
void panic_init();


}  // namespace gort::internal

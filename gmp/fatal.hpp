// gmp/fatal.hpp — the runtime's ways to die, as Go's throw, fatal,
// fatalpanic and checkdead, each with Go's traceback (docs/debugging.md).
//
// `fatal` is for broken invariants and unrecoverable conditions (Go's
// throw): it prints `fatal error: <msg>`, the failing goroutine (or the
// runtime's own stack) with the runtime's frames, then every other
// goroutine, and exits with status 2, always, in every build. `fatal_user`
// is Go's fatal: a user's mistake the runtime cannot survive (unlocking an
// unlocked mutex, parking while holding an OS lock); the same, but frames
// are shown per GORT_TRACEBACK. Misuse that can be survived is a panic
// (gort::panic_error) instead, thrown where it happens.
#pragma once

#include <cstdint>

#include "gmp/sched.hpp"
#include "gmp/unwind.hpp"

namespace gort::internal {

[[noreturn]] void fatal(const char* msg);
[[noreturn]] void fatal_user(const char* msg);

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

// Go's checkdead, called by stopm when an M goes idle (Sched::lock held): if
// no M is running a goroutine and nothing can ever make one runnable, prints
// Go's deadlock report and exits with status 2.
void check_dead_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock);

// Installs the handler that reports an exception escaping a goroutine as
// Go's unrecovered panic (panic.cpp); once per process.
void panic_init();

// Writes a string to stderr without allocating (safe in signal handlers).
void write_stderr(const char* s);
void write_stderr_int(long long v);
// "0x" and v in lower-case hex, as Go prints addresses.
void write_stderr_hex(unsigned long long v);

}  // namespace gort::internal

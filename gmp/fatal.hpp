// gmp/fatal.hpp — the runtime's ways to die, as Go's throw, fatalpanic and
// checkdead.
//
// `fatal` is for broken invariants and unrecoverable conditions: it prints
// `fatal error: <msg>` (plus the current goroutine when there is one) and
// exits with status 2, always, in every build. Misuse by the user is a panic
// (gort::panic_error) instead, thrown where it happens.
#pragma once

namespace gort::internal {

[[noreturn]] void fatal(const char* msg);
// An exception escaped goroutine `goid`: prints Go's unrecovered-panic report
// and exits with status 2.
[[noreturn]] void fatal_panic(const char* what, long long goid);

struct G;
// Prints "goroutine N [state]:" for every live goroutine except `current`.
// Sched::lock must be held (it guards the list of all Gs).
void dump_goroutines_locked(G* current);

// Go's checkdead, called by stopm when an M goes idle (Sched::lock held): if
// no M is running a goroutine and nothing can ever make one runnable, prints
// Go's deadlock report and exits with status 2.
void check_dead_locked();

// Writes a string to stderr without allocating (safe in signal handlers).
void write_stderr(const char* s);
void write_stderr_int(long long v);
// "0x" and v in lower-case hex, as Go prints addresses.
void write_stderr_hex(unsigned long long v);

}  // namespace gort::internal

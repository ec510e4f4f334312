// gmp/os/fatal.hpp — the runtime's ways to die, declared where every room
// can call them: the scheduler core, the OS primitives and the sanitizer
// support all end the process through these, and none of them may include
// the diagnostics that print the report (gmp/diag/fatal.hpp has the full
// interface: Death, die, the dump's parts; gmp/diag/fatal.cpp defines all).
//
// `fatal` is for broken invariants and unrecoverable conditions (Go's
// throw): it prints `fatal error: <msg>`, the failing goroutine (or the
// runtime's own stack) with the runtime's frames, then every other
// goroutine, and exits with status 2, always, in every build. `fatal_user`
// is Go's fatal: a user's mistake the runtime cannot survive (unlocking an
// unlocked mutex, parking while holding an OS lock); the same, but frames
// are shown per GORT_TRACEBACK. Misuse that can be survived is a panic
// (gort::panic_error) instead, thrown where it happens.
//
// Thread-safety: any thread, any time, a signal handler included; one
// thread prints, a second one that dies waits for the first to exit.
#pragma once

namespace gort::internal {

[[noreturn]] void fatal(const char* msg);
[[noreturn]] void fatal_user(const char* msg);
// fatal, with `preamble` printed just before `fatal error:` inside the one
// dying thread's report (Go's checkmcount line): two threads dying at once
// would otherwise interleave their preambles.
[[noreturn]] void fatal_after(const char* preamble, const char* msg);

// Go's checkdead verdict: prints `msg` and every goroutine, then exits with
// status 2. The caller holds Sched::lock (gmp/checkdead.cpp).
[[noreturn]] void fatal_deadlock_locked(const char* msg);

// Raw writes to standard error (write(2), nothing allocated or buffered):
// safe in a signal handler and on a dying process.
void write_stderr(const char* s);
void write_stderr_int(long long v);
// "0x" and v in lower-case hex, as Go prints addresses.
void write_stderr_hex(unsigned long long v);

}  // namespace gort::internal

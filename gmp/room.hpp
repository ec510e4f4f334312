// gmp/room.hpp — included first by every header of the scheduler core
// (gmp/*.hpp). gmp/ is four rooms, each its own Meson library compiled with
// its room's macro, and a room may include only the rooms below it
// (docs/runtime.md, "Rooms"):
//
//   gmp/os/     OS primitives: futex, Note, clock, cgroup, raw syscalls,
//               interposition, the leaf fatal() declaration, GORT_DEBUG
//   gmp/race/   sanitizer support (may include os)
//   gmp/        the scheduler core (may include os, race)
//   gmp/diag/   diagnostics: tracebacks, symbolizing, unwinding, dying,
//               panics, faults, schedtrace, the gdb extension (may include
//               all three; the core reaches it only through SchedHooks)
//
// The layers above gmp/ (netpoll/, preempt/, stdlib/) may include any room.
#pragma once

#if defined(GORT_ROOM_OS) || defined(GORT_ROOM_RACE)
#error "gmp/os/ and gmp/race/ sit below the scheduler core: they may not include its headers (docs/runtime.md, Rooms)"
#endif

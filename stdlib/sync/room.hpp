// stdlib/sync/room.hpp — included first by every header of stdlib/sync/.
// stdlib/ is three rooms above the runtime, each its own Meson library
// compiled with its room's macro, and a room may include only the rooms
// below it (docs/runtime.md, "Rooms"):
//
//   stdlib/sync/  what goroutines coordinate with: channels and select,
//                 semaphores, sync's types, time's timers, context, errgroup
//   stdlib/net/   descriptors on the poller (NetFD, FdMutex), net, tls
//                 (may include sync)
//   stdlib/os/    files, processes, signals (may include sync and net: a
//                 File is a NetFD, as in Go's internal/poll)
//
// gmp/'s rooms sit below all three and include none of them.
#pragma once

#if defined(GORT_ROOM_OS) || defined(GORT_ROOM_RACE) || defined(GORT_ROOM_CORE) || defined(GORT_ROOM_DIAG)
#error "stdlib/ sits above gmp/: gmp's rooms may not include its headers (docs/runtime.md, Rooms)"
#endif

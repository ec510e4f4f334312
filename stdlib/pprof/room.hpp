// stdlib/pprof/room.hpp — included first by every header of stdlib/pprof/
// (the rooms: stdlib/sync/room.hpp, docs/runtime.md "Rooms").
//
//   stdlib/pprof/  Go's runtime/pprof: labels, the CPU profile, the
//                  goroutine, block and mutex profiles (may include gmp's
//                  rooms and stdlib/sync)
//
// Nothing below it names a profile: the core and stdlib/sync reach it only
// through gmp/profiling.hpp's hooks.
#pragma once

#include "stdlib/sync/room.hpp"

#if defined(GORT_ROOM_STDLIB_SYNC) || defined(GORT_ROOM_STDLIB_NET) || defined(GORT_ROOM_STDLIB_OS)
#error "stdlib/pprof/ sits above stdlib/sync/ and beside net and os: they may not include its headers (docs/runtime.md, Rooms)"
#endif

// stdlib/trace/room.hpp — included first by every header of stdlib/trace/,
// the execution tracer's room: what it records and how it writes it out
// (the rooms: stdlib/sync/room.hpp, docs/runtime.md "Rooms"). It sits
// above stdlib/sync/, as stdlib/net/ does: it may include gmp's rooms and
// sync, and sync may not include it.
#pragma once

#include "stdlib/sync/room.hpp"

#if defined(GORT_ROOM_STDLIB_SYNC)
#error "stdlib/trace/ sits above stdlib/sync/: sync may not include its headers (docs/runtime.md, Rooms)"
#endif

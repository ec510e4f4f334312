// stdlib/net/room.hpp — included first by every header of stdlib/net/
// (the rooms: stdlib/sync/room.hpp, docs/runtime.md "Rooms").
#pragma once

#include "stdlib/sync/room.hpp"

#if defined(GORT_ROOM_STDLIB_SYNC)
#error "stdlib/net/ sits above stdlib/sync/: sync may not include its headers (docs/runtime.md, Rooms)"
#endif

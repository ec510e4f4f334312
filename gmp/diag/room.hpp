// gmp/diag/room.hpp — included first by every header of gmp/diag/ (the
// rooms: gmp/room.hpp).
#pragma once

#if defined(GORT_ROOM_OS) || defined(GORT_ROOM_RACE) || defined(GORT_ROOM_CORE)
#error "gmp/diag/ sits above the scheduler core: os, race and the core reach it only through SchedHooks (docs/runtime.md, Rooms)"
#endif

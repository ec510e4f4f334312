// gmp/race/room.hpp — included first by every header of gmp/race/ (the
// rooms: gmp/room.hpp).
#pragma once

#if defined(GORT_ROOM_OS)
#error "gmp/os/ sits below gmp/race/: it may not include its headers (docs/runtime.md, Rooms)"
#endif

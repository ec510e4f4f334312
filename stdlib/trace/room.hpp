// stdlib/trace/room.hpp — included first by every header of stdlib/trace/,
// the execution tracer's reading side: decoding, the viewers' model, the
// JSON writer, trace::start/stop and the flight recorder (docs/runtime.md,
// "Rooms"). It sits above stdlib/os/ and may include every room below it;
// the scheduler core emits the events (gmp/trace.hpp) and names nothing
// here.
#pragma once

#if defined(GORT_ROOM_OS) || defined(GORT_ROOM_RACE) || defined(GORT_ROOM_CORE) || defined(GORT_ROOM_DIAG) || \
    defined(GORT_ROOM_STDLIB_SYNC) || defined(GORT_ROOM_STDLIB_NET) || defined(GORT_ROOM_STDLIB_OS)
#error "stdlib/trace/ sits above the runtime and stdlib's other rooms: they may not include its headers (docs/runtime.md, Rooms)"
#endif

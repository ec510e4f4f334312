// stdlib/pprof/events.hpp — the block and mutex profiles' tables (Go's
// blockProfile and mutexProfile buckets): for each (stack, label set), the
// events and their delay, scaled for sampling as Go's saveblockevent
// scales them, accumulated for the life of the process.
//
// The events come through gmp/profiling.hpp: park's block_event, and
// mutex_event from gort::Mutex and RWMutex (stdlib/sync/mutex.cpp) and
// pthread_mutex_lock (preempt/oslock.cpp). Each is recorded on the thread
// that waited, with the stack it waited on (unwind_here.hpp) and the
// goroutine's labels; the table keeps a reference to each label set it
// names.
#pragma once

#include "stdlib/pprof/room.hpp"

#include <cstdint>
#include <vector>

#include "stdlib/pprof/profile_builder.hpp"

namespace gort::internal {

// The tables as records: values {contentions, delay in ns}.
std::vector<StackRecord> block_records();
std::vector<StackRecord> mutex_records();

}  // namespace gort::internal

// stdlib/sync/semtable.hpp — semaphores keyed by address (Go's semtable,
// runtime/sema.go), for objects too numerous to carry a wait queue each:
// the two locks of every NetFD (stdlib/net/fd_mutex.hpp), whose bytes each
// idle connection pays for. The count is a uint32_t inside the object; the
// waiters queue in one of 251 shared roots, by the count's address.
//
// Everything happens under the root's lock: a release hands its unit to
// the oldest waiter for the address, or with none adds it to the count,
// then unlocks. Unlike gort::internal::Sema (one per object, whose object
// may be destroyed as soon as the unit is taken), the count here must stay
// alive through the release: the caller keeps the object alive (FdMutex's
// unlocker holds its reference until the release returns).
//
// Costs: an uncontended acquire or release takes the root's lock; finding
// a waiter scans the root's queue (the waiters of every address that maps
// to it: one or two, as a rule). Plain threads wait as goroutines do (a
// futex), as with Sema.
#pragma once

#include "stdlib/sync/room.hpp"

#include <cstdint>

#include "gmp/g.hpp"

namespace gort::internal {

// Waits until *count is positive and decrements it (Go's semacquire).
void semacquire_addr(uint32_t* count, WaitReason reason);
// Wakes the oldest waiter on count, handing it the unit, or increments
// *count (Go's semrelease).
void semrelease_addr(uint32_t* count);

}  // namespace gort::internal

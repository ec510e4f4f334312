// gmp/lock.hpp — the runtime's mutual-exclusion lock (Go's lock_futex).
//
// A 32-bit word: 0 unlocked, 1 locked, 2 locked with sleepers. Contenders
// spin briefly (only with several CPUs), then sleep on a futex, so a holder
// descheduled by the kernel does not make others burn CPU. Holding it
// counts as a runtime critical section (acquirem): the holder is never
// asynchronously preempted. It is an *OS-thread* lock: never hold it across
// a park, except through park's unlock function (park_unlock_word), which
// releases it on the next context once the parking goroutine is saved.
#pragma once

#include <atomic>
#include <cstdint>

namespace gort::internal {

struct G;

void lock_word(std::atomic<uint32_t>* w);
void unlock_word(std::atomic<uint32_t>* w);
// For park(): releases the lock word `arg`.
bool park_unlock_word(G* g, void* arg);

// Yields if sysmon asked the running goroutine to give up its P (Go's
// stack-bound check in function prologues). Cheap; called at gort entry
// points.
void preempt_check();

}  // namespace gort::internal

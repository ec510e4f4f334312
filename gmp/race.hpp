// gmp/race.hpp — each goroutine's ThreadSanitizer fiber (Go's racegostart
// and racegoend), for the race detector (docs/race.md). The happens-before
// annotations the primitives make are in <gort/detail/race.hpp>.
//
// Every function here is empty unless the build has TSan (GORT_TSAN_ON).
// Thread-safe. Costs, in TSan builds: a fiber per spawn, an mmap per
// recycled stack (tsan_fresh_stack).
#pragma once

#include "gmp/g.hpp"
#include "gort/detail/race.hpp"

namespace gort::internal {

// Called by make_context on a G about to get a new goroutine: the slot is
// mapped afresh so that nothing its previous goroutine did counts (Go's
// racemalloc in gfget).
void tsan_fresh_stack(G* g);

// Gives g a fresh fiber, created by the spawner once the closure is built,
// so that the goroutine starts with everything its spawner did behind it.
// Dies with Go's text past the race detector's limit of live goroutines.
void tsan_start_fiber(G* g);

// Takes an exited (or torn-down) g's fiber, from another context. The fiber
// is kept a while (a quarantine of finished ones, reused once full): TSan
// drops any report whose earlier access belongs to a destroyed fiber, and
// Go reports races with goroutines that have finished.
void tsan_release_fiber(G* g);

// The address every exiting goroutine releases and run()'s end acquires
// (Go's racefini: what goroutines did happens before run() returns). Its
// own object: &sched, used before, is also Sched::lock, a std::mutex whose
// unlock TSan models as a release that replaces the address's clock, so
// an unlock between an exit's release and run()'s acquire erased the
// exit's edge (Race.SpawnContextTimersAndRunEndAreQuiet, ~3% of runs).
inline char race_run_end;

// Allocate and free a runtime object (an M, a P) out of the race
// detector's sight. TSan counts an allocation as a write by the allocating
// thread (sysmon, say), and code compiled with TSan that reads the
// object's fields from a goroutine (getg(), the tests' current_m()) would
// race with it; the runtime's own accesses are not instrumented at all.
template <class T>
T* new_untracked() {
  RaceIgnore ignore;
  return new T;
}
template <class T>
void delete_untracked(T* x) {
  RaceIgnore ignore;
  delete x;
}

}  // namespace gort::internal

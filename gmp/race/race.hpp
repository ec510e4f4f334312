// gmp/race/race.hpp — each goroutine's ThreadSanitizer fiber (Go's racegostart
// and racegoend), for the race detector (docs/race.md). The happens-before
// annotations the primitives make are in <gort/detail/race.hpp>.
//
// Every function here is empty unless the build has TSan (GORT_TSAN_ON).
// It sits below the scheduler core (gmp/race/ may include only gmp/os/):
// it is handed a goroutine's plain data (its stack slot, its fiber slot,
// its id), never a G.
// Thread-safe. Costs, in TSan builds: a fiber per spawn (reused from a
// spare list when one is there), a mincore and an mmap per spawn over the
// pages earlier goroutines left resident (tsan_fresh_stack).
#pragma once

#include "gmp/race/room.hpp"

#include <cstddef>
#include <cstdint>

#include "gort/detail/race.hpp"

namespace gort::internal {

// Called by make_context on a stack slot [lo, top) about to get a new
// goroutine: the part earlier goroutines touched is mapped afresh so that
// nothing they did counts (Go's racemalloc in gfget). The top `keep` bytes
// (the G, which lives at the slot's top) come through unchanged; at most
// kRaceKeepMax.
inline constexpr size_t kRaceKeepMax = 4096;
void tsan_fresh_stack(char* lo, char* top, size_t keep);

// Gives a stack's pages [lo, lo + len) back to the kernel and clears TSan's
// record of them, in place of the pool's MADV_DONTNEED in this build:
// tsan_fresh_stack resets only resident pages, so a page must not leave
// with its record still there.
void tsan_forget_stack(char* lo, size_t len);

// Gives goroutine `id` a fresh fiber in *fiber (unless it has one),
// created by the spawner once the closure is built, so that the goroutine
// starts with everything its spawner did behind it: released on
// `start_sync`, which the goroutine acquires when it starts. Dies with Go's
// text past the race detector's limit of live goroutines.
void tsan_start_fiber(void** fiber, int64_t id, const void* start_sync);

// Takes an exited (or torn-down) goroutine's fiber out of *fiber, from
// another context. The fiber
// is kept a while (a quarantine of finished ones, reused once full): TSan
// drops any report whose earlier access belongs to a destroyed fiber, and
// Go reports races with goroutines that have finished.
void tsan_release_fiber(void** fiber);
// The fiber of a goroutine abandoned while parked (run's tear-down): it
// may be inside an ignore scope (a channel operation's), which TSan
// reports when the fiber is destroyed, and which a reused fiber would
// carry into its next goroutine (no race found there). It is forgotten,
// never destroyed nor reused: a few hundred bytes of TSan's per abandoned
// goroutine, which the race detector's limit counts no more.
void tsan_abandon_fiber(void** fiber);

// How many fibers tsan_start_fiber has created (not reused) so far; for
// tests.
int64_t tsan_fibers_created();

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

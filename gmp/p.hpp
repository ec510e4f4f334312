// gmp/p.hpp — a processor (P): the right to run Go code, and its local state.
//
// An M must hold a P to run goroutines. Each P owns a local run queue, a
// cache of free Gs (with their stacks) and of fresh stacks, and a batch of
// goroutine ids, so the hot paths (spawn, ready, exit) touch no shared state.
//
// P states (owned by the field `status`):
//   kIdle     on the idle list, no M; owned by whoever holds the sched lock.
//   kRunning  held by an M that runs Gs or looks for them.
//   kBlocking held by an M inside gort::blocking(); sysmon may take it.
//   kStopped  stopped while the world is stopped (gmp/procresize.cpp).
//   kDead     not in use (removed by set_procs, or shutdown).
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>

#include "gmp/g.hpp"
#include "gmp/runq.hpp"

namespace gort::internal {

enum class PStatus : uint32_t { kIdle, kRunning, kBlocking, kStopped, kDead };

struct alignas(64) P {
  int32_t id = 0;
  std::atomic<PStatus> status{PStatus::kIdle};
  M* m = nullptr;      // the M holding this P, if any (relaxed_store)
  P* link = nullptr;   // idle list
  // Incremented at every execute (read by sysmon: a tick that does not
  // move for a whole time slice means one G has run that long).
  std::atomic<uint32_t> schedtick_seen{0};
  uint32_t schedtick = 0;
  // The G this P last preempted onto the global queue (find_runnable's
  // fairness check passes over it once). Compared, never dereferenced: a
  // stale match only defers one fairness check. Only this P's M touches it.
  const G* preempted = nullptr;
  // Incremented at every entersyscall (blocking()).
  std::atomic<uint32_t> syscalltick{0};

  Runq runq;

  // Free Gs (dead, each on its stack), and stacks taken from the pool in a
  // batch for Gs to be born on (only ever refilled: a stack goes back to
  // the pool only with its released G).
  GQueue gfree;
  // gfree.size, for schedtrace (sysmon reads it; the owner's stores are
  // plain movs, relaxed).
  std::atomic<int32_t> gfreecnt{0};
  static constexpr int kStackCacheMax = 32;
  char* stacks[kStackCacheMax];
  int nstacks = 0;

  // Goroutine id batch [goid_next, goid_end).
  int64_t goid_next = 0;
  int64_t goid_end = 0;

  // Goroutines created and exited on this P; num_goroutine sums them.
  std::atomic<int64_t> created{0};
  std::atomic<int64_t> exited{0};

  // Opaque per-P state of other subsystems (the timer heap).
  void* timers = nullptr;
  // The timer heap's earliest `when` (timer.cpp keeps it), for
  // timers_first; null while the P has no heap.
  std::atomic<int64_t>* timer0 = nullptr;
};

// Earliest `when` of p's timers (a snapshot), or 0 if none. Asked on
// every trip through the scheduler, a yield's included: inline, two loads
// (it was a call into timer.cpp).
inline int64_t timers_first(const P* p) {
  std::atomic<int64_t>* t0 = p->timer0;
  return t0 != nullptr ? t0->load(std::memory_order_seq_cst) : 0;
}

}  // namespace gort::internal

// gmp/p.hpp — a processor (P): the right to run Go code, and its local state.
//
// An M must hold a P to run goroutines. Each P owns a local run queue, a
// cache of free Gs (with their stacks) and of fresh stacks, and a batch of
// goroutine ids, so the hot paths (spawn, ready, exit) touch no shared state.
//
// States, defined by who owns the P (as Go's runtime2.go does):
//
//   kIdle      no M holds it: on the idle list (Sched::pidle, under
//              Sched::lock), or on its way on or off it (released, taken
//              back by sysmon, handed off, new); whoever moved it there
//              owns it until it is listed or given to an M.
//   kRunning   held by an M (p->m, m->p) that runs goroutines or looks for
//              them; owned by that M, except that sysmon may take it from
//              an M the kernel blocked outside blocking() (the CAS of
//              preempt/retake.cpp, a Dekker with the M's ensurep).
//   kBlocking  its M is inside gort::blocking(): owned by nobody; whoever
//              wins the CAS out of it has it (the M leaving blocking(),
//              sysmon's retake, entersyscallblock, the world's stopper).
//   kStopped   stopped while the world is stopped; owned by the stopper
//              (gmp/procresize.cpp).
//   kDead      not in use: beyond the number of Ps, after set_procs removed
//              it; kept until the run ends (Sched::allp).
//
// Legal transitions: kPStatusTransitions below, one row each, with who
// makes it. set_status (the owner's change: a checked load, then a store)
// and cas_status (the racy ones) check every one; any other is a runtime
// bug and a fatal error naming both states.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>

#include "gmp/g.hpp"
#include "gmp/runq.hpp"
#include "gmp/stack.hpp"
#include "gmp/transition.hpp"

namespace gort::internal {

enum class PStatus : uint32_t { kIdle, kRunning, kBlocking, kStopped, kDead };

inline constexpr const char* kPStatusNames[] = {"idle", "running", "blocking", "stopped", "dead"};

inline constexpr Transition<PStatus> kPStatusTransitions[] = {
    {PStatus::kIdle, PStatus::kRunning},      // acquirep; run() gives P 0 to M0
    {PStatus::kRunning, PStatus::kIdle},      // releasep; sysmon's retake of a blocked M (CAS)
    {PStatus::kRunning, PStatus::kBlocking},  // entersyscall
    {PStatus::kBlocking, PStatus::kRunning},  // exitsyscall, on any M leaving blocking() (CAS)
    {PStatus::kBlocking, PStatus::kIdle},     // sysmon's retake, entersyscallblock (CAS)
    {PStatus::kIdle, PStatus::kStopped},      // stop_the_world, stop_p_if_waiting_locked, procresize (new P)
    {PStatus::kRunning, PStatus::kStopped},   // stop_the_world: the stopper's own P
    {PStatus::kBlocking, PStatus::kStopped},  // stop_the_world (CAS)
    {PStatus::kStopped, PStatus::kRunning},   // start_the_world: the stopper's own P
    {PStatus::kStopped, PStatus::kIdle},      // start_the_world: every other P
    {PStatus::kStopped, PStatus::kDead},      // procresize: removed by set_procs
    {PStatus::kDead, PStatus::kStopped},      // procresize: back in use
};

inline constexpr TransitionTable<PStatus> kPStatusTable{kPStatusTransitions, kPStatusNames};

struct alignas(64) P {
  int32_t id = 0;
  // Changed only through set_status and cas_status (the table above).
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
  // The same for each other stack size class (GoOptions::stack; index
  // stack_class - 1; stack.hpp's kStackClassTable bounds them): a G of
  // one class is never reborn as a G of another.
  struct SizedCache {
    GQueue gfree;
    int nstacks = 0;
    char* stacks[kSizedStackCacheMax];
  };
  SizedCache sized[kStackClasses - 1];

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

[[noreturn, gnu::cold, gnu::noinline]] inline void bad_status(const P* p, PStatus from, PStatus to) {
  bad_transition(kPStatusTable, "P", p->id, "status", from, to, p->status.load(std::memory_order_relaxed));
}

// The owner's change of p's status (see the table): a checked load and a
// store, as set_status(G*) does; nobody else writes it meanwhile.
inline void set_status(P* p, PStatus from, PStatus to, std::memory_order order = std::memory_order_release) {
  if (!kPStatusTable.legal(from, to) || p->status.load(std::memory_order_relaxed) != from) [[unlikely]] {
    bad_status(p, from, to);
  }
  p->status.store(to, order);
}

// A change that others may race for (out of kBlocking, and sysmon's retake
// out of kRunning): true if this one made it, false if p was not in `from`
// (another party moved it first, which is no error).
inline bool cas_status(P* p, PStatus from, PStatus to) {
  if (!kPStatusTable.legal(from, to)) [[unlikely]] bad_status(p, from, to);
  return p->status.compare_exchange_strong(from, to, std::memory_order_acq_rel);
}

// Earliest `when` of p's timers (a snapshot), or 0 if none. Asked on
// every trip through the scheduler, a yield's included: inline, two loads.
inline int64_t timers_first(const P* p) {
  std::atomic<int64_t>* t0 = p->timer0;
  return t0 != nullptr ? t0->load(std::memory_order_seq_cst) : 0;
}

}  // namespace gort::internal

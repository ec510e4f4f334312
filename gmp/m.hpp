// gmp/m.hpp — a machine (M): an OS thread that runs goroutines.
//
// Each M runs the scheduler loop on its own thread stack, represented by the
// pseudo-goroutine `g0` (Go's name): g0 is never on a run queue and never
// migrates. A goroutine switches to another goroutine directly when one is
// runnable on its P and to g0 otherwise (to look for work or to sleep).
//
// Per-M state is reached only through getm() (tls.hpp), never through a
// pointer kept across a switch: a goroutine may resume on another M. Parts
// of it belong to the areas that use them: M::preemption to preempt/
// (gmp/m_preempt.hpp), M::tb to the diagnostics (gmp/m_traceback.hpp).
//
// sysmon's retake of the P of an M the kernel blocked outside blocking()
// (M::retake; preempt/retake.cpp, whose Dekker with ensurep in
// gmp/sched.hpp it is):
//
//   kNone      nothing under way: the M may use its P.
//   kDeciding  sysmon, between its membarrier and its verdict, may take
//              the P: the M waits at its next runtime entry (ensurep_slow).
//   kDone      sysmon took the P: the M, at its next runtime entry, drops
//              it and gets one as exitsyscall does.
//
// Legal transitions: kRetakeTransitions; set_retake and cas_retake check
// every one.
#pragma once

#include "gmp/room.hpp"

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "gmp/g.hpp"
#include "gmp/m_preempt.hpp"
#include "gmp/m_traceback.hpp"
#include "gmp/os/note.hpp"
#include "gmp/trace.hpp"
#include "gmp/transition.hpp"

namespace gort::internal {
struct P;
}

namespace gort::internal {

// What the context we switch to must do with the G we switch away from,
// once that G's context is saved (see switch.hpp).
enum class AfterSwitch : uint8_t {
  kNone,        // nothing (the previous context was g0, or is still running)
  kRunqTail,    // put the previous G at the tail of this P's run queue
  kGlobal,      // put the previous G on the global run queue
  kPark,        // call park_unlock(prev, park_arg); if false, ready prev
  kExit,        // the previous G is dead: recycle it
};

enum class RetakeState : uint32_t { kNone, kDeciding, kDone };

inline constexpr const char* kRetakeStateNames[] = {"none", "deciding", "done"};

inline constexpr Transition<RetakeState> kRetakeTransitions[] = {
    {RetakeState::kNone, RetakeState::kDeciding},  // sysmon, before its membarrier (CAS)
    {RetakeState::kDeciding, RetakeState::kNone},  // sysmon backs off: the M is in the runtime
    {RetakeState::kDeciding, RetakeState::kDone},  // sysmon took the P
    {RetakeState::kDone, RetakeState::kNone},      // the M, at its next runtime entry
};

inline constexpr TransitionTable<RetakeState> kRetakeTable{kRetakeTransitions, kRetakeStateNames};

// The race detector's per-M state (TSan builds; docs/race.md).
struct MRace {
  // The fiber timer functions run in (timer.cpp), made on first use; Go's
  // per-P timerRaceCtx.
  void* timer_fiber = nullptr;
  // Released by the thread once TSan has set up its TLS, and acquired by
  // every goroutine switched in on it, so that the thread's TLS (errno,
  // the program's thread_locals) is not new memory that each goroutine
  // races with (gmp/switch.cpp).
  char tls = 0;
};

struct Sudog;
// How far ahead walk_back (gmp/sudog.hpp) fetches (Sudog::hint).
inline constexpr uint32_t kHintDistance = 16;

struct M {
  int64_t id = 0;
  G g0;
  G* curg = nullptr;     // the goroutine running on this M, or null on g0 (relaxed_store: sysmon reads it)
  P* p = nullptr;        // the P held, or null
  P* nextp = nullptr;    // the P handed over by whoever woke this M
  M* link = nullptr;     // idle list
  bool spinning = false; // looking for work without a P's own work (relaxed_store)
  bool is_main = false;  // the thread that called gort::run
  bool started_idle = false;  // started ahead of need, on the idle list from birth (mprestart)
  Note park;             // sleeps here when idle
  // The goroutine this M runs and no other (Go's m.lockedg; lockedm.cpp):
  // an asynchronously preempted G waits for its own thread. Only this M
  // writes it.
  G* lockedg = nullptr;
  // Asleep in stoplockedm until a P is handed over for lockedg (Sched::lock).
  bool stoplocked = false;
  // A G locked to another M that this M took from its queue on the direct
  // switch path (next_local): g0 hands it over (startlockedm).
  G* handoff_g = nullptr;

  // The last Sudogs this thread queued, a ring (WaitQ::push): each new
  // one takes the one kHintDistance pushes back as its Sudog::hint.
  Sudog* pushed[kHintDistance] = {};
  uint32_t npushed = 0;

  AfterSwitch after = AfterSwitch::kNone;
  bool (*park_unlock)(G* g, void* arg) = nullptr;
  void* park_arg = nullptr;

  // Bounds of the thread's own stack (for ASan's fiber switch records).
  void* g0_stack_lo = nullptr;
  size_t g0_stack_size = 0;
  // Running systemstack's function for curg: curg is executing, off its
  // own stack (a frozen M there is not about to resume it). This thread
  // writes it; its traceback handler reads it.
  std::atomic<bool> in_systemstack{false};

  // Runtime critical-section depth (Go's m.locks): no preemption while > 0.
  std::atomic<int32_t> locks{0};
  // OS-level locks and one-time initialisations this thread is inside of
  // (pthread mutexes, rwlocks, spinlocks, stdio locks, pthread_once,
  // function-local statics; preempt/oslock.cpp counts them). No
  // preemption, asynchronous or cooperative, while > 0, and parking is a
  // fatal error: the goroutine must not leave the thread that holds them.
  // Written only by this thread (plain load + store, like locks).
  std::atomic<int32_t> oslocks{0};
  // The signal mask goroutine code runs with on this thread (set by
  // minit). An interrupted context with another mask is inside a signal
  // handler (or changed the thread's mask itself): never preempted there.
  uint64_t sigmask = 0;
  // Inside gort::blocking(), and the P it held when it entered.
  std::atomic<bool> in_blocking{false};
  P* blocking_p = nullptr;
  // sysmon's retake of this M's P (the table at the top). The M looks at
  // it (ensurep) at every runtime entry that uses its P, under acquirem.
  std::atomic<RetakeState> retake{RetakeState::kNone};
  // This thread's CPU-time clock (sysmon reads it to tell a thread asleep in
  // the kernel from one that runs).
  clockid_t cpuclock = 0;
  // Owned by preempt/ (gmp/m_preempt.hpp).
  MPreempt preemption;
  MRace race;
  // The execution tracer's buffer (gmp/trace.hpp).
  MTrace trace;
  // Owned by the diagnostics (gmp/m_traceback.hpp).
  TracebackRequest tb;

  // Per-M alternate signal stack (for the stack-overflow handler).
  void* sigstack = nullptr;
  size_t sigstack_size = 0;

  uint64_t fastrand_state = 0;

  // This thread's errno and C++ exception globals (fixed for the thread's
  // life): cached so a switch does not look them up through TLS.
  int* errno_ptr = nullptr;
  void* eh_globals = nullptr;

  std::thread thread;
  pthread_t tid{};
  std::atomic<int> os_tid{0};  // the kernel's thread id, set by minit
};

// A goroutine may leave its thread only when nothing of the thread's is
// held: an OS lock or a one-time initialisation (M::oslocks), or the thread
// itself (blocking(f): f runs outside the scheduler). Park and gosched make
// it a fatal error otherwise; code that can wait either way asks first.
inline bool m_may_switch(const M* m) {
  // Both loads, no branch between them (a hot path's check): int operands.
  return (static_cast<int>(m->oslocks.load(std::memory_order_relaxed) == 0) &
          static_cast<int>(!m->in_blocking.load(std::memory_order_relaxed))) != 0;
}

[[noreturn, gnu::cold, gnu::noinline]] inline void bad_retake(const M* m, RetakeState from, RetakeState to) {
  bad_transition(kRetakeTable, "M", m->id, "retake", from, to, m->retake.load(std::memory_order_relaxed));
}

// The one party that may change m->retake from `from` (sysmon out of
// kDeciding, the M out of kDone): a checked load and a store.
inline void set_retake(M* m, RetakeState from, RetakeState to, std::memory_order order) {
  if (!kRetakeTable.legal(from, to) || m->retake.load(std::memory_order_relaxed) != from) [[unlikely]] {
    bad_retake(m, from, to);
  }
  m->retake.store(to, order);
}

// sysmon's start of a retake, kNone -> kDeciding: false if one is under
// way or not yet seen by the M. seq_cst: sysmon's side of the Dekker.
inline bool cas_retake(M* m, RetakeState from, RetakeState to) {
  if (!kRetakeTable.legal(from, to)) [[unlikely]] bad_retake(m, from, to);
  return m->retake.compare_exchange_strong(from, to, std::memory_order_seq_cst);
}

}  // namespace gort::internal

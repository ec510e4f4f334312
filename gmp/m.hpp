// gmp/m.hpp — a machine (M): an OS thread that runs goroutines.
//
// Each M runs the scheduler loop on its own thread stack, represented by the
// pseudo-goroutine `g0` (Go's name): g0 is never on a run queue and never
// migrates. A goroutine switches to another goroutine directly when one is
// runnable on its P and to g0 otherwise (to look for work or to sleep).
//
// Per-M state is reached only through getm() (tls.hpp), never through a
// pointer kept across a switch: a goroutine may resume on another M.
#pragma once

#include "gmp/room.hpp"

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "gmp/g.hpp"
#include "gmp/os/note.hpp"

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

// A request for this M's running goroutine's registers (gmp/diag/unwind.cpp):
// one asker at a time (under symbolizer_mutex) fills in the fields and
// moves `state` kTbIdle -> kTbAsked, then sends the preemption signal; the
// M's handler takes it (kTbAsked -> kTbBusy), records the goroutine it
// interrupted, copies its stack, publishes kTbDone, and with `freeze` stays
// in the handler for good (a dying process stops its other threads so that
// the stacks it prints hold still). A freeze that finds the M just landed
// from a switch, before the context of the goroutine it left is stored,
// declines instead (kTbBusy -> kTbAsked) and is signalled again
// (freeze_answered). An asker that gives up moves kTbAsked ->
// kTbIdle; if the handler was quicker it waits for kTbDone instead, so the
// handler never writes into a buffer its asker has let go of.
inline constexpr uint32_t kTbIdle = 0;
inline constexpr uint32_t kTbAsked = 1;
inline constexpr uint32_t kTbBusy = 2;
inline constexpr uint32_t kTbDone = 3;

struct TracebackRequest {
  std::atomic<uint32_t> state{kTbIdle};
  bool freeze = false;
  char* buf = nullptr;  // where to copy the stack (null: no copy)
  size_t cap = 0;
  // The answer: the goroutine the M runs (null if the M was elsewhere: on
  // g0, idle, in the runtime's switch), its registers in DWARF order
  // (unwind.hpp), and the copied bytes [copy_lo, copy_lo+copied). The
  // registers are the interrupted ones, or with g_after_call a caller's
  // state after a call (a saved context): the M was caught inside a switch
  // into g, or, for a freeze only, between making g its current goroutine
  // and landing on g's stack (execute, or next_local's direct switch).
  G* g = nullptr;
  bool g_after_call = false;
  uint64_t regs[17] = {};
  uint32_t regs_known = 0;
  // For a freeze only: the goroutine a switch under way leaves (its status
  // already says parked or runnable, its saved context is not yet
  // written), and where it stands, in the same terms.
  G* leaving = nullptr;
  bool leaving_after_call = false;
  uint64_t leaving_regs[17] = {};
  uint32_t leaving_known = 0;
  uintptr_t copy_lo = 0;
  size_t copied = 0;
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
  // sysmon's retake of the P of an M that the kernel blocked outside
  // blocking() (preempt/retake.cpp): kRetakeNone, kRetakeDeciding while it
  // decides, kRetakeDone once the P is gone. The M looks at it (ensurep) at
  // every runtime entry that uses its P, under acquirem.
  std::atomic<uint32_t> retake{0};
  // This thread's CPU-time clock (sysmon reads it to tell a thread asleep in
  // the kernel from one that runs).
  clockid_t cpuclock = 0;
  // Asynchronous preemption requests: sysmon bumps this for each new request
  // (its retries resend the same number) and sends it with the signal; the
  // handler acts only on the current one.
  std::atomic<uint32_t> preempt_gen{0};
  // Preemption signals sent to this M, and that count as the handler last
  // saw it: while they differ a signal is still pending (SIGURG is not
  // queued), and sending another would only cost a system call.
  std::atomic<uint32_t> preempt_sent{0};
  std::atomic<uint32_t> preempt_seen{0};
  // sysmon is between its look at in_blocking and the end of its
  // pthread_sigqueue (the other half of a Dekker with entersyscall's store
  // of in_blocking), and how many of its signals have been queued; the M
  // compares the latter with preempt_queued_flushed (its own) to know that a
  // signal may be pending that f's first system call would see as EINTR.
  std::atomic<bool> preempt_sending{false};
  std::atomic<uint32_t> preempt_queued{0};
  uint32_t preempt_queued_flushed = 0;
  // The slice timer (preempt/signal.cpp): a POSIX timer, made by sysmon on
  // first use, that delivers the preemption signal to this thread when the
  // slice of the G sysmon saw running ends, so the preemption does not wait
  // for sysmon to get a CPU. Armed for the run with P schedtick
  // slice_timer_tick, by this M when it resumes a G whose last run was
  // preempted; stopped by entersyscall.
  void* slice_timer = nullptr;
  // TSan builds: the fiber timer functions run in (timer.cpp), made on
  // first use; Go's per-P timerRaceCtx.
  void* tsan_timer_fiber = nullptr;
  // Race builds: released by the thread once TSan has set up its TLS, and
  // acquired by every goroutine switched in on it, so that the thread's
  // TLS (errno, the program's thread_locals) is not new memory that each
  // goroutine races with (gmp/switch.cpp).
  char race_tls = 0;
  std::atomic<int> slice_timer_state{0};  // 0 none, 1 being made, 2 made
  std::atomic<uint32_t> slice_timer_tick{0};
  std::atomic<int64_t> slice_timer_deadline{0};

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
  return (m->oslocks.load(std::memory_order_relaxed) == 0) & !m->in_blocking.load(std::memory_order_relaxed);
}

}  // namespace gort::internal

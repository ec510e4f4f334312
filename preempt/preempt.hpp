// preempt/preempt.hpp — asynchronous preemption (internal).
//
// sysmon calls preempt_one(p) for a P whose G has run past its slice: it
// sets g->preempt (honoured at the next gort call: the cooperative path)
// and, if Config::preempt is on, sends the preemption signal to the M with
// a fresh request number. The handler (signal.cpp) injects a call to the
// trampoline (async_preempt_<arch>.S) only at an asynchronously safe point:
//   1. the signal is our current request and this M runs a goroutine that
//      still has g->preempt set;
//   2. no runtime critical section (m->locks), no NoPreempt scope, not in
//      blocking();
//   3. the interrupted RSP is inside the G's stack with enough headroom for
//      the saved state and the yield;
//   4. the interrupted PC lies in code registered as preemptible (the main
//      executable's text by default, less the code of static archives
//      linked into it; never libc, libstdc++ or gort, which hold locks and
//      thread-local state such as malloc's arenas), or in a clock function
//      (the vDSO, libc's and libstdc++'s clock reads) that preemptible code
//      called (clock_caller_preemptible);
//   5. the thread holds no OS lock and is inside no one-time
//      initialisation (m->oslocks, counted by oslock.cpp);
//   6. the interrupted context runs with the M's own signal mask (not
//      inside a signal handler), and its live frames hold no signal frame
//      (frames_preemptible: a handler with SA_NODEFER).
// Otherwise nothing happens and the request is made again a little later:
// by the M's slice timer, which the handler re-arms, when the timer times
// the run (slice_timer_times), else by sysmon. The
// preempted goroutine then resumes on this M, which runs nothing else
// meanwhile (gmp/lockedm.cpp), so C++ code in the middle of thread-local
// state (an inlined thread_local initialiser, a thread_local's address in a
// register) is never seen half done nor moved. Only past
// kMaxPreemptLockedMs such waiting Ms does a preemption move the goroutine;
// then an address in the thread's TLS in its registers or frames also
// makes the point unsafe.
#pragma once

#include <link.h>
#include <sys/ucontext.h>

#include <atomic>
#include <cstdint>

#include "gmp/tls.hpp"

// The trampoline's interface (async_preempt_<arch>.S): the handler points
// the interrupted context at gort_async_preempt, which saves the state
// (gort_xsave_mode: 1 xsave, 0 fxsave, into gort_xsave_size bytes; set by
// preempt_init) and calls gort_async_preempt_yield (signal.cpp).
extern "C" {
__attribute__((visibility("hidden"))) extern uint64_t gort_xsave_size;
__attribute__((visibility("hidden"))) extern uint32_t gort_xsave_mode;
__attribute__((visibility("hidden"))) void gort_async_preempt();
__attribute__((visibility("hidden"))) void gort_async_preempt_yield();
}

namespace gort::internal {

struct G;
struct M;
struct P;
struct SchedHooks;

// Plug preemption into the scheduler (gmp knows nothing of signals or of
// the monitor thread): called by run before the runtime starts
// (stdlib/run_main.cpp), as Go's runtime.main starts sysmon.
// Sets SchedHooks::sysmon_start and sysmon_stop (sysmon.cpp).
void install_sysmon_hooks(SchedHooks* hooks);
// Sets the slice timer's hooks (slice_started, slice_timer_stop), the
// traceback signal and preempt_p (signal.cpp).
void install_slice_timer_hooks(SchedHooks* hooks);

// Installs the signal handler (once per process) and finds the code ranges
// and the FP state size. Called by sysmon_start.
void preempt_init();
int preempt_signal();
// What preempt_one did, which says when sysmon should look again.
enum class PreemptRequest {
  kNone,       // only the cooperative flag (preemption off, no G, an M in
               // blocking()): it stays set until the G's next gort call
  kSignalled,  // a signal went out; it may land at an unsafe point
  kPending,    // nothing was sent: this request's signal has not been
               // delivered yet (the thread is not running), or the M is in
               // a non-blocking system call, at whose return the G yields
               // (gmp/nbsyscall.hpp)
};
// Asks the G running on p to yield: sets its cooperative flag and, when
// asynchronous preemption is on, signals its M.
PreemptRequest preempt_one(P* p);
#ifdef GORT_TESTING
// Arms p's M's slice timer, from another thread, to deliver the preemption
// signal at `deadline` (a nanotime) unless the run with schedtick `tick`
// ends first. False if the timer cannot be used (no async preemption, no M,
// the M is in blocking(), timer_create failed). Not for the runtime
// (sysmon): a timer armed from outside can fire just after its M entered
// blocking() and before either side stops it, interrupting f (EINTR); the
// M arms its own (SchedHooks::slice_started), and entersyscall stops it
// first.
bool arm_slice_timer(P* p, uint32_t tick, int64_t deadline);
#endif
// Deletes every M's slice timer (sysmon_stop, after the Ms have left).
void delete_slice_timers();
// Whether m's slice timer times its run with schedtick `tick`: it will
// signal the end of the slice, and the handler retries an unsafe point by
// itself, so sysmon need not wake for that run's deadline.
bool slice_timer_times(const M* m, uint32_t tick);
// How soon a preemption that met an unsafe point is tried again: a tenth of
// the slice, at most 100 µs.
int64_t preempt_retry_ns();
// Whether async preemption is possible in this process (x86-64, not TSan,
// gort's own code found: own_code_known).
bool async_preempt_supported();
// Whether the runtime knows where its own code lies, so that it is never
// preempted: libgort.so (or the shared library that linked libgort.a in),
// or the gort_text section of an executable linked with libgort.a and
// preempt/gort_text.ld. False for an executable linked with libgort.a
// without the script: gort's code cannot be told from the program's, and
// async preemption stays off (safe_points.cpp).
bool own_code_known();

// What preempt/gort_text.ld gave an executable linked with libgort.a
// (static_link.cpp): [gort_lo, gort_hi) holds gort's code, [archives_lo,
// archives_hi) other static archives' code. Empty (lo >= hi, or null)
// where the script was not used, and in libgort.so.
struct StaticLinkText {
  uintptr_t gort_lo = 0;
  uintptr_t gort_hi = 0;
  uintptr_t archives_lo = 0;
  uintptr_t archives_hi = 0;
};
StaticLinkText static_link_text();

// What sysmon remembers of a P's M between rounds to tell that its thread
// sleeps in the kernel (retake.cpp).
struct BlockedWatch {
  M* m = nullptr;
  uint32_t tick = 0;
  int64_t cpu = 0;
  int64_t since = 0;
};
// Adds delta to the calling thread's count of OS locks held (M::oslocks;
// oslock.cpp, oslock_absl.cpp). Only the M's own thread writes it and its
// signal handler reads it: plain load and store, as acquirem.
inline void oslock_add(int32_t delta) {
  M* m = getm();
  if (m == nullptr) return;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  m->oslocks.store(m->oslocks.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

// Registers for membarrier(2); without it, Ms the kernel blocks outside
// blocking() keep their P.
void retake_init();
// Tests turn the retake of blocked Ms off to check the other mechanisms alone.
extern std::atomic<bool> retake_blocked_allowed;
// Takes p from its M if the M's thread has slept in the kernel outside
// blocking() for about kBlockedNs, and hands p off; true if it did.
// *next_look: lowered to when sysmon should look again.
bool retake_blocked(P* p, BlockedWatch* w, int64_t now, int64_t* next_look);

// Whether the kernel has thread `tid` of this process asleep (state S or D
// in /proc: blocked, not waiting for a CPU).
bool thread_sleeps(int tid);

// ---- the stall report (stall.cpp) ----

// What sysmon remembers of a P's run to tell that it has gone on too long.
struct StallWatch {
  uint32_t tick = 0;
  int64_t since = 0;  // 0: not watching
  G* g = nullptr;
  bool reported = false;
};
// Reads the threshold (GORT_DEBUG=stallreport=MS); sysmon_start.
void stall_init();
// A sysmon round's look at a P that runs a goroutine: reports the run once
// it has lasted the threshold.
void stall_check_running(P* p, StallWatch* w, int64_t now);
// m, blocked in the kernel since `since` while running g, lost its P.
void stall_watch_blocked(M* m, G* g, int64_t since);
// Reports the Ms still blocked past the threshold; true while some are
// not reported yet (sysmon must not sleep for good meanwhile).
bool stall_check_blocked(int64_t now);

// ---- SIGQUIT (sigquit.cpp) ----

// Installs the handler (once per process); a SIGQUIT from now on is kept
// for this run's sysmon, whose thread is about to start. Called by
// sysmon_start, before it starts the thread.
void sigquit_arm();
// Routes the signal to this run's sysmon, the calling thread.
void sigquit_start();
void sigquit_stop();
// sysmon: between rounds, asleep (a SIGQUIT on sysmon then dumps at once).
void sigquit_sleeping(bool asleep);
// sysmon, each round: dumps every goroutine and exits if SIGQUIT came.
void sigquit_poll();

// Finds the main program's TLS block and the signal-return trampoline
// (after the preemption handler is installed).
void frames_init(int preempt_sig);
// Check 6 above, for g interrupted in context uc, on g's thread, from the
// signal handler. Reads the G's live stack: O(depth).
enum class TlsCheck : bool { kNo = false, kYes = true };
bool frames_preemptible(const G* g, const ucontext_t* uc, TlsCheck tls);

// For tests: when set, called by the trampoline's yield on the preempted
// goroutine's stack before it gives up the P, so that a test can unwind
// through the trampoline (tests/preempt/unwind_test.cpp).
extern std::atomic<void (*)()> async_preempt_hook;

// Code ranges where an interrupted goroutine may be preempted: kYes, code
// registered as preemptible; kClock, a clock function, preemptible only
// when its caller is (clock_caller_preemptible); kNo, anything else, and
// gort's own code whatever was registered.
enum class PcKind { kNo, kYes, kClock };
PcKind pc_kind(uintptr_t pc);
inline bool pc_preemptible(uintptr_t pc) { return pc_kind(pc) == PcKind::kYes; }
// From the preemption signal's handler, for a PC of kind kClock: unwinds
// the interrupted thread out of the clock functions (the vDSO, libc, an
// ASan interceptor) and says whether the code that called them is
// preemptible. A clock read inside a library that holds a lock (ASan's
// allocator, abseil's clock, gort itself) is not. O(frames) with libgcc's
// unwinder, which finds frame data through _dl_find_object: no lock, no
// allocation. False if the walk fails.
bool clock_caller_preemptible(uintptr_t interrupted_pc);
void preempt_ranges_init();
bool add_preemptible_range(uintptr_t lo, uintptr_t hi);
// For dl_iterate_phdr callbacks. Whether addr lies in one of the loaded
// (PT_LOAD) segments of the object `info` describes, executable ones only
// when `exec`:
bool object_contains(const dl_phdr_info* info, uintptr_t addr, bool exec);
// Adds the object's executable segments to the preemptible ranges.
void add_object_segments(const dl_phdr_info* info);

}  // namespace gort::internal

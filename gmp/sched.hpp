// gmp/sched.hpp — the scheduler's global state and internal API.
//
// Glossary (Go's words): G a goroutine, M an OS thread, P a processor (the
// right to run goroutines; there are Config::procs of them). An M holds at
// most one P; a G runs only on an M that holds a P.
//
// Lock order: every runtime lock has a rank, in one table
// (gort/detail/word_lock.hpp, GORT_LOCK_RANKS), checked at run time in a
// lock_rank build (gmp/lockrank.cpp) and, for who holds what, by clang
// (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED on the lock types of
// gmp/lock.hpp; docs/locks.md). Nothing may be held across
// a switch except through park's unlock function, which releases it on the
// next context once the parking G's context is saved.
//
// Spinning Ms (Go's protocol): an M that looks for work to steal is
// "spinning". At most one M is woken to spin when work appears (wakep only
// starts one if none spins), and a spinning M that finds work wakes another
// before running it. An M that stops spinning re-checks every run queue (the
// Ps' and the global one) after decrementing nmspinning, so work submitted
// concurrently is never stranded.
#pragma once

#include "gmp/room.hpp"

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "gmp/clock_rand.hpp"
#include "gmp/g.hpp"
#include "gmp/gdeque.hpp"
#include "gmp/lock.hpp"
#include "gmp/m.hpp"
#include "gmp/os/note.hpp"
#include "gmp/p.hpp"
#include "gmp/random_order.hpp"
#include "gmp/stack.hpp"
#include "gort/runtime.hpp"

namespace gort::internal {

// Subsystems that live outside gmp (the netpoller, sysmon, the slice
// timer) plug in here so that gmp knows nothing of sockets or signals. Each
// area fills its hooks in an install_*_hooks function (netpoll/netpoll.hpp,
// preempt/preempt.hpp, gmp/diag/diag.hpp), which run_main
// (stdlib/run_main.cpp) calls before the runtime starts; nothing installs
// itself. Until then each hook is a no-op ("nothing plugged in"), so that
// no caller checks for null; run_scheduler refuses a set that leaves one
// unwired (unwired()).
// Out of line (run.cpp): one address each, the library's, wherever a
// SchedHooks is made.
namespace nohook {
bool netpoll(int64_t, GQueue*);
void none();
int64_t zero();
int64_t sweep(int64_t);
void slice_started(P*, uint32_t);
void on_m(M*);
bool signal_m(M*);
void on_p(P*);
}  // namespace nohook
struct SchedHooks {
  // Polls the network. timeout_ns < 0 blocks, 0 does not. Appends readied
  // Gs to *out. Returns false if there is nothing to poll.
  bool (*netpoll)(int64_t timeout_ns, GQueue* out) = &nohook::netpoll;
  // Interrupts a blocking netpoll.
  void (*netpoll_break)() = &nohook::none;
  // Goroutines parked in the poller (for the deadlock check).
  int64_t (*netpoll_waiters)() = &nohook::zero;
  // sysmon's round: the poller looks for goroutines waiting on a
  // descriptor number closed behind its back and since reused
  // (netpoll/poll_desc.cpp, poll_sweep_stale). Returns when it wants to
  // look again (a nanotime; -1: only when something waits), which bounds
  // sysmon's sleep while every P is idle.
  int64_t (*netpoll_sweep)(int64_t now) = &nohook::sweep;
  // Create / destroy the poller (once per run).
  void (*netpoll_init)() = &nohook::none;
  void (*netpoll_fini)() = &nohook::none;
  // Start / stop the monitor thread (sysmon), once per run.
  void (*sysmon_start)() = &nohook::none;
  void (*sysmon_stop)() = &nohook::none;
  // Wakes sysmon from its deep sleep (every P was idle) when a P starts
  // running again; nothing while sysmon is not running.
  void (*sysmon_wake)() = &nohook::none;
  // A G whose last run was preempted starts a fresh slice (run `tick` of
  // p) on the calling M: arm the M's slice timer (preempt/signal.cpp).
  void (*slice_started)(P* p, uint32_t tick) = &nohook::slice_started;
  // Disarms m's slice timer (m enters blocking(); called on m).
  void (*slice_timer_stop)(M* m) = &nohook::on_m;
  // Sends m the runtime's signal for a traceback request (m->tb, see
  // unwind.hpp); false if it could not be sent.
  bool (*traceback_signal)(M* m) = &nohook::signal_m;
  // Asks the goroutine running on p to yield soon (stop_the_world).
  void (*preempt_p)(P* p) = &nohook::on_p;
  // The diagnostics (gmp/diag/), which sit above the core: installs the
  // fault handlers and readies tracebacks and panics (once per run, before
  // any goroutine); drops what symbolizing cached (at the run's end).
  void (*diag_init)() = &nohook::none;
  void (*diag_fini)() = &nohook::none;

  // The first hook still a no-op, by name; null when every one is wired.
  const char* unwired() const {
    const SchedHooks none;
#define GORT_HOOK_WIRED(h) \
  if (h == none.h) return #h;
    GORT_HOOK_WIRED(netpoll)
    GORT_HOOK_WIRED(netpoll_break)
    GORT_HOOK_WIRED(netpoll_waiters)
    GORT_HOOK_WIRED(netpoll_sweep)
    GORT_HOOK_WIRED(netpoll_init)
    GORT_HOOK_WIRED(netpoll_fini)
    GORT_HOOK_WIRED(sysmon_start)
    GORT_HOOK_WIRED(sysmon_stop)
    GORT_HOOK_WIRED(sysmon_wake)
    GORT_HOOK_WIRED(slice_started)
    GORT_HOOK_WIRED(slice_timer_stop)
    GORT_HOOK_WIRED(traceback_signal)
    GORT_HOOK_WIRED(preempt_p)
    GORT_HOOK_WIRED(diag_init)
    GORT_HOOK_WIRED(diag_fini)
#undef GORT_HOOK_WIRED
    return nullptr;
  }
};

// Go's _MaxGomaxprocs: the most Ps a run may have (set_procs refuses more).
inline constexpr int32_t kMaxProcs = 1024;
static_assert(kMaxProcs <= static_cast<int32_t>(RandomOrder::kMaxCount));

// Every P a run has made, by id, in a table that never moves, so that
// threads without a P (sysmon, an M about to block in the poller, a plain
// thread asking num_goroutine) may walk it while set_procs resizes: Ps
// [0, size()) are in use, those beyond (up to allocated()) are kDead and
// kept until the run ends. Iterating gives the Ps in use.
class AllP {
 public:
  int32_t size() const { return n_.load(std::memory_order_acquire); }
  int32_t allocated() const { return nalloc_.load(std::memory_order_acquire); }
  P* operator[](size_t i) const { return slot_[i]; }
  P* const* begin() const { return slot_; }
  P* const* end() const { return slot_ + size(); }
  // Only run() and procresize (the world stopped) change the table.
  void set(int32_t i, P* p) { slot_[i] = p; }
  void set_size(int32_t n, int32_t nalloc) {
    nalloc_.store(nalloc, std::memory_order_release);
    n_.store(n, std::memory_order_release);
  }

 private:
  P* slot_[kMaxProcs] = {};
  std::atomic<int32_t> n_{0};
  std::atomic<int32_t> nalloc_{0};
};

// What outlives a run: the process's, not a run's. Plain threads read and
// write it before, during, after and between runs, so it is never rebuilt.
struct Runtime {
  // A run is under way: set once the run's Sched is built, cleared once it
  // is torn down. Plain threads look here before they touch sched.
  std::atomic<bool> running{false};
  // Installed by run_main before each run and written only when they
  // change (the first run): a plain thread that outlived the last run may
  // still call them.
  SchedHooks hooks;
  // Plain-thread go() calls in progress (run() drains them before freeing).
  // A call raises it before it looks at `running`: a count per run would
  // lose the raise of a call caught between the two by a run's start.
  std::atomic<int32_t> external_go{0};
  // A plain thread's go() may start a goroutine: set once a run's state is
  // built, cleared when its main returns. One word, so that a plain thread
  // never pairs one run's `running` with the next run's `stopping`. The
  // stores and the loads beside external_go are sequentially consistent
  // (a Dekker pair): a call that raised external_go and then found this set
  // is seen by the drain that follows the clear.
  std::atomic<bool> go_open{false};
  // Plain-thread calls in progress that may ready a goroutine (the
  // deadlock detector stands down while > 0). A plain thread may wait in
  // one (a channel between plain threads, a descriptor) across a run's
  // start or end.
  std::atomic<int32_t> external_ops{0};
  // Runtime threads that are not Ms (sysmon, the stack pool's helper),
  // which the deadlock check tells from the program's.
  std::atomic<int32_t> nsystem_threads{0};
  // Goroutine stacks. Each run sets the pool up (init) and releases it
  // (destroy), but the fault handler asks it where an address lies (find)
  // from any thread at any time, and the nodes of its range list are freed
  // only with the pool (stack.hpp).
  StackPool stacks;
  // The same for the other stack size classes (GoOptions::stack), index
  // stack_class - 1 (stackclass.cpp).
  StackPool sized_stacks[kStackClasses - 1];
};

extern Runtime runtime;  // defined in run.cpp

// The pool of stack size class `cls` (G::stack_class).
inline StackPool& stack_pool(int cls) { return cls == 0 ? runtime.stacks : runtime.sized_stacks[cls - 1]; }
// Sets up the pools of the classes other than the default for a run, and
// releases them at its end, as StackPool::init and destroy (stackclass.cpp).
void stack_classes_init();
void stack_classes_destroy(bool keep_mapped);
// Which stack, of any class's pool, addr lies in (StackPool::find over
// every pool). Lock-free and async-signal-safe.
bool find_stack(const void* addr, StackSlot* out);
// Bytes enough to copy the live part of any goroutine stack that may
// exist (the largest class with a slab mapped), at most 1 MiB: the
// buffers tracebacks copy stacks into.
size_t stack_copy_cap();

// One run's scheduler state (Go's schedt). Each run builds it fresh from
// its Config, and its tear-down replaces it with an empty one (run.cpp): no
// field is ever reset by hand, so every field, a new one included, starts
// from its initialiser here. Inside a run any thread may use it; outside,
// only after looking at runtime.running (what a plain thread finds between
// runs is the empty state, which points at nothing freed).
struct Sched {
  // The state between runs: nothing in it, and stopping, so that a plain
  // thread's go() caught by the end of a run is dropped.
  Sched() = default;
  // A run's, on the thread that calls gort::run; cfg is resolved (procs,
  // time slice, thread limit). custom_procs: the program chose the number
  // of Ps.
  Sched(const Config& cfg, bool custom_procs);
  Sched(const Sched&) = delete;
  Sched& operator=(const Sched&) = delete;

  RuntimeMutex<LockRank::kSched> lock;
  M* midle ABSL_GUARDED_BY(lock) = nullptr;
  int32_t nmidle ABSL_GUARDED_BY(lock) = 0;
  int32_t mcount ABSL_GUARDED_BY(lock) = 0;
  // Ms asleep in stoplockedm, waiting for their locked G to be picked
  // (Go's nmidlelocked; lockedm.cpp).
  int32_t nmidlelocked ABSL_GUARDED_BY(lock) = 0;
  // Ms reserved by preemptions that lock their G to its M (lockedm.cpp),
  // at most kMaxPreemptLockedMs.
  std::atomic<int32_t> npreemptlocked{0};
  P* pidle ABSL_GUARDED_BY(lock) = nullptr;
  std::atomic<int32_t> npidle{0};
  std::atomic<int32_t> nmspinning{0};
  GDeque runq ABSL_GUARDED_BY(lock);
  std::atomic<int32_t> runqsize{0};
  // Dead Gs, a list per stack size class (G::stack_class; the default's
  // is [0]), so that a G is only reborn on a stack of its own class.
  GDeque gfree[kStackClasses] ABSL_GUARDED_BY(lock);
  // Written under lock; read without it as a hint (gfget, the scavenger).
  std::atomic<int32_t> ngfree[kStackClasses]{};
  // Scavenger state (under lock): the fewest Gs gfree held since the last
  // period began, when that was, and how many Gs are still to be released
  // (the last two are also read without the lock, as hints).
  int32_t ngfree_low[kStackClasses] ABSL_GUARDED_BY(lock) = {};
  std::atomic<int64_t> gfree_scavenged[kStackClasses]{};
  std::atomic<int32_t> gfree_debt[kStackClasses]{};
  // One M may block in netpoll at a time; it is not idle for checkdead.
  std::atomic<bool> netpoll_blocked{false};
  // When an M last polled the network. A run starts as Go's schedinit
  // does, "polled just now", so that sysmon polls 10 ms later if no M
  // ever does (0 would read as "never" and stop it for good).
  std::atomic<int64_t> last_poll{0};
  // Gs that ready_after_write queued on the writer's P, in this run.
  std::atomic<int64_t> readied_after_write{0};
  // While an M blocks in netpoll: the nanotime it will wake up by
  // (INT64_MAX: no timeout); 0 otherwise. A timer added earlier breaks it.
  std::atomic<int64_t> poll_until{0};

  AllP allp;
  // The order thieves visit the Ps in (steal_work); reset with allp's size
  // (run, procresize), the world stopped.
  RandomOrder steal_order;
  // Go's gomaxprocs: Ps in use (allp.size()); changed only by procresize,
  // read without a lock.
  int32_t procs() const { return allp.size(); }
  // Stopping the world (gmp/procresize.cpp): gcwaiting is set while the
  // Ps are being stopped and until they restart; stopwait (under lock)
  // counts the Ps still to stop, and the last one wakes stopnote.
  std::atomic<bool> gcwaiting{false};
  int32_t stopwait ABSL_GUARDED_BY(lock) = 0;
  Note stopnote;
  // One stop of the world at a time.
  std::atomic<bool> world_owner{false};
  // The number of Ps was chosen by the program (Config::procs,
  // GORT_MAXPROCS, set_procs): sysmon leaves it alone. Otherwise it follows
  // the default (CPUs and cgroup limit), as Go 1.25 does.
  std::atomic<bool> custom_procs{false};
  // A goroutine that moves the Ps to the default is on its way.
  std::atomic<bool> procs_update_pending{false};
  // Goroutines created and exited on Ps that set_procs removed.
  std::atomic<int64_t> retired_created{0};
  std::atomic<int64_t> retired_exited{0};
  std::vector<M*> allm ABSL_GUARDED_BY(lock);
  // Under lock: every G that exists (running, parked, runnable, or dead on a
  // free list with its stack), linked through G::allg_prev/allg_next; a
  // released G leaves it. Oldest first, as goroutine dumps list them.
  G* allg ABSL_GUARDED_BY(lock) = nullptr;
  G* allg_tail ABSL_GUARDED_BY(lock) = nullptr;
  int64_t nallg ABSL_GUARDED_BY(lock) = 0;

  // Main has returned: Ms leave their loops and go() is dropped. Also set
  // between runs (see Sched()).
  std::atomic<bool> stopping{true};
  std::atomic<int64_t> goidgen{0};
  std::atomic<int64_t> mnext{0};
  // Goroutines started from plain threads (their exits count on a P).
  std::atomic<int64_t> external_created{0};
  // Goroutines that exited on an M whose P sysmon had taken (no P to
  // count them on).
  std::atomic<int64_t> detached_exited{0};
  // Ms inside gort::blocking() (and the system-call protocol of the libc
  // hooks).
  std::atomic<int32_t> nblocking{0};
  // Stall reports sysmon made in this run (preempt/stall.cpp).
  std::atomic<int64_t> stall_reports{0};
  // A clock for stamps that need no precision (G::waitsince): sysmon
  // stores nanotime() every round, and whoever wakes it from its deep sleep
  // stores it first, so it is never more than a sysmon round behind while
  // goroutines run. On its own cache line: parking reads it.
  alignas(64) std::atomic<int64_t> coarse_now{0};
  // A dying process stopped its threads to print their goroutines
  // (traceback.cpp): sysmon stops acting and a new M never starts.
  alignas(64) std::atomic<bool> frozen{false};
  // sysmon is in a long sleep because every P is idle; wake it when one
  // starts running again.
  std::atomic<bool> sysmon_wait{false};

  // Signal mask for every M (that of the thread that called run).
  sigset_t m_sigmask{};
  Config cfg;
  int64_t time_slice_ns = 0;
};

extern Sched sched;  // defined in schedule.cpp

// ---- park / ready: the one mechanism every blocking primitive uses ----

// Parks the running goroutine. Once its context is saved, `unlock(g, arg)`
// runs on the next context (holding no runtime lock); it typically releases
// the lock that protects the wait structure in which g was recorded. If it
// returns false, g is readied immediately (the wait was cancelled).
void park(bool (*unlock)(G* g, void* arg), void* arg, WaitReason reason);

// Makes a parked goroutine runnable. Callable from any goroutine, from
// runtime threads and from plain threads. From a goroutine, g goes to this
// P's runnext slot (it runs next, on this P, keeping a hand-off pair hot).
void ready(G* g);

// Puts a batch of runnable Gs (status already kRunnable) on the global queue
// and starts Ms for them.
void inject(GQueue* q);

// After a write to a connection whose other end is in this process (the
// stdlib's NetFD): g, the other end's reader, which the write has just made
// runnable (poll_wake_reader), goes to this P's runnext without waking an
// M. The writer as a rule waits for the answer next, and g then runs here,
// finding the data in this CPU's cache, where the poller (an M blocked in
// it, or stealing) would run it on another CPU. From a plain thread or
// inside gort::blocking, or if sysmon took our P, g goes where ready()
// puts it, and an M is woken for it.
void ready_after_write(G* g);

// Go's Gosched: the running G goes to the back of the queue.
void gosched();
// A preempted G yields to the global queue. How: at a gort call
// (kCooperative), or from the preemption signal's trampoline, keeping its
// thread (kAsyncLocked, lockedm.cpp) or not (kAsync: more Ms than
// kMaxPreemptLockedMs wait for their goroutines already).
enum class PreemptKind : uint8_t { kCooperative, kAsync, kAsyncLocked };
void preempt_park(G* g, PreemptKind kind = PreemptKind::kCooperative);

// ---- locked Ms (lockedm.cpp) ----

// How many Ms may wait for their asynchronously preempted goroutines at
// once. Past it a preemption moves the goroutine as a cooperative one does
// (and the signal handler then declines where the goroutine holds a
// thread-local address).
inline constexpr int32_t kMaxPreemptLockedMs = 1024;
// Reserves a locked M for the preemption being injected; async-signal-safe.
bool preempt_lock_reserve();
// The next G for an M that has a locked G (m->lockedg) which just switched
// away: that G itself, once this M holds a P for it (Go's stoplockedm).
// Null when the runtime stops.
G* lockedg_next(M* m);
// m (on g0, holding a P) found g, which is locked to another M: hands its P
// to that M and sleeps until given one (Go's startlockedm).
void startlockedm(M* m, G* g);
// begin_stop: wakes the Ms asleep in stoplockedm. Sched::lock held.
void wake_locked_ms_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock);

// ---- Ms and Ps ----
void wakep();
// Stopping the world (Go's stopTheWorld / startTheWorld, procresize.cpp).
// stop_the_world is called by a goroutine: it returns when every other P
// is stopped (their goroutines preempted and queued), holding acquirem and
// its own P (stopped too). start_the_world(n) resizes to n Ps, restarts
// them, and releases. No Go code runs elsewhere in between: only the
// caller, Ms inside blocking() (which find no P when they leave it) and
// plain threads (whose readied goroutines wait on the queues).
void stop_the_world();
void start_the_world(int32_t procs);
// The default number of Ps (Go 1.25): the CPUs the process may run on,
// lowered to its cgroup's CPU limit rounded up (at least 2) unless
// GORT_DEBUG=containermaxprocs=0. procs_default_init (run, after the
// debug variables) finds the cgroup; procs_update_check (sysmon, each
// round) moves the Ps to a changed default about once a second unless the
// program chose the number or GORT_DEBUG=updatemaxprocs=0.
void procs_default_init();
void procs_default_fini();  // closes the cgroup files (a run leaves no fd)
int default_procs();
void procs_update_check(int64_t now);
#ifdef GORT_TESTING
// Where procs_default_init looks (a fake /proc/self and a prefix for the
// cgroup directories); empty strings restore the real ones.
void procs_cgroup_root_for_test(const std::string& proc_self, const std::string& fs_prefix);
#endif
// Calls fn once when the current run ends (after every goroutine stopped,
// before the poller is destroyed), then forgets it. For subsystems that set
// up process-wide state the first time a run uses them (os/signal's
// handlers). Registering the same fn twice in a run calls it once.
void at_run_end(void (*fn)());
// An M with a P that finds the world stopping: stops its P and sleeps.
void gcstopm(M* m);
// Sched::lock held: if the world is stopping, stops p (which its M has
// released) instead of putting it on the idle list, and returns true.
bool stop_p_if_waiting_locked(P* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock);
// Whether the M that startm starts spins (looks for work to steal; the
// caller has counted it in nmspinning already), Go's `spinning` argument.
enum class Spinning : bool { kNo = false, kYes = true };
// Starts an M to run p (or any idle P when null).
void startm(P* p, Spinning spinning);
// Starts one M ahead of need when an idle P has no idle M waiting, on the
// idle list from before its thread runs: the program's first `go` then
// wakes a thread instead of creating one on its own path (~60 µs here; Go's
// runtime has its threads before main runs, started for its GC workers).
// run() calls it before the main goroutine starts, so the thread has the
// caller's attributes as any M has (one started by sysmon inherited its
// 1 µs timer slack and its name, and spawn_join ran 10-15 % slower).
void mprestart();
// Go's entersyscallblock: entersyscall for a call known to block for long
// (name resolution, fsync, waiting for a child): the P is handed to another
// M at once instead of after sysmon's look. exitsyscall ends it. If the M
// holds an OS lock, exitsyscall keeps the goroutine on its thread.
void entersyscallblock();
// Go's checkdead, called by stopm when an M goes idle (checkdead.cpp): if
// no M is running a goroutine and nothing can ever make one runnable, prints
// Go's deadlock report and exits with status 2.
void check_dead_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock);
// Go's handoffp: p (taken from an M stuck in blocking()) gets an M if it
// has work, else goes idle. p must have no M and be in neither list.
void handoffp(P* p);
// Runtime critical sections (Go's acquirem/releasem): no async preemption.
// Only m's own thread writes m->locks (its signal handler only reads it), so
// a plain load and store suffice: no locked instruction.
inline void acquirem(M* m) {
  m->locks.store(m->locks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
}
inline void releasem(M* m) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  m->locks.store(m->locks.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

// The P of the calling M, or null: sysmon may have taken it while the
// thread slept in the kernel outside blocking(); then this gets an idle P
// if there is one, as exitsyscall does (ensurep_slow, syscall.cpp). Call
// under acquirem and use the result only until releasem: the pair is the
// M's side of a Dekker with sysmon (acquirem's store, then this load; sysmon
// stores kDeciding, runs membarrier(2), then loads m->locks), so
// sysmon never takes a P that the M is using (M::retake, gmp/m.hpp).
P* ensurep_slow(M* m);
inline P* ensurep(M* m) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (m->retake.load(std::memory_order_relaxed) == RetakeState::kNone) [[likely]] return m->p;
  return ensurep_slow(m);
}

// Called by switch.cpp on the context that was switched to, once the
// previous context `prev` is saved: carries out the M's pending AfterSwitch.
void after_switch(G* prev);
// Recycles a dead G with its stack (newproc.cpp). Called on the context
// that follows g's last switch, so that g's stack is no longer in use: g
// may be released (destroyed, its stack given back) before gfput returns.
void gfput(P* p, G* g);
// The same onto the global free list; Sched::lock held.
void gfput_global_locked(G* g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock);
// How much gfree_scavenge releases: the Gs the global free list did not
// need for a whole period, or, when every P is idle, all of the excess.
enum class Scavenge : bool { kUnneeded = false, kAllExcess = true };
// Releases dead Gs (with their stacks) beyond StackPool::kWarmLimit, a batch
// per call. Called by sysmon; returns how many went.
int gfree_scavenge(int64_t now, Scavenge what);
// Body of every goroutine (runs the closure, then exits).
[[noreturn]] void goroutine_main(G* self);
// Destroys g's goroutine-local values (gls.cpp); called by goroutine_main
// on g's own stack when g's closure returns.
void gls_destroy(G* g);

// gort::run (run.cpp): brings the runtime up with `hooks` installed, runs
// body on the main goroutine, and brings it down. Called by run_main.
int run_scheduler(void (*body)(void* arg, int* result), void* arg, const Config& cfg,
                  const SchedHooks& hooks);

// The scheduler loop on an M's g0; returns when the runtime stops.
void schedule_loop();
// Runs the scheduler loop on the calling thread (the one that called run).
void mstart_on_current_thread(M* m);

// Puts g on the global run queue; Sched::lock must be held.
void globrunqput_locked(G* g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock);

// Each M's alternate signal stack, for the fault and preemption handlers
// (sigstack.cpp).
void m_signal_stack_init(M* m);
void m_signal_stack_free(M* m);

}  // namespace gort::internal

// gmp/procresize.cpp — stopping the world and changing the number of Ps
// (Go's stopTheWorld, startTheWorld and procresize; gort::set_procs is
// Go's runtime.GOMAXPROCS).
//
// Stopping the world, as Go does it: the stopper sets gcwaiting and counts
// in stopwait the Ps still to stop, then stops every P nobody runs on (the
// idle list, and Ps whose M is inside blocking(): kBlocking -> kStopped,
// the same CAS sysmon's retake and exitsyscall race for). Every other P
// stops itself: its M, at its next look for work (find_runnable) or when
// it would put the P on the idle list (pidleput, also reached from
// handoffp), marks it kStopped and decrements stopwait; the last one wakes
// the stopper. The stopper preempts the goroutines still running (every
// millisecond until they stop), and a preempted or parking goroutine's M
// goes to g0 instead of switching to its next local G (next_local).
//
//   | P status  | who stops it                                      |
//   |-----------|---------------------------------------------------|
//   | kIdle     | the stopper (pidleget), or pidleput when it comes |
//   |           | back to the idle list in transit (handoffp)       |
//   | kBlocking | the stopper's CAS (at every retry), or if       |
//   |           | exitsyscall wins the CAS,                         |
//   |           | the M, as for kRunning                            |
//   | kRunning  | its M: find_runnable (gcstopm) or pidleput        |
//   | the       | itself (it keeps running, under acquirem)         |
//   | stopper's |                                                   |
//
// While the world is stopped nothing but the stopper runs goroutines: an M
// leaving blocking() finds its P taken and no idle P (its G waits on the
// global queue), sysmon skips its retake, and what plain threads ready
// waits on the queues. Lock order: Sched::lock, then a timer heap's lock
// (procresize moves the timers of removed Ps).
#include <algorithm>
#include <future>
#include <mutex>

#include "gmp/os/cgroup_cpu.hpp"
#include "gmp/os/debugvars.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/proc.hpp"
#include "gmp/race/race.hpp"
#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"
#include "gort/runtime.hpp"

namespace gort::internal {
namespace {

constexpr int64_t kStopRetryNs = 1000 * 1000;

// Sched::lock held, the world stopped. A P that leaves use gives what it
// holds to the ones that stay: its runnable goroutines to the global
// queue, its timers to P 0, its free Gs to the global free list; its
// goroutine counts are kept with the runtime's.
void destroy_p_locked(P* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  GQueue runnable;
  p->runq.drain(&runnable);
  while (G* g = runnable.pop()) globrunqput_locked(g);
  // kDead first: a timer added to this P from now on sees it and goes to
  // P 0 instead (timer.cpp add_locked).
  set_status(p, PStatus::kStopped, PStatus::kDead, std::memory_order_seq_cst);
  timers_move(p, sched.allp[0]);
  while (G* g = p->gfree.pop()) gfput_global_locked(g);
  p->gfreecnt.store(0, std::memory_order_relaxed);
  if (p->nstacks > 0) {
    runtime.stacks.free(p->stacks, static_cast<size_t>(p->nstacks));
    p->nstacks = 0;
  }
  // The other stack size classes' (each G onto its own class's list).
  for (int c = 1; c < kStackClasses; c++) {
    P::SizedCache& sc = p->sized[c - 1];
    while (G* g = sc.gfree.pop()) gfput_global_locked(g);
    if (sc.nstacks > 0) {
      stack_pool(c).free(sc.stacks, static_cast<size_t>(sc.nstacks));
      sc.nstacks = 0;
    }
  }
  p->goid_next = p->goid_end = 0;
  p->preempted = nullptr;
  sched.retired_created.fetch_add(p->created.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  sched.retired_exited.fetch_add(p->exited.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
}

// Sched::lock held, the world stopped: Ps [0, n) are in use afterwards, each
// kStopped (the caller restarts them). The calling M keeps a P: its own,
// or P 0 if its own was removed.
void procresize_locked(M* m, int32_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  int32_t old = sched.procs();
  int32_t nalloc = sched.allp.allocated();
  for (int32_t i = old; i < n; i++) {
    P* p = sched.allp[static_cast<size_t>(i)];
    PStatus from = PStatus::kDead;  // removed earlier, back in use
    if (p == nullptr) {
      p = new_untracked<P>();
      p->id = i;
      timers_init(p);
      sched.allp.set(i, p);
      nalloc = i + 1;
      from = PStatus::kIdle;
    }
    set_status(p, from, PStatus::kStopped, std::memory_order_relaxed);
  }
  for (int32_t i = n; i < old; i++) destroy_p_locked(sched.allp[static_cast<size_t>(i)]);
  if (m->p->id >= n) {
    P* p0 = sched.allp[0];
    relaxed_store<M*>(m->p->m, nullptr);
    m->p = p0;
    relaxed_store(p0->m, m);
  }
  sched.allp.set_size(n, nalloc);
  sched.steal_order.reset(static_cast<uint32_t>(n));
}

// Sched::lock held. Counts one more P stopped.
void stopped_one_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  if (--sched.stopwait == 0) sched.stopnote.wakeup();
  if (sched.stopwait < 0) fatal("stop_the_world: negative stopwait");
}

// Sched::lock held. Stops the Ps whose M is inside blocking(); returns
// whether Ps remain to stop. Called again at every retry: a goroutine that
// calls blocking() in a loop takes its P back in exitsyscall's fast path
// and gives it up again, and is seldom kRunning when the stopper looks.
bool stop_blocking_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  for (P* p : sched.allp) {
    if (cas_status(p, PStatus::kBlocking, PStatus::kStopped)) stopped_one_locked();
  }
  return sched.stopwait > 0;
}

}  // namespace

bool stop_p_if_waiting_locked(P* p) {
  if (!sched.gcwaiting.load(std::memory_order_relaxed)) return false;
  set_status(p, PStatus::kIdle, PStatus::kStopped, std::memory_order_relaxed);
  stopped_one_locked();
  return true;
}

void gcstopm(M* m) {
  {
    MutexLock lock(sched.lock);
    P* p = releasep(m);
    if (m->spinning) {
      relaxed_store(m->spinning, false);
      sched.nmspinning.fetch_sub(1, std::memory_order_acq_rel);
    }
    if (!stop_p_if_waiting_locked(p)) {
      // The world restarted between the caller's look and the lock.
      pidleput(p);
    }
  }
  stopm(m);
}

void stop_the_world() {
  // One stopper at a time; the others wait their turn as goroutines.
  while (sched.world_owner.exchange(true, std::memory_order_acquire)) gosched();
  M* m = getm();
  acquirem(m);
  // Our P, or one like exitsyscall's, if sysmon took ours while this thread
  // slept in the kernel.
  while (ensurep(m) == nullptr) {
    releasem(m);
    gosched();
    m = getm();
    acquirem(m);
  }
  sched.stopnote.clear();
  bool wait;
  {
    MutexLock lock(sched.lock);
    sched.gcwaiting.store(true, std::memory_order_seq_cst);
    sched.stopwait = sched.procs();
    set_status(m->p, PStatus::kRunning, PStatus::kStopped, std::memory_order_relaxed);
    sched.stopwait--;
    while (P* p = pidleget()) {
      set_status(p, PStatus::kIdle, PStatus::kStopped, std::memory_order_relaxed);
      sched.stopwait--;
    }
    wait = stop_blocking_locked();
  }
  while (wait) {
    // Ask every P still running to stop (again: a signal may land where the
    // goroutine cannot be interrupted).
    for (P* p : sched.allp) {
      if (p != m->p && p->status.load(std::memory_order_acquire) == PStatus::kRunning) {
        runtime.hooks.preempt_p(p);
      }
    }
    if (sched.stopnote.sleep_for(kStopRetryNs)) break;
    MutexLock lock(sched.lock);
    wait = stop_blocking_locked();
  }
}

void start_the_world(int32_t procs) {
  M* m = getm();
  P* with_work[kMaxProcs];
  int nwork = 0;
  bool shrunk = procs < sched.procs();
  {
    MutexLock lock(sched.lock);
    if (procs != sched.procs()) procresize_locked(m, procs);
    sched.gcwaiting.store(false, std::memory_order_seq_cst);
    set_status(m->p, PStatus::kStopped, PStatus::kRunning);
    for (P* p : sched.allp) {
      if (p == m->p) continue;
      set_status(p, PStatus::kStopped, PStatus::kIdle, std::memory_order_relaxed);
      if (p->runq.empty()) {
        pidleput(p);
      } else {
        with_work[nwork++] = p;
      }
    }
  }
  for (int i = 0; i < nwork; i++) startm(with_work[i], Spinning::kNo);
  if (sched.runqsize.load(std::memory_order_acquire) > 0 || nwork > 0) wakep();
  // The removed Ps' timers are on P 0 now: a poller sleeping with a timeout
  // computed without them recomputes it; with every P idle, an M is woken
  // to serve them.
  if (shrunk && timers_first(sched.allp[0]) != 0) {
    if (sched.poll_until.load(std::memory_order_acquire) != 0) runtime.hooks.netpoll_break();
    wakep();
  }
  sched.world_owner.store(false, std::memory_order_release);
  releasem(m);
}

namespace {

CgroupCpu g_cgroup;
std::string g_cgroup_proc_self;  // empty: /proc/self
std::string g_cgroup_prefix;
int64_t g_procs_checked = 0;  // sysmon's last look

constexpr int64_t kProcsUpdateEveryNs = 1000 * 1000 * 1000;  // Go's sysmon: once a second

// Called by a goroutine: the world stopped, `n` Ps (or, with n == 0, the
// default unless the program chose a number meanwhile), restarted.
// Returns the previous number.
int resize(int n) {
  stop_the_world();
  int prev = sched.procs();
  int want = n;
  if (want == 0) want = sched.custom_procs.load(std::memory_order_acquire) ? prev : default_procs();
  start_the_world(std::min(want, kMaxProcs));
  return prev;
}

// resize from anywhere: a plain thread (or one inside blocking()) has no P
// to stop the world from, so a goroutine does it while the thread waits.
int resize_from_anywhere(int n) {
  M* m = getm();
  if (m == nullptr || m->curg == nullptr || m->in_blocking.load(std::memory_order_relaxed)) {
    std::promise<int> done;
    auto result = done.get_future();
    go([&] { done.set_value(resize(n)); });
    return result.get();
  }
  return resize(n);
}

}  // namespace

#ifdef GORT_TESTING
void procs_cgroup_root_for_test(const std::string& proc_self, const std::string& fs_prefix) {
  g_cgroup_proc_self = proc_self;
  g_cgroup_prefix = fs_prefix;
}
#endif

void procs_default_init() {
  // Before sysmon starts, and no goroutine runs yet: nothing reads g_cgroup.
  if (debug.containermaxprocs > 0) {
    cgroup_cpu_open(&g_cgroup, g_cgroup_proc_self.empty() ? "/proc/self" : g_cgroup_proc_self, g_cgroup_prefix);
  } else {
    cgroup_cpu_close(&g_cgroup);
  }
  g_procs_checked = 0;
}

void procs_default_fini() { cgroup_cpu_close(&g_cgroup); }

int default_procs() {
  return std::min(cgroup_adjust_procs(affinity_cpus(), cgroup_cpu_limit(g_cgroup)), kMaxProcs);
}

void procs_update_check(int64_t now) {
  if (debug.updatemaxprocs == 0 || sched.custom_procs.load(std::memory_order_relaxed)) return;
  if (g_procs_checked != 0 && now - g_procs_checked < kProcsUpdateEveryNs) return;
  g_procs_checked = now;
  if (default_procs() == sched.procs()) return;
  if (sched.procs_update_pending.exchange(true, std::memory_order_acq_rel)) return;
  // Go's updateMaxProcsG: a goroutine stops the world (sysmon cannot), and
  // looks at the default again with the world stopped.
  go([] {
    resize(0);
    sched.procs_update_pending.store(false, std::memory_order_release);
  });
}

}  // namespace gort::internal

namespace gort {

int set_procs(int n) {
  using namespace internal;
  if (!runtime.running.load(std::memory_order_acquire)) {
    throw panic_error("gort::set_procs: the runtime is not running");
  }
  if (n < 1) return sched.procs();  // Go: n < 1 only asks
  // Before the stop: a default update that stops the world after this call
  // sees the program's choice and leaves it.
  sched.custom_procs.store(true, std::memory_order_release);
  int32_t want = std::min(n, kMaxProcs);
  int32_t prev = sched.procs();
  if (want == prev) return prev;
  return resize_from_anywhere(want);
}

int set_default_procs() {
  using namespace internal;
  if (!runtime.running.load(std::memory_order_acquire)) {
    throw panic_error("gort::set_default_procs: the runtime is not running");
  }
  sched.custom_procs.store(false, std::memory_order_release);
  return resize_from_anywhere(0);
}

}  // namespace gort
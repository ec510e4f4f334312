// gmp/run.cpp — gort::run: bringing the runtime up and down.
//
// The thread that calls run becomes M0 and runs the scheduler loop on its
// own stack. When the main goroutine returns, the runtime is marked
// stopping: idle Ms are woken, every M leaves its scheduler loop at its next
// look for work, M0 joins them, and everything (Gs, then the stacks they live
// on, Ps, Ms) is freed.
// Goroutines still runnable or parked are abandoned, as in Go; closures of
// goroutines that never started are destroyed.
//
// gort::run enters through run_main (stdlib/run_main.cpp), which installs the
// hooks of the areas above gmp (the poller, sysmon, the slice timer) and
// calls run_scheduler here: gmp never names them.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "gmp/os/debugvars.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/race/race.hpp"
#include "gmp/race/sanitizer.hpp"
#include "gmp/switch.hpp"
#include <gort/detail/race.hpp>
#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {
namespace {

std::atomic<bool> g_active{false};

struct MainCtx {
  void (*body)(void*, int*);
  void* arg;
  int result = 0;
};

void begin_stop() {
  sched.stopping.store(true, std::memory_order_release);
  MutexLock lock(sched.lock);
  while (M* m = sched.midle) {
    sched.midle = m->link;
    m->link = nullptr;
    sched.nmidle--;
    m->nextp = nullptr;
    m->park.wakeup();
  }
  wake_locked_ms_locked();
  sched.hooks.netpoll_break();
}

void main_invoke(void* storage) {
  MainCtx* ctx = *static_cast<MainCtx**>(storage);
  ctx->body(ctx->arg, &ctx->result);
  begin_stop();
}

void main_destroy(void*) {}

RuntimeMutex<LockRank::kRunEnd> g_run_end_mu;
std::vector<void (*)()> g_run_end;

void run_end_callbacks() {
  std::vector<void (*)()> fns;
  {
    MutexLock lock(g_run_end_mu);
    fns.swap(g_run_end);
  }
  for (auto fn : fns) fn();
}

// Also records whether the program chose the number (then sysmon never
// changes it).
int resolve_procs(int requested) {
  // Go clamps GOMAXPROCS to _MaxGomaxprocs the same way.
  sched.custom_procs.store(true, std::memory_order_relaxed);
  if (requested > 0) return std::min(requested, kMaxProcs);
  if (const char* env = std::getenv("GORT_MAXPROCS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return static_cast<int>(std::min<long>(v, kMaxProcs));
  }
  sched.custom_procs.store(false, std::memory_order_relaxed);
  return default_procs();
}

// Go's default thread limit (debug.SetMaxThreads).
constexpr int kDefaultMaxThreads = 10000;

int resolve_max_threads(int requested) {
  if (requested > 0) return requested;
  if (const char* env = std::getenv("GORT_MAXTHREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return static_cast<int>(std::min<long>(v, INT32_MAX));
  }
  return kDefaultMaxThreads;
}

// No other runtime thread exists yet: nothing to lock against.
void reset_sched(const Config& cfg) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  sched.midle = nullptr;
  sched.nmidle = 0;
  sched.nmidlelocked = 0;
  sched.npreemptlocked.store(0);
  sched.mcount = 0;
  sched.pidle = nullptr;
  sched.npidle.store(0);
  sched.nmspinning.store(0);
  sched.runq.clear();
  sched.runqsize.store(0);
  sched.gfree.clear();
  sched.ngfree.store(0);
  sched.ngfree_low = 0;
  sched.gfree_scavenged.store(0);
  sched.gfree_debt.store(0);
  sched.netpoll_blocked.store(false);
  sched.procs_update_pending.store(false);
  // As Go's schedinit: "polled just now", so that sysmon polls 10 ms from
  // now if no M ever does (0 would read as "never" and stop it for good).
  sched.last_poll.store(nanotime());
  sched.poll_until.store(0);
  sched.gcwaiting.store(false);
  sched.stopwait = 0;
  sched.world_owner.store(false);
  sched.retired_created.store(0);
  sched.retired_exited.store(0);
  sched.allm.clear();
  sched.allg = sched.allg_tail = nullptr;
  sched.nallg = 0;
  sched.stopping.store(false);
  sched.goidgen.store(0);
  sched.mnext.store(0);
  sched.external_created.store(0);
  sched.readied_after_write.store(0);
  sched.detached_exited.store(0);
  sched.external_ops.store(0);
  sched.external_go.store(0);
  sched.nblocking.store(0);
  sched.stall_reports.store(0);
  sched.coarse_now.store(nanotime());
  sched.frozen.store(false);
  sched.cfg = cfg;
  sched.time_slice_ns = absl::ToInt64Nanoseconds(cfg.time_slice);
}

void join_ms() {
  // Join every other M; more may have been started while we stopped.
  size_t joined = 1;
  for (;;) {
    std::vector<M*> ms;
    {
      MutexLock lock(sched.lock);
      if (joined == sched.allm.size()) break;
      ms.assign(sched.allm.begin() + static_cast<long>(joined), sched.allm.end());
    }
    for (M* m : ms) {
      if (m->thread.joinable()) m->thread.join();
    }
    joined += ms.size();
  }
}

// Every other M has been joined: nothing to lock against.
// Everything every goroutine did happens before the rest of the tear-down
// and what the program does after run() (docs/race.md): exited goroutines
// released on the way out (goroutine_main); an abandoned one's fiber does
// it now.
void race_all_goroutines_done() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if constexpr (!kRaceEnabled) return;
  void* self = tsan_current_fiber();
  for (G* g = sched.allg; g != nullptr; g = g->allg_next) {
    if (g->tsan_fiber == nullptr) continue;
    tsan_switch_to(g->tsan_fiber);
    race_release(&race_run_end);
    tsan_switch_to(self);
  }
  race_acquire(&race_run_end);
}

void teardown() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  race_all_goroutines_done();
  // Gs first: each lives at the top of its stack, which the pool unmaps
  // below. (The Ms' g0s are members of their Ms, not on goroutine stacks.)
  // A G owns nothing but, before it starts, its closure, and every G that
  // has not started is on a run queue: so only the run queues are walked.
  // Walking allg would touch a page per goroutine (a third of the tear-down
  // after a million parked goroutines). The sanitizer builds walk allg: TSan
  // has a fiber per G to free, and LeakSanitizer needs to know whether any
  // goroutine was abandoned.
  static_assert(std::is_trivially_destructible_v<G>);
  auto destroy_unstarted = [](G* g) {
    if (!g->started && g->status.load() == GStatus::kRunnable && g->destroy != nullptr) {
      g->destroy(g->closure);
      g->destroy = nullptr;
    }
  };
  bool abandoned = false;
  if constexpr (kRaceEnabled || kAsanEnabled) {
    for (G* g = sched.allg, *next; g != nullptr; g = next) {
      next = g->allg_next;
      GStatus st = g->status.load();
      if (g->started && st != GStatus::kDead && st != GStatus::kIdle) abandoned = true;
      destroy_unstarted(g);
      tsan_release_fiber(&g->tsan_fiber);
    }
  } else {
    int32_t np = sched.allp.allocated();
    for (int32_t i = 0; i < np; i++) {
      GQueue q;
      sched.allp[static_cast<size_t>(i)]->runq.drain(&q);
      while (G* g = q.pop()) destroy_unstarted(g);
    }
    while (G* g = sched.runq.pop_front()) destroy_unstarted(g);
  }
  sched.allg = sched.allg_tail = nullptr;
  sched.nallg = 0;
  // Abandoned timers drop their references while this thread is still an
  // M: a reference hook takes runtime locks, which look at the current M.
  int32_t nalloc = sched.allp.allocated();
  for (int32_t i = 0; i < nalloc; i++) timers_destroy(sched.allp[static_cast<size_t>(i)]);
  setm(nullptr);  // this thread's M is deleted next
  for (M* m : sched.allm) delete_untracked(m);
  sched.allm.clear();
  sched.allp.set_size(0, 0);
  for (int32_t i = 0; i < nalloc; i++) {
    delete_untracked(sched.allp[static_cast<size_t>(i)]);
    sched.allp.set(i, nullptr);  // procresize makes a P where it finds none
  }
#ifdef GORT_ASAN
  // Under LeakSanitizer, heap owned through an abandoned goroutine's frames
  // must stay reachable (docs/runtime.md: no leaks under ASan/LSan): keep its stacks.
  sched.stacks.destroy(/*keep_mapped=*/abandoned);
#else
  (void)abandoned;
  sched.stacks.destroy();
#endif
}

}  // namespace

void at_run_end(void (*fn)()) {
  MutexLock lock(g_run_end_mu);
  for (auto f : g_run_end) {
    if (f == fn) return;
  }
  g_run_end.push_back(fn);
}

namespace nohook {
bool netpoll(int64_t, GQueue*) { return false; }
void none() {}
int64_t zero() { return 0; }
int64_t sweep(int64_t) { return -1; }
void slice_started(P*, uint32_t) {}
void on_m(M*) {}
bool signal_m(M*) { return false; }
void on_p(P*) {}
}  // namespace nohook

int run_scheduler(void (*body)(void*, int*), void* arg, const Config& cfg_in, const SchedHooks& hooks) {
  if (g_active.exchange(true)) {
    throw panic_error("gort::run: the runtime is already running");
  }
  // Before anything starts. The hooks stay installed after the run, and are
  // written only when they change (the first run): a plain thread that
  // outlived the last run may still read them.
  // run_main wires every area; a hook left unwired is a broken build.
  if (const char* name = hooks.unwired()) {
    write_stderr("gort::run: SchedHooks::");
    write_stderr(name);
    write_stderr(" is not wired\n");
    fatal("gort::run: an area of the runtime is not wired in (stdlib/run_main.cpp)");
  }
  if (std::memcmp(&sched.hooks, &hooks, sizeof hooks) != 0) sched.hooks = hooks;
  Config cfg = cfg_in;
  parse_debugvars(std::getenv("GORT_DEBUG"));
  procs_default_init();
  cfg.procs = resolve_procs(cfg.procs);
  if (cfg.time_slice <= absl::ZeroDuration()) cfg.time_slice = absl::Milliseconds(10);
  cfg.max_threads = resolve_max_threads(cfg.max_threads);
  cfg.hook_libc = cfg.hook_libc && debug.hooklibc != 0;
  reset_sched(cfg);
  pthread_sigmask(SIG_SETMASK, nullptr, &sched.m_sigmask);
  sched.stacks.init(cfg.stack_size);
  sched.hooks.diag_init();
  sched.hooks.netpoll_init();

  for (int i = 0; i < cfg.procs; i++) {
    P* p = new_untracked<P>();
    p->id = i;
    timers_init(p);
    sched.allp.set(i, p);
  }
  sched.allp.set_size(cfg.procs, cfg.procs);
  sched.steal_order.reset(static_cast<uint32_t>(cfg.procs));
  M* m0 = new_untracked<M>();
  m0->id = sched.mnext.fetch_add(1);
  m0->is_main = true;
  m0->g0.is_g0 = true;
  m0->g0.status.store(GStatus::kRunning);
  m0->fastrand_state = static_cast<uint64_t>(nanotime()) | 1;
  P* p0 = sched.allp[0];
  {
    // No other M exists yet; the lock only states the rule.
    MutexLock lock(sched.lock);
    sched.allm.push_back(m0);
    sched.mcount = 1;
    m0->p = p0;
    relaxed_store(p0->m, m0);
    p0->status.store(PStatus::kRunning);
    for (int i = cfg.procs - 1; i >= 1; i--) {
      P* p = sched.allp[static_cast<size_t>(i)];
      p->link = sched.pidle;
      sched.pidle = p;
      sched.npidle.fetch_add(1);
    }
  }
  sched.running.store(true, std::memory_order_release);

  MainCtx ctx{body, arg};
  void* storage;
  G* main_g = newproc_alloc(&main_invoke, &main_destroy, &storage);
  // Allocated before this thread is an M, so it counted as a plain
  // thread's go(); it is queued directly below instead.
  sched.external_go.fetch_sub(1, std::memory_order_acq_rel);
  *static_cast<MainCtx**>(storage) = &ctx;
  tsan_start_fiber(&main_g->tsan_fiber, main_g->id, main_g);  // what the program did before run() comes first
  set_status(main_g, GStatus::kIdle, GStatus::kRunnable);
  p0->created.store(1);
  GQueue unused;
  p0->runq.put(main_g, RunqAt::kNext, &unused);

  sched.hooks.sysmon_start();
  mprestart();
  // With a second CPU for it, the stack helper starts here, off any
  // goroutine's path, and prepares its stock while main starts: a program's
  // first goroutines then find their stacks ready (stack.hpp).
  if (cfg.procs > 1) sched.stacks.start_preparer(&sched.nsystem_threads);
  mstart_on_current_thread(m0);
  // Plain threads inside go() finish before anything is torn down.
  while (sched.external_go.load(std::memory_order_acquire) > 0) sched_yield();
  // sysmon keeps preempting until every M has left its loop.
  join_ms();
  sched.hooks.sysmon_stop();
  teardown();
  sched.hooks.diag_fini();
  run_end_callbacks();
  sched.hooks.netpoll_fini();
  procs_default_fini();
  setm(nullptr);
  sched.running.store(false, std::memory_order_release);
  g_active.store(false);
  return ctx.result;
}

}  // namespace gort::internal

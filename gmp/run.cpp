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
#include <memory>
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
#include "gmp/trace_consume.hpp"

namespace gort::internal {
namespace {

std::atomic<bool> g_active{false};

struct MainCtx {
  void (*body)(void*, int*);
  void* arg;
  int result = 0;
};

void begin_stop() {
  runtime.go_open.store(false, std::memory_order_seq_cst);
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
  runtime.hooks.netpoll_break();
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

// *custom: the program chose the number (then sysmon never changes it).
int resolve_procs(int requested, bool* custom) {
  // Go clamps GOMAXPROCS to _MaxGomaxprocs the same way.
  *custom = true;
  if (requested > 0) return std::min(requested, kMaxProcs);
  if (const char* env = std::getenv("GORT_MAXPROCS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return static_cast<int>(std::min<long>(v, kMaxProcs));
  }
  *custom = false;
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

// Replaces the run's state with one built from args (a run's Config, or
// nothing: the empty state between runs), every field from its initialiser.
// No runtime thread exists meanwhile, and plain threads look at
// runtime.running before they touch sched.
template <class... Args>
void rebuild_sched(const Args&... args) {
  std::destroy_at(&sched);
  std::construct_at(&sched, args...);
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

// Everything every goroutine did happens before the rest of the tear-down
// and what the program does after run() (docs/race.md): exited goroutines
// released on the way out (goroutine_main); an abandoned one's fiber does
// it now. allg: the run's, taken out of sched.
void race_all_goroutines_done(G* allg) {
  if constexpr (!kRaceEnabled) return;
  void* self = tsan_current_fiber();
  for (G* g = allg; g != nullptr; g = g->allg_next) {
    if (g->tsan_fiber == nullptr) continue;
    tsan_switch_to(g->tsan_fiber);
    race_release(&race_run_end);
    tsan_switch_to(self);
  }
  race_acquire(&race_run_end);
}

void teardown() {
  // What the run holds is taken out of sched, which is then emptied before
  // anything it pointed to is freed: a plain thread that looks at it from
  // then on (a fatal error's dump walks allg and allm) finds nothing, and
  // the next run builds its own.
  G* allg;
  GQueue queued;
  std::vector<M*> ms;
  const int32_t nalloc = sched.allp.allocated();
  std::vector<P*> ps(sched.allp.begin(), sched.allp.begin() + nalloc);
  {
    // Every other M is joined: the lock only states the rule.
    MutexLock lock(sched.lock);
    allg = sched.allg;
    while (G* g = sched.runq.pop_front()) queued.push_back(g);
    ms.swap(sched.allm);
  }
  for (P* p : ps) p->runq.drain(&queued);
  race_all_goroutines_done(allg);
  // Gs first: each lives at the top of its stack, which the pool unmaps
  // below (the Ms' g0s are members of their Ms). A G owns nothing but,
  // before it starts, its closure, and every G that has not started is on
  // a run queue: so only the run queues are walked. Walking allg would
  // touch a page per goroutine (a third of the tear-down after a million
  // parked goroutines). The sanitizer builds walk allg: TSan has a fiber
  // per G to free, and LeakSanitizer needs to know whether any goroutine
  // was abandoned. Closures are destroyed holding no runtime lock (their
  // destructors may take some).
  static_assert(std::is_trivially_destructible_v<G>);
  auto destroy_unstarted = [](G* g) {
    if (!g->started && g->status.load() == GStatus::kRunnable && g->destroy != nullptr) {
      g->destroy(g->closure);
      g->destroy = nullptr;
    }
  };
  bool abandoned = false;
  if constexpr (kRaceEnabled || kAsanEnabled) {
    for (G* g = allg, *next; g != nullptr; g = next) {
      next = g->allg_next;
      GStatus st = g->status.load();
      const bool parked = g->started && st != GStatus::kDead && st != GStatus::kIdle;
      if (parked) abandoned = true;
      destroy_unstarted(g);
      if (parked) {
        tsan_abandon_fiber(&g->tsan_fiber);
      } else {
        tsan_release_fiber(&g->tsan_fiber);
      }
    }
  } else {
    while (G* g = queued.pop()) destroy_unstarted(g);
  }
  // Abandoned timers drop their references while this thread is still an
  // M: a reference hook takes runtime locks, which look at the current M.
  for (P* p : ps) timers_destroy(p);
  rebuild_sched();
  setm(nullptr);  // this thread's M is deleted next
  for (M* m : ms) {
    trace_release_m(m);
    delete_untracked(m);
  }
  for (P* p : ps) delete_untracked(p);
#ifdef GORT_ASAN
  // Under LeakSanitizer, heap owned through an abandoned goroutine's frames
  // must stay reachable (docs/runtime.md: no leaks under ASan/LSan): keep its stacks.
  runtime.stacks.destroy(/*keep_mapped=*/abandoned);
  stack_classes_destroy(/*keep_mapped=*/abandoned);
#else
  (void)abandoned;
  runtime.stacks.destroy();
  stack_classes_destroy(/*keep_mapped=*/false);
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

// Constant-initialised, so that a plain thread may use it even from a
// static initialiser that runs before this file's.
constinit Runtime runtime;

Sched::Sched(const Config& run_cfg, bool custom)
    : last_poll(nanotime()),
      custom_procs(custom),
      stopping(false),
      coarse_now(nanotime()),
      cfg(run_cfg),
      time_slice_ns(absl::ToInt64Nanoseconds(run_cfg.time_slice)) {
  steal_order.reset(static_cast<uint32_t>(run_cfg.procs));
  pthread_sigmask(SIG_SETMASK, nullptr, &m_sigmask);
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
  if (std::memcmp(&runtime.hooks, &hooks, sizeof hooks) != 0) runtime.hooks = hooks;
  Config cfg = cfg_in;
  parse_debugvars(std::getenv("GORT_DEBUG"));
  procs_default_init();
  bool custom_procs;
  cfg.procs = resolve_procs(cfg.procs, &custom_procs);
  if (cfg.time_slice <= absl::ZeroDuration()) cfg.time_slice = absl::Milliseconds(10);
  cfg.max_threads = resolve_max_threads(cfg.max_threads);
  cfg.hook_libc = cfg.hook_libc && debug.hooklibc != 0;
  if (cfg.park_check) debug.parkcheck = 1;
  rebuild_sched(cfg, custom_procs);
  runtime.stacks.init(cfg.stack_size);
  stack_classes_init();
  runtime.hooks.diag_init();
  runtime.hooks.netpoll_init();

  for (int i = 0; i < cfg.procs; i++) {
    P* p = new_untracked<P>();
    p->id = i;
    timers_init(p);
    sched.allp.set(i, p);
  }
  sched.allp.set_size(cfg.procs, cfg.procs);
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
    set_status(p0, PStatus::kIdle, PStatus::kRunning);
    for (int i = cfg.procs - 1; i >= 1; i--) {
      P* p = sched.allp[static_cast<size_t>(i)];
      p->link = sched.pidle;
      sched.pidle = p;
      sched.npidle.fetch_add(1);
    }
  }
  runtime.running.store(true, std::memory_order_release);
  runtime.go_open.store(true, std::memory_order_seq_cst);

  MainCtx ctx{body, arg};
  void* storage;
  G* main_g = newproc_alloc(&main_invoke, &main_destroy, &storage);
  // Allocated before this thread is an M, so it counted as a plain
  // thread's go(); it is queued directly below instead.
  runtime.external_go.fetch_sub(1, std::memory_order_acq_rel);
  *static_cast<MainCtx**>(storage) = &ctx;
  tsan_start_fiber(&main_g->tsan_fiber, main_g->id, main_g);  // what the program did before run() comes first
  set_status(main_g, GStatus::kIdle, GStatus::kRunnable);
  p0->created.store(1);
  GQueue unused;
  p0->runq.put(main_g, RunqAt::kNext, &unused);

  runtime.hooks.sysmon_start();
  mprestart();
  // With a second CPU for it, the stack helper starts here, off any
  // goroutine's path, and prepares its stock while main starts: a program's
  // first goroutines then find their stacks ready (stack.hpp).
  if (cfg.procs > 1) runtime.stacks.start_preparer(&runtime.nsystem_threads);
  mstart_on_current_thread(m0);
  // Plain threads inside go() finish before anything is torn down.
  while (runtime.external_go.load(std::memory_order_seq_cst) > 0) sched_yield();
  // sysmon keeps preempting until every M has left its loop.
  join_ms();
  runtime.hooks.sysmon_stop();
  teardown();
  runtime.hooks.diag_fini();
  run_end_callbacks();
  runtime.hooks.netpoll_fini();
  procs_default_fini();
  setm(nullptr);
  runtime.running.store(false, std::memory_order_release);
  g_active.store(false);
  return ctx.result;
}

}  // namespace gort::internal

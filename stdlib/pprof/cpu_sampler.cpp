// stdlib/pprof/cpu_sampler.cpp — see cpu_sampler.hpp: the SIGPROF handler,
// the per-M timers and the rings they fill.
//
// Identifying our signals: each timer's sigev_value carries a tag, the
// session and its ring's index; the handler drops a signal of an older
// session (one still pending when its timer was deleted) and hands any
// other SIGPROF (SI_KERNEL from setitimer, a timer of the program's) to
// the handler installed before ours, if there was one. The handler is
// installed at the first profile, never before, and stays: a signal of a
// deleted timer may still be pending, and SIGPROF's default action ends
// the process. A program that installs its own SIGPROF handler after a
// profile started takes our timers' signals (as it would Go's).
//
// Stopping: g_active_gen goes to 0, then stop waits until no handler is
// inside (g_inflight): a handler increments g_inflight before it reads
// g_active_gen, both seq_cst, so either it sees 0 or stop sees it.
//
// EINTR: a handler counts itself in gort_own_signals, so the libc hooks
// retry a call our signal interrupted (netpoll/hook/hook.hpp).
#include "stdlib/pprof/cpu_sampler.hpp"

#include <sched.h>
#include <signal.h>

#include <cerrno>
#include <mutex>
#include <vector>

#include "gmp/clock_rand.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "stdlib/pprof/unwind_here.hpp"

namespace gort::internal {

std::atomic<CpuRing*> g_cpu_rings[kCpuMaxRings];
std::atomic<uint32_t> g_cpu_nrings{0};

namespace {

// sigev_value: kTag << 48 | gen << 24 | ring index.
constexpr uint64_t kTag = 0x6770;  // "gp"
constexpr uint32_t kField = 0xFFFFFF;

std::atomic<uint32_t> g_active_gen{0};
std::atomic<int32_t> g_inflight{0};

std::once_flag g_install_once;
struct sigaction g_old_action;

// Under g_mu: the session's rings and rate (the handler reads neither).
std::mutex g_mu;
uint32_t g_gen = 0;
int g_hz = 0;

void chain(int sig, siginfo_t* info, void* uc) {
  if ((g_old_action.sa_flags & SA_SIGINFO) != 0) {
    if (g_old_action.sa_sigaction != nullptr) g_old_action.sa_sigaction(sig, info, uc);
  } else if (g_old_action.sa_handler != SIG_DFL && g_old_action.sa_handler != SIG_IGN) {
    g_old_action.sa_handler(sig);
  }
  // SIG_DFL would end the process: a stray SIGPROF once we took it over is
  // dropped instead.
}

void sample(CpuRing* r, const siginfo_t* info, void* uc) {
  const uint32_t weight = 1 + static_cast<uint32_t>(info->si_overrun > 0 ? info->si_overrun : 0);
  CpuSample* s = r->reserve();
  if (s == nullptr) {
    r->lost.fetch_add(weight, std::memory_order_relaxed);
    return;
  }
  s->n = static_cast<uint32_t>(unwind_interrupted(uc, s->pc, kCpuMaxFrames));
  s->weight = weight;
  M* m = getm();
  G* g = m != nullptr ? relaxed_load(m->curg) : nullptr;
  // The running goroutine's own field, read on its thread: it cannot
  // change under the handler.
  s->labels = g != nullptr ? __atomic_load_n(&g->labels, __ATOMIC_RELAXED) : nullptr;
  r->commit();
}

void on_sigprof(int sig, siginfo_t* info, void* uc) {
  const int saved_errno = errno;
  const auto v = reinterpret_cast<uintptr_t>(info->si_value.sival_ptr);
  if (info->si_code != SI_TIMER || (v >> 48) != kTag) {
    chain(sig, info, uc);
    errno = saved_errno;
    return;
  }
  gort_own_signals++;
  g_inflight.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t gen = static_cast<uint32_t>(v >> 24) & kField;
  const uint32_t idx = static_cast<uint32_t>(v) & kField;
  if (gen == g_active_gen.load(std::memory_order_seq_cst) && idx < kCpuMaxRings) {
    CpuRing* r = g_cpu_rings[idx].load(std::memory_order_acquire);
    if (r != nullptr && r->gen == gen) sample(r, info, uc);
  }
  g_inflight.fetch_sub(1, std::memory_order_release);
  errno = saved_errno;
}

void install() {
  struct sigaction sa = {};
  sa.sa_sigaction = &on_sigprof;
  // SA_RESTART: most interrupted system calls restart by themselves
  // (docs/tracing-and-profiling.md lists the ones that do not).
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, &g_old_action);
}

// Whether m's thread has a ring of this session already (an M seen both by
// start's walk and by its own m_start call).
bool known_locked(const M* m, int tid) {
  const uint32_t n = g_cpu_nrings.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) {
    CpuRing* r = g_cpu_rings[i].load(std::memory_order_relaxed);
    if (r != nullptr && r->m == m && r->tid == tid) return true;
  }
  return false;
}

// A ring and a timer for the thread tid (M m) on its CPU clock. g_mu held.
void add_locked(M* m, int tid, clockid_t clock) {
  if (tid == 0 || known_locked(m, tid)) return;
  const uint32_t idx = g_cpu_nrings.load(std::memory_order_relaxed);
  if (idx >= kCpuMaxRings) return;  // that many Ms: the rest go unsampled
  auto* r = new CpuRing;
  r->gen = g_gen;
  r->m = m;
  r->tid = tid;
  sigevent ev = {};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = SIGPROF;
  ev._sigev_un._tid = tid;
  ev.sigev_value.sival_ptr =
      reinterpret_cast<void*>(static_cast<uintptr_t>(kTag << 48 | uint64_t{g_gen} << 24 | idx));
  if (timer_create(clock, &ev, &r->timer) != 0) {  // the thread is gone
    delete r;
    return;
  }
  // Published before the timer runs: its first signal finds the ring.
  g_cpu_rings[idx].store(r, std::memory_order_release);
  g_cpu_nrings.store(idx + 1, std::memory_order_release);
  const int64_t period = 1000000000 / g_hz;
  itimerspec its = {};
  its.it_interval.tv_sec = static_cast<time_t>(period / 1000000000);
  its.it_interval.tv_nsec = static_cast<long>(period % 1000000000);
  // The first tick at a random point of the period, as Go does: threads
  // started together do not sample in step with a periodic workload.
  const int64_t first = 1 + static_cast<int64_t>(fastrand() % static_cast<uint32_t>(period));
  its.it_value.tv_sec = static_cast<time_t>(first / 1000000000);
  its.it_value.tv_nsec = static_cast<long>(first % 1000000000);
  timer_settime(r->timer, 0, &its, nullptr);
}

// gmp/profiling.hpp's m_start: on a new M's thread (minit).
void on_m_start(M* m) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_active_gen.load(std::memory_order_relaxed) == 0) return;
  add_locked(m, m->os_tid.load(std::memory_order_relaxed), m->cpuclock);
}

struct MThread {
  M* m;
  int tid;
  clockid_t clock;
};

}  // namespace

void cpu_sampling_start(uint32_t gen, int hz) {
  std::call_once(g_install_once, &install);
  // libgcc's once-only set-up, here rather than in the first handler.
  unwind_warm_up();
  std::lock_guard<std::mutex> lock(g_mu);
  g_gen = gen;
  g_hz = hz;
  g_active_gen.store(gen, std::memory_order_seq_cst);
  // Dekker with minit (it stores os_tid, then loads m_start): an M this
  // walk finds without a thread id calls the hook itself.
  profiling.m_start.store(&on_m_start, std::memory_order_seq_cst);
  if (!runtime.running.load(std::memory_order_acquire)) return;
  std::vector<MThread> ms;
  {
    MutexLock sched_lock(sched.lock);
    for (M* m : sched.allm) {
      const int tid = m->os_tid.load(std::memory_order_seq_cst);
      if (tid != 0) ms.push_back({m, tid, m->cpuclock});
    }
  }
  // A thread gone since (its run ended) fails timer_create.
  for (const MThread& t : ms) add_locked(t.m, t.tid, t.clock);
}

void cpu_sampling_stop() {
  std::lock_guard<std::mutex> lock(g_mu);
  profiling.m_start.store(nullptr, std::memory_order_seq_cst);
  const uint32_t n = g_cpu_nrings.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; i++) {
    if (CpuRing* r = g_cpu_rings[i].load(std::memory_order_relaxed)) timer_delete(r->timer);
  }
  g_active_gen.store(0, std::memory_order_seq_cst);
  while (g_inflight.load(std::memory_order_seq_cst) != 0) sched_yield();
}

void cpu_sampling_free() {
  std::lock_guard<std::mutex> lock(g_mu);
  const uint32_t n = g_cpu_nrings.load(std::memory_order_relaxed);
  g_cpu_nrings.store(0, std::memory_order_release);
  for (uint32_t i = 0; i < n; i++) delete g_cpu_rings[i].exchange(nullptr, std::memory_order_acq_rel);
}

}  // namespace gort::internal

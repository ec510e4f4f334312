// preempt/signal.cpp — the preemption signal: sending it, and deciding in
// the handler whether the interrupted point is asynchronously safe. See
// preempt.hpp for the rules and DESIGN.md ("Preemption pitfalls") for why
// each one exists.
#include <cpuid.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#include "gmp/fatal.hpp"
#include "gmp/sanitizer.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "preempt/preempt.hpp"

extern "C" {
// Read by the trampoline.
__attribute__((visibility("hidden"))) uint64_t gort_xsave_size = 512;
__attribute__((visibility("hidden"))) uint32_t gort_xsave_mode = 0;  // 1: xsave, 0: fxsave
void gort_async_preempt();
__attribute__((visibility("hidden"))) void gort_async_preempt_yield();
}

namespace gort::internal {

void preempt_park(G* g);

namespace {

int g_sig = SIGURG;
struct sigaction g_old_action;
std::once_flag g_install_once;
bool g_supported = false;

// Saved registers + XSAVE area + the frames of the yield itself.
constexpr uintptr_t kFrameHeadroom = 16 * 1024;

bool detect_xsave() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  bool xsave = (c & (1u << 26)) != 0;
  bool osxsave = (c & (1u << 27)) != 0;
  if (!xsave || !osxsave) return false;
  __cpuid_count(0xD, 0, a, b, c, d);
  // EBX: bytes needed for the components enabled in XCR0.
  if (b < 576) return false;
  gort_xsave_size = (b + 63) & ~uint64_t{63};
  gort_xsave_mode = 1;
  return true;
#else
  return false;
#endif
}

void chain(int sig, siginfo_t* info, void* uc) {
  if ((g_old_action.sa_flags & SA_SIGINFO) != 0 && g_old_action.sa_sigaction != nullptr) {
    g_old_action.sa_sigaction(sig, info, uc);
  } else if (g_old_action.sa_handler != SIG_DFL && g_old_action.sa_handler != SIG_IGN) {
    g_old_action.sa_handler(sig);
  }
  // SIGURG's default action is to ignore it.
}

void on_signal(int sig, siginfo_t* info, void* ucv) {
  int saved_errno = errno;
  bool ours = info->si_code == SI_QUEUE && info->si_pid == getpid() &&
              (static_cast<uint32_t>(info->si_value.sival_int) >> 24) == 0xA5;
  if (!ours) {
    chain(sig, info, ucv);
    errno = saved_errno;
    return;
  }
  M* m = getm();
  // Delivering one signal consumes every pending one (they are not queued).
  if (m != nullptr) {
    m->preempt_seen.store(m->preempt_sent.load(std::memory_order_acquire), std::memory_order_release);
  }
#if defined(__x86_64__)
  G* g = m != nullptr ? m->curg : nullptr;
  uint32_t gen = static_cast<uint32_t>(info->si_value.sival_int) & 0xFFFFFF;
  if (g == nullptr || g->is_g0 || (m->preempt_gen.load(std::memory_order_relaxed) & 0xFFFFFF) != gen ||
      !g->preempt.load(std::memory_order_relaxed) || m->locks.load(std::memory_order_relaxed) != 0 ||
      g->nopreempt != 0 || m->in_blocking.load(std::memory_order_relaxed) || g->stack_lo == nullptr) {
    errno = saved_errno;
    return;
  }
  auto* uc = static_cast<ucontext_t*>(ucv);
  uintptr_t rip = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  uintptr_t rsp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  uintptr_t lo = reinterpret_cast<uintptr_t>(g->stack_lo);
  uintptr_t hi = reinterpret_cast<uintptr_t>(g->stack_hi);
  if (rsp > hi || rsp < lo + 128 + 8 + kFrameHeadroom + gort_xsave_size || !pc_preemptible(rip)) {
    errno = saved_errno;
    return;
  }
  // Inject a call to the trampoline, skipping the red zone.
  rsp -= 128 + 8;
  *reinterpret_cast<uintptr_t*>(rsp) = rip;
  uc->uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(rsp);
  uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(reinterpret_cast<uintptr_t>(&gort_async_preempt));
#else
  (void)ucv;
#endif
  errno = saved_errno;
}

}  // namespace

int preempt_signal() { return g_sig; }

bool gort_linked_into_main();

bool async_preempt_supported() { return g_supported; }

void preempt_init() {
  std::call_once(g_install_once, [] {
#if defined(__x86_64__) && !defined(GORT_TSAN_ON)
    if (!detect_xsave()) {
      gort_xsave_size = 512;
      gort_xsave_mode = 0;
    }
    preempt_ranges_init();
    g_supported = !gort_linked_into_main();
#else
    g_supported = false;  // no trampoline for this architecture, or TSan
#endif
    if (const char* env = getenv("GORT_PREEMPT_SIGNAL")) {
      int s = atoi(env);
      if (s > 0 && s < NSIG) g_sig = s;
    }
    struct sigaction sa = {};
    sa.sa_sigaction = &on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(g_sig, &sa, &g_old_action);
  });
}

PreemptRequest preempt_one(P* p) {
  M* m = p->m;
  if (m == nullptr) return PreemptRequest::kNone;
  G* g = m->curg;
  if (g == nullptr || g->is_g0) return PreemptRequest::kNone;
  // Already set: sysmon asked this run of g before (make_current clears it),
  // and this is a retry.
  bool retry = g->preempt.exchange(true, std::memory_order_acq_rel);
  if (!sched.cfg.preempt || !g_supported) return PreemptRequest::kNone;  // cooperative only
  // Never signal those.
  if (m->in_blocking.load(std::memory_order_acquire)) return PreemptRequest::kNone;
  if (retry && m->preempt_seen.load(std::memory_order_acquire) !=
                   m->preempt_sent.load(std::memory_order_acquire)) {
    return PreemptRequest::kPending;
  }
  // A retry keeps the request number. SIGURG is not queued: while the first
  // signal is still pending (its thread descheduled on a busy machine), a
  // retry's signal is discarded and the first one is delivered later with
  // its own number; had the retry taken a new number, the handler would drop
  // that signal as stale and the preemption would wait for a retry that
  // happens to be delivered within one retry interval.
  uint32_t gen = retry ? m->preempt_gen.load(std::memory_order_acquire) & 0xFFFFFF
                       : (m->preempt_gen.fetch_add(1, std::memory_order_acq_rel) + 1) & 0xFFFFFF;
  sigval v;
  v.sival_int = static_cast<int>((0xA5u << 24) | gen);
  m->preempt_sent.fetch_add(1, std::memory_order_acq_rel);
  pthread_sigqueue(m->tid, g_sig, v);
  return PreemptRequest::kSignalled;
}

}  // namespace gort::internal

// Called by the trampoline on the preempted goroutine's stack, with all its
// registers saved.
extern "C" void gort_async_preempt_yield() {
  using namespace gort::internal;
  M* m = getm();
  G* g = m->curg;
  g->async_preempts++;
  preempt_park(g);
}

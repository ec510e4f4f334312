// preempt/signal.cpp — the preemption signal: sending it, and deciding in
// the handler whether the interrupted point is asynchronously safe. See
// preempt.hpp for the rules and docs/preemption.md for why each one exists.
#include <cpuid.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "gmp/diag/fatal.hpp"
#include "gmp/race/sanitizer.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gmp/diag/unwind.hpp"
#include "preempt/preempt.hpp"

// Read by the trampoline (declared in preempt.hpp).
uint64_t gort_xsave_size = 512;
uint32_t gort_xsave_mode = 0;

namespace gort::internal {

std::atomic<void (*)()> async_preempt_hook{nullptr};

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

// Tags in the signal's value: sysmon's request (sigqueue, with the request
// number) and an M's slice timer (timer_create, with the M's id).
constexpr uint32_t kTagRequest = 0xA5;
constexpr uint32_t kTagTimer = 0xA6;
// A traceback request (M::tb, gmp/diag/unwind.hpp).
constexpr uint32_t kTagTraceback = 0xA7;

// The handler found an unsafe point in a run that the M's slice timer
// times: have the timer ask again shortly (what sysmon's retry did when it
// looked every tenth of a slice; it now sleeps up to 10 ms while Ps run). A
// run the timer does not time (its first slice, or a timer stopped by
// entersyscall) is sysmon's to retry. timer_settime is async-signal-safe.
void retry_soon(M* m) {
  P* p = m->p;
  if (p == nullptr || !slice_timer_times(m, p->schedtick)) return;
  itimerspec its = {};
  its.it_value.tv_nsec = static_cast<long>(preempt_retry_ns());
  timer_settime(static_cast<timer_t>(m->preemption.slice_timer), 0, &its, nullptr);
}

void on_signal(int sig, siginfo_t* info, void* ucv) {
  int saved_errno = errno;
  uint32_t value = static_cast<uint32_t>(info->si_value.sival_int);
  bool ours = info->si_code == SI_QUEUE && info->si_pid == getpid();
  bool request = ours && (value >> 24) == kTagRequest;
  bool timer = info->si_code == SI_TIMER && (value >> 24) == kTagTimer;
  bool traceback = ours && (value >> 24) == kTagTraceback;
  if (!request && !timer && !traceback) {
    chain(sig, info, ucv);
    errno = saved_errno;
    return;
  }
  // A system call this interrupted returns EINTR for the runtime's
  // signal, not the program's: the libc hooks retry it (netpoll/hook/).
  gort_own_signals++;
  M* m = getm();
  // Delivering one signal consumes every pending one (they are not queued),
  // a timer's included: each of them answers a pending traceback request,
  // and a traceback request's accounts for a pending preemption (sysmon
  // asks again).
  if (m != nullptr) {
    m->preemption.seen.store(m->preemption.sent.load(std::memory_order_acquire), std::memory_order_release);
    traceback_signal_handler(m, static_cast<const ucontext_t*>(ucv));
  }
  if (traceback) {
    errno = saved_errno;
    return;
  }
#if defined(__x86_64__)
  G* g = m != nullptr ? relaxed_load(m->curg) : nullptr;
  if (timer) {
    // The slice of the run sysmon saw has ended if that run still goes on
    // (same schedtick: no reschedule since). Then this is sysmon's request,
    // made on time: set the cooperative flag as preempt_one would.
    P* p = m != nullptr ? m->p : nullptr;
    if (g == nullptr || g->is_g0 || p == nullptr || (m->id & 0xFFFFFF) != (value & 0xFFFFFF) ||
        p->schedtick != m->preemption.slice_timer_tick.load(std::memory_order_relaxed)) {
      errno = saved_errno;
      return;
    }
    g->preempt.store(true, std::memory_order_relaxed);
  } else if (g == nullptr || (m->preemption.gen.load(std::memory_order_relaxed) & 0xFFFFFF) != (value & 0xFFFFFF)) {
    errno = saved_errno;
    return;
  }
  // Nor inside a runtime's non-blocking system call: the goroutine looks at
  // its flag when the call returns (gmp/nbsyscall.hpp), so no retry.
  if (g->is_g0 || !g->preempt.load(std::memory_order_relaxed) || m->in_blocking.load(std::memory_order_relaxed) ||
      m->preemption.in_nbsyscall.load(std::memory_order_relaxed)) {
    errno = saved_errno;
    return;
  }
  if (m->locks.load(std::memory_order_relaxed) != 0 || g->nopreempt != 0 || g->stack_lo == nullptr) {
    retry_soon(m);
    errno = saved_errno;
    return;
  }
  auto* uc = static_cast<ucontext_t*>(ucv);
  uintptr_t rip = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  uintptr_t rsp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  uintptr_t lo = reinterpret_cast<uintptr_t>(g->stack_lo);
  uintptr_t hi = reinterpret_cast<uintptr_t>(g->stack_hi);
  PcKind kind = pc_kind(rip);
  if (rsp > hi || rsp < lo + 128 + 8 + kFrameHeadroom + gort_xsave_size || kind == PcKind::kNo ||
      m->oslocks.load(std::memory_order_relaxed) != 0 ||
      (kind == PcKind::kClock && !clock_caller_preemptible(rip))) {
    retry_soon(m);
    errno = saved_errno;
    return;
  }
  uint64_t mask;
  std::memcpy(&mask, &uc->uc_sigmask, sizeof mask);
  if (mask != m->sigmask) {
    retry_soon(m);
    errno = saved_errno;
    return;
  }
  // The goroutine keeps this thread until it resumes (gmp/lockedm.cpp), so
  // thread-local addresses in its registers or frames stay right; past the
  // cap it may move, and then such an address makes this an unsafe point.
  bool locks_m = preempt_lock_reserve();
  if (!frames_preemptible(g, uc, locks_m ? TlsCheck::kNo : TlsCheck::kYes)) {
    if (locks_m) sched.npreemptlocked.fetch_sub(1, std::memory_order_relaxed);
    retry_soon(m);
    errno = saved_errno;
    return;
  }
  g->preempt_locks_m = locks_m;
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

int64_t preempt_retry_ns() { return std::min<int64_t>(sched.time_slice_ns / 10 + 1, 100 * 1000); }

bool async_preempt_supported() { return g_supported; }

void preempt_init() {
  std::call_once(g_install_once, [] {
#if defined(__x86_64__) && !defined(GORT_TSAN_ON)
    if (!detect_xsave()) {
      gort_xsave_size = 512;
      gort_xsave_mode = 0;
    }
    preempt_ranges_init();
    g_supported = own_code_known();
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
    frames_init(g_sig);
  });
}

PreemptRequest preempt_one(P* p) {
  M* m = relaxed_load(p->m);
  if (m == nullptr) return PreemptRequest::kNone;
  G* g = relaxed_load(m->curg);
  if (g == nullptr || g->is_g0) return PreemptRequest::kNone;
  // Already set: sysmon asked this run of g before (make_current clears it),
  // and this is a retry.
  bool retry = g->preempt.exchange(true, std::memory_order_acq_rel);
  if (!sched.cfg.preempt || !g_supported) return PreemptRequest::kNone;  // cooperative only
  // In a runtime's non-blocking system call: it yields when the call
  // returns (gmp/nbsyscall.hpp). Look again in a tenth of a slice.
  if (m->preemption.in_nbsyscall.load(std::memory_order_relaxed)) return PreemptRequest::kPending;
  // Never signal those. Dekker with entersyscall: sending is stored before
  // in_blocking is loaded, and stays set until the signal is queued; the M
  // stores in_blocking, then waits for sending to clear and takes delivery
  // of whatever was queued before f runs.
  m->preemption.sending.store(true, std::memory_order_seq_cst);
  if (m->in_blocking.load(std::memory_order_seq_cst)) {
    m->preemption.sending.store(false, std::memory_order_release);
    return PreemptRequest::kNone;
  }
  if (retry && m->preemption.seen.load(std::memory_order_acquire) !=
                   m->preemption.sent.load(std::memory_order_acquire)) {
    m->preemption.sending.store(false, std::memory_order_release);
    return PreemptRequest::kPending;
  }
  // A retry keeps the request number. SIGURG is not queued: while the first
  // signal is still pending (its thread descheduled on a busy machine), a
  // retry's signal is discarded and the first one is delivered later with
  // its own number; had the retry taken a new number, the handler would drop
  // that signal as stale and the preemption would wait for a retry that
  // happens to be delivered within one retry interval.
  uint32_t gen = retry ? m->preemption.gen.load(std::memory_order_acquire) & 0xFFFFFF
                       : (m->preemption.gen.fetch_add(1, std::memory_order_acq_rel) + 1) & 0xFFFFFF;
  sigval v;
  v.sival_int = static_cast<int>((kTagRequest << 24) | gen);
  m->preemption.sent.fetch_add(1, std::memory_order_acq_rel);
  pthread_sigqueue(m->tid, g_sig, v);
  m->preemption.queued.fetch_add(1, std::memory_order_release);
  m->preemption.sending.store(false, std::memory_order_release);
  return PreemptRequest::kSignalled;
}

namespace {

// ---- the slice timer's state (SliceTimerState, gmp/m_preempt.hpp) ----

[[noreturn, gnu::cold, gnu::noinline]] void bad_slice_timer(const M* m, SliceTimerState from, SliceTimerState to) {
  bad_transition(kSliceTimerTable, "M", m->id, "slice timer", from, to,
                 m->preemption.slice_timer_state.load(std::memory_order_relaxed));
}

// By the one party that may leave `from`: the maker leaves kMaking, and
// only sysmon's end of the run leaves kMade (delete_slice_timers).
void set_slice_timer_state(M* m, SliceTimerState from, SliceTimerState to) {
  std::atomic<SliceTimerState>& st = m->preemption.slice_timer_state;
  if (!kSliceTimerTable.legal(from, to) || st.load(std::memory_order_relaxed) != from) [[unlikely]] {
    bad_slice_timer(m, from, to);
  }
  st.store(to, std::memory_order_release);
}

// Acquire: kMade is stored once the timer is.
bool slice_timer_made(const M* m) {
  return m->preemption.slice_timer_state.load(std::memory_order_acquire) == SliceTimerState::kMade;
}

// Makes m's slice timer on first use. sysmon and the M itself may both get
// here; the one that moves the state out of kNone makes it, the other gives
// up this time.
bool slice_timer_ready(M* m) {
  std::atomic<SliceTimerState>& st = m->preemption.slice_timer_state;
  SliceTimerState state = st.load(std::memory_order_acquire);
  if (state == SliceTimerState::kMade) return true;
  static_assert(kSliceTimerTable.legal(SliceTimerState::kNone, SliceTimerState::kMaking));
  if (state != SliceTimerState::kNone ||
      !st.compare_exchange_strong(state, SliceTimerState::kMaking, std::memory_order_acq_rel)) {
    return false;
  }
  int tid = m->os_tid.load(std::memory_order_acquire);
  sigevent ev = {};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = g_sig;
  ev._sigev_un._tid = tid;
  ev.sigev_value.sival_int = static_cast<int>((kTagTimer << 24) | (static_cast<uint32_t>(m->id) & 0xFFFFFF));
  timer_t t;
  if (tid == 0 || timer_create(CLOCK_MONOTONIC, &ev, &t) != 0) {
    set_slice_timer_state(m, SliceTimerState::kMaking, SliceTimerState::kNone);
    return false;
  }
  m->preemption.slice_timer = t;
  set_slice_timer_state(m, SliceTimerState::kMaking, SliceTimerState::kMade);
  return true;
}

bool arm_for(M* m, uint32_t tick, int64_t deadline) {
  if (!slice_timer_ready(m)) return false;
  // The tick first: a timer left armed from an earlier run fires for that
  // run's tick, which no longer matches once this store is seen.
  m->preemption.slice_timer_tick.store(tick, std::memory_order_release);
  m->preemption.slice_timer_deadline.store(deadline, std::memory_order_seq_cst);
  itimerspec its = {};
  its.it_value.tv_sec = static_cast<time_t>(deadline / 1000000000);
  its.it_value.tv_nsec = static_cast<long>(deadline % 1000000000);
  return timer_settime(static_cast<timer_t>(m->preemption.slice_timer), TIMER_ABSTIME, &its, nullptr) == 0;
}

// SchedHooks::slice_started, on the M that starts the run.
void slice_started(P* p, uint32_t tick) {
  if (!sched.cfg.preempt || !g_supported) return;
  M* m = getm();
  if (m == nullptr || m->p != p) return;
  arm_for(m, tick, nanotime() + sched.time_slice_ns);
}

// SchedHooks::slice_timer_stop; also arm_slice_timer's, when the M it
// armed entered blocking() meanwhile.
void slice_timer_stop(M* m) {
  if (!slice_timer_made(m)) return;
  m->preemption.slice_timer_deadline.store(0, std::memory_order_seq_cst);
  itimerspec its = {};
  timer_settime(static_cast<timer_t>(m->preemption.slice_timer), 0, &its, nullptr);
}

// SchedHooks::traceback_signal.
bool traceback_signal(M* m) {
  // An M whose thread has not set itself up yet (minit) has no tid to
  // signal; it runs no goroutine either.
  if (m->os_tid.load(std::memory_order_acquire) == 0) return false;
  preempt_init();
  sigval v;
  v.sival_int = static_cast<int>(kTagTraceback << 24);
  return pthread_sigqueue(m->tid, g_sig, v) == 0;
}

}  // namespace

void install_slice_timer_hooks(SchedHooks* hooks) {
  hooks->slice_started = &slice_started;
  hooks->slice_timer_stop = &slice_timer_stop;
  hooks->traceback_signal = &traceback_signal;
  hooks->preempt_p = [](P* p) { (void)preempt_one(p); };
}

#ifdef GORT_TESTING
bool arm_slice_timer(P* p, uint32_t tick, int64_t deadline) {
  if (!sched.cfg.preempt || !g_supported) return false;
  M* m = relaxed_load(p->m);
  if (m == nullptr || m->in_blocking.load(std::memory_order_acquire)) return false;
  // Armed already for this run, as early: by the M itself when the run
  // began, with the exact start, which a look by sysmon can only know later.
  if (slice_timer_made(m) &&
      m->preemption.slice_timer_tick.load(std::memory_order_acquire) == tick &&
      m->preemption.slice_timer_deadline.load(std::memory_order_acquire) <= deadline) {
    return true;
  }
  if (!arm_for(m, tick, deadline)) return false;
  // The M may have entered blocking() since the check above and found no
  // timer to stop (entersyscall stores in_blocking, then loads the
  // deadline; this stored the deadline, now loads in_blocking).
  if (m->in_blocking.load(std::memory_order_seq_cst)) {
    slice_timer_stop(m);
    return false;
  }
  return true;
}
#endif

bool slice_timer_times(const M* m, uint32_t tick) {
  return m != nullptr && slice_timer_made(m) &&
         m->preemption.slice_timer_deadline.load(std::memory_order_acquire) != 0 &&
         m->preemption.slice_timer_tick.load(std::memory_order_acquire) == tick;
}

void delete_slice_timers() {
  MutexLock lock(sched.lock);
  for (M* m : sched.allm) {
    if (!slice_timer_made(m)) continue;
    timer_delete(static_cast<timer_t>(m->preemption.slice_timer));
    m->preemption.slice_timer = nullptr;
    set_slice_timer_state(m, SliceTimerState::kMade, SliceTimerState::kNone);
  }
}

}  // namespace gort::internal

// Called by the trampoline on the preempted goroutine's stack, with all its
// registers saved.
extern "C" void gort_async_preempt_yield() {
  using namespace gort::internal;
  M* m = getm();
  G* g = relaxed_load(m->curg);
  g->async_preempts++;
  if (auto* hook = async_preempt_hook.load(std::memory_order_relaxed)) hook();
  bool locks_m = g->preempt_locks_m;
  g->preempt_locks_m = false;
  preempt_park(g, locks_m ? PreemptKind::kAsyncLocked : PreemptKind::kAsync);
}

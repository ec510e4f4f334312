// gmp/diag/unwind.cpp — see unwind.hpp.
#include "gmp/diag/unwind.hpp"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

#include "gmp/clock_rand.hpp"
#include "gmp/sched.hpp"
#include "gmp/diag/symbolize.hpp"
#include "gmp/tls.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {
namespace {

// The walk in progress (symbolizer_mutex held): libdw's callbacks get
// only the argument given when the session was attached.
struct Walk {
  const UnwindRegs* regs;
  StackView view;
  FirstPc first;
  PcList* out;
};
Walk* g_walk = nullptr;
// The symbolizer session the thread callbacks were attached to, and whether
// that failed (0: none yet).
uint64_t g_attached = 0;
bool g_attach_failed = false;

// Reads of other stacks: ASan must not check them (a frame's redzones are
// poisoned, and libdw reads whatever the CFI points at).
__attribute__((no_sanitize("address", "thread"))) uint64_t load_word(uintptr_t addr) {
  uint64_t v = 0;
  auto* src = reinterpret_cast<const volatile unsigned char*>(addr);
  for (int i = 7; i >= 0; i--) v = (v << 8) | src[i];
  return v;
}

bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void*) {
  const StackView& v = g_walk->view;
  if (addr < v.lo || addr > v.hi - 8 || v.hi < 8) return false;
  *result = load_word(v.copy != nullptr ? reinterpret_cast<uintptr_t>(v.copy) + (addr - v.copy_lo) : addr);
  return true;
}

pid_t next_thread(Dwfl*, void*, void** thread_arg) {
  // Only get_thread is used: the one "thread" is the walk in progress.
  *thread_arg = nullptr;
  return 0;
}

bool get_thread(Dwfl*, pid_t, void*, void** thread_arg) {
  *thread_arg = g_walk;
  return true;
}

bool set_initial_registers(Dwfl_Thread* thread, void* arg) {
  const UnwindRegs& r = *static_cast<Walk*>(arg)->regs;
  // Only the registers we know: a made-up value could mislead a CFI rule
  // that uses it.
  for (int i = 0; i < 17; i++) {
    if ((r.known & (1u << i)) == 0) continue;
    Dwarf_Word w = r.r[i];
    if (!dwfl_thread_state_registers(thread, i, 1, &w)) return false;
  }
  return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    next_thread, get_thread, memory_read, set_initial_registers, nullptr, nullptr,
};

int on_frame(Dwfl_Frame* frame, void* arg) {
  Walk* w = static_cast<Walk*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(frame, &pc, &activation) || pc == 0) return DWARF_CB_ABORT;
  bool exact = activation && !(w->out->total == 0 && w->first == FirstPc::kReturnAddress);
  w->out->add(PcEntry{static_cast<uintptr_t>(pc), exact});
  return w->out->total < PcList::kMaxFrames ? DWARF_CB_OK : DWARF_CB_ABORT;
}

bool attach(Dwfl* dwfl) {
  uint64_t gen = symbolizer_generation();
  if (g_attached != gen) {
    g_attached = gen;
    g_attach_failed =
        dwfl == nullptr || !dwfl_attach_state(dwfl, nullptr, getpid(), &kThreadCallbacks, nullptr);
  }
  return !g_attach_failed;
}

// Whether sp lies on m's own thread stack, where g0 runs.
bool on_g0_stack(const M* m, uintptr_t sp) {
  auto lo = reinterpret_cast<uintptr_t>(m->g0_stack_lo);
  return lo != 0 && sp >= lo && sp - lo < m->g0_stack_size;
}

}  // namespace

bool unwind(const UnwindRegs& regs, const StackView& view, FirstPc first, PcList* out) {
  *out = PcList{};
  Dwfl* dwfl = symbolizer_dwfl();
  if (!attach(dwfl)) return false;
  Walk w{&regs, view, first, out};
  g_walk = &w;
  // Any error (no CFI, a read outside the stack) just ends the walk: what
  // was found so far is the answer.
  dwfl_getthread_frames(dwfl, 1, &on_frame, &w);
  g_walk = nullptr;
  return true;
}

void regs_from_ucontext(const ucontext_t* uc, UnwindRegs* regs) {
  const greg_t* g = uc->uc_mcontext.gregs;
  static constexpr int kOrder[17] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                     REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                     REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  for (int i = 0; i < 17; i++) regs->r[i] = static_cast<uint64_t>(g[kOrder[i]]);
  regs->known = (1u << 17) - 1;
}

StackView goroutine_stack(const G* g) {
  StackView v;
  v.lo = reinterpret_cast<uintptr_t>(g->stack_lo);
  v.hi = reinterpret_cast<uintptr_t>(g->stack_hi);
  return v;
}

void current_regs_from(const ucontext_t* uc, UnwindRegs* regs, StackView* view) {
  regs_from_ucontext(uc, regs);
  // getcontext saves the callee-saved registers, the argument registers,
  // rsp and the return address; rax, r10 and r11 are not saved.
  regs->known &= ~((1u << 0) | (1u << 10) | (1u << 11));
  uintptr_t sp = regs->sp();
  M* m = getm();
  G* g = m != nullptr ? m->curg : nullptr;
  if (g != nullptr && g->stack_lo != nullptr && sp >= reinterpret_cast<uintptr_t>(g->stack_lo) &&
      sp < reinterpret_cast<uintptr_t>(g->stack_hi)) {
    *view = goroutine_stack(g);
  } else if (m != nullptr && on_g0_stack(m, sp)) {
    view->lo = reinterpret_cast<uintptr_t>(m->g0_stack_lo);
    view->hi = view->lo + m->g0_stack_size;
  } else {
    // A plain thread, sysmon, or an alternate signal stack.
    pthread_attr_t attr;
    void* lo = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &lo, &size);
      pthread_attr_destroy(&attr);
    }
    uintptr_t l = reinterpret_cast<uintptr_t>(lo);
    if (sp >= l && sp < l + size) {
      view->lo = l;
      view->hi = l + size;
    } else {
      // Not on the thread's stack (a signal stack): the next 64 KiB.
      view->lo = sp;
      view->hi = sp + 64 * 1024;
    }
  }
  view->copy = nullptr;
  // The frames below sp (later calls) are not part of the walk.
  if (view->lo < sp - 128) view->lo = sp - 128;
}

// ---- asking another M ----

namespace {

__attribute__((no_sanitize("address", "thread"))) void copy_words(char* dst, uintptr_t src, size_t n) {
  auto* s = reinterpret_cast<const volatile uint64_t*>(src);
  auto* d = reinterpret_cast<uint64_t*>(dst);
  for (size_t i = 0; i < n / 8; i++) d[i] = s[i];
}

void sleep_briefly() {
  timespec ts{0, 50 * 1000};
  sys::nanosleep(&ts, nullptr);
}

bool signal_m(M* m) {
  return runtime.hooks.traceback_signal(m);
}

// ---- the request's state (TracebackState, gmp/m_traceback.hpp) ----

[[noreturn, gnu::cold, gnu::noinline]] void bad_request(const M* m, TracebackState from, TracebackState to) {
  bad_transition(kTracebackTable, "M", m->id, "traceback request", from, to,
                 m->tb.state.load(std::memory_order_relaxed));
}

// By the one party that may leave `from`: the asker leaves kIdle and
// kDone, the handler kBusy. Async-signal-safe.
void set_request_state(M* m, TracebackState from, TracebackState to) {
  if (!kTracebackTable.legal(from, to) || m->tb.state.load(std::memory_order_relaxed) != from) [[unlikely]] {
    bad_request(m, from, to);
  }
  m->tb.state.store(to, std::memory_order_release);
}

// Out of kAsked, which the handler and a withdrawing asker race for: true
// if this one won.
bool cas_request_state(M* m, TracebackState from, TracebackState to) {
  if (!kTracebackTable.legal(from, to)) [[unlikely]] bad_request(m, from, to);
  return m->tb.state.compare_exchange_strong(from, to, std::memory_order_acq_rel);
}

// Takes back an unanswered request: one the handler has taken is waited
// for (it only copies memory) and let go once answered, or taken back if
// the handler declined it.
void withdraw(M* m) {
  for (;;) {
    if (cas_request_state(m, TracebackState::kAsked, TracebackState::kIdle)) return;
    if (m->tb.state.load(std::memory_order_acquire) == TracebackState::kDone) {
      set_request_state(m, TracebackState::kDone, TracebackState::kIdle);
      return;
    }
    sleep_briefly();
  }
}

void answer(M* m, RunningRegs* out, bool live) {
  TracebackRequest& r = m->tb;
  out->ok = r.g != nullptr;
  if (!out->ok) return;
  for (int i = 0; i < 17; i++) out->regs.r[i] = r.regs[i];
  out->regs.known = r.regs_known;
  out->after_call = r.g_after_call;
  out->view = goroutine_stack(r.g);
  if (!live) {
    out->view.lo = r.copy_lo;
    out->view.hi = r.copy_lo + r.copied;
    out->view.copy = r.buf;
    out->view.copy_lo = r.copy_lo;
  }
}

void put_regs(const UnwindRegs& from, uint64_t* regs, uint32_t* known) {
  for (int i = 0; i < 17; i++) regs[i] = from.r[i];
  *known = from.known;
}

// The M made g its current goroutine (curg) and is not on g's stack (the
// caller checked): it is on g0's stack in execute, or on the previous
// goroutine's in next_local's direct switch, and g's saved context is where
// g stands. Not so while g itself runs off its stack: in systemstack, or in
// a signal handler on the signal stack.
bool about_to_resume(M* m, const G* g, uintptr_t sp) {
  if (g == nullptr || g->is_g0 || __atomic_load_n(&g->ctx, __ATOMIC_ACQUIRE) == nullptr ||
      m->in_systemstack.load(std::memory_order_relaxed)) {
    return false;
  }
  return on_g0_stack(m, sp) || goroutine_on_stack(sp) != nullptr;
}

// A switch has landed (the M stands on the arriving side's stack, which
// still holds its spent context) but has not yet written the context of the
// goroutine it left (switch.cpp, `arrived`): that goroutine's status says
// it is not running and nothing says where it stands. A freeze caught here
// declines, and is asked again a moment later. The arriving side's context
// is cleared only after the left one is written, and a running goroutine,
// or g0 while it runs, has none; systemstack runs below g0's context.
// in_jump: the M was caught inside jump_fcontext, which both sides explain.
bool landed_unpublished(M* m, uintptr_t sp, bool in_jump) {
  if (in_jump || m->in_systemstack.load(std::memory_order_relaxed)) return false;
  const G* on = goroutine_on_stack(sp);
  if (on == nullptr && on_g0_stack(m, sp)) on = &m->g0;
  return on != nullptr && __atomic_load_n(&on->ctx, __ATOMIC_ACQUIRE) != nullptr;
}

// Copies [lo, g's stack top) into buf, as much as fits in cap (whole words
// from lo, which is word-aligned); returns the bytes copied.
size_t copy_stack_from(const G* g, uintptr_t lo, char* buf, size_t cap) {
  auto hi = reinterpret_cast<uintptr_t>(g->stack_hi);
  size_t n = hi > lo ? (hi - lo < cap ? hi - lo : cap) : 0;
  n &= ~size_t{7};
  copy_words(buf, lo, n);
  return n;
}

}  // namespace

G* goroutine_on_stack(uintptr_t sp) {
  StackSlot slot;
  if (!find_stack(reinterpret_cast<void*>(sp), &slot) || slot.guard) return nullptr;
  return reinterpret_cast<G*>(slot.lo + slot.size - kGSize);
}

StackView copy_parked_stack(const G* g, const void* ctx, char* buf, size_t cap, UnwindRegs* regs) {
  auto lo = reinterpret_cast<uintptr_t>(ctx) & ~uintptr_t{7};
  size_t n = copy_stack_from(g, lo, buf, cap);
  context_regs(ctx, regs, buf + (reinterpret_cast<uintptr_t>(ctx) - lo));
  StackView v;
  v.lo = lo;
  v.hi = lo + n;
  v.copy = buf;
  v.copy_lo = lo;
  return v;
}

bool ask_running_m(M* m, G* g, char* buf, size_t cap, int64_t timeout_ns, RunningRegs* out) {
  *out = RunningRegs{};
  TracebackRequest& r = m->tb;
  if (r.state.load(std::memory_order_acquire) != TracebackState::kIdle) return false;
  r.freeze = false;
  r.buf = buf;
  r.cap = cap;
  r.g = nullptr;
  r.copied = 0;
  set_request_state(m, TracebackState::kIdle, TracebackState::kAsked);
  if (!signal_m(m)) {
    withdraw(m);
    return false;
  }
  int64_t deadline = nanotime() + timeout_ns;
  while (r.state.load(std::memory_order_acquire) != TracebackState::kDone) {
    if (nanotime() > deadline) {
      withdraw(m);
      return false;
    }
    sleep_briefly();
  }
  answer(m, out, false);
  bool ok = out->ok && r.g == g;
  set_request_state(m, TracebackState::kDone, TracebackState::kIdle);
  out->ok = ok;
  return ok;
}

bool freeze_m(M* m) {
  TracebackRequest& r = m->tb;
  if (r.state.load(std::memory_order_acquire) != TracebackState::kIdle) return false;
  r.freeze = true;
  r.buf = nullptr;
  r.cap = 0;
  r.g = nullptr;
  set_request_state(m, TracebackState::kIdle, TracebackState::kAsked);
  if (signal_m(m)) return true;
  withdraw(m);
  return false;
}

bool freeze_answered(M* m) {
  TracebackState state = m->tb.state.load(std::memory_order_acquire);
  if (state == TracebackState::kAsked && m->tb.freeze) signal_m(m);  // declined, or not delivered yet
  return state == TracebackState::kDone;
}

bool frozen_regs_of(const G* g, RunningRegs* out) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  *out = RunningRegs{};
  for (M* m : sched.allm) {
    TracebackRequest& r = m->tb;
    if (r.state.load(std::memory_order_acquire) != TracebackState::kDone || !r.freeze) continue;
    if (r.g == g) {
      answer(m, out, true);
      return true;
    }
    if (r.leaving == g) {
      for (int i = 0; i < 17; i++) out->regs.r[i] = r.leaving_regs[i];
      out->regs.known = r.leaving_known;
      out->after_call = r.leaving_after_call;
      out->view = goroutine_stack(g);
      out->ok = true;
      return true;
    }
  }
  return false;
}

void traceback_signal_handler(M* m, const ucontext_t* uc) {
  TracebackRequest& r = m->tb;
  if (r.state.load(std::memory_order_relaxed) != TracebackState::kAsked ||
      !cas_request_state(m, TracebackState::kAsked, TracebackState::kBusy)) {
    return;
  }
  G* g = m->curg;
  UnwindRegs in;
  regs_from_ucontext(uc, &in);
  uintptr_t sp = in.sp();
  JumpSides jump;
  bool in_jump = in_jump_fcontext(in, &jump);
  if (r.freeze && landed_unpublished(m, sp, in_jump)) {
    set_request_state(m, TracebackState::kBusy, TracebackState::kAsked);  // freeze_world asks again
    return;
  }
  r.g = nullptr;
  r.g_after_call = false;
  r.leaving = nullptr;
  r.copied = 0;
  if (in_jump) {
    // Mid-switch: both sides are known exactly. A live ask wants only its
    // goroutine, which can only be the one entered.
    G* to = goroutine_on_stack(jump.entering.sp());
    if (to != nullptr && (to == g || r.freeze)) {
      r.g = to;
      r.g_after_call = true;
      put_regs(jump.entering, r.regs, &r.regs_known);
    }
    G* from = goroutine_on_stack(jump.leaving.sp());
    if (r.freeze && from != nullptr) {
      r.leaving = from;
      r.leaving_after_call = true;
      put_regs(jump.leaving, r.leaving_regs, &r.leaving_known);
    }
  } else if (g != nullptr && !g->is_g0 && g->stack_lo != nullptr && sp >= reinterpret_cast<uintptr_t>(g->stack_lo) &&
             sp < reinterpret_cast<uintptr_t>(g->stack_hi)) {
    r.g = g;
    put_regs(in, r.regs, &r.regs_known);
  } else if (r.freeze) {
    // Caught around a switch (the process is dying: say as much as is
    // known). next_local's direct switch is both cases at once: g is
    // resuming while the stack is still the one of the goroutine it leaves.
    if (about_to_resume(m, g, sp)) {
      UnwindRegs saved;
      parked_regs(g, &saved);
      r.g = g;
      r.g_after_call = true;
      put_regs(saved, r.regs, &r.regs_known);
    }
    if (G* on = goroutine_on_stack(sp)) {
      r.leaving = on;
      r.leaving_after_call = false;
      put_regs(in, r.leaving_regs, &r.leaving_known);
    }
  }
  if (r.g != nullptr && r.buf != nullptr) {
    // From below the red zone up, as much as fits: the innermost frames.
    uintptr_t from = r.regs[kRegRsp];
    uintptr_t lo = from - 128;
    if (lo < reinterpret_cast<uintptr_t>(r.g->stack_lo)) lo = reinterpret_cast<uintptr_t>(r.g->stack_lo);
    lo &= ~uintptr_t{7};
    r.copy_lo = lo;
    r.copied = copy_stack_from(r.g, lo, r.buf, r.cap);
  }
  bool freeze = r.freeze;
  set_request_state(m, TracebackState::kBusy, TracebackState::kDone);
  if (!freeze) return;
  // A dying process: hold still until it exits.
  for (;;) sys::pause();
}

}  // namespace gort::internal

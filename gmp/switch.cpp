// gmp/switch.cpp — see switch.hpp. The only file that includes Boost.Context.
#include "gmp/switch.hpp"

#include <pthread.h>
#include <signal.h>

#include <cxxabi.h>

#include <boost/context/detail/fcontext.hpp>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "gmp/os/fatal.hpp"
#include "gmp/race/sanitizer.hpp"
#include "gmp/race/race.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {
namespace bctx = boost::context::detail;

static_assert(kGSize <= kRaceKeepMax, "tsan_fresh_stack keeps the G across the remap");

namespace {

// libstdc++'s per-thread exception state (cxxabi's __cxa_eh_globals).
struct EhGlobals {
  void* caught_exceptions;
  unsigned int uncaught_exceptions;
};

// __cxa_get_globals and __errno_location are declared const: the compiler
// may keep their results in a register across a switch that moved us to
// another thread. These wrappers are opaque to it.
__attribute__((noipa)) EhGlobals* eh_globals() {
  asm volatile("" ::: "memory");
  return reinterpret_cast<EhGlobals*>(abi::__cxa_get_globals());
}

__attribute__((noipa)) int* errno_location() {
  asm volatile("" ::: "memory");
  return &errno;
}

}  // namespace

void m_thread_state_init(M* m) {
  m->errno_ptr = errno_location();
  m->eh_globals = eh_globals();
  m->g0.tsan_fiber = tsan_current_fiber();
  // The thread's TLS was written by TSan's thread start (its "clear" of the
  // block). The thread carries no goroutine's history (newm starts it
  // outside any), so publishing that is no edge between goroutines.
  race_release(&m->race.tls);
  tsan_errno_is_per_goroutine(m->errno_ptr);
  // The kernel's mask is the first 64 bits of a sigset_t.
  sigset_t cur;
  pthread_sigmask(SIG_SETMASK, nullptr, &cur);
  std::memcpy(&m->sigmask, &cur, sizeof m->sigmask);
}

namespace {

inline void save_thread_state(G* g) {
  M* m = getm();
  g->saved_errno = *m->errno_ptr;
  EhGlobals* eh = static_cast<EhGlobals*>(m->eh_globals);
  g->eh_caught = eh->caught_exceptions;
  g->eh_uncaught = eh->uncaught_exceptions;
  eh->caught_exceptions = nullptr;
  eh->uncaught_exceptions = 0;
}

inline void restore_thread_state(G* g) {
  M* m = getm();
  EhGlobals* eh = static_cast<EhGlobals*>(m->eh_globals);
  eh->caught_exceptions = g->eh_caught;
  eh->uncaught_exceptions = g->eh_uncaught;
  *m->errno_ptr = g->saved_errno;
}

inline void asan_start(G* from, G* to, bool from_dying) {
#ifdef GORT_ASAN
  M* m = getm();
  const void* bottom;
  size_t size;
  if (to->is_g0) {
    bottom = m->g0_stack_lo;
    size = m->g0_stack_size;
  } else {
    bottom = to->stack_lo;
    size = static_cast<size_t>(to->stack_hi - to->stack_lo);
  }
  __sanitizer_start_switch_fiber(from_dying ? nullptr : &from->asan_fake_stack, bottom, size);
#else
  (void)from;
  (void)to;
  (void)from_dying;
#endif
}

inline void asan_finish(G* self) {
#ifdef GORT_ASAN
  __sanitizer_finish_switch_fiber(self->asan_fake_stack, nullptr, nullptr);
#else
  (void)self;
#endif
}

// Runs on the arriving context, right after a jump landed.
inline void arrived(G* self, bctx::transfer_t t) {
  // prev's context first: until it is stored, prev is a goroutine not
  // running by its status and without a context, which a dump of a dying
  // process cannot walk (no M reports it once this one is on self's
  // stack). ASan's bookkeeping below is a call, not a few instructions.
  G* prev = static_cast<G*>(t.data);
  __atomic_store_n(&prev->ctx, t.fctx, __ATOMIC_RELEASE);
  asan_finish(self);
  // self's context is spent: a traceback that finds a goroutine not
  // running by its status and without a context knows that its switch
  // away is under way (traceback.cpp), rather than walk a stale one.
  __atomic_store_n(&self->ctx, nullptr, __ATOMIC_RELAXED);
  self->resumes.store(self->resumes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // before the G's own stack writes
  after_switch(prev);
  restore_thread_state(self);
}

void entry(bctx::transfer_t t) {
  G* self = getm()->curg;
  arrived(self, t);
  goroutine_main(self);
}

}  // namespace

// In the goroutine's fiber, once switched to it (see MRace::tls).
inline void race_arrive_on_m(G* to) {
  if (kRaceEnabled && !to->is_g0) race_acquire(&getm()->race.tls);
}

void switch_to(G* from, G* to) {
  save_thread_state(from);
  asan_start(from, to, false);
  tsan_switch_to(to->tsan_fiber);
  race_arrive_on_m(to);
  bctx::transfer_t t = bctx::jump_fcontext(to->ctx, from);
  arrived(from, t);
}

void switch_exit(G* from, G* to) {
  save_thread_state(from);
  asan_start(from, to, true);
  tsan_switch_to(to->tsan_fiber);
  race_arrive_on_m(to);
  bctx::jump_fcontext(to->ctx, from);
  fatal("switch_exit: a dead goroutine was resumed");
}

void capture_fp_control(G* g) {
#if defined(__x86_64__)
  asm volatile("stmxcsr %0" : "=m"(g->fp_mxcsr));
  asm volatile("fnstcw %0" : "=m"(g->fp_x87cw));
#else
  (void)g;
#endif
}

// Boost.Context's saved context on x86-64 (jump_x86_64_sysv_elf_gas.S,
// make_x86_64_sysv_elf_gas.S): the fcontext_t points at
//   0x00 MXCSR, x87 control word   0x08 r12   0x10 r13   0x18 r14
//   0x20 r15   0x28 rbx   0x30 rbp   0x38 the return address
// and the context's stack pointer is fcontext + 0x40 once resumed. A new
// context's "rbp" is the address of its `finish` label, which its
// trampoline pushes as the entry function's return address.
constexpr size_t kCtxR12 = 0x08, kCtxRbx = 0x28, kCtxRbp = 0x30, kCtxRip = 0x38, kCtxSize = 0x40;

void make_context(G* g) {
  tsan_fresh_stack(g->stack_lo, reinterpret_cast<char*>(g) + kGSize, kGSize);
  size_t size = static_cast<size_t>(g->stack_hi - g->stack_lo);
  g->ctx = bctx::make_fcontext(g->stack_hi, size, &entry);
#if defined(__x86_64__)
  // make_fcontext snapshots the *current* thread's MXCSR and x87 control
  // word into the new context (at offsets 0 and 4); the goroutine must get
  // its creator's instead.
  std::memcpy(static_cast<char*>(g->ctx), &g->fp_mxcsr, sizeof g->fp_mxcsr);
  std::memcpy(static_cast<char*>(g->ctx) + 4, &g->fp_x87cw, sizeof g->fp_x87cw);
  // A zero return address below the first frame, as a thread's start has:
  // unwinders (tracebacks, gdb, and the C++ runtime looking for a handler)
  // stop there instead of walking into the G above the stack. `entry`
  // never returns, so the finish label it replaces is never needed. An
  // exception nothing catches so ends its search at the bottom of the
  // goroutine and std::terminate runs on the intact stack (panic.cpp).
  std::memset(static_cast<char*>(g->ctx) + kCtxRbp, 0, 8);
#endif
  g->saved_errno = 0;
  g->eh_caught = nullptr;
  g->eh_uncaught = 0;
  g->asan_fake_stack = nullptr;
}

namespace {

__attribute__((no_sanitize("address", "thread"))) uint64_t ctx_word(const void* ctx, size_t off) {
  return *reinterpret_cast<const volatile uint64_t*>(static_cast<const char*>(ctx) + off);
}

// The registers a saved context holds, as a caller's state after the call;
// read from `bytes` (a copy of the memory at ctx) if given.
void ctx_regs(uintptr_t ctx, UnwindRegs* regs, const void* bytes = nullptr) {
  *regs = UnwindRegs{};
#if defined(__x86_64__)
  const void* c = bytes != nullptr ? bytes : reinterpret_cast<const void*>(ctx);
  for (int i = 0; i < 4; i++) regs->r[12 + i] = ctx_word(c, kCtxR12 + 8 * static_cast<size_t>(i));
  regs->r[kRegRbx] = ctx_word(c, kCtxRbx);
  regs->r[kRegRbp] = ctx_word(c, kCtxRbp);
  regs->r[kRegRip] = ctx_word(c, kCtxRip);
  regs->r[kRegRsp] = ctx + kCtxSize;
  regs->known = (1u << kRegRbx) | (1u << kRegRbp) | (1u << kRegRsp) | (0xFu << 12) | (1u << kRegRip);
#else
  (void)ctx;
  (void)bytes;
#endif
}

#if defined(__x86_64__)
// jump_fcontext (Boost 1.74, x86-64 SysV), by offset:
//   +0   lea -0x38(%rsp),%rsp       +5..+38  the leaving registers pushed
//   +43  mov %rsp,%rax (leaving context complete)
//   +46  mov %rdi,%rsp (the entered context's stack from here)
//   +49..+87  the entered registers popped    +92  lea 0x40(%rsp),%rsp
//   +97..+103 transfer_t set up, jmp *%r8 (the entered return address)
// Checked against these instructions before use: another build of the
// library is simply not decoded.
constexpr uintptr_t kJumpLea = 0, kJumpLeavingDone = 43, kJumpSwapSp = 46, kJumpPopSp = 92, kJumpEnd = 106;

bool jump_layout_known(const unsigned char* f) {
  static const unsigned char kLea[] = {0x48, 0x8d, 0x64, 0x24, 0xc8};
  static const unsigned char kMovRax[] = {0x48, 0x89, 0xe0, 0x48, 0x89, 0xfc};
  static const unsigned char kPop[] = {0x48, 0x8d, 0x64, 0x24, 0x40};
  static const unsigned char kJmp[] = {0x41, 0xff, 0xe0};
  return std::memcmp(f + kJumpLea, kLea, sizeof kLea) == 0 &&
         std::memcmp(f + kJumpLeavingDone, kMovRax, sizeof kMovRax) == 0 &&
         std::memcmp(f + kJumpPopSp, kPop, sizeof kPop) == 0 &&
         std::memcmp(f + kJumpEnd - sizeof kJmp, kJmp, sizeof kJmp) == 0;
}
#endif

}  // namespace

void context_regs(const void* ctx, UnwindRegs* regs, const void* bytes) {
  *regs = UnwindRegs{};
  if (ctx != nullptr) ctx_regs(reinterpret_cast<uintptr_t>(ctx), regs, bytes);
}

void parked_regs(const G* g, UnwindRegs* regs) { context_regs(__atomic_load_n(&g->ctx, __ATOMIC_ACQUIRE), regs); }

bool in_jump_fcontext(const UnwindRegs& in, JumpSides* out) {
#if defined(__x86_64__)
  // 0 unknown, 1 decodable, 2 not.
  static std::atomic<int> layout{0};
  auto start = reinterpret_cast<uintptr_t>(&bctx::jump_fcontext);
  uintptr_t pc = in.r[kRegRip];
  if (pc < start || pc >= start + kJumpEnd) return false;
  int known = layout.load(std::memory_order_relaxed);
  if (known == 0) {
    known = jump_layout_known(reinterpret_cast<const unsigned char*>(start)) ? 1 : 2;
    layout.store(known, std::memory_order_relaxed);
  }
  if (known != 1) return false;
  uintptr_t off = pc - start;
  uintptr_t sp = in.r[kRegRsp];
  constexpr uint32_t kCalleeSaved = (1u << kRegRbx) | (1u << kRegRbp) | (0xFu << 12);
  // The leaving side.
  if (off <= kJumpLeavingDone) {
    // Its registers are still live; the return address is on top of its
    // stack, above the area being filled.
    uintptr_t ra_at = off == kJumpLea ? sp : sp + kCtxRip;
    out->leaving = UnwindRegs{};
    for (uint32_t k = kCalleeSaved; k != 0; k &= k - 1) {
      int i = __builtin_ctz(k);
      out->leaving.r[i] = in.r[i];
    }
    out->leaving.r[kRegRip] = ctx_word(reinterpret_cast<const void*>(ra_at), 0);
    out->leaving.r[kRegRsp] = ra_at + 8;
    out->leaving.known = kCalleeSaved | (1u << kRegRip) | (1u << kRegRsp);
  } else {
    ctx_regs(in.r[0], &out->leaving);  // rax: the complete leaving context
  }
  // The entered side: its context is whole in memory until the jump
  // leaves (only read from it).
  uintptr_t entered = off <= kJumpSwapSp ? in.r[5] : off <= kJumpPopSp ? sp : sp - kCtxSize;  // rdi before the swap
  ctx_regs(entered, &out->entering);
  return true;
#else
  (void)in;
  (void)out;
  return false;
#endif
}

namespace {

struct SystemCall {
  void (*fn)(void*);
  void* arg;
  // ASan: the caller's stack, to tell ASan when switching back to it.
  const void* from_bottom = nullptr;
  size_t from_size = 0;
};

void systemstack_entry(bctx::transfer_t t) {
  auto* c = static_cast<SystemCall*>(t.data);
#ifdef GORT_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &c->from_bottom, &c->from_size);
#endif
  c->fn(c->arg);
  // Back to the caller; this context is simply abandoned (no fake stack
  // to keep: null).
#ifdef GORT_ASAN
  __sanitizer_start_switch_fiber(nullptr, c->from_bottom, c->from_size);
#endif
  bctx::jump_fcontext(t.fctx, nullptr);
}

}  // namespace

void systemstack(void (*fn)(void*), void* arg) {
#if defined(GORT_TSAN_ON)
  fn(arg);  // no TSan fiber for this one-off stack: run in place
#else
  M* m = getm();
  G* g = m != nullptr ? m->curg : nullptr;
  // g0 is suspended only while one of its goroutines runs; its context is
  // then the lowest address in use on its stack.
  uintptr_t lo = m != nullptr ? reinterpret_cast<uintptr_t>(m->g0_stack_lo) : 0;
  uintptr_t top = m != nullptr ? reinterpret_cast<uintptr_t>(m->g0.ctx) : 0;
  constexpr uintptr_t kMinSize = 256 * 1024;
  // Nested (a traceback that fails while printing one): already on the
  // region below g0's context, which a second one would overwrite.
  if (g == nullptr || g->is_g0 || m->in_systemstack.load(std::memory_order_relaxed) || lo == 0 || top < lo + kMinSize + 4096 ||
      top > lo + m->g0_stack_size) {
    fn(arg);
    return;
  }
  top = (top - 256) & ~uintptr_t{15};
  SystemCall call{fn, arg};
  bctx::fcontext_t ctx = bctx::make_fcontext(reinterpret_cast<void*>(top), top - lo - 4096, &systemstack_entry);
  m->in_systemstack.store(true, std::memory_order_relaxed);
#ifdef GORT_ASAN
  // Told, as every switch is: ASan's no-return hooks and its stack checks
  // would otherwise take the M's stack for the goroutine's (or the signal
  // stack's: a dying goroutine's traceback is printed from a fault handler,
  // and libdw needs more than the small signal stack ASan gives a thread).
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, reinterpret_cast<void*>(lo + 4096), top - lo - 4096);
  bctx::jump_fcontext(ctx, &call);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  bctx::jump_fcontext(ctx, &call);
#endif
  m->in_systemstack.store(false, std::memory_order_relaxed);
#endif
}

}  // namespace gort::internal

// gmp/switch.cpp — see switch.hpp. The only file that includes Boost.Context.
#include "gmp/switch.hpp"

#include <pthread.h>
#include <signal.h>

#include <cxxabi.h>

#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <cstring>

#include "gmp/fatal.hpp"
#include "gmp/sanitizer.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {
namespace bctx = boost::context::detail;

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
  asan_finish(self);
  G* prev = static_cast<G*>(t.data);
  prev->ctx = t.fctx;
  after_switch(prev);
  restore_thread_state(self);
}

void entry(bctx::transfer_t t) {
  G* self = getm()->curg;
  arrived(self, t);
  goroutine_main(self);
}

}  // namespace

void switch_to(G* from, G* to) {
  save_thread_state(from);
  asan_start(from, to, false);
  tsan_switch_to(to->tsan_fiber);
  bctx::transfer_t t = bctx::jump_fcontext(to->ctx, from);
  arrived(from, t);
}

void switch_exit(G* from, G* to) {
  save_thread_state(from);
  asan_start(from, to, true);
  tsan_switch_to(to->tsan_fiber);
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

void make_context(G* g) {
  size_t size = static_cast<size_t>(g->stack_hi - g->stack_lo);
  g->ctx = bctx::make_fcontext(g->stack_hi, size, &entry);
#if defined(__x86_64__)
  // make_fcontext snapshots the *current* thread's MXCSR and x87 control
  // word into the new context (at offsets 0 and 4); the goroutine must get
  // its creator's instead.
  std::memcpy(static_cast<char*>(g->ctx), &g->fp_mxcsr, sizeof g->fp_mxcsr);
  std::memcpy(static_cast<char*>(g->ctx) + 4, &g->fp_x87cw, sizeof g->fp_x87cw);
#endif
  if (g->tsan_fiber == nullptr) g->tsan_fiber = tsan_create_fiber();
  g->saved_errno = 0;
  g->eh_caught = nullptr;
  g->eh_uncaught = 0;
  g->asan_fake_stack = nullptr;
}

}  // namespace gort::internal

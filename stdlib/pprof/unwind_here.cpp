// stdlib/pprof/unwind_here.cpp — see unwind_here.hpp.
//
// _Unwind_Backtrace in a signal handler: libgcc 12 on glibc >= 2.35 finds
// a PC's unwind tables with _dl_find_object, which takes no lock and
// allocates nothing; its once-only set-up is done ahead (unwind_warm_up).
// What remains unsafe: a program that registers frames of its own (a JIT's
// __register_frame) sends libgcc through a mutex first, which an
// interrupted holder keeps locked (a deadlock); and a corrupt stack can
// fault the walk. The walk starts in the handler and goes through the
// kernel's signal frame (glibc's __restore_rt carries call frame
// information marked as a signal frame): the frames before the interrupted
// instruction are the handler's and are dropped. Code without unwind
// tables (Boost.Context's switch, JIT code) ends the walk at that frame.
#include "stdlib/pprof/unwind_here.hpp"

#include <sys/ucontext.h>
#include <unwind.h>

namespace gort::internal {
namespace {

struct Walk {
  uintptr_t* out;
  int max;
  int n = 0;
  int skip = 0;          // frames to drop first (unwind_here's own)
  uintptr_t from = 0;    // with a signal: the interrupted instruction
  bool started = true;
};

_Unwind_Reason_Code step(_Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<Walk*>(arg);
  int exact = 0;
  auto ip = static_cast<uintptr_t>(_Unwind_GetIPInfo(ctx, &exact));
  if (ip == 0) return _URC_END_OF_STACK;
  if (!w->started) {
    // The frame below the kernel's signal frame, at the interrupted
    // instruction: the first one that is not the handler's.
    if (exact == 0 || ip != w->from) return _URC_NO_REASON;
    w->started = true;
  }
  if (w->skip > 0) {
    w->skip--;
    return _URC_NO_REASON;
  }
  w->out[w->n++] = exact != 0 ? ip : ip - 1;
  return w->n < w->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

}  // namespace

__attribute__((noinline)) int unwind_here(uintptr_t* out, int max) {
  if (max <= 0) return 0;
  Walk w{out, max};
  w.skip = 1;  // unwind_here
  _Unwind_Backtrace(&step, &w);
  return w.n;
}

int unwind_interrupted(const void* ucv, uintptr_t* out, int max) {
  if (max <= 0) return 0;
  const auto* uc = static_cast<const ucontext_t*>(ucv);
#if defined(__x86_64__)
  const auto pc = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  const auto pc = static_cast<uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;  // no ucontext layout known here
#endif
  Walk w{out, max};
  w.from = pc;
  w.started = false;
  _Unwind_Backtrace(&step, &w);
  if (w.n == 0) out[w.n++] = pc;  // the walk never reached it: the PC alone
  return w.n;
}

void unwind_warm_up() {
  uintptr_t pcs[4];
  (void)unwind_here(pcs, 4);
}

}  // namespace gort::internal

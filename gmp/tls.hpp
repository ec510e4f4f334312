// gmp/tls.hpp — access to the current M.
//
// The compiler may compute the address of a thread_local once per function
// and keep it across a call that parks; if the goroutine then resumes on
// another M, it would read the old thread's variables (llvm-project#98479).
// So every access goes through getm(), which reads the thread pointer
// inside an `asm volatile`: the compiler can neither cache the result nor
// the address across a switch. (Elsewhere than x86-64 it is a noipa call.)
// Never hold the result across a park or yield.
#pragma once

#include "gmp/room.hpp"

#include <cstdint>

#include "gmp/m.hpp"

extern "C" {
// Initial-exec TLS: a fixed offset from the thread pointer, no
// __tls_get_addr call.
extern __thread gort::internal::M* gort_current_m __attribute__((tls_model("initial-exec")));
// Signals of the runtime's own (preemption, profiling) this thread has
// taken: their handlers count them, so that a call that failed with EINTR
// can tell the runtime's signal from the program's (netpoll/hook/).
extern __thread uint32_t gort_own_signals __attribute__((tls_model("initial-exec")));
}

namespace gort::internal {

#if defined(__x86_64__)
inline M* getm() {
  M* m;
  asm volatile(
      "movq gort_current_m@gottpoff(%%rip), %0\n\t"
      "movq %%fs:(%0), %0"
      : "=r"(m)
      :
      : "memory");
  return m;
}
#else
M* getm();
#endif

void setm(M* m);

// The running goroutine, or null on g0 or outside the runtime.
inline G* getg() {
  M* m = getm();
  return m ? m->curg : nullptr;
}

}  // namespace gort::internal

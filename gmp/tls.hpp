// gmp/tls.hpp — access to the current M.
//
// The compiler may compute the address of a thread_local once per function
// and keep it across a call that parks; if the goroutine then resumes on
// another M, it would read the old thread's variables (llvm-project#98479).
// So every access goes through getm(), which is noipa (GCC) and contains an
// opaque asm statement: it can be neither inlined, nor proven pure, nor
// hoisted across a switch. Never hold the result across a park or yield.
#pragma once

#include "gmp/m.hpp"

namespace gort::internal {

M* getm();
void setm(M* m);

// The running goroutine, or null on g0 or outside the runtime.
inline G* getg() {
  M* m = getm();
  return m ? m->curg : nullptr;
}

}  // namespace gort::internal

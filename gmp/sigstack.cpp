// gmp/sigstack.cpp — each M's alternate signal stack (Go's
// minitSignalStack): the fault handler (gmp/diag/fault.cpp) must run when
// a goroutine's stack is the thing that overflowed, and preemption's
// handler must not push onto a goroutine's small stack.
#include <signal.h>
#include <sys/mman.h>

#include "gmp/m.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/sched.hpp"

namespace gort::internal {
namespace {

constexpr size_t kSigStackSize = 64 * 1024;

}  // namespace

void m_signal_stack_init(M* m) {
  stack_t old;
  if (sigaltstack(nullptr, &old) == 0 && (old.ss_flags & SS_DISABLE) == 0) {
    return;  // someone (ASan, the application) already gave this thread one
  }
  void* mem = mmap(nullptr, kSigStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (mem == MAP_FAILED) fatal("cannot allocate a signal stack");
  stack_t ss = {};
  ss.ss_sp = mem;
  ss.ss_size = kSigStackSize;
  if (sigaltstack(&ss, nullptr) != 0) fatal("sigaltstack failed");
  m->sigstack = mem;
  m->sigstack_size = kSigStackSize;
}

void m_signal_stack_free(M* m) {
  if (m->sigstack == nullptr) return;
  stack_t ss = {};
  ss.ss_flags = SS_DISABLE;
  sigaltstack(&ss, nullptr);
  munmap(m->sigstack, m->sigstack_size);
  m->sigstack = nullptr;
}

}  // namespace gort::internal

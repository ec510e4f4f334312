// gmp/diag/fault.cpp — telling a goroutine stack overflow from other faults.
//
// Each stack has a guard region below it. A goroutine that runs into it
// faults with SIGSEGV; the handler runs on the M's alternate signal stack
// (the faulting stack is unusable), checks that the address lies in the
// running G's guard, and prints Go's `fatal error: stack overflow`.
//
// A frame larger than the guard (code built without -fstack-clash-protection)
// can jump it: its first touch lands in the stack below, or in that stack's
// guard or further down, having maybe overwritten other goroutines' frames
// and the G at the top of their stacks. So a fault anywhere in the stack
// pools' memory (every stack size class's) while a goroutine runs is
// reported as that goroutine's stack overflow too, naming the stack it hit
// (find_stack is async-signal-safe). The report is Go's, with the goroutine's frames from
// the faulting instruction (fatal.cpp's die, on the M's own stack: the
// alternate signal stack is too small for a symbolizer). Any other fault goes to whatever handler was
// installed before us (ASan's, the application's) or, if none, gets the
// default action.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "gmp/diag/diag.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gmp/diag/unwind.hpp"
#include "gort/detail/race.hpp"

namespace gort::internal {
namespace {

struct sigaction g_old_segv;
struct sigaction g_old_bus;
std::once_flag g_install_once;


// In a race build (docs/race.md) the overflow is reported after the
// handler returns, not inside it: ThreadSanitizer reports every malloc
// made in a signal handler (libdw and the demangler allocate), some 800
// reports in front of the traceback. It calls the handler of a fault on
// the real context (SIGSEGV is synchronous to it), so the handler points
// that context at die_after_fault, on the top of the thread's alternate
// signal stack (TSan's own, or the M's), which nothing uses once the
// handler has returned. Returns false in other builds.
Death* g_fault_death;

[[noreturn]] void die_after_fault() { die(g_fault_death); }

bool return_into_die(ucontext_t* uc, Death* d) {
#if defined(__x86_64__)
  stack_t ss;
  if (!kRaceEnabled || sigaltstack(nullptr, &ss) != 0 || (ss.ss_flags & SS_ONSTACK) == 0) return false;
  g_fault_death = d;
  uintptr_t top = reinterpret_cast<uintptr_t>(ss.ss_sp) + ss.ss_size;
  // As right after a call: die_after_fault never returns, so the slot of
  // its return address is left as it is (the kernel's signal frame lies
  // there until the handler returns).
  uc->uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>((top & ~uintptr_t{15}) - 8);
  uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(reinterpret_cast<uintptr_t>(&die_after_fault));
  return true;
#else
  (void)uc, (void)d;
  return false;
#endif
}

void chain(int sig, siginfo_t* info, void* uc) {
  struct sigaction* old = sig == SIGSEGV ? &g_old_segv : &g_old_bus;
  if ((old->sa_flags & SA_SIGINFO) != 0 && old->sa_sigaction != nullptr) {
    old->sa_sigaction(sig, info, uc);
    return;
  }
  if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
    old->sa_handler(sig);
    return;
  }
  // Default action: reinstate it and return; the fault repeats and kills.
  signal(sig, SIG_DFL);
}

// Names the stack at slot (not the running G's): its owner's G sits at
// its top, if the slot is in use and that G was not overwritten.
void describe_hit(char* addr, const StackSlot& slot) {
  char* hi = slot.lo + slot.size - kGSize;
  const G* owner = reinterpret_cast<const G*>(hi);
  write_stderr("runtime: fault at ");
  write_stderr_hex(reinterpret_cast<uintptr_t>(addr));
  write_stderr(slot.guard ? " in the guard of " : " in ");
  if (owner->stack_lo == slot.lo && owner->stack_hi == hi && !owner->is_g0 &&
      owner->status.load(std::memory_order_relaxed) != GStatus::kDead) {
    write_stderr("goroutine ");
    write_stderr_int(owner->id);
    write_stderr("'s stack [");
  } else {
    write_stderr("an unused stack [");
  }
  write_stderr_hex(reinterpret_cast<uintptr_t>(slot.lo));
  write_stderr(", ");
  write_stderr_hex(reinterpret_cast<uintptr_t>(hi));
  write_stderr(")\n");
}

// Not instrumented: ASan calls __asan_handle_no_return before _exit and
// die(), which looks up this thread's stack (pthread_getattr_np: malloc and
// /proc/self/maps) and faults again on an exhausted or alternate stack.
__attribute__((no_sanitize("address"))) void on_fault(int sig, siginfo_t* info, void* uc) {
  if (dying_on_this_thread()) {
    // The traceback of a dying process faulted (a stack it read changed
    // under it, a bug of ours): the message is out, end with it.
    write_stderr("\nruntime: fault while printing the traceback\n");
    exit_now(2);
  }
  M* m = getm();
  G* g = m ? m->curg : nullptr;
  if (g != nullptr && g->stack_lo != nullptr) {
    char* addr = static_cast<char*>(info->si_addr);
    bool own_guard = addr >= g->stack_lo - kGuardSize && addr < g->stack_lo;
    StackSlot slot;
    if (own_guard || find_stack(addr, &slot)) {
      write_stderr("runtime: goroutine stack exceeds ");
      write_stderr_int(static_cast<long long>(g->stack_hi - g->stack_lo));
      write_stderr("-byte limit\n");
      if (!own_guard) describe_hit(addr, slot);
      // Not on this frame: die() moves to the M's own stack, and a signal
      // arriving before it blocks them would reuse the alternate stack.
      static Death d;
      d.text[0] = "fatal error: stack overflow\n";
      d.all = true;
      d.g = g;
      regs_from_ucontext(static_cast<const ucontext_t*>(uc), &d.regs);
      d.view = goroutine_stack(g);
      d.have_regs = true;
      d.in_signal_handler = true;
      if (return_into_die(static_cast<ucontext_t*>(uc), &d)) return;
      die(&d);
    }
  }
  chain(sig, info, uc);
}

}  // namespace

void install_fatal_signal_handlers() {
  std::call_once(g_install_once, [] {
    struct sigaction sa = {};
    sa.sa_sigaction = &on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_old_segv);
    sigaction(SIGBUS, &sa, &g_old_bus);
  });
}

}  // namespace gort::internal

// gmp/syscall.cpp — gort::blocking's two halves, Go's entersyscall and
// exitsyscall: the P of an M inside a blocking call is left for sysmon to
// take (retake, preempt/sysmon.cpp) and hand off, so a long call does not
// hold up the other goroutines; a short one costs a few atomic operations.
#include <atomic>
#include <mutex>

#include "gmp/proc.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/tls.hpp"
#include "gort/runtime.hpp"

namespace gort::internal {

void entersyscall() {
  M* m = getm();
  if (m == nullptr || m->curg == nullptr || m->p == nullptr) return;
  P* p = m->p;
  m->blocking_p = p;
  sched.nblocking.fetch_add(1, std::memory_order_relaxed);
  p->syscalltick.store(p->syscalltick.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  m->in_blocking.store(true, std::memory_order_seq_cst);
  // A slice timer still to fire would interrupt f's system calls (EINTR):
  // stop it, here on its own thread, before f runs. Whatever its deadline
  // says: a timer fires up to the timer slack late.
  if (m->slice_timer_deadline.load(std::memory_order_seq_cst) != 0 &&
      sched.hooks.slice_timer_stop != nullptr) {
    sched.hooks.slice_timer_stop(m);
  }
  // From here p belongs to nobody: sysmon may take it (kBlocking -> kIdle)
  // and hand it off, and any M leaving blocking() may take it
  // (kBlocking -> kRunning), ours or not (see exitsyscall). m->p stays set
  // only as a hint for which timer heap to use.
  p->m = nullptr;
  p->status.store(PStatus::kBlocking, std::memory_order_release);
}

void exitsyscall() {
  M* m = getm();
  if (m == nullptr || !m->in_blocking.load(std::memory_order_relaxed)) return;
  G* g = m->curg;
  P* oldp = m->blocking_p;
  m->blocking_p = nullptr;
  m->in_blocking.store(false, std::memory_order_release);
  sched.nblocking.fetch_sub(1, std::memory_order_relaxed);
  PStatus expected = PStatus::kBlocking;
  if (oldp->status.compare_exchange_strong(expected, PStatus::kRunning, std::memory_order_acq_rel)) {
    // Fast path: our P is free. It may have been retaken and handed off
    // meanwhile, and be in blocking() again under another M: taking it is
    // then a retake like sysmon's (as in Go), and that M finds it gone.
    oldp->m = m;
    m->p = oldp;
    return;
  }
  // sysmon handed our P to another M.
  m->p = nullptr;
  {
    std::unique_lock<std::mutex> lock(sched.lock);
    P* np = pidleget();
    lock.unlock();
    if (np != nullptr) {
      acquirep(m, np);
      return;
    }
  }
  // No P free: queue ourselves and let this M go idle.
  set_status(g, GStatus::kRunning, GStatus::kRunnable);
  m->after = AfterSwitch::kGlobal;
  m->curg = nullptr;
  switch_to(g, &m->g0);
}

}  // namespace gort::internal

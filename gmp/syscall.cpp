// gmp/syscall.cpp — gort::blocking's two halves, Go's entersyscall and
// exitsyscall: the P of an M inside a blocking call is left for sysmon to
// take (retake, preempt/sysmon.cpp) and hand off, so a long call does not
// hold up the other goroutines; a short one costs a few atomic operations.
//
// C++ code also blocks in the kernel without telling anyone (a futex on
// someone's std::mutex or absl::Mutex, a plain read() in a library). sysmon
// takes the P of such an M too (preempt/retake.cpp); the M finds out at its
// next runtime entry (ensurep) and gets a P back here, as exitsyscall does.
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "gmp/os/fatal.hpp"
#include "gmp/proc.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/tls.hpp"
#include "gort/runtime.hpp"

namespace gort::internal {

P* ensurep_slow(M* m) {
  // sysmon is deciding (a membarrier away): wait for its verdict.
  RetakeState r;
  while ((r = m->retake.load(std::memory_order_acquire)) == RetakeState::kDeciding) sched_yield();
  if (r == RetakeState::kDone) {
    // The P went to another M while this thread slept in the kernel.
    m->p = nullptr;
    set_retake(m, RetakeState::kDone, RetakeState::kNone, std::memory_order_relaxed);
    UniqueLock lock(sched.lock);
    P* np = pidleget();
    lock.unlock();
    if (np != nullptr) acquirep(m, np);
  }
  return m->p;
}

void entersyscall() {
  M* m = getm();
  if (m == nullptr || m->curg == nullptr) return;
  // Under acquirem until p is kBlocking: sysmon takes only a kRunning P
  // from an M that is outside the runtime.
  acquirem(m);
  P* p = ensurep(m);
  // No P (sysmon took it and none was free): nothing to hand off.
  if (p == nullptr) {
    releasem(m);
    return;
  }
  m->blocking_p = p;
  sched.nblocking.fetch_add(1, std::memory_order_relaxed);
  p->syscalltick.store(p->syscalltick.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  m->in_blocking.store(true, std::memory_order_seq_cst);
  // A preemption signal sysmon sent just before it could see in_blocking
  // would interrupt f's first system call (EINTR): wait until sysmon is
  // done sending (Dekker with preempt_one), and if it queued anything since
  // we last looked, make one system call so that the kernel delivers it now,
  // to a handler that ignores it (in_blocking).
  while (m->preemption.sending.load(std::memory_order_seq_cst)) sched_yield();
  uint32_t queued = m->preemption.queued.load(std::memory_order_acquire);
  if (queued != m->preemption.queued_flushed) {
    m->preemption.queued_flushed = queued;
    (void)getppid();
  }
  // A slice timer still to fire would interrupt f's system calls (EINTR):
  // stop it, here on its own thread, before f runs. Whatever its deadline
  // says: a timer fires up to the timer slack late.
  if (m->preemption.slice_timer_deadline.load(std::memory_order_seq_cst) != 0) runtime.hooks.slice_timer_stop(m);
  // From here p belongs to nobody: sysmon may take it (kBlocking -> kIdle)
  // and hand it off, and any M leaving blocking() may take it
  // (kBlocking -> kRunning), ours or not (see exitsyscall). m->p stays set
  // only as a hint for which timer heap to use.
  relaxed_store<M*>(p->m, nullptr);
  set_status(p, PStatus::kRunning, PStatus::kBlocking);
  if (tracing()) [[unlikely]] trace_syscall(m->curg, true, false);
  releasem(m);
}

void entersyscallblock() {
  entersyscall();
  M* m = getm();
  if (m == nullptr || !m->in_blocking.load(std::memory_order_relaxed)) return;
  // Go's entersyscallblock: the call is known to block for long, so the P
  // goes to another M now instead of after sysmon's look (as retake does).
  P* p = m->blocking_p;
  if (cas_status(p, PStatus::kBlocking, PStatus::kIdle)) handoffp(p);
}

void exitsyscall() {
  M* m = getm();
  if (m == nullptr || !m->in_blocking.load(std::memory_order_relaxed)) return;
  G* g = m->curg;
  P* oldp = m->blocking_p;
  m->blocking_p = nullptr;
  m->in_blocking.store(false, std::memory_order_release);
  sched.nblocking.fetch_sub(1, std::memory_order_relaxed);
  if (cas_status(oldp, PStatus::kBlocking, PStatus::kRunning)) {
    // Fast path: our P is free. It may have been retaken and handed off
    // meanwhile, and be in blocking() again under another M: taking it is
    // then a retake like sysmon's (as in Go), and that M finds it gone.
    relaxed_store(oldp->m, m);
    m->p = oldp;
    if (tracing()) [[unlikely]] trace_syscall(g, false, false);
    return;
  }
  // sysmon handed our P to another M.
  m->p = nullptr;
  if (tracing()) [[unlikely]] trace_syscall(g, false, true);
  {
    UniqueLock lock(sched.lock);
    P* np = pidleget();
    lock.unlock();
    if (np != nullptr) {
      acquirep(m, np);
      return;
    }
  }
  // No P free: queue ourselves and let this M go idle.
  acquirem(m);  // carried to g0 (see gschedule)
  set_status(g, GStatus::kRunning, GStatus::kRunnable);
  if (m->oslocks.load(std::memory_order_relaxed) > 0) {
    // The thread holds an OS lock (a library's mutex held across a hooked
    // call, netpoll/hook/): the goroutine must not leave it. It waits for a
    // P on this M, as an asynchronously preempted goroutine does
    // (lockedm.cpp): queued, locked to this M, which sleeps until whoever
    // takes it from the queue hands over its P.
    relaxed_store(g->lockedm, m);
    relaxed_store(m->lockedg, g);
    m->after = AfterSwitch::kNone;
    relaxed_store<G*>(m->curg, nullptr);
    switch_to(g, &m->g0);
    if (getm() != m) fatal("exitsyscall: a goroutine holding an OS lock resumed on another M");
    relaxed_store<G*>(m->lockedg, nullptr);
    relaxed_store<M*>(g->lockedm, nullptr);
    releasem(m);
    return;
  }
  m->after = AfterSwitch::kGlobal;
  relaxed_store<G*>(m->curg, nullptr);
  switch_to(g, &m->g0);
  releasem(getm());
}

}  // namespace gort::internal

namespace gort {

// The goroutine is kept, not looked up again: the scope may end on
// another M (a preemption in between moves it), and the count is the
// goroutine's.
RawLibc::RawLibc() noexcept : g_(internal::getg()) {
  if (g_ != nullptr) g_->rawlibc++;
}

RawLibc::~RawLibc() {
  if (g_ != nullptr) g_->rawlibc--;
}

}  // namespace gort

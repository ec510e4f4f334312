// gmp/nbsyscall.hpp — a non-blocking system call the runtime makes for a
// goroutine (a socket's read or write that returns at once), and Go's
// preemption at its exit.
//
// Go preempts a goroutine that is in a system call at exitsyscall, not with
// a signal. gort's asynchronous preemption cannot stop a goroutine inside
// the kernel or in gort's own code either, and a goroutine that streams
// (every read finds data, every write finds room) never parks: it spends
// almost all its time in exactly those places. Signals then kept landing
// where they could not act, and were retried every tenth of a slice: on
// one P, 7,000 to 25,000 signals a second, and the other goroutines waited
// up to seconds for the P (tests/preempt/nbsyscall_test.cpp;
// docs/server-cpu.md, "Streaming").
//
// So the call is bracketed: sysmon finds M::preemption.in_nbsyscall set and
// only sets the goroutine's preempt flag, the signal handler leaves such a
// call alone, and the goroutine looks at the flag when the call returns and
// yields there. Cost per call: two stores to this thread's M and one load
// of its G's flag; no atomic read-modify-write.
//
// Thread safety: per thread. Off goroutines (a plain thread, g0) it does
// nothing. errno is kept across the yield, which may move the goroutine to
// another thread. The bracket must hold nothing that can park: the mark is
// the M's, and a parked goroutine's M runs others.
//
//   ssize_t n;
//   {
//     NbSyscall sc;
//     n = sys::recv(fd, buf, len, 0);  // a non-blocking descriptor
//   }                                  // yields here if sysmon asked
#pragma once

#include "gmp/room.hpp"

#include <atomic>

#include "gmp/lock.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

// preempt_check, keeping errno (gmp/park.cpp).
void nbsyscall_preempt();

class NbSyscall {
 public:
  NbSyscall() : m_(getm()) {
    if (m_ != nullptr) {
      m_->preemption.in_nbsyscall.store(true, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // before the call (the handler's view)
    }
  }
  ~NbSyscall() {
    if (m_ == nullptr) return;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    m_->preemption.in_nbsyscall.store(false, std::memory_order_relaxed);
    G* g = m_->curg;
    if (g != nullptr && g->preempt.load(std::memory_order_relaxed)) [[unlikely]] nbsyscall_preempt();
  }
  NbSyscall(const NbSyscall&) = delete;
  NbSyscall& operator=(const NbSyscall&) = delete;

 private:
  M* const m_;
};

}  // namespace gort::internal

// tests/gmp/diag/unwind_test.cpp — what a frozen M reports (gmp/diag/unwind.cpp,
// traceback_signal_handler). A dying process freezes every M in its
// handler and walks each goroutine from what the Ms said. One moment of a
// switch cannot be said: it has landed on the arriving stack but has not yet
// stored the context of the goroutine it left. An M caught there must
// decline (and be asked again), not hold still and leave that goroutine
// `stack unavailable`. The window is a few instructions (more under ASan,
// where Sigquit.GoroutinesCaughtMidSwitchShowTheirFrames caught it), so
// these tests build the interrupted state by hand and call the handler.
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gmp/diag/unwind.hpp"
#include "gort/chan.hpp"
#include "gort/sync.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::G;
using internal::M;

// An address in this file's code, nowhere near Boost.Context's switch.
__attribute__((noinline)) void somewhere_else() { asm volatile(""); }

// The registers of a thread interrupted at somewhere_else with its stack
// pointer at sp.
ucontext_t interrupted_at(uintptr_t sp) {
  ucontext_t uc;
  getcontext(&uc);
  uc.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(sp);
  uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(reinterpret_cast<uintptr_t>(&somewhere_else));
  return uc;
}

// Calls the handler as a freeze of this M would, with the registers of
// uc, and reports the request's state once it returns (kAsked: declined;
// a handler that holds still never returns, and the caller's alarm ends it).
internal::TracebackState freeze_here(const ucontext_t& uc) {
  M* m = internal::getm();
  m->tb.freeze = true;
  m->tb.buf = nullptr;
  m->tb.cap = 0;
  m->tb.g = nullptr;
  m->tb.state.store(internal::TracebackState::kAsked);
  internal::traceback_signal_handler(m, &uc);
  internal::TracebackState state = m->tb.state.load();
  m->tb.freeze = false;
  m->tb.state.store(internal::TracebackState::kIdle);
  return state;
}

// Parks one goroutine on a channel and hands its G to f, then wakes it.
template <typename F>
void with_parked_goroutine(F f) {
  gort::run(
      [&f] {
        auto ch = gort::make_chan<int>(0);
        std::atomic<G*> parked{nullptr};
        gort::WaitGroup done;
        done.add(1);
        gort::go([ch, &parked, &done]() mutable {
          parked.store(internal::getg());
          ch.recv();
          done.done();
        });
        ASSERT_TRUE(eventually([&] {
          G* g = parked.load();
          return g != nullptr && g->status.load() == internal::GStatus::kWaiting &&
                 __atomic_load_n(&g->ctx, __ATOMIC_ACQUIRE) != nullptr;
        }));
        f(parked.load());
        ch.close();
        done.wait();
      },
      unpreempted_cfg(1));
}

// The switch into g has landed (the M stands on g's stack, whose spent
// context is still there): the goroutine it left has no context yet. The
// freeze declines.
TEST(FreezeAnswer, DeclinesWhereASwitchHasLandedButNotStoredTheLeftContext) {
  GORT_SKIP_IN_RACE_BUILD("calls the signal handler's freeze outside a signal");
  EXPECT_EXIT(
      {
        ::alarm(10);
        internal::TracebackState state = internal::TracebackState::kDone;
        with_parked_goroutine([&state](G* g) {
          state = freeze_here(interrupted_at(reinterpret_cast<uintptr_t>(g->stack_hi) - 512));
        });
        ::_exit(state == internal::TracebackState::kAsked ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

// On the stack of a goroutine that runs (no saved context): an ordinary
// point, which the freeze answers and holds (the handler does not return).
TEST(FreezeAnswer, HoldsStillOnARunningGoroutinesStack) {
  GORT_SKIP_IN_RACE_BUILD("calls the signal handler's freeze outside a signal");
  EXPECT_EXIT(
      {
        ::alarm(2);
        gort::run(
            [] {
              char here = 0;
              asm volatile("" : : "r"(&here) : "memory");
              freeze_here(interrupted_at(reinterpret_cast<uintptr_t>(&here) & ~uintptr_t{15}));
            },
            unpreempted_cfg(1));
        ::_exit(0);
      },
      ::testing::KilledBySignal(SIGALRM), "");
}

}  // namespace
}  // namespace gort::test

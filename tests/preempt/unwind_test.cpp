// tests/preempt/unwind_test.cpp — unwinding through the preemption
// trampoline (preempt/async_preempt_x86_64.S): from inside the yield of an
// asynchronously preempted goroutine, a DWARF unwinder (libgcc's, as gdb
// and profilers use the same CFI) must walk through the trampoline into the
// interrupted function.
#include <unwind.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "preempt/preempt.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;

std::atomic<bool> g_spinning{false};
std::atomic<G*> g_spinner{nullptr};
std::atomic<int> g_unwinds{0};
std::atomic<int> g_frames{0};
std::atomic<bool> g_found{false};

// Call-free: an asynchronous preemption interrupts this very function.
__attribute__((noinline)) uint64_t spin_in_known_function() {
  uint64_t x = 0;
  while (g_spinning.load(std::memory_order_relaxed)) x++;
  return x;
}

_Unwind_Reason_Code visit(_Unwind_Context* ctx, void*) {
  int before_insn = 0;
  uintptr_t ip = _Unwind_GetIPInfo(ctx, &before_insn);
  g_frames.fetch_add(1, std::memory_order_relaxed);
  // FindEnclosingFunction looks up pc - 1: an exact pc (a signal frame's)
  // goes in one byte further.
  void* fn = _Unwind_FindEnclosingFunction(reinterpret_cast<void*>(ip + (before_insn ? 1 : 0)));
  if (fn == reinterpret_cast<void*>(&spin_in_known_function)) {
    g_found.store(true);
    return _URC_END_OF_STACK;
  }
  return g_frames.load(std::memory_order_relaxed) > 64 ? _URC_END_OF_STACK : _URC_NO_REASON;
}

// Runs on the preempted goroutine's stack, called by the trampoline's yield.
// Claimed before unwinding: the first _Unwind_Backtrace of a process can
// take longer than a slice on a loaded machine, and the next preemption of
// the spinner then runs this hook again from inside the first call (CI
// once counted 2 unwinds that way).
void unwind_from_yield() {
  if (internal::getg() != g_spinner.load()) return;
  int none = 0;
  if (!g_unwinds.compare_exchange_strong(none, 1)) return;
  _Unwind_Backtrace(&visit, nullptr);
  g_spinning.store(false);
}

TEST(PreemptUnwind, BacktraceFromTheYieldReachesTheInterruptedFunction) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  // A trampoline without CFI sends the unwinder into the saved register
  // area: keep a crash in a child.
  auto child = reporting([] {
    g_spinning.store(true);
    internal::async_preempt_hook.store(&unwind_from_yield);
    Watchdog dog(10s, [] { g_spinning.store(false); });
    run_cfg(preempt_cfg(1), [] {
      Countdown cd(1);
      gort::go([&cd] {
        g_spinner.store(internal::getg());
        spin_in_known_function();
        cd.done();
      });
      cd.wait();
    });
    dog.disarm();
    internal::async_preempt_hook.store(nullptr);
    EXPECT_FALSE(dog.fired()) << "no asynchronous preemption within 10 s";
    EXPECT_EQ(g_unwinds.load(), 1) << "the hook never unwound";
    EXPECT_TRUE(g_found.load()) << "the unwinder stopped after " << g_frames.load()
                                << " frames without reaching the interrupted function";
  });
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

}  // namespace
}  // namespace gort::test

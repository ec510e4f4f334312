// tests/gmp/diag/stack_overflow_test.cpp — a frame larger than the guard jumps
// it (gmp/stack.hpp) and faults in some other stack's guard: the fault
// handler (gmp/diag/fault.cpp) must still report Go's `fatal error: stack
// overflow` for the running goroutine, with exit status 2, not die of a
// silent SIGSEGV.
#include <cstdint>
#include <cstdio>
#include <string>

#include "tests/gmp/big_frame.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::kGuardSize;

TEST(StackOverflow, FrameJumpingTheGuardIntoTheStackBelow) {
  GORT_SKIP_IN_RACE_BUILD("the traceback of an overflow is best effort");
  EXPECT_EXIT(
      {
        ::alarm(30);
        gort::Config cfg;
        cfg.procs = 1;
        cfg.stack_size = 64 * 1024;
        gort::run(
            [] {
              G* main_g = internal::getg();
              Event never;
              gort::go([main_g] {
                G* g = internal::getg();
                size_t size = internal::runtime.stacks.stack_size();
                // The slot below this one: [guard | stack], then our guard.
                auto lo = reinterpret_cast<uintptr_t>(g->stack_lo);
                uintptr_t guard_lo = lo - kGuardSize - size - kGuardSize;
                uintptr_t guard_hi = guard_lo + kGuardSize;
                char here;
                uintptr_t touch = reinterpret_cast<uintptr_t>(&here) - kBigFrameBytes;
                // The frame must skip our own guard and land in the guard of
                // the stack below, inside the slab (main's stack is its slot 0).
                if (touch - 4096 < guard_lo || touch >= guard_hi ||
                    guard_lo < reinterpret_cast<uintptr_t>(main_g->stack_lo) - kGuardSize) {
                  std::fprintf(stderr, "test setup: touch %#lx, guard below [%#lx, %#lx)\n",
                               static_cast<unsigned long>(touch), static_cast<unsigned long>(guard_lo),
                               static_cast<unsigned long>(guard_hi));
                  ::_exit(3);
                }
                announce_goroutine();
                big_frame_touch_bottom();
                ::_exit(4);
              });
              never.wait();
            },
            cfg);
      },
      ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            return goroutine_report("fatal error: stack overflow\n\n").Matches(out) &&
                   out.find("runtime: fault at 0x") != std::string::npos &&
                   out.find(" in the guard of ") != std::string::npos;
          },
          "Go's stack overflow report for the announced goroutine, naming the guard hit"));
}

}  // namespace
}  // namespace gort::test

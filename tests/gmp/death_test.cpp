// tests/gmp/death_test.cpp — the ways the runtime ends the process, with
// Go's messages and exit status 2 (gmp/fatal.cpp, with checkdead, and
// gmp/signals.cpp).
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tests/testing.hpp"

namespace gort::test {
namespace {

gort::Config procs_cfg(int procs) {
  gort::Config cfg;
  cfg.procs = procs;
  return cfg;
}

// ---- unrecovered panics ----

TEST(DeathPanic, ExceptionEscapingGoroutine) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::go([] {
                announce_goroutine();
                throw std::runtime_error("boom");
              });
              Event never;
              never.wait();
            },
            procs_cfg(2));
      },
      ::testing::ExitedWithCode(2), goroutine_report("panic: boom\n\n"));
}

TEST(DeathPanic, PanicErrorEscapingGoroutineAfterSwitches) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              for (int i = 0; i < 10; i++) gort::go([] { for (;;) gort::yield(); });
              gort::go([] {
                for (int i = 0; i < 100; i++) gort::yield();
                announce_goroutine();
                throw gort::panic_error("send on closed channel");
              });
              for (;;) gort::yield();
            },
            procs_cfg(4));
      },
      ::testing::ExitedWithCode(2), goroutine_report("panic: send on closed channel\n\n"));
}

TEST(DeathPanic, ExceptionEscapingMainGoroutine) {
  EXPECT_EXIT(
      {
        gort::run([]() -> int { throw std::out_of_range("main gave up"); }, procs_cfg(1));
      },
      ::testing::ExitedWithCode(2), "panic: main gave up\n\ngoroutine 1 \\[running\\]:");
}

TEST(DeathPanic, NonStdExceptionEscapingGoroutine) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::go([] { throw 42; });
              Event never;
              never.wait();
            },
            procs_cfg(1));
      },
      ::testing::ExitedWithCode(2), "panic: .*\n\ngoroutine [0-9]+ \\[running\\]:");
}

// ---- checkdead ----

TEST(DeathDeadlock, MainParkedWithNothingToWakeIt) {
  for (int procs : {1, 4}) {
    EXPECT_EXIT(
        {
          gort::run(
              [] {
                Event never;
                never.wait();
              },
              procs_cfg(procs));
        },
        ::testing::ExitedWithCode(2), "fatal error: all goroutines are asleep - deadlock!")
        << "procs=" << procs;
  }
}

TEST(DeathDeadlock, EveryGoroutineParked) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              Gate gate;
              for (int i = 0; i < 100; i++) {
                gort::go([&] {
                  for (int k = 0; k < 10; k++) gort::yield();
                  gate.wait();
                });
              }
              gate.wait();
            },
            procs_cfg(4));
      },
      ::testing::ExitedWithCode(2),
      "fatal error: all goroutines are asleep - deadlock!\n(.|\n)*goroutine 1 \\[test\\]:");
}

// After a burst whose dead Gs were partly released with their stacks
// (released Gs leave allg), the deadlock report still lists exactly the
// goroutines that are parked, and nothing released.
TEST(DeathDeadlock, ReportAfterGoroutinesWereReleased) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              constexpr int kBurst = 5000;  // well past the warm limit
              {
                Gate gate;
                Countdown cd(kBurst);
                for (int i = 0; i < kBurst; i++) {
                  gort::go([&] {
                    gate.wait();
                    cd.done();
                  });
                }
                while (gate.waiting() < static_cast<size_t>(kBurst)) gort::yield();
                gate.open();
                cd.wait();
              }
              while (gort::num_goroutine() > 1) gort::yield();
              // The scavenger releases the excess within a few 100 ms periods.
              if (!eventually([] { return gort::runtime_stats().goroutines_allocated < kBurst; })) {
                std::fprintf(stderr, "dead goroutines were not released\n");
                std::exit(3);
              }
              Gate never;
              for (int i = 0; i < 3; i++) gort::go([&] { never.wait(); });
              never.wait();
            },
            procs_cfg(2));
      },
      ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            size_t n = 0;
            for (size_t at = out.find("goroutine "); at != std::string::npos;
                 at = out.find("goroutine ", at + 1)) {
              n++;
            }
            return out.find("fatal error: all goroutines are asleep - deadlock!") != std::string::npos &&
                   out.find("goroutine 1 [test]:") != std::string::npos && n == 4 &&
                   out.find("[test]", out.rfind("goroutine ")) != std::string::npos;
          },
          "a deadlock report listing main and the 3 parked goroutines"));
}

// Not a deadlock: a goroutine keeps running while others are parked, then
// releases them. Ends normally.
TEST(DeathDeadlock, NoFalseReportWhileOneGoroutineRuns) {
  auto child = [&] {
    gort::run(
        [] {
          Gate gate;
          Countdown cd(50);
          for (int i = 0; i < 50; i++) {
            gort::go([&] {
              gate.wait();
              cd.done();
            });
          }
          gort::go([&] {
            // Busy without parking long enough for the other Ms to go idle.
            volatile uint64_t x = 0;
            for (uint64_t i = 0; i < 50000000; i++) x = x + i;
            gate.open();
          });
          cd.wait();
        },
        procs_cfg(4));
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

// ---- stack overflow ----

volatile int g_depth_limit = INT_MAX;

__attribute__((noinline)) int recurse_small(int depth) {
  volatile char buf[256];
  buf[0] = static_cast<char>(depth);
  if (depth >= g_depth_limit) return buf[0];
  return recurse_small(depth + 1) + buf[0];
}

// Frames larger than the guard region: -fstack-clash-protection makes them
// probe every page, so they still hit the guard instead of jumping over it
// into the neighbouring stack.
__attribute__((noinline)) int recurse_large(int depth) {
  volatile char buf[64 * 1024];
  buf[0] = static_cast<char>(depth);
  buf[sizeof buf - 1] = buf[0];
  if (depth >= g_depth_limit) return buf[0];
  return recurse_large(depth + 1) + buf[sizeof buf - 1];
}

TEST(DeathStackOverflow, UnboundedRecursionInGoroutine) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::go([] {
                announce_goroutine();
                recurse_small(0);
              });
              Event never;
              never.wait();
            },
            procs_cfg(2));
      },
      ::testing::ExitedWithCode(2), goroutine_report("fatal error: stack overflow\n\n"));
}

TEST(DeathStackOverflow, UnboundedRecursionInMainGoroutine) {
  EXPECT_EXIT({ gort::run([] { return recurse_small(0); }, procs_cfg(1)); },
              ::testing::ExitedWithCode(2), "fatal error: stack overflow\n\ngoroutine 1 \\[running\\]:");
}

TEST(DeathStackOverflow, LargeFramesHitTheGuard) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::go([] {
                announce_goroutine();
                recurse_large(0);
              });
              Event never;
              never.wait();
            },
            procs_cfg(2));
      },
      ::testing::ExitedWithCode(2), goroutine_report("fatal error: stack overflow\n\n"));
}

TEST(DeathStackOverflow, SmallConfiguredStackOverflowsSooner) {
  EXPECT_EXIT(
      {
        gort::Config cfg = procs_cfg(1);
        cfg.stack_size = 32 * 1024;
        gort::run(
            [] {
              gort::go([] {
                // Fits easily in the default 256 KiB, not in 32 KiB.
                g_depth_limit = 200;
                announce_goroutine();
                recurse_small(0);
                std::_Exit(0);
              });
              Event never;
              never.wait();
            },
            cfg);
      },
      ::testing::ExitedWithCode(2), goroutine_report("fatal error: stack overflow\n\n"));
}

// Other faults in a goroutine are not reported as stack overflows: they keep
// their usual meaning (SIGSEGV, or the sanitizer's report).
TEST(DeathStackOverflow, OtherFaultsAreNotStackOverflows) {
  EXPECT_DEATH(
      {
        gort::run(
            [] {
              gort::go([] {
                volatile int* p = nullptr;
                *p = 1;
              });
              Event never;
              never.wait();
            },
            procs_cfg(1));
      },
      output_that([](const std::string& out) { return out.find("stack overflow") == std::string::npos; },
                  "does not mention a stack overflow"));
}

}  // namespace
}  // namespace gort::test

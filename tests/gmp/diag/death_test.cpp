// tests/gmp/diag/death_test.cpp — the ways the runtime ends the process, with
// Go's messages and exit status 2 (gmp/diag/fatal.cpp, with checkdead, and
// gmp/diag/fault.cpp).
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "gmp/diag/fatal.hpp"
#include "gmp/stack.hpp"
#include "gort/chan.hpp"
#include "gort/sync.hpp"
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
      ::testing::ExitedWithCode(2), goroutine_report("panic: boom [std::runtime_error]\n\n"));
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
      ::testing::ExitedWithCode(2), "panic: main gave up \\[std::out_of_range\\]\n\ngoroutine 1 \\[running\\]:");
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

// Every goroutine is listed with its wait reason, its frames and its
// creator (Go's checkdead dump).
constexpr int kMainWaitLine = __LINE__ + 3;
__attribute__((noinline)) void main_waits_forever(gort::Chan<int> ch) {
  asm volatile("");
  ch.recv();
  asm volatile("");
}

constexpr int kWorkerWaitLine = __LINE__ + 3;
__attribute__((noinline)) void worker_waits_forever(Gate* gate) {
  asm volatile("");
  gate->wait();
  asm volatile("");
}

constexpr int kWorkerGoLine = __LINE__ + 6;
__attribute__((noinline)) void deadlock_program(int procs) {
  gort::run(
      [] {
        Gate gate;
        auto ch = gort::make_chan<int>();
        for (int i = 0; i < 3; i++) gort::go([&] { worker_waits_forever(&gate); });
        main_waits_forever(ch);
      },
      procs_cfg(procs));
}

TEST(DeathDeadlock, EveryGoroutineWithItsFrames) {
  for (int procs : {1, 2}) {
    EXPECT_EXIT(deadlock_program(procs), ::testing::ExitedWithCode(2),
                output_that(
                    [](const std::string& out) {
                      std::string main_g = goroutine_block(out, 1);
                      if (out.find("fatal error: all goroutines are asleep - deadlock!\n\ngoroutine ") ==
                              std::string::npos ||
                          count_goroutines(out) != 4 || main_g.find("[chan receive]:") == std::string::npos ||
                          !has_frame(main_g, "main_waits_forever(", "death_test.cpp", kMainWaitLine)) {
                        return false;
                      }
                      // The workers' ids: not necessarily 2 to 4 (main
                      // may move to another P, with its own batch of ids,
                      // between the spawns).
                      for (int64_t id : goroutine_ids(out)) {
                        if (id == 1) continue;
                        std::string b = goroutine_block(out, id);
                        if (b.find("[test]:") == std::string::npos ||
                            !has_frame(b, "worker_waits_forever(", "death_test.cpp", kWorkerWaitLine) ||
                            b.find(" in goroutine 1\n\t") == std::string::npos ||
                            b.find("death_test.cpp:" + std::to_string(kWorkerGoLine)) == std::string::npos) {
                          return false;
                        }
                      }
                      return out.find("gort::internal") == std::string::npos;
                    },
                    "main and the three workers, each with its wait, frames and creator"))
        << "procs=" << procs;
  }
}

// After a burst whose dead Gs were partly released with their stacks
// (released Gs leave allg), the deadlock report still lists exactly the
// goroutines that are parked, and nothing released.
TEST(DeathDeadlock, ReportAfterGoroutinesWereReleased) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              // Well past the warm limit (twice it in the race build, where
              // each goroutine costs far more).
              constexpr int kBurst = std::max<int>(stress_size(5000), 2 * internal::StackPool::kWarmLimit);
              if (!burst_of_dead_goroutines(kBurst)) {
                std::fprintf(stderr, "the burst did not start\n");
                std::exit(3);
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
            size_t at = out.find("fatal error: all goroutines are asleep - deadlock!\n");
            if (at == std::string::npos) return false;
            std::string report = out.substr(at);
            size_t waiting = 0;
            for (size_t k = report.find(" [test]:\n"); k != std::string::npos; k = report.find(" [test]:\n", k + 1)) {
              waiting++;
            }
            return report.find("\ngoroutine 1 [test]:\n") != std::string::npos && count_goroutines(report) == 4 &&
                   waiting == 4;
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

constexpr int kRecurseLine = __LINE__ + 5;
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

// In the race detector's build the guard may be hit inside TSan's own
// runtime (its hooks run on the goroutine's stack, around every call and
// access), which then cannot allocate for the traceback: the report may
// stop after "fatal error: stack overflow" (docs/race.md, Limits).
#define SKIP_OVERFLOW_TRACEBACK_IN_RACE_BUILD() \
  if (internal::kRaceEnabled) GTEST_SKIP() << "the traceback of an overflow is best effort in a race build"

TEST(DeathStackOverflow, UnboundedRecursionInGoroutine) {
  SKIP_OVERFLOW_TRACEBACK_IN_RACE_BUILD();
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

// Stacks whose pages went back to the kernel (released in batched ranges,
// gmp/stack.cpp) and were handed out again keep their guards: an overflow
// on one is still Go's report, not a write into the stack below.
TEST(DeathStackOverflow, OnAStackReleasedAndHandedOutAgain) {
  SKIP_OVERFLOW_TRACEBACK_IN_RACE_BUILD();
  EXPECT_EXIT(
      {
        ::alarm(60);
        gort::Config cfg = procs_cfg(2);
        cfg.stack_size = 64 * 1024;
        gort::run(
            [] {
              constexpr int kBurst = 3 * static_cast<int>(internal::StackPool::kWarmLimit);
              if (!burst_of_dead_goroutines(kBurst)) ::_exit(3);
              // The idle scavenger releases the dead Gs beyond the warm
              // limit, their stacks' pages with them.
              if (!eventually([] { return gort::runtime_stats().goroutines_allocated < kBurst / 2; })) {
                std::fprintf(stderr, "test setup: the dead goroutines were not released\n");
                ::_exit(3);
              }
              const size_t slabs = internal::runtime.stacks.slabs();
              // Every stack again, the released ones included; the last
              // one overflows.
              Gate never;
              for (int i = 0; i < kBurst - 1; i++) gort::go([&] { never.wait(); });
              gort::go([slabs] {
                if (internal::runtime.stacks.slabs() != slabs) {
                  std::fprintf(stderr, "test setup: the pool grew instead of reusing stacks\n");
                  ::_exit(3);
                }
                announce_goroutine();
                recurse_small(0);
              });
              never.wait();
            },
            cfg);
      },
      ::testing::ExitedWithCode(2), goroutine_report("fatal error: stack overflow\n\n"));
}

// The frames of the recursion, the middle of it elided as Go does (the
// innermost 50 and the outermost 50 are shown).
TEST(DeathStackOverflow, FramesOfTheRecursion) {
  SKIP_OVERFLOW_TRACEBACK_IN_RACE_BUILD();
  EXPECT_EXIT(die_in_goroutine(2, [] { recurse_small(0); }), ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            std::string b = announced_block(out);
            size_t n = 0;
            for (size_t k = b.find("recurse_small(int)\n"); k != std::string::npos;
                 k = b.find("recurse_small(int)\n", k + 1)) {
              n++;
            }
            return goroutine_report("fatal error: stack overflow\n\n").Matches(out) &&
                   has_frame(b, "recurse_small(int)", "death_test.cpp", kRecurseLine) && n >= 90 && n <= 100 &&
                   b.find(" frames elided...\n") != std::string::npos && b.find("created by ") != std::string::npos;
          },
          "the overflowing goroutine: 50 + 50 frames of recurse_small around the elided middle"));
}

// A fatal error the user caused (Go's fatal, not throw): the frames of the
// caller, without the runtime's, and every goroutine.
constexpr int kUnlockLine = __LINE__ + 4;
__attribute__((noinline)) void unlock_twice() {
  gort::Mutex mu;
  asm volatile("");
  mu.unlock();
  asm volatile("");
}

TEST(DeathFatal, UnlockOfUnlockedMutexShowsTheCaller) {
  EXPECT_EXIT(die_in_goroutine(2, unlock_twice), ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            std::string b = announced_block(out);
            return goroutine_report("fatal error: sync: unlock of unlocked mutex\n\n").Matches(out) &&
                   has_frame(b, "unlock_twice()", "death_test.cpp", kUnlockLine) &&
                   b.find("gort::internal") == std::string::npos && count_goroutines(out) == 2;
          },
          "the caller's frames and every goroutine"));
}

// A broken runtime invariant (Go's throw) shows the runtime's frames too,
// from the goroutine that found it, then every goroutine.
constexpr int kInvariantLine = __LINE__ + 3;
__attribute__((noinline)) void finds_a_broken_invariant() {
  asm volatile("");
  internal::fatal("test: invariant broken");
}

TEST(DeathFatal, RuntimeErrorShowsTheRuntimesFrames) {
  EXPECT_EXIT(die_in_goroutine(2, finds_a_broken_invariant), ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            std::string b = announced_block(out);
            // Go's header for a runtime error names the G and M.
            std::string head =
                "fatal error: test: invariant broken\n\ngoroutine " + std::to_string(announced_id(out)) + " gp=0x";
            return out.find(head) != std::string::npos && b.find("[running]:\n") != std::string::npos &&
                   has_frame(b, "finds_a_broken_invariant()", "death_test.cpp", kInvariantLine) &&
                   b.find("gort::internal::fatal(") != std::string::npos && b.find(" pc=0x") != std::string::npos &&
                   count_goroutines(out) == 2;
          },
          "the runtime's frames and every goroutine"));
}

// Off any goroutine (a plain thread here), the failing thread's own stack
// is printed as Go's "runtime stack:".
constexpr int kThreadFatalLine = __LINE__ + 3;
__attribute__((noinline)) void plain_thread_finds_a_broken_invariant() {
  asm volatile("");
  internal::fatal("test: invariant broken off a goroutine");
}

TEST(DeathFatal, OffAGoroutineShowsTheRuntimeStack) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              std::thread t([] { plain_thread_finds_a_broken_invariant(); });
              t.join();
            },
            procs_cfg(1));
      },
      ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            size_t at = out.find("fatal error: test: invariant broken off a goroutine\n\nruntime stack:\n");
            return at != std::string::npos &&
                   has_frame(out.substr(at), "plain_thread_finds_a_broken_invariant()", "death_test.cpp",
                             kThreadFatalLine) &&
                   goroutine_block(out, 1).find("[running]:") != std::string::npos;
          },
          "the thread's stack, then the goroutines"));
}

TEST(DeathStackOverflow, UnboundedRecursionInMainGoroutine) {
  SKIP_OVERFLOW_TRACEBACK_IN_RACE_BUILD();
  EXPECT_EXIT({ gort::run([] { return recurse_small(0); }, procs_cfg(1)); },
              ::testing::ExitedWithCode(2), "fatal error: stack overflow\n\ngoroutine 1 \\[running\\]:");
}

TEST(DeathStackOverflow, LargeFramesHitTheGuard) {
  SKIP_OVERFLOW_TRACEBACK_IN_RACE_BUILD();
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
  SKIP_OVERFLOW_TRACEBACK_IN_RACE_BUILD();
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

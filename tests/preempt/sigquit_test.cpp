// tests/preempt/sigquit_test.cpp — SIGQUIT prints every goroutine in Go's
// format and exits with status 2 (preempt/sigquit.cpp), whichever thread
// the signal lands on, with every P idle or some running.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "gort/time.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

constexpr const char* kFile = "sigquit_test.cpp";

constexpr int kParkedLine = __LINE__ + 3;
__attribute__((noinline)) void parked_until_quit(Event* e) {
  asm volatile("");
  e->wait();
  asm volatile("");
}

std::atomic<bool> g_spinning{true};

constexpr int kSpinLine = __LINE__ + 3;
__attribute__((noinline)) uint64_t spinning_until_quit() {
  uint64_t x = 0;
  while (g_spinning.load(std::memory_order_relaxed)) x = x * 7 + 3;
  return x;
}

// Runs `start` (which starts goroutines) as main on `procs` Ps; `settle`
// later main sleeps, and `delay` after that a plain thread sends the
// process SIGQUIT.
void quit_after(int procs, absl::Duration settle, std::chrono::milliseconds delay, std::function<void()> start) {
  ::alarm(60);
  static std::atomic<bool> asleep{false};
  std::thread sender([delay] {
    while (!asleep.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(delay);
    ::kill(::getpid(), SIGQUIT);
  });
  sender.detach();
  gort::run(
      [&] {
        start();
        gort::sleep(settle);
        asleep = true;
        gort::sleep(absl::Seconds(30));
      },
      preempt_cfg(procs));
}

// Goroutine 2 parks; with `spin`, goroutine 3 runs a loop on another P.
void quit_program(int procs, bool spin) {
  Event never;
  quit_after(procs, absl::Milliseconds(50), std::chrono::milliseconds(100), [&] {
    gort::go([&] { parked_until_quit(&never); });
    if (spin) gort::go([] { spinning_until_quit(); });
  });
}

TEST(Sigquit, DumpsEveryGoroutineAndExitsWithStatus2) {
  GORT_SKIP_IN_RACE_BUILD("the dump runs in a signal handler, where TSan reports each malloc");
  for (int procs : {1, 2}) {
    bool spin = procs > 1;
    EXPECT_EXIT(quit_program(procs, spin), ::testing::ExitedWithCode(2),
                output_that(
                    [spin](const std::string& out) {
                      std::string parked = goroutine_block(out, 2);
                      bool ok = out.compare(0, 15, "SIGQUIT: quit\n\n") == 0 &&
                                count_goroutines(out) == (spin ? 3 : 2) &&
                                goroutine_block(out, 1).find("[sleep]:") != std::string::npos &&
                                parked.find("[test]:") != std::string::npos &&
                                has_frame(parked, "parked_until_quit(", kFile, kParkedLine) &&
                                parked.find("created by ") != std::string::npos;
                      if (spin) {
                        // Its M was stopped in its signal handler and said
                        // where it was: in the loop, or, when the freeze
                        // caught it in a preemption's switch (on its way
                        // out, or back in), in the loop all the same.
                        std::string running = goroutine_block(out, 3);
                        ok = ok &&
                             (running.find("[running]:") != std::string::npos ||
                              running.find("[runnable]:") != std::string::npos) &&
                             has_frame(running, "spinning_until_quit()", kFile, kSpinLine);
                      }
                      return ok;
                    },
                    "SIGQUIT: quit, then every goroutine with its frames"))
        << "procs=" << procs;
  }
}

constexpr int kYieldLine = __LINE__ + 4;
__attribute__((noinline)) void yielding_until_quit() {
  asm volatile("");
  for (;;) {
    gort::yield();
    asm volatile("");
  }
}

// Goroutines 2-5 yield to each other without pause on 2 Ps, so the Ms
// spend much of their time between two goroutines: the freeze catches them
// there (after the next one became current but before its stack was
// entered, or after the last one was marked runnable but before its
// context was saved), and each must still show where it was.
void quit_switching_program() {
  quit_after(2, absl::Milliseconds(20), std::chrono::milliseconds(20), [] {
    for (int i = 0; i < 4; i++) gort::go([] { yielding_until_quit(); });
  });
}

TEST(Sigquit, GoroutinesCaughtMidSwitchShowTheirFrames) {
  GORT_SKIP_IN_RACE_BUILD("the dump runs in a signal handler, where TSan reports each malloc");
  for (int round = 0; round < 5; round++) {
    EXPECT_EXIT(quit_switching_program(), ::testing::ExitedWithCode(2),
                output_that(
                    [](const std::string& out) {
                      if (count_goroutines(out) != 5) return false;
                      for (int id = 2; id <= 5; id++) {
                        std::string b = goroutine_block(out, id);
                        // Parked or mid-switch: at the call of yield. Running
                        // (interrupted): there, or at the loop's jump back.
                        bool in_loop = has_frame(b, "yielding_until_quit()", kFile, kYieldLine) ||
                                       has_frame(b, "yielding_until_quit()", kFile, kYieldLine - 1);
                        if (b.find("stack unavailable") != std::string::npos || !in_loop) {
                          return false;
                        }
                      }
                      return true;
                    },
                    "every yielding goroutine with its frames"))
        << "round " << round;
  }
}

// A SIGQUIT as soon as main runs, before sysmon's thread may have started:
// the runtime is already up, so the signal dumps (once sysmon runs) rather
// than taking the default action (a core dump), whatever thread it lands on.
TEST(Sigquit, RightAfterTheRuntimeStartsStillDumps) {
  GORT_SKIP_IN_RACE_BUILD("the dump runs in a signal handler, where TSan reports each malloc");
  for (int round = 0; round < 20; round++) {
    EXPECT_EXIT(
        {
          ::alarm(60);
          gort::run(
              [] {
                ::kill(::getpid(), SIGQUIT);
                gort::sleep(absl::Seconds(30));
              },
              preempt_cfg(2));
        },
        ::testing::ExitedWithCode(2),
        output_that([](const std::string& out) { return out.compare(0, 15, "SIGQUIT: quit\n\n") == 0; },
                    "SIGQUIT: quit, then the goroutines"))
        << "round " << round;
  }
}

TEST(Sigquit, NonePrintsNoGoroutines) {
  EXPECT_EXIT(
      {
        setenv("GORT_TRACEBACK", "none", 1);
        quit_program(2, false);
      },
      ::testing::ExitedWithCode(2),
      output_that([](const std::string& out) { return out == "SIGQUIT: quit\n"; }, "only SIGQUIT: quit"));
}

// Outside gort::run the signal keeps the action it had before: here the
// default (a core dump). (A test runner may have started us with SIGQUIT
// ignored, as a shell does for background jobs.)
TEST(Sigquit, OutsideTheRuntimeKeepsItsDefault) {
  EXPECT_EXIT(
      {
        no_core_file();
        ::signal(SIGQUIT, SIG_DFL);
        gort::run([] {}, preempt_cfg(1));
        ::raise(SIGQUIT);
        ::_exit(0);
      },
      ::testing::KilledBySignal(SIGQUIT), "");
}

}  // namespace
}  // namespace gort::test

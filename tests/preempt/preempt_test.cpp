// tests/preempt/preempt_test.cpp — asynchronous preemption (preempt/signal.cpp,
// preempt/sysmon.cpp, preempt/safe_points.cpp, preempt/preempt_api.cpp):
// call-free loops cannot starve other goroutines, preempted goroutines resume
// intact on other threads, NoPreempt and Config::preempt = false switch it
// off, code registration, the signal's configuration and chaining, and
// shutdown with a spinner still running. sysmon's own cost is in
// sysmon_test.cpp.
//
// Pattern used throughout: the spinner itself starts the goroutine that must
// make progress. With one P that goroutine lands in the spinner's runnext
// slot and can run only if the spinner is preempted; the spinner's own
// G::async_preempts counts how often that happened. A Watchdog stops the
// spinner if preemption never comes, so a broken runtime fails the test
// instead of hanging it.
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "gmp/race/sanitizer.hpp"
#include "gmp/sched.hpp"
#include "gmp/diag/schedtrace.hpp"
#include "gort/time.hpp"
#include "preempt/preempt.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;

pid_t os_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// ---- a call-free loop does not starve others ----

TEST(Preempt, CallFreeSpinnerDoesNotStarveAnotherGoroutineOnOneP) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<bool> spinning{true};
  std::atomic<bool> other_stopped_spinner{false};
  std::atomic<uint32_t> preempts{0};
  Watchdog dog(5s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1), [&] {
    Countdown cd(2);
    gort::go([&] {
      // Readied into this goroutine's runnext: runs only if we are preempted.
      gort::go([&] {
        other_stopped_spinner = spinning.exchange(false);
        cd.done();
      });
      spin_while(spinning);
      preempts = self_async_preempts();
      cd.done();
    });
    cd.wait();
  });
  dog.disarm();
  EXPECT_FALSE(dog.fired()) << "the spinner was not preempted within 5 s on 1 P";
  EXPECT_TRUE(other_stopped_spinner.load()) << "the other goroutine ran only after the spinner stopped";
  EXPECT_GE(preempts.load(), 1u) << "the spinner has no calls: only an async preemption lets the other run";
}

// ---- small stacks (GoOptions::stack) ----

// A spinner on a small stack (StackSize::kSmall), near its top, is
// preempted as one on a default stack is.
TEST(PreemptSmallStack, CallFreeSpinnerNearTheTopIsPreempted) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<bool> spinning{true};
  std::atomic<bool> other_stopped_spinner{false};
  std::atomic<uint32_t> preempts{0};
  std::atomic<size_t> stack_bytes{0};
  Watchdog dog(5s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1), [&] {
    Countdown cd(2);
    gort::go(gort::GoOptions{.stack = gort::StackSize::kSmall}, [&] {
      G* g = internal::getg();
      stack_bytes = static_cast<size_t>(g->stack_hi - g->stack_lo);
      gort::go([&] {
        other_stopped_spinner = spinning.exchange(false);
        cd.done();
      });
      spin_while(spinning);
      preempts = self_async_preempts();
      cd.done();
    });
    cd.wait();
  });
  dog.disarm();
  EXPECT_EQ(stack_bytes.load(), gort::kSmallStackSize - internal::kGSize);
  EXPECT_FALSE(dog.fired()) << "the spinner on a small stack was not preempted within 5 s on 1 P";
  EXPECT_TRUE(other_stopped_spinner.load());
#ifndef GORT_ASAN
  // Under ASan the spinner is switched out, but in 2 runs of 3 without an
  // asynchronous preemption counted on its G (not understood yet; the
  // default-stack twin above counts one every time).
  EXPECT_GE(preempts.load(), 1u);
#endif
}

// Recurses until at most `left` bytes of the goroutine's stack remain
// below the frame, and calls f() there.
template <class F>
__attribute__((noinline)) uint64_t at_stack_depth(size_t left, F& f) {
  volatile char pad[512];
  pad[0] = 1;
  auto here = reinterpret_cast<uintptr_t>(&pad[0]);
  if (here - reinterpret_cast<uintptr_t>(internal::getg()->stack_lo) <= left) return f() + pad[0];
  return at_stack_depth(left, f) + pad[0];
}

// What a small stack gives up (docs/stacks.md, "Stack size classes"): the
// signal handler injects the preemption only with room below the stack
// pointer for the saved registers, the XSAVE area and the yield's frames
// (preempt/signal.cpp, kFrameHeadroom: over 16 KiB). A call-free loop with
// 12 KiB left under it is never preempted asynchronously, however often
// it is asked (1 ms slices for 200 ms); the goroutine waiting on the P
// runs only once the loop has come back up and yielded.
TEST(PreemptSmallStack, CallFreeLoopNearTheBottomIsNotPreemptedAsynchronously) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<uint32_t> deep_preempts{~0u};
  std::atomic<int> other_ran_while_deep{-1};
  std::atomic<bool> other_ran{false};
  run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
    Countdown cd(2);
    gort::go(gort::GoOptions{.stack = gort::StackSize::kSmall}, [&] {
      gort::go([&] {
        other_ran = true;
        cd.done();
      });
      auto spin_deep = [&]() -> uint64_t {
        const bool ran_before = other_ran.load();
        const uint32_t before = self_async_preempts();
        uint64_t x = spin_for(200ms);
        deep_preempts = self_async_preempts() - before;
        other_ran_while_deep = !ran_before && other_ran.load() ? 1 : 0;
        return x;
      };
      at_stack_depth(12 * 1024, spin_deep);
      gort::yield();
      cd.done();
    });
    cd.wait();
  });
  EXPECT_EQ(deep_preempts.load(), 0u) << "preempted asynchronously with 12 KiB of stack left";
  EXPECT_EQ(other_ran_while_deep.load(), 0);
  EXPECT_TRUE(other_ran.load());
}

// Another goroutine sleeps 1 ms at a time, kTicks times, beside a spinner
// on one P. Each of its wake-ups needs the spinner off the P (the P's timers
// run only when its M is in the scheduler), so the spinner must have been
// preempted at least kTicks times. Parameter: the time slice in µs.
class PreemptSlice : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Slices, PreemptSlice, ::testing::Values(10000, 1000),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "slice" + std::to_string(info.param) + "us";
                         });

TEST_P(PreemptSlice, SleeperKeepsTickingBesideASpinner) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  constexpr int kTicks = 30;
  std::atomic<bool> spinning{true};
  std::atomic<int> ticks{0};
  std::atomic<bool> ticker_stopped_spinner{false};
  std::atomic<uint32_t> preempts{0};
  std::atomic<int64_t> elapsed_us{0};
  Watchdog dog(20s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1, absl::Microseconds(GetParam())), [&] {
    Countdown cd(2);
    gort::go([&] {
      gort::go([&] {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kTicks && spinning.load(); i++) {
          gort::sleep(absl::Milliseconds(1));
          ticks++;
        }
        elapsed_us = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now() - t0)
                         .count();
        ticker_stopped_spinner = spinning.exchange(false);
        cd.done();
      });
      spin_while(spinning);
      preempts = self_async_preempts();
      cd.done();
    });
    cd.wait();
  });
  dog.disarm();
  EXPECT_FALSE(dog.fired()) << "the ticker made " << ticks.load() << " of " << kTicks << " ticks in 20 s";
  EXPECT_EQ(ticks.load(), kTicks);
  EXPECT_TRUE(ticker_stopped_spinner.load());
  EXPECT_GE(preempts.load(), static_cast<uint32_t>(kTicks))
      << "every wake-up of the sleeper needs a preemption of the spinner";
  // Informational only (speed is measured by the benchmarks).
  std::fprintf(stderr, "[info] slice %d us: %d ticks of 1 ms took %lld us, %u preemptions\n",
               GetParam(), kTicks, static_cast<long long>(elapsed_us.load()), preempts.load());
}

// A sleeper readied by its timer while a spinner is preempted must run
// before the spinner gets its P back, also on the scheduler's fairness ticks
// (every 61st schedule takes the global queue first, and the preempted
// spinner waits there). A regression would lose those ticks: the spinner
// would run a second slice, which sets the p99 wake-up lateness of
// bench/preempt_bench at two slices. Counted, not timed: with a 1 ms slice
// and 1 ms sleeps the timer is due at every preemption, so each preemption
// of the spinner should give exactly one tick (plus the first, which starts
// the sleeper).
TEST(Preempt, TimerReadiedGoroutineRunsBeforeThePreemptedOneOnFairnessTicks) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  constexpr int kTicks = 600;
  std::atomic<bool> spinning{true};
  std::atomic<int> ticks{0};
  std::atomic<uint32_t> preempts{0};
  Watchdog dog(30s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
    Countdown cd(2);
    gort::go([&] {
      gort::go([&] {
        for (int i = 0; i < kTicks && spinning.load(); i++) {
          gort::sleep(absl::Milliseconds(1));
          ticks++;
        }
        spinning = false;
        cd.done();
      });
      spin_while(spinning);
      preempts = self_async_preempts();
      cd.done();
    });
    cd.wait();
  });
  dog.disarm();
  EXPECT_FALSE(dog.fired());
  EXPECT_EQ(ticks.load(), kTicks);
  // 600 ticks pass about 10 fairness ticks; a little slack for a preemption
  // that a loaded machine turns into a spare one (the sleeper itself
  // preempted after its thread was descheduled).
  EXPECT_LE(preempts.load(), static_cast<uint32_t>(kTicks + 4))
      << "the spinner got its P back before the sleeper its timer had readied";
  std::fprintf(stderr, "[info] %d ticks, %u preemptions of the spinner\n", ticks.load(), preempts.load());
}

#if defined(__x86_64__)
// Unblocks the preemption signal with a raw syscall instruction, so that a
// pending signal is delivered at a PC in this executable (a safe point),
// not inside libc's pthread_sigmask.
__attribute__((noinline)) void unblock_signal_here(int sig) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  register long sigsetsize asm("r10") = _NSIG / 8;
  long ret = SYS_rt_sigprocmask;
  asm volatile("syscall"
               : "+a"(ret)
               : "D"(SIG_UNBLOCK), "S"(&set), "d"(nullptr), "r"(sigsetsize)
               : "rcx", "r11", "memory");
}
#endif

// A preemption signal that reaches its thread late (the thread was not
// running: here, it blocked the signal) must still preempt, and sysmon
// should not resend it meanwhile. SIGURG is not
// queued, so what is delivered is sysmon's *first* signal; its retries used
// to carry new request numbers, and the handler dropped the first signal as
// stale, leaving the goroutine to run until a retry happened to arrive
// within one retry interval (on a busy machine: many intervals).
TEST(Preempt, LateSignalStillPreemptsAfterSysmonRetried) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
#if defined(__x86_64__)
  std::atomic<uint32_t> before{0};
  std::atomic<uint32_t> after{0};
  std::atomic<uint32_t> sent{0};
  run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
    Countdown cd(1);
    gort::go([&] {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, internal::preempt_signal());
      pthread_sigmask(SIG_BLOCK, &set, nullptr);
      // Blocked: no preemption, so this goroutine stays on this M.
      internal::M* m = current_m();
      uint32_t sent0 = m->preemption.sent.load();
      // Well past the 1 ms slice: sysmon asks, then looks again every
      // ~100 µs while the signal stays pending.
      spin_for(30ms);
      sent = m->preemption.sent.load() - sent0;
      before = self_async_preempts();
      unblock_signal_here(internal::preempt_signal());
      after = self_async_preempts();
      cd.done();
    });
    cd.wait();
  });
  EXPECT_EQ(after.load(), before.load() + 1)
      << "the pending preemption signal was delivered at a safe point but did not preempt";
  // One signal, not one per look: a retry that resent would cost ~290
  // system calls here, though a signal that is not queued can only merge.
  EXPECT_LE(sent.load(), 2u) << "sysmon resent a signal that was still pending";
#endif
}

// ---- preempted goroutines resume intact: on their own thread, or (past
// the cap of locked Ms) on another ----

// An integer chain the spinners compute between looks at their M.
__attribute__((noinline)) uint64_t chain_round(uint64_t h, uint64_t round) {
  for (uint64_t i = 0; i < 65536; i++) {
    h = h * 0x9E3779B97F4A7C15ull + (round * 65536 + i);
    h ^= h >> 29;
  }
  return h;
}

volatile uint64_t chain_sink = 0;

uint64_t chain_reference(uint64_t seed, uint64_t rounds) {
  uint64_t h = seed;
  for (uint64_t r = 0; r < rounds; r++) h = chain_round(h, r);
  return h;
}

// An asynchronously preempted goroutine keeps its thread (gmp/lockedm.cpp):
// 3 spinners on 2 Ps, preempted every ms, each resumes on the M (and OS
// thread) it started on, every time.
TEST(Preempt, AsyncPreemptedGoroutineResumesOnItsOwnThread) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  constexpr int kSpinners = 3;
  struct Result {
    bool moved = false;
    uint32_t preempts = 0;
    int errno_after = 0;
  };
  std::vector<Result> results(kSpinners);
  run_cfg(preempt_cfg(2, absl::Milliseconds(1)), [&] {
    Countdown cd(kSpinners);
    for (int i = 0; i < kSpinners; i++) {
      gort::go([&, i] {
        Result& r = results[static_cast<size_t>(i)];
        write_errno(2000 + i);
        internal::M* m0 = current_m();
        pid_t tid0 = os_tid();
        auto deadline = std::chrono::steady_clock::now() + 5s;
        uint64_t h = 0;
        do {
          h = chain_round(h, 1);
          if (current_m() != m0 || os_tid() != tid0) r.moved = true;
        } while (self_async_preempts() < 20 && std::chrono::steady_clock::now() < deadline);
        chain_sink = h;
        r.errno_after = read_errno();
        r.preempts = self_async_preempts();
        cd.done();
      });
    }
    cd.wait();
  });
  for (int i = 0; i < kSpinners; i++) {
    const Result& r = results[static_cast<size_t>(i)];
    EXPECT_GE(r.preempts, 20u) << "spinner " << i;
    EXPECT_FALSE(r.moved) << "spinner " << i << " resumed on another thread after an asynchronous preemption";
    EXPECT_EQ(r.errno_after, 2000 + i) << "spinner " << i;
  }
}

// While one spinner runs on the only P, the other waits for its own M, and
// a detailed schedtrace says so from both sides (lockedm / lockedg).
TEST(Preempt, SchedtraceShowsAPreemptedGoroutineWaitingForItsM) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::string trace;
  int64_t waiter_id = 0;
  run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> ids[2] = {0, 0};
    Countdown cd(2);
    for (int i = 0; i < 2; i++) {
      gort::go([&, i] {
        ids[i] = gort::goroutine_id();
        while (self_async_preempts() < 3 && !stop.load()) chain_sink = chain_round(chain_sink, 1);
        if (!stop.exchange(true)) {
          // The first to be preempted 3 times: the other has had its turns
          // in between (1 P) and waits, preempted, for its M.
          internal::schedtrace_format(0, 0, true, &trace);
          waiter_id = ids[1 - i].load();
        }
        cd.done();
      });
    }
    cd.wait();
  });
  ASSERT_NE(waiter_id, 0) << "the other spinner never started";
  std::smatch g;
  std::regex gline("  G" + std::to_string(waiter_id) + ": status=1\\(\\) m=-1 lockedm=(\\d+)");
  ASSERT_TRUE(std::regex_search(trace, g, gline)) << trace;
  std::regex mline("  M" + g[1].str() + ": p=-1 .* lockedg=" + std::to_string(waiter_id));
  EXPECT_TRUE(std::regex_search(trace, mline)) << trace;
  EXPECT_NE(trace.find("nmidlelocked=1"), std::string::npos) << trace;
}

// Ms that waited for their preempted goroutines count as idle again once
// those goroutines park: a deadlock after a preempted phase is reported.
TEST(PreemptDeathTest, DeadlockAfterPreemptedSpinnersIsReported) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  for (int procs : {1, 2}) {
    EXPECT_EXIT(
        {
          ::alarm(30);
          run_cfg(preempt_cfg(procs, absl::Milliseconds(1)), [] {
            Gate never;  // four waiters: an Event takes one
            for (int i = 0; i < 3; i++) {
              gort::go([&] {
                while (self_async_preempts() < 3) chain_sink = chain_round(chain_sink, 1);
                never.wait();
              });
            }
            never.wait();
          });
        },
        ::testing::ExitedWithCode(2), "fatal error: all goroutines are asleep - deadlock!")
        << procs << " P";
  }
}

// Threads in this process (/proc/self/status).
int process_threads() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int n = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "Threads: %d", &n) == 1) break;
  }
  std::fclose(f);
  return n;
}

// Many CPU-bound goroutines, each preempted several times: every one
// finishes with the right answer, and the threads the locked Ms need stay
// within kMaxPreemptLockedMs (past it, preemptions move goroutines).
TEST(Preempt, ManySpinnersKeepTheirThreadsWithinTheCap) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  GORT_SKIP_OVER_RACE_LIMIT(1300);
  auto child = reporting([] {
    for (int spinners : {200, internal::kMaxPreemptLockedMs + 200}) {
      constexpr uint64_t kRounds = 30;  // 1-3 ms of CPU each
      std::vector<uint64_t> got(static_cast<size_t>(spinners));
      std::atomic<uint32_t> preempts{0};
      int threads = 0;
      run_cfg(preempt_cfg(2, absl::Milliseconds(1)), [&] {
        Countdown cd(spinners);
        for (int i = 0; i < spinners; i++) {
          gort::go([&, i] {
            got[static_cast<size_t>(i)] = chain_reference(static_cast<uint64_t>(i), kRounds);
            preempts.fetch_add(self_async_preempts());
            cd.done();
          });
        }
        cd.wait();
        threads = process_threads();
      });
      int wrong = 0;
      for (int i = 0; i < spinners; i++) {
        wrong += got[static_cast<size_t>(i)] != chain_reference(static_cast<uint64_t>(i), kRounds);
      }
      EXPECT_EQ(wrong, 0) << spinners << " spinners";
      EXPECT_GE(preempts.load(), static_cast<uint32_t>(spinners / 2)) << spinners << " spinners";
      // The locked Ms, an M per P, a spare or two, sysmon and the main thread.
      EXPECT_LE(threads, std::min(spinners, internal::kMaxPreemptLockedMs) + 8) << spinners << " spinners";
    }
  });
  GORT_EXPECT_SUBPROCESS_OK(120, child);
}

// Past kMaxPreemptLockedMs waiting Ms, a preemption moves the goroutine (as
// a cooperative one does): it resumes elsewhere with its state intact.
TEST(Preempt, PreemptedGoroutineResumesOnAnotherThreadWithStateIntact) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  constexpr int kSpinners = 3;
  struct Result {
    uint64_t seed = 0;
    uint64_t rounds = 0;
    uint64_t h = 0;
    bool migrated = false;
    bool m_tid_mismatch = false;
    int errno_after = 0;
    uint64_t local_after = 0;
    uint32_t preempts = 0;
  };
  std::vector<Result> results(kSpinners);
  GoroutineLocal<uint64_t> local;
  run_cfg(preempt_cfg(2, absl::Milliseconds(1)), [&] {
    // Every locked M taken (run() starts from none).
    internal::sched.npreemptlocked.store(internal::kMaxPreemptLockedMs);
    Countdown cd(kSpinners);
    for (int i = 0; i < kSpinners; i++) {
      gort::go([&, i] {
        Result& r = results[static_cast<size_t>(i)];
        r.seed = 0x1234567ull * static_cast<uint64_t>(i + 1);
        local.set(0xABC000u + static_cast<uint64_t>(i));
        write_errno(1000 + i);
        internal::M* m0 = current_m();
        pid_t tid0 = os_tid();
        uint64_t h = r.seed;
        uint64_t round = 0;
        auto deadline = std::chrono::steady_clock::now() + 5s;
        // Until this goroutine has been seen on another M and then spun a
        // few more rounds there (or 5 s pass).
        uint64_t rounds_after_move = 0;
        do {
          h = chain_round(h, round++);
          // An M is one OS thread for life: "on another M" and "on another
          // thread" must agree (read twice: a preemption may fall between).
          internal::M* m = current_m();
          pid_t tid = os_tid();
          if (current_m() == m) {
            if ((m != m0) != (tid != tid0)) r.m_tid_mismatch = true;
            if (m != m0) r.migrated = true;
          }
          if (r.migrated) rounds_after_move++;
        } while (rounds_after_move < 16 && std::chrono::steady_clock::now() < deadline);
        r.errno_after = read_errno();
        r.local_after = local.get();
        r.h = h;
        r.rounds = round;
        r.preempts = self_async_preempts();
        cd.done();
      });
    }
    cd.wait();
  });
  int migrated = 0;
  for (int i = 0; i < kSpinners; i++) {
    const Result& r = results[static_cast<size_t>(i)];
    EXPECT_EQ(r.h, chain_reference(r.seed, r.rounds)) << "spinner " << i << " computed a wrong chain";
    EXPECT_EQ(r.errno_after, 1000 + i) << "spinner " << i;
    EXPECT_EQ(r.local_after, 0xABC000u + static_cast<uint64_t>(i)) << "spinner " << i;
    EXPECT_FALSE(r.m_tid_mismatch) << "spinner " << i << ": a new M must mean a new OS thread";
    EXPECT_GE(r.preempts, 1u) << "spinner " << i;
    migrated += r.migrated ? 1 : 0;
  }
  EXPECT_GE(migrated, 1) << "3 spinners on 2 Ps, preempted every ms for up to 5 s: none moved";
}

// ---- every thread that runs goroutines accepts the signal ----

// Whether the calling thread blocks the preemption signal.
bool preempt_signal_blocked() {
  sigset_t set;
  pthread_sigmask(SIG_BLOCK, nullptr, &set);
  return sigismember(&set, internal::preempt_signal()) == 1;
}

// sysmon blocks the preemption signal for itself. An M that sysmon starts
// (handing off the P of a goroutine stuck in blocking()) must not inherit
// that mask, or goroutines on it can never be preempted. Here the only P
// is handed to a new thread while the main goroutine sits in blocking(), and
// a call-free spinner on that thread must still let another goroutine run.
TEST(Preempt, ThreadsStartedBySysmonAcceptThePreemptionSignal) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<int> ran_blocked{0}, ran{0};
  std::atomic<bool> spinning{true};
  std::atomic<bool> other_stopped_spinner{false};
  std::atomic<uint32_t> preempts{0};
  Watchdog dog(10s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1), [&] {
    Countdown cd(2);
    gort::go([&] {
      ran++;
      if (preempt_signal_blocked()) ran_blocked++;
      gort::go([&] {
        ran++;
        if (preempt_signal_blocked()) ran_blocked++;
        other_stopped_spinner = spinning.exchange(false);
        cd.done();
      });
      spin_while(spinning);
      preempts = self_async_preempts();
      cd.done();
    });
    // Our thread sleeps in the kernel; sysmon hands the P to another thread,
    // which runs the spinner.
    gort::blocking([] { ::usleep(200000); });
    cd.wait();
  });
  dog.disarm();
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(ran_blocked.load(), 0) << "goroutines ran on a thread that blocks the preemption signal";
  EXPECT_FALSE(dog.fired()) << "a spinner on the thread sysmon started was never preempted";
  EXPECT_TRUE(other_stopped_spinner.load());
  EXPECT_GE(preempts.load(), 1u);
}

// ---- Config::preempt = false ----

TEST(Preempt, PreemptOffLeavesOnlyCooperativePreemption) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  // Sequence numbers of three events: the spinner finishes its call-free
  // 200 ms, the other goroutine runs, the spinner passes its next gort call.
  std::atomic<int> seq{0};
  std::atomic<int> spin_done{-1}, other_ran{-1}, after_call{-1};
  std::atomic<bool> flagged{false};
  std::atomic<uint32_t> preempts{99};
  run_cfg(preempt_cfg(1, absl::Milliseconds(1), /*preempt=*/false), [&] {
    Countdown cd(2);
    gort::go([&] {
      gort::go([&] {
        other_ran = seq++;
        cd.done();
      });
      spin_for(200ms);
      spin_done = seq++;
      // sysmon asked for a cooperative yield long ago...
      flagged = internal::getg()->preempt.load();
      preempts = self_async_preempts();
      // ...which this gort call honours.
      gort::sleep(absl::ZeroDuration());
      after_call = seq++;
      cd.done();
    });
    cd.wait();
  });
  EXPECT_EQ(preempts.load(), 0u) << "async preemption happened with Config::preempt = false";
  EXPECT_EQ(spin_done.load(), 0) << "the other goroutine ran while the spinner spun";
  EXPECT_EQ(other_ran.load(), 1);
  EXPECT_EQ(after_call.load(), 2) << "the spinner's next gort call did not yield to the starved goroutine";
  EXPECT_TRUE(flagged.load()) << "sysmon did not ask the 200 ms spinner to yield";
}

// ---- NoPreempt ----

TEST(Preempt, NoPreemptPreventsAsyncPreemptionForItsScope) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<int> seq{0};
  std::atomic<int> scope_done{-1}, other_ran{-1};
  std::atomic<uint32_t> preempts_in_scope{99}, preempts_after{0};
  std::atomic<bool> spinning{true};
  std::atomic<bool> other_stopped_spinner{false};
  Watchdog dog(10s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
    Countdown cd(2);
    gort::go([&] {
      {
        gort::NoPreempt np;
        gort::go([&] {
          other_ran = seq++;
          other_stopped_spinner = spinning.exchange(false);
          cd.done();
        });
        // 150 slices' worth of call-free spinning (the clock is read
        // between blocks of 4096 iterations).
        spin_for(150ms);
        scope_done = seq++;
        preempts_in_scope = self_async_preempts();
      }
      // Out of the scope: preemptible again.
      spin_while(spinning);
      preempts_after = self_async_preempts();
      cd.done();
    });
    cd.wait();
  });
  dog.disarm();
  EXPECT_EQ(preempts_in_scope.load(), 0u);
  EXPECT_EQ(scope_done.load(), 0) << "the other goroutine ran inside the NoPreempt scope";
  EXPECT_EQ(other_ran.load(), 1);
  EXPECT_FALSE(dog.fired()) << "not preempted after the NoPreempt scope ended";
  EXPECT_TRUE(other_stopped_spinner.load());
  EXPECT_GE(preempts_after.load(), 1u);
}

TEST(Preempt, NoPreemptNestsPerGoroutineAndIsHarmlessOnPlainThreads) {
  {
    gort::NoPreempt outside_runtime;  // a plain thread: no effect, no crash
  }
  run_cfg(preempt_cfg(2), [&] {
    internal::G* g = internal::getg();
    EXPECT_EQ(g->nopreempt, 0);
    {
      gort::NoPreempt a;
      EXPECT_EQ(g->nopreempt, 1);
      {
        gort::NoPreempt b;
        EXPECT_EQ(g->nopreempt, 2);
        // Blocking inside the scope is allowed; the count travels with the G.
        gort::sleep(absl::Milliseconds(1));
        gort::yield();
        EXPECT_EQ(internal::getg(), g);
        EXPECT_EQ(g->nopreempt, 2);
        Countdown cd(1);
        gort::go([&] {
          EXPECT_EQ(internal::getg()->nopreempt, 0) << "another goroutine inherited NoPreempt";
          cd.done();
        });
        cd.wait();
      }
      EXPECT_EQ(g->nopreempt, 1);
    }
    EXPECT_EQ(g->nopreempt, 0);
    std::thread t([] { gort::NoPreempt np; });
    t.join();
  });
}

// ---- code registration ----

__attribute__((noinline)) int function_in_the_executable(int x) { return x * 3 + 1; }

TEST(Preempt, RegisterPreemptibleObject) {
  EXPECT_TRUE(gort::register_preemptible_object(reinterpret_cast<const void*>(&function_in_the_executable)));
  // The executable's text is preemptible by default.
  internal::preempt_ranges_init();
  EXPECT_TRUE(internal::pc_preemptible(reinterpret_cast<uintptr_t>(&function_in_the_executable)));
  // gort's own code never is.
  EXPECT_FALSE(internal::pc_preemptible(reinterpret_cast<uintptr_t>(&internal::preempt_one)));

  int on_stack = 0;
  EXPECT_FALSE(gort::register_preemptible_object(&on_stack));
  EXPECT_FALSE(gort::register_preemptible_object(reinterpret_cast<const void*>(uintptr_t{16})));
  EXPECT_FALSE(gort::register_preemptible_object(nullptr));
  void* anon = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  EXPECT_FALSE(gort::register_preemptible_object(anon));
  EXPECT_FALSE(internal::pc_preemptible(reinterpret_cast<uintptr_t>(anon)));
  munmap(anon, 4096);

  // An empty range is refused.
  char buf[16];
  EXPECT_FALSE(gort::register_preemptible_code(buf + 8, buf + 8));
  EXPECT_FALSE(gort::register_preemptible_code(buf + 8, buf));
}

TEST(Preempt, AsyncPreemptionAvailableInThisBuild) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  // The test executable links libgort.so, on x86-64, without TSan.
  EXPECT_TRUE(gort::async_preemption_available());
#else
  GTEST_SKIP() << "not an x86-64 non-TSan build";
#endif
}

// ---- the signal ----

std::atomic<int> g_foreign_sigurg{0};
void count_foreign_sigurg(int) { g_foreign_sigurg.fetch_add(1); }

// These two run in a fresh process where nothing has initialised the
// preemption signal yet: the test must not ask async_preemption_available()
// before its own set-up (that would install the handler).
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define SKIP_UNLESS_X86_64_NO_TSAN()
#else
#define SKIP_UNLESS_X86_64_NO_TSAN() GTEST_SKIP() << "no async preemption in this build"
#endif

TEST(PreemptSignal, ForeignSigurgGoesToThePreviousHandlerAndOursDoNot) {
  SKIP_UNLESS_X86_64_NO_TSAN();
  auto child = [] {
    // Installed before the runtime's first start (this is a fresh process).
    struct sigaction sa = {};
    sa.sa_handler = &count_foreign_sigurg;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGURG, &sa, nullptr);
    ASSERT_TRUE(gort::async_preemption_available());

    std::atomic<bool> spinning{true};
    std::atomic<uint32_t> preempts{0};
    Watchdog dog(10s, [&] { spinning.store(false); });
    run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
      Countdown cd(2);
      gort::go([&] {
        gort::go([&] {
          // 20 ms of slices, then stop the spinner.
          gort::sleep(absl::Milliseconds(20));
          spinning = false;
          cd.done();
        });
        spin_while(spinning);
        preempts = self_async_preempts();
        cd.done();
      });
      cd.wait();
      EXPECT_EQ(g_foreign_sigurg.load(), 0) << "the runtime's preemption signals reached the old handler";
      // A SIGURG that is not the runtime's is passed on.
      for (int i = 1; i <= 3; i++) {
        kill(getpid(), SIGURG);
        EXPECT_TRUE(eventually([&] { return g_foreign_sigurg.load() == i; }, std::chrono::seconds(10)));
      }
    });
    EXPECT_FALSE(dog.fired());
    EXPECT_GE(preempts.load(), 1u);
    EXPECT_EQ(g_foreign_sigurg.load(), 3);
  };
  GORT_EXPECT_SUBPROCESS_OK(60, reporting(child));
}

TEST(PreemptSignal, SignalNumberFromEnvironment) {
  SKIP_UNLESS_X86_64_NO_TSAN();
  auto child = [] {
    int sig = SIGRTMIN + 3;
    setenv("GORT_PREEMPT_SIGNAL", std::to_string(sig).c_str(), 1);
    struct sigaction sa = {};
    sa.sa_handler = &count_foreign_sigurg;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGURG, &sa, nullptr);
    ASSERT_TRUE(gort::async_preemption_available());

    std::atomic<bool> spinning{true};
    std::atomic<uint32_t> preempts{0};
    std::atomic<bool> other_stopped_spinner{false};
    Watchdog dog(10s, [&] { spinning.store(false); });
    run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
      EXPECT_EQ(internal::preempt_signal(), sig);
      Countdown cd(2);
      gort::go([&] {
        gort::go([&] {
          other_stopped_spinner = spinning.exchange(false);
          cd.done();
        });
        spin_while(spinning);
        preempts = self_async_preempts();
        cd.done();
      });
      cd.wait();
    });
    EXPECT_FALSE(dog.fired());
    EXPECT_TRUE(other_stopped_spinner.load());
    EXPECT_GE(preempts.load(), 1u);
    EXPECT_EQ(g_foreign_sigurg.load(), 0) << "SIGURG was used although GORT_PREEMPT_SIGNAL chose another";
  };
  GORT_EXPECT_SUBPROCESS_OK(60, reporting(child));
}

// ---- shutdown ----

TEST(Preempt, RunReturnsWhileSpinnersStillRun) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = [] {
    for (int procs : {1, 2}) {
      // Never cleared: the spinners are abandoned when main returns, as Go
      // abandons goroutines at exit.
      static std::atomic<bool> forever{true};
      std::atomic<int> started{0};
      ResourceSnapshot before;
      gort::run(
          [&] {
            for (int i = 0; i < procs + 1; i++) {
              gort::go([&] {
                started++;
                spin_while(forever);
              });
            }
            // Every spinner got a P at least once: preemption rotates them.
            EXPECT_TRUE(eventually([&] { return started.load() == procs + 1; }));
          },
          preempt_cfg(procs, absl::Milliseconds(2)));
      expect_no_leaks(before);
    }
    // And the runtime starts again afterwards.
    EXPECT_EQ(gort::run([] { return 7; }, preempt_cfg(2)), 7);
  };
  GORT_EXPECT_SUBPROCESS_OK(60, reporting(child));
}

}  // namespace
}  // namespace gort::test

// tests/preempt/clock_poll_test.cpp — a goroutine that polls the clock in a
// loop (its time spent in the vDSO and libc, not in the executable) is
// preempted, and a mutex holder that re-locks in such a loop lets a waiter
// in: the vDSO and the clock functions are safe points, and Mutex::unlock
// under contention is a cooperative preemption point (docs/preemption.md,
// "Which code is preempted").
//
// Each case is on one P, where nothing else can run until the looping
// goroutine gives the P up. The looping goroutines stop at a deadline far
// beyond what a working runtime needs, so a failure is a failed assertion,
// not a hang.
#include <dlfcn.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "preempt/preempt.hpp"
#include "tests/preempt/clock_lib.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Reads the clock until `deadline`, with no gort call; the call-free part
// of the loop is a few instructions of the executable.
__attribute__((noinline)) void poll_clock_until(Clock::time_point deadline) {
  while (Clock::now() < deadline) {
  }
}

uintptr_t symbol_in(const char* library, const char* name) {
  void* lib = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return 0;
  void* f = dlsym(lib, name);
  dlclose(lib);
  return reinterpret_cast<uintptr_t>(f);
}

TEST(ClockPoll, ClockFunctionsAreSafePoints) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  internal::preempt_ranges_init();
  using internal::PcKind;
  uintptr_t vdso = symbol_in("linux-vdso.so.1", "__vdso_clock_gettime");
  if (vdso != 0) {
    EXPECT_EQ(internal::pc_kind(vdso), PcKind::kClock);
  }
  uintptr_t libc_clock = symbol_in("libc.so.6", "clock_gettime");
  ASSERT_NE(libc_clock, 0u);
  EXPECT_EQ(internal::pc_kind(libc_clock), PcKind::kClock);
  uintptr_t steady = symbol_in("libstdc++.so.6", "_ZNSt6chrono3_V212steady_clock3nowEv");
  ASSERT_NE(steady, 0u);
  EXPECT_EQ(internal::pc_kind(steady), PcKind::kClock);
  // The rest of those libraries is not, nor a library of the program's own
  // that reads the clock.
  EXPECT_EQ(internal::pc_kind(symbol_in("libc.so.6", "malloc")), PcKind::kNo);
  EXPECT_EQ(internal::pc_kind(symbol_in("libc.so.6", "pthread_mutex_lock")), PcKind::kNo);
  EXPECT_EQ(internal::pc_kind(reinterpret_cast<uintptr_t>(&clock_lib_locked_reads)), PcKind::kNo);
  // The executable is.
  EXPECT_EQ(internal::pc_kind(reinterpret_cast<uintptr_t>(&poll_clock_until)), PcKind::kYes);
}

// About a second at the clock rates of today's machines.
constexpr uint64_t kGiveUpCycles = uint64_t{3} << 30;

// The clock functions are safe points only for the code that called them.
// A library that reads the clock while it holds a lock (clock_lib.cpp; so
// do ASan's allocator, abseil's clock and gort's timers) must not be
// preempted there: two goroutines on one P take the library's spin lock in
// turn, and one preempted inside it would leave the other spinning in the
// library (no safe point either) until the give-up time. Before the check,
// this failed on nearly every run; it was the hang of
// PreemptIntegrity.MallocStringsStreamsAndExceptionsUnderPreemption under
// ASan.
TEST(ClockPoll, ClockReadUnderALibrarysLockIsNotASafePoint) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<int> gave_up{0};
  std::atomic<int64_t> calls{0};
  std::atomic<uint32_t> preempts{0};
  run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
    std::atomic<bool> lock{false};
    auto until = Clock::now() + 1500ms;
    Countdown cd(2);
    for (int i = 0; i < 2; i++) {
      gort::go([&] {
        while (Clock::now() < until) {
          if (clock_lib_locked_reads(&lock, 200, kGiveUpCycles) < 0) gave_up++;
          calls++;
          poll_clock_until(Clock::now() + 20us);  // the executable: where preemptions land
        }
        preempts += self_async_preempts();
        cd.done();
      });
    }
    cd.wait();
  });
  EXPECT_EQ(gave_up.load(), 0) << "a goroutine was preempted holding the library's lock";
  EXPECT_GT(calls.load(), 100);
  // Preemption worked all along (1 ms slices for 1.5 s).
  EXPECT_GT(preempts.load(), 10u);
}

// The report: a goroutine polling steady_clock::now() was
// preempted only when the signal happened to land in the executable's few
// instructions, 0.5–4 s per slice on one P. Now each of the sleeper's
// fifty wake-ups waits for about one slice.
TEST(ClockPoll, ClockPollerIsPreempted) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<int64_t> sleeper_ms{-1};
  run_cfg(preempt_cfg(1), [&] {
    auto give_up = Clock::now() + 30s;
    std::atomic<bool> stop{false};
    Countdown cd(2);
    gort::go([&] {
      while (!stop.load(std::memory_order_relaxed) && Clock::now() < give_up) {
        poll_clock_until(Clock::now() + 1ms);
      }
      cd.done();
    });
    gort::go([&] {
      auto t0 = Clock::now();
      for (int i = 0; i < 50; i++) gort::sleep(absl::Milliseconds(1));
      sleeper_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      stop = true;
      cd.done();
    });
    cd.wait();
  });
  // ~50 slices of 10 ms; before the vDSO was a safe point, 30 s (the
  // poller's deadline).
  EXPECT_GE(sleeper_ms.load(), 0);
  EXPECT_LT(sleeper_ms.load(), 3000);
}

// Go's TestMutexFairness with the holder polling the clock and no
// asynchronous preemption at all: the only way the waiter gets the P on one
// P is the holder's unlock honouring sysmon's request. The main goroutine
// is the holder, so that the waiter is parked on the mutex before the hot
// loop starts.
TEST(ClockPoll, MutexHolderPollingTheClockLetsTheWaiterIn) {
  std::atomic<int64_t> hot_rounds{0};
  std::atomic<bool> waiter_done{false};
  run_cfg(preempt_cfg(1, absl::Milliseconds(10), /*preempt=*/false), [&] {
    gort::Mutex mu;
    auto give_up = Clock::now() + 5s;
    Countdown cd(1);
    mu.lock();
    gort::go([&] {
      for (int i = 0; i < 10; i++) {
        mu.lock();
        mu.unlock();
        poll_clock_until(Clock::now() + 100us);
      }
      waiter_done = true;
      cd.done();
    });
    gort::yield();  // the waiter parks on mu
    while (!waiter_done.load() && Clock::now() < give_up) {
      poll_clock_until(Clock::now() + 100us);
      mu.unlock();
      hot_rounds++;
      mu.lock();
    }
    mu.unlock();
    cd.wait();
  });
  EXPECT_TRUE(waiter_done.load()) << "the waiter did not get the mutex in 5 s (" << hot_rounds.load()
                                  << " rounds)";
  // About a slice of 100 µs rounds (~100); before unlock was a preemption
  // point, the waiter ran only after the 5 s deadline.
  EXPECT_LT(hot_rounds.load(), 10000);
}

// The same with asynchronous preemption on: the holder is interrupted in
// the clock functions.
TEST(ClockPoll, MutexHolderPollingTheClockIsPreempted) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<bool> waiter_done{false};
  std::atomic<int64_t> waiter_ms{-1};
  run_cfg(preempt_cfg(1), [&] {
    gort::Mutex mu;
    auto give_up = Clock::now() + 30s;
    Countdown cd(2);
    gort::go([&] {
      while (!waiter_done.load() && Clock::now() < give_up) {
        mu.lock();
        poll_clock_until(Clock::now() + 100us);
        mu.unlock();
      }
      cd.done();
    });
    gort::go([&] {
      auto t0 = Clock::now();
      for (int i = 0; i < 50; i++) {
        gort::sleep(absl::Microseconds(100));
        mu.lock();
        mu.unlock();
      }
      waiter_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      waiter_done = true;
      cd.done();
    });
    cd.wait();
  });
  EXPECT_TRUE(waiter_done.load());
  // ~50 rounds of one or two 10 ms slices; before the clock functions were
  // safe points, 30 s (the hot loop's deadline): a slice ended only when the
  // signal hit the executable's few instructions.
  EXPECT_LT(waiter_ms.load(), 6000);
}

}  // namespace
}  // namespace gort::test

// tests/netpoll/hook_sleep_test.cpp — libc's sleeps on goroutines
// (netpoll/hook/sleep.cpp): std::this_thread::sleep_for, nanosleep,
// usleep, sleep and clock_nanosleep park the goroutine on a timer, with
// Go's wait reason `sleep`, and make no thread.
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/netpoll/hook_helpers.hpp"

namespace {

using gort::test::ms_created;
using gort::test::Parked;
using gort::test::WaitReason;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class HookSleep : public gort::test::ProcsTest {};
GORT_INSTANTIATE_HOOK_PROCS(HookSleep);

TEST_P(HookSleep, ThousandsOfSleepForsParkWithoutThreads) {
  run_test([] {
    constexpr int kSleepers = gort::test::stress_size(3000);
    int ms_before = ms_created();
    std::vector<Parked> parked(kSleepers);
    std::atomic<int> done{0};
    gort::WaitGroup wg;
    auto t0 = Clock::now();
    for (int i = 0; i < kSleepers; i++) {
      wg.add(1);
      gort::go([&, i] {
        parked[i].mark();
        std::this_thread::sleep_for(milliseconds(300));
        done++;
        wg.done();
      });
    }
    // The last one spawned: still asleep when the spawning ends, however
    // slow the machine.
    EXPECT_TRUE(parked.back().wait(WaitReason::kSleep)) << "sleep_for did not park";
    wg.wait();
    EXPECT_EQ(done.load(), kSleepers);
    EXPECT_GE(Clock::now() - t0, milliseconds(299));
    // Under the race detector a thread that waits on one of
    // ThreadSanitizer's own locks for a millisecond looks blocked in OS code
    // to sysmon (preempt/retake.cpp), which hands its P to a new M: a few
    // more, never one per sleeper.
    const int slack = gort::internal::kRaceEnabled ? 2 * gort::procs() : 0;
    EXPECT_LE(ms_created() - ms_before, gort::procs() + slack) << "sleepers made threads";
  });
}

TEST_P(HookSleep, EveryFormSleepsItsTime) {
  run_test([] {
    auto t0 = Clock::now();
    timespec ts{0, 20 * 1000000};
    timespec rem{7, 7};
    EXPECT_EQ(::nanosleep(&ts, &rem), 0);
    EXPECT_EQ(rem.tv_sec, 7) << "rem is left alone unless interrupted";
    EXPECT_EQ(::usleep(20000), 0);
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr), 0);
    timespec at;
    clock_gettime(CLOCK_MONOTONIC, &at);
    at.tv_nsec += 20 * 1000000;
    if (at.tv_nsec >= 1000000000) {
      at.tv_sec++;
      at.tv_nsec -= 1000000000;
    }
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr), 0);
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_nsec += 20 * 1000000;
    if (at.tv_nsec >= 1000000000) {
      at.tv_sec++;
      at.tv_nsec -= 1000000000;
    }
    EXPECT_EQ(::clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, nullptr), 0);
    EXPECT_GE(Clock::now() - t0, milliseconds(99));
    // A time already past, and zero, return at once.
    timespec past{0, 0};
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, nullptr), 0);
    EXPECT_EQ(::usleep(0), 0);
    EXPECT_EQ(::sleep(0), 0u);
    auto until = std::chrono::system_clock::now() + milliseconds(15);
    std::this_thread::sleep_until(until);
    EXPECT_GE(std::chrono::system_clock::now(), until);
  });
}

TEST_P(HookSleep, BadArgumentsFailAsLibcs) {
  run_test([] {
    timespec bad{0, 1000000000};
    gort::test::write_errno(0);
    EXPECT_EQ(::nanosleep(&bad, nullptr), -1);
    EXPECT_EQ(gort::test::read_errno(), EINVAL);
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, 0, &bad, nullptr), EINVAL);
    timespec neg{-1, 0};
    EXPECT_EQ(::clock_nanosleep(CLOCK_MONOTONIC, 0, &neg, nullptr), EINVAL);
    timespec ok{0, 1000};
    EXPECT_EQ(::clock_nanosleep(static_cast<clockid_t>(12345), 0, &ok, nullptr), EINVAL);
  });
}

// Sleeping goroutines leave their P to the others: on one P a sleeper of
// 100 ms does not hold up a goroutine that counts meanwhile.
TEST_P(HookSleep, ASleepLeavesThePToOthers) {
  run_test([] {
    std::atomic<bool> asleep{false};
    std::atomic<int> steps{0};
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      asleep = true;
      ::usleep(100000);
      asleep = false;
      wg.done();
    });
    while (!asleep.load()) gort::yield();
    while (asleep.load()) {
      steps++;
      gort::yield();
    }
    wg.wait();
    EXPECT_GT(steps.load(), 100);
  });
}

// A sleep under an OS lock sleeps the thread (no park: the lock stays on
// its thread), with the P handed to another M meanwhile.
TEST_P(HookSleep, ASleepUnderAnOsLockSleepsItsThread) {
  run_test([] {
    std::mutex m;
    std::atomic<bool> done{false};
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      std::lock_guard<std::mutex> hold(m);
      std::this_thread::sleep_for(milliseconds(50));
      done = true;
      wg.done();
    });
    int spins = 0;
    while (!done.load()) {
      spins++;
      gort::sleep(absl::Milliseconds(1));
    }
    wg.wait();
    EXPECT_GT(spins, 5) << "the sleeper's P was not handed off";
  });
}

}  // namespace

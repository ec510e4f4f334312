// tests/stdlib/sync/synctest_clock_test.cpp — the standard clocks in a
// synctest bubble made with Options::fake_std_clocks (netpoll/hook/clock.cpp,
// docs/testing.md "The standard clocks"): std::chrono's clocks,
// clock_gettime, gettimeofday and time read the bubble's fake clock, which
// starts at 2000-01-01 00:00:00 UTC and moves only when every goroutine of
// the bubble is durably blocked; absl::Now() stays real for everyone;
// absolute deadlines computed from the fake clock wait their distance in
// real time; a bubble without the option shows the real clocks.
// What the interposers do outside a bubble is
// tests/netpoll/hook_clock_test.cpp's.
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "absl/time/clock.h"
#include "gort/sync.hpp"
#include "gort/synctest.hpp"
#include "gort/time.hpp"
#include "tests/testing.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::run_checked;
using namespace std::chrono_literals;
using std::chrono::steady_clock;
using std::chrono::system_clock;

constexpr time_t k2000 = 946684800;  // 2000-01-01 00:00:00 UTC
constexpr int64_t kSecond = 1000000000;

int64_t raw_ns(clockid_t c) {
  timespec ts{};
  ::syscall(SYS_clock_gettime, c, &ts);
  return int64_t{ts.tv_sec} * kSecond + ts.tv_nsec;
}

int64_t ns_of(const timespec& ts) { return int64_t{ts.tv_sec} * kSecond + ts.tv_nsec; }

gort::synctest::Options faking() { return gort::synctest::Options{.fake_std_clocks = true}; }

TEST(SynctestClock, StdClocksStartAt2000) {
  run_checked(2, [] {
    gort::synctest::test(
        [] {
          EXPECT_EQ(system_clock::now(), system_clock::time_point(std::chrono::seconds(k2000)));
          EXPECT_EQ(gort::now(), absl::FromUnixSeconds(k2000));
          timespec ts{};
          EXPECT_EQ(clock_gettime(CLOCK_REALTIME, &ts), 0);
          EXPECT_EQ(ts.tv_sec, k2000);
          EXPECT_EQ(ts.tv_nsec, 0);
          EXPECT_EQ(clock_gettime(CLOCK_REALTIME_COARSE, &ts), 0);
          EXPECT_EQ(ts.tv_sec, k2000);
          timeval tv{};
          EXPECT_EQ(gettimeofday(&tv, nullptr), 0);
          EXPECT_EQ(tv.tv_sec, k2000);
          EXPECT_EQ(tv.tv_usec, 0);
          time_t stored = 0;
          EXPECT_EQ(time(&stored), k2000);
          EXPECT_EQ(stored, k2000);
          // CPU time is not the bubble's.
          EXPECT_EQ(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts), 0);
          EXPECT_GT(ns_of(ts), 0);
        },
        faking());
  });
}

TEST(SynctestClock, StdClocksMoveExactlyWithTheBubble) {
  run_checked(2, [] {
    gort::synctest::test(
        [] {
          auto sys0 = system_clock::now();
          auto steady0 = steady_clock::now();
          timespec mono0{};
          clock_gettime(CLOCK_MONOTONIC, &mono0);
          // Running code does not move the fake clock, however long it runs.
          int64_t until = raw_ns(CLOCK_MONOTONIC) + 20 * 1000 * 1000;
          while (raw_ns(CLOCK_MONOTONIC) < until) {
          }
          EXPECT_EQ(system_clock::now(), sys0);
          EXPECT_EQ(steady_clock::now(), steady0);
          gort::sleep(absl::Hours(1));
          EXPECT_EQ(system_clock::now() - sys0, 1h);
          EXPECT_EQ(steady_clock::now() - steady0, 1h);
          timespec mono1{};
          clock_gettime(CLOCK_MONOTONIC, &mono1);
          EXPECT_EQ(ns_of(mono1) - ns_of(mono0), 3600 * kSecond);
          EXPECT_EQ(time(nullptr), k2000 + 3600);
          // libc's sleeps park on the fake clock too.
          int64_t real0 = raw_ns(CLOCK_MONOTONIC);
          std::this_thread::sleep_for(30min);
          EXPECT_EQ(system_clock::now() - sys0, 90min);
          EXPECT_EQ(steady_clock::now() - steady0, 90min);
          EXPECT_LT(raw_ns(CLOCK_MONOTONIC) - real0, 5 * kSecond) << "the sleep took real time";
        },
        faking());
  });
}

TEST(SynctestClock, WaitDoesNotMoveTheClock) {
  run_checked(2, [] {
    gort::synctest::test(
        [] {
          auto start = system_clock::now();
          std::atomic<bool> woke{false};
          gort::go([&] {
            gort::sleep(absl::Hours(1));
            woke = true;
          });
          gort::synctest::wait();  // the sleeper is parked
          EXPECT_EQ(system_clock::now(), start);
          EXPECT_FALSE(woke.load());
          gort::sleep(absl::Hours(2));
          EXPECT_TRUE(woke.load());
          EXPECT_EQ(system_clock::now() - start, 2h);
        },
        faking());
  });
}

// A bubble goroutine reads the C clock in a loop (each read fake) while a
// plain thread reads absl::Now(): abseil's sample of the clock, shared by
// every thread, never sees the fake time.
TEST(SynctestClock, AbslNowStaysReal) {
  std::atomic<bool> stop{false};
  std::atomic<int> backwards{0};
  std::atomic<int> off{0};
  std::thread checker([&] {
    absl::Time last = absl::Now();
    int64_t until = raw_ns(CLOCK_MONOTONIC) + 300 * 1000 * 1000;
    while (raw_ns(CLOCK_MONOTONIC) < until) {
      absl::Time t = absl::Now();
      if (t < last) backwards++;
      if (absl::AbsDuration(t - absl::FromUnixNanos(raw_ns(CLOCK_REALTIME))) > absl::Seconds(1)) off++;
      last = t;
    }
    stop = true;
  });
  std::atomic<int64_t> reads{0};
  std::atomic<int> bubble_off{0};
  std::atomic<int> fake_missed{0};
  std::string first_off;
  run_checked(2, [&] {
    gort::synctest::test(
        [&] {
          while (!stop.load()) {
            timespec ts{};
            clock_gettime(CLOCK_REALTIME, &ts);
            if (ts.tv_sec != k2000) fake_missed++;
            // The bubble's own absl::Now() is real as well.
            absl::Time a = absl::Now();
            if (absl::AbsDuration(a - absl::FromUnixNanos(raw_ns(CLOCK_REALTIME))) > absl::Seconds(1)) {
              if (bubble_off++ == 0) first_off = absl::FormatTime(a);
            }
            reads++;
          }
        },
        faking());
  });
  checker.join();
  EXPECT_EQ(backwards.load(), 0);
  EXPECT_EQ(off.load(), 0);
  EXPECT_EQ(bubble_off.load(), 0) << "absl::Now() in the bubble read " << first_off;
  EXPECT_EQ(fake_missed.load(), 0);
  EXPECT_GT(reads.load(), 0);
}

// Waits of ~50 ms real time each, measured by the raw clock.
template <class F>
void expect_about_50ms(const char* what, F wait) {
  int64_t t0 = raw_ns(CLOCK_MONOTONIC);
  wait();
  int64_t waited = raw_ns(CLOCK_MONOTONIC) - t0;
  EXPECT_GE(waited, 40 * 1000 * 1000) << what;
  EXPECT_LT(waited, 5 * kSecond) << what;
}

TEST(SynctestClock, FakeDeadlinesWaitTheirDistanceInRealTime) {
  // A mutex held by a plain thread for the whole test.
  pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
  std::atomic<bool> locked{false};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    pthread_mutex_lock(&held);
    locked = true;
    while (!release.load()) std::this_thread::sleep_for(1ms);
    pthread_mutex_unlock(&held);
  });
  while (!locked.load()) std::this_thread::sleep_for(1ms);
  run_checked(2, [&] {
    gort::synctest::test(
        [&] {
          std::mutex mu;
          std::condition_variable cv;
          {
            std::unique_lock<std::mutex> lock(mu);
            expect_about_50ms("condition_variable::wait_until(steady_clock)",
                              [&] { cv.wait_until(lock, steady_clock::now() + 50ms); });
            // Under the race detector TSan's interceptor of
            // pthread_cond_timedwait binds libc's versioned definition and
            // gort's translation never sees the call (docs/testing.md).
            if (!gort::internal::kRaceEnabled) {
              expect_about_50ms("condition_variable::wait_until(system_clock)",
                                [&] { cv.wait_until(lock, system_clock::now() + 50ms); });
            }
          }
          expect_about_50ms("pthread_mutex_clocklock", [&] {
            timespec ts{};
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 50 * 1000 * 1000;
            if (ts.tv_nsec >= kSecond) {
              ts.tv_sec++;
              ts.tv_nsec -= kSecond;
            }
            EXPECT_EQ(pthread_mutex_clocklock(&held, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
          });
          expect_about_50ms("sem_timedwait", [&] {
            sem_t sem;
            sem_init(&sem, 0, 0);
            timespec ts{};
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50 * 1000 * 1000;  // the fake clock's nanoseconds start at 0
            EXPECT_EQ(sem_timedwait(&sem, &ts), -1);
            sem_destroy(&sem);
          });
        },
        faking());
  });
  release = true;
  holder.join();
}

TEST(SynctestClock, WithoutTheOptionStdClocksAreReal) {
  run_checked(2, [] {
    gort::synctest::test(
        [] {
          EXPECT_EQ(gort::now(), absl::FromUnixSeconds(k2000));
          gort::sleep(absl::Hours(1));
          EXPECT_EQ(gort::now(), absl::FromUnixSeconds(k2000 + 3600));
          auto real_sys = std::chrono::nanoseconds(raw_ns(CLOCK_REALTIME));
          auto sys = system_clock::now().time_since_epoch();
          EXPECT_LT(sys > real_sys ? sys - real_sys : real_sys - sys, 1s);
          auto real_steady = std::chrono::nanoseconds(raw_ns(CLOCK_MONOTONIC));
          auto steady = steady_clock::now().time_since_epoch();
          EXPECT_LT(steady > real_steady ? steady - real_steady : real_steady - steady, 1s);
          EXPECT_GT(time(nullptr), k2000 + 365 * 24 * 3600);
        },
        gort::synctest::Options{});
  });
}

}  // namespace
}  // namespace gort_stdlib_test

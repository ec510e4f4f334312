// tests/netpoll/hook_clock_test.cpp — the standard clocks' interposers
// (netpoll/hook/clock.cpp) and the deadline translation of the timed waits
// (fake_clock.hpp, timedwait.cpp) outside a synctest bubble: every read is
// the real clock's, every deadline reaches the kernel as it was given, the
// runtime's own clock is real, abseil's reads are recognised, and a
// goroutine polling the clock through the interposer is still preempted.
// What a faking bubble sees is tests/stdlib/sync/synctest_clock_test.cpp's.
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/time/clock.h"
#include "gmp/os/clock.hpp"
#include "gmp/os/sys.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "netpoll/hook/clock.hpp"
#include "netpoll/hook/fake_clock.hpp"
#include "preempt/preempt.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kSecond = 1000000000;
// How far a clock read through the interposer may stray outside the two
// system calls around it: nothing, but for clocks whose vDSO and system
// call answers are not the same arithmetic.
constexpr int64_t kSlackNs = 10000;

int64_t ns_of(const timespec& ts) { return int64_t{ts.tv_sec} * kSecond + ts.tv_nsec; }

int64_t raw_ns(clockid_t c) {
  timespec ts{};
  ::syscall(SYS_clock_gettime, c, &ts);
  return ns_of(ts);
}

constexpr clockid_t kClocks[] = {CLOCK_REALTIME,  CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC,
                                 CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME,
                                 CLOCK_TAI,       CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID};

// Every clock, gettimeofday and time, read through the interposers between
// two system calls. Not the thread's CPU clock on a goroutine, which may
// move to another thread between the reads.
void expect_forwarded(bool on_goroutine) {
  for (clockid_t c : kClocks) {
    if (on_goroutine && c == CLOCK_THREAD_CPUTIME_ID) continue;
    int64_t before = raw_ns(c);
    timespec ts{};
    EXPECT_EQ(clock_gettime(c, &ts), 0) << "clock " << c;
    int64_t after = raw_ns(c);
    EXPECT_LE(before - kSlackNs, ns_of(ts)) << "clock " << c;
    EXPECT_LE(ns_of(ts), after + kSlackNs) << "clock " << c;
  }
  timeval raw_before{}, tv{}, raw_after{};
  ::syscall(SYS_gettimeofday, &raw_before, nullptr);
  EXPECT_EQ(gettimeofday(&tv, nullptr), 0);
  ::syscall(SYS_gettimeofday, &raw_after, nullptr);
  auto us = [](const timeval& t) { return int64_t{t.tv_sec} * 1000000 + t.tv_usec; };
  EXPECT_LE(us(raw_before), us(tv));
  EXPECT_LE(us(tv), us(raw_after));
  auto t_before = static_cast<time_t>(::syscall(SYS_time, nullptr));
  time_t stored = 0;
  time_t t = time(&stored);
  auto t_after = static_cast<time_t>(::syscall(SYS_time, nullptr));
  EXPECT_EQ(t, stored);
  EXPECT_LE(t_before, t);
  EXPECT_LE(t, t_after);
}

TEST(HookClock, IsTheDefinitionProgramsCall) {
  void* own[internal::kClockHooks];
  internal::clock_hook_entries(own);
  const char* names[] = {"clock_gettime", "gettimeofday", "time"};
  for (int i = 0; i < internal::kClockHooks; i++) {
    void* first = dlsym(RTLD_DEFAULT, names[i]);
    Dl_info info{};
    if (first != own[i] && dladdr(first, &info) != 0 && info.dli_fname != nullptr &&
        (std::strstr(info.dli_fname, "libasan") != nullptr || std::strstr(info.dli_fname, "libtsan") != nullptr)) {
      continue;  // a sanitizer's interceptor comes first, and calls on to gort's
    }
    EXPECT_EQ(first, own[i]) << names[i];
  }
}

TEST(HookClock, ForwardsExactlyOnAThread) { expect_forwarded(false); }

TEST(HookClock, ForwardsExactlyOnAGoroutine) {
  run_checked(2, [] {
    expect_forwarded(true);
    Countdown cd(1);
    gort::go([&] {
      expect_forwarded(true);
      cd.done();
    });
    cd.wait();
  });
}

TEST(HookClock, NanotimeIsTheRealMonotonicClock) {
  for (clockid_t c : kClocks) {
    if (c == CLOCK_THREAD_CPUTIME_ID || c == CLOCK_PROCESS_CPUTIME_ID) continue;
    int64_t before = raw_ns(c);
    timespec ts{};
    EXPECT_EQ(internal::real_clock_gettime(c, &ts), 0);
    int64_t after = raw_ns(c);
    EXPECT_LE(before - kSlackNs, ns_of(ts)) << "clock " << c;
    EXPECT_LE(ns_of(ts), after + kSlackNs) << "clock " << c;
  }
  int64_t raw0 = raw_ns(CLOCK_MONOTONIC);
  int64_t t0 = internal::nanotime();
  timespec nap{0, 20 * 1000 * 1000};
  internal::sys::nanosleep(&nap, nullptr);
  int64_t t1 = internal::nanotime();
  int64_t raw1 = raw_ns(CLOCK_MONOTONIC);
  EXPECT_LE(raw0 - kSlackNs, t0);
  EXPECT_LE(t1, raw1 + kSlackNs);
  EXPECT_GE(t1 - t0, 20 * 1000 * 1000);
  EXPECT_LT(t1 - t0, 5 * kSecond);
}

// A return address just past a call inside abseil's clock, as the
// interposer sees one.
uintptr_t just_inside(void* f) { return reinterpret_cast<uintptr_t>(f) + 1; }

__attribute__((noinline)) void a_program_function() { asm volatile(""); }

int find_absl_time(dl_phdr_info* info, size_t, void* out) {
  if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, "libabsl_time.so") == nullptr) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) != 0) {
      *static_cast<void**>(out) = reinterpret_cast<void*>(info->dlpi_addr + ph.p_vaddr + 16);
      return 1;
    }
  }
  return 0;
}

void* absl_time_code() {
  void* at = nullptr;
  dl_iterate_phdr(&find_absl_time, &at);
  return at;
}

TEST(HookClock, AbseilsReadsAreNeverFaked) {
  ASSERT_TRUE(internal::clock_hook_absl_range_known())
      << "abseil's code was not found: a faking bubble would fake nothing at the C level";
  // An address in libabsl_time's code, found through the loaded objects:
  // &absl::GetCurrentTimeNanos would be the executable's own PLT entry in
  // a non-PIE test program (a canonical PLT address).
  void* absl_now = absl_time_code();
  ASSERT_NE(absl_now, nullptr);
  EXPECT_FALSE(internal::clock_fake_for_caller(just_inside(absl_now)));
  // The program's own code is faked.
  EXPECT_TRUE(internal::clock_fake_for_caller(just_inside(reinterpret_cast<void*>(&a_program_function))));
  // libstdc++'s clocks are judged by their own caller, found on the stack
  // (abseil reads system_clock::now): a read from steady_clock::now whose
  // frame is not on the stack has no caller to judge, and stays real.
  // Through the real call chain, the program's reads are faked and
  // abseil's are not (tests/stdlib/sync/synctest_clock_test.cpp).
  void* libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (libstdcxx != nullptr) {
    void* steady_now = dlsym(libstdcxx, "_ZNSt6chrono3_V212steady_clock3nowEv");
    dlclose(libstdcxx);
    ASSERT_NE(steady_now, nullptr);
    EXPECT_FALSE(internal::clock_fake_for_caller(just_inside(steady_now)));
  }
}

TEST(HookClock, WhichClocksAreFaked) {
  constexpr int64_t kUnix = 946684800 * kSecond;  // 2000-01-01
  constexpr int64_t kMono = 12345 * kSecond;
  int64_t now = 0;
  for (clockid_t c : {CLOCK_REALTIME, CLOCK_REALTIME_COARSE}) {
    EXPECT_TRUE(internal::fake_clock_now(c, kUnix, kMono, &now)) << c;
    EXPECT_EQ(now, kUnix);
  }
  for (clockid_t c : {CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME}) {
    EXPECT_TRUE(internal::fake_clock_now(c, kUnix, kMono, &now)) << c;
    EXPECT_EQ(now, kMono);
  }
  for (clockid_t c : {CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID, CLOCK_TAI, CLOCK_REALTIME_ALARM,
                      CLOCK_BOOTTIME_ALARM}) {
    EXPECT_FALSE(internal::fake_clock_now(c, kUnix, kMono, &now)) << c;
  }
  timespec ts = internal::ns_timespec(-1);
  EXPECT_EQ(ts.tv_sec, -1);
  EXPECT_EQ(ts.tv_nsec, 999999999);
}

TEST(HookClock, DeadlineShiftKeepsTheDistance) {
  using internal::shift_deadline;
  // 50 ms after a fake now of 2000-01-01, on a real clock at 1.7e9 s.
  constexpr int64_t kFake = 946684800 * kSecond;
  constexpr int64_t kReal = 1700000000 * kSecond + 999000000;
  timespec t = shift_deadline(timespec{946684800, 50000000}, kFake, kReal);
  EXPECT_EQ(t.tv_sec, 1700000001);
  EXPECT_EQ(t.tv_nsec, 49000000);
  // A deadline already passed on the fake clock is as far in the real past.
  t = shift_deadline(timespec{946684799, 0}, kFake, kReal);
  EXPECT_EQ(t.tv_sec, 1699999999);
  EXPECT_EQ(t.tv_nsec, 999000000);
  // Before the epoch: the epoch.
  t = shift_deadline(timespec{0, 0}, kFake, kReal - kFake - 1);
  EXPECT_EQ(t.tv_sec, 0);
  EXPECT_EQ(t.tv_nsec, 0);
  // Beyond timespec: the largest.
  t = shift_deadline(timespec{std::numeric_limits<time_t>::max(), 999999999}, 0, kReal);
  EXPECT_EQ(t.tv_sec, std::numeric_limits<time_t>::max());
  EXPECT_EQ(t.tv_nsec, 999999999);
  // A fake monotonic clock ahead of the real one.
  t = shift_deadline(timespec{5000, 0}, 4999 * kSecond, 100 * kSecond);
  EXPECT_EQ(t.tv_sec, 101);
  EXPECT_EQ(t.tv_nsec, 0);
}

TEST(HookClock, DeadlinesOutsideABubbleAreUntouched) {
  timespec t{123, 456};
  timespec buf{};
  EXPECT_EQ(internal::real_deadline(CLOCK_REALTIME, &t, &buf), &t);
  EXPECT_EQ(internal::real_deadline(CLOCK_MONOTONIC, &t, &buf), &t);
  run_checked(1, [&] {
    timespec b{};
    EXPECT_EQ(internal::real_deadline(CLOCK_MONOTONIC, &t, &b), &t);
  });
}

timespec in_30ms(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return internal::ns_timespec(ns_of(ts) + 30 * 1000 * 1000);
}

// Each timed wait through its interposer times out after its 30 ms.
template <class F>
void expect_times_out_in_30ms(const char* what, F wait) {
  int64_t t0 = raw_ns(CLOCK_MONOTONIC);
  int r = wait();
  int64_t waited = raw_ns(CLOCK_MONOTONIC) - t0;
  EXPECT_EQ(r, ETIMEDOUT) << what;
  EXPECT_GE(waited, 29 * 1000 * 1000) << what;
  EXPECT_LT(waited, 5 * kSecond) << what;
}

TEST(HookClock, TimedWaitsKeepTheirDeadlines) {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_t mono_cond;
  pthread_cond_init(&mono_cond, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_lock(&mu);
  expect_times_out_in_30ms("pthread_cond_timedwait", [&] {
    timespec d = in_30ms(CLOCK_REALTIME);
    return pthread_cond_timedwait(&cond, &mu, &d);
  });
  expect_times_out_in_30ms("pthread_cond_timedwait, CLOCK_MONOTONIC", [&] {
    timespec d = in_30ms(CLOCK_MONOTONIC);
    return pthread_cond_timedwait(&mono_cond, &mu, &d);
  });
  expect_times_out_in_30ms("pthread_cond_clockwait", [&] {
    timespec d = in_30ms(CLOCK_MONOTONIC);
    return pthread_cond_clockwait(&cond, &mu, CLOCK_MONOTONIC, &d);
  });
  pthread_mutex_unlock(&mu);
  pthread_cond_destroy(&mono_cond);
  pthread_cond_destroy(&cond);

  sem_t sem;
  sem_init(&sem, 0, 0);
  auto sem_result = [](int r) { return r == 0 ? 0 : errno; };
  expect_times_out_in_30ms("sem_timedwait", [&] {
    timespec d = in_30ms(CLOCK_REALTIME);
    return sem_result(sem_timedwait(&sem, &d));
  });
  expect_times_out_in_30ms("sem_clockwait", [&] {
    timespec d = in_30ms(CLOCK_MONOTONIC);
    return sem_result(sem_clockwait(&sem, CLOCK_MONOTONIC, &d));
  });
  sem_destroy(&sem);

  int64_t t0 = raw_ns(CLOCK_MONOTONIC);
  timespec d = in_30ms(CLOCK_MONOTONIC);
  EXPECT_EQ(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, nullptr), 0);
  EXPECT_GE(raw_ns(CLOCK_MONOTONIC) - t0, 29 * 1000 * 1000);
}

// tests/preempt/clock_poll_test.cpp's ClockPollerIsPreempted with the C
// clock, called straight from the executable: each read passes through
// gort's clock_gettime (no safe point itself) on its way to libc and the
// vDSO (safe points for the executable's loop, unwound through it).
__attribute__((noinline)) void poll_clock_gettime_until(int64_t deadline_ns) {
  timespec ts{};
  do {
    clock_gettime(CLOCK_MONOTONIC, &ts);
  } while (ns_of(ts) < deadline_ns);
}

TEST(HookClock, ClockGettimePollerIsPreempted) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  internal::preempt_ranges_init();
  void* own[internal::kClockHooks];
  internal::clock_hook_entries(own);
  for (void* f : own) EXPECT_EQ(internal::pc_kind(reinterpret_cast<uintptr_t>(f)), internal::PcKind::kNo);
  std::atomic<int64_t> sleeper_ms{-1};
  std::atomic<uint32_t> preempts{0};
  run_cfg(preempt_cfg(1), [&] {
    int64_t give_up = raw_ns(CLOCK_MONOTONIC) + 30 * kSecond;
    std::atomic<bool> stop{false};
    Countdown cd(2);
    gort::go([&] {
      while (!stop.load(std::memory_order_relaxed) && raw_ns(CLOCK_MONOTONIC) < give_up) {
        poll_clock_gettime_until(raw_ns(CLOCK_MONOTONIC) + 1000 * 1000);
      }
      preempts += self_async_preempts();
      cd.done();
    });
    gort::go([&] {
      int64_t t0 = raw_ns(CLOCK_MONOTONIC);
      for (int i = 0; i < 50; i++) gort::sleep(absl::Milliseconds(1));
      sleeper_ms = (raw_ns(CLOCK_MONOTONIC) - t0) / 1000000;
      stop = true;
      cd.done();
    });
    cd.wait();
  });
  // ~50 slices of 10 ms; a poller that could not be preempted would hold
  // the P until its 30 s give-up time.
  EXPECT_GE(sleeper_ms.load(), 0);
  EXPECT_LT(sleeper_ms.load(), 3000);
  EXPECT_GT(preempts.load(), 0u);
}

}  // namespace
}  // namespace gort::test

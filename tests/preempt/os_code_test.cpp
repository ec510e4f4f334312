// tests/preempt/os_code_test.cpp — preemption that ordinary C++ code
// survives (preempt/oslock.cpp, preempt/safe_points.cpp, the retake of Ms
// blocked in the kernel in preempt/sysmon.cpp).
//
// Each case runs goroutine code the way users write it — a std::mutex
// around a critical section, a slow function-local static, call_once, a
// thread_local with a dynamic initialiser, atomic<shared_ptr>, absl::Mutex,
// a SIGPROF handler, a blocking read() with no gort::blocking — with more
// goroutines than Ps, spending most of their time where a preemption would
// hurt. Before the fixes these hung (the lock holder preempted, the next
// goroutine on its M blocking the thread in the kernel) or saw
// half-constructed objects. Each case runs in a child process with a
// watchdog (a hang fails the test) at a 1 ms and a 10 ms slice on 1, 2 and 4
// Ps, and checks the answer.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <tuple>

#include <absl/synchronization/mutex.h>

#include "gmp/m.hpp"
#include "gort/gort.hpp"
#include "preempt/preempt.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;

struct Case {
  int procs;
  int slice_ms;
};

// The OS-lock cases check the counting alone: with the retake of blocked Ms
// on, a waiter's M asleep on the lock would lose its P and hide a preempted
// holder. BlockedM (below) is the fixture of the retake's own cases.
class OsCode : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { internal::retake_blocked_allowed.store(false); }
  void TearDown() override { internal::retake_blocked_allowed.store(true); }
  gort::Config cfg() const {
    return preempt_cfg(GetParam().procs, absl::Milliseconds(GetParam().slice_ms));
  }
  // Goroutines per case: more than Ps, so that a blocked M matters.
  int workers() const { return GetParam().procs + 2; }
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "procs" + std::to_string(info.param.procs) + "_slice" + std::to_string(info.param.slice_ms) + "ms";
}

// Runs `body(done)` on `n` goroutines and waits for all of them.
template <class F>
void on_goroutines(int n, F body) {
  gort::WaitGroup wg;
  for (int i = 0; i < n; i++) {
    wg.add(1);
    gort::go([&wg, &body, i] {
      body(i);
      wg.done();
    });
  }
  wg.wait();
}

// A critical section long enough that preemption signals land inside it.
constexpr auto kInside = 150us;
constexpr int kRounds = 60;

// ---- OS locks held while the goroutine runs user code ----

// workers() goroutines each run kRounds critical sections that spin for
// kInside and count; under_lock(i, section) runs section() holding the lock
// (i: the goroutine's index). The count must come out exact.
template <class UnderLock>
void locked_counter(const gort::Config& cfg, int n, UnderLock under_lock) {
  auto child = reporting([&] {
    long counter = 0;
    gort::run(
        [&] {
          on_goroutines(n, [&](int i) {
            for (int r = 0; r < kRounds; r++) {
              under_lock(i, [&] {
                spin_for(kInside);
                counter++;
              });
            }
          });
        },
        cfg);
    EXPECT_EQ(counter, long{n} * kRounds);
  });
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

TEST_P(OsCode, StdMutex) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::mutex mu;
  locked_counter(cfg(), workers(), [&](int, auto section) {
    std::lock_guard<std::mutex> g(mu);
    section();
  });
}

TEST_P(OsCode, RecursiveMutex) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::recursive_mutex mu;
  locked_counter(cfg(), workers(), [&](int, auto section) {
    std::lock_guard<std::recursive_mutex> outer(mu);
    spin_for(kInside / 2);
    std::lock_guard<std::recursive_mutex> inner(mu);
    section();
  });
}

TEST_P(OsCode, TimedMutex) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::timed_mutex mu;
  locked_counter(cfg(), workers(), [&](int i, auto section) {
    if (i % 2 == 0) {
      while (!mu.try_lock_for(50ms)) {
      }
    } else {
      mu.lock();
    }
    section();
    mu.unlock();
  });
}

TEST_P(OsCode, SharedMutex) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = reporting([&] {
    std::shared_mutex mu;
    long counter = 0;
    std::atomic<long> reads{0};
    int n = workers();
    gort::run(
        [&] {
          on_goroutines(n, [&](int i) {
            for (int r = 0; r < kRounds; r++) {
              if ((i + r) % 3 == 0) {
                std::unique_lock<std::shared_mutex> w(mu);
                spin_for(kInside);
                counter++;
              } else {
                std::shared_lock<std::shared_mutex> rd(mu);
                spin_for(kInside);
                reads.fetch_add(1);
              }
            }
          });
        },
        cfg());
    long writes = 0;
    for (int i = 0; i < n; i++) {
      for (int r = 0; r < kRounds; r++) writes += (i + r) % 3 == 0;
    }
    EXPECT_EQ(counter, writes);
    EXPECT_EQ(reads.load(), long{n} * kRounds - writes);
  });
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

TEST_P(OsCode, PthreadSpinlock) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  pthread_spinlock_t spin;
  pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
  locked_counter(cfg(), workers(), [&](int, auto section) {
    pthread_spin_lock(&spin);
    section();
    pthread_spin_unlock(&spin);
  });
  pthread_spin_destroy(&spin);
}

// ---- one-time initialisation ----

struct Slow {
  Slow() {
    spin_for(30ms);
    value = 42;
  }
  int value = 0;
};

__attribute__((noinline)) int slow_static_value() {
  static Slow s;
  return s.value;
}

TEST_P(OsCode, SlowFunctionLocalStatic) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = reporting([&] {
    std::atomic<int> wrong{0};
    gort::run([&] { on_goroutines(workers() * 2, [&](int) { wrong += slow_static_value() != 42; }); },
              cfg());
    EXPECT_EQ(wrong.load(), 0);
  });
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

TEST_P(OsCode, CallOnceWithLongCallable) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = reporting([&] {
    std::once_flag once;
    int value = 0;
    std::atomic<int> wrong{0};
    gort::run(
        [&] {
          on_goroutines(workers() * 2, [&](int) {
            std::call_once(once, [&] {
              spin_for(30ms);
              value = 42;
            });
            wrong += value != 42;
          });
        },
        cfg());
    EXPECT_EQ(wrong.load(), 0);
  });
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

// pthread_once counts its initialiser as an OS lock while it runs; a once
// already done holds nothing, and asking it again counts nothing (its fast
// path, preempt/oslock.cpp).
std::atomic<int> once_runs{0};
std::atomic<int32_t> oslocks_in_init{-1};
pthread_once_t once_flag = PTHREAD_ONCE_INIT;
void once_init() {
  once_runs++;
  oslocks_in_init = internal::getm()->oslocks.load();
}

TEST(OsCount, PthreadOnceCountsOnlyWhileItsInitialiserRuns) {
  GORT_SKIP_IN_RACE_BUILD("TSan's own pthread_once runs instead of the counting one");
  gort::run([] {
    EXPECT_EQ(internal::getm()->oslocks.load(), 0);
    EXPECT_EQ(pthread_once(&once_flag, once_init), 0);
    EXPECT_EQ(once_runs.load(), 1);
    EXPECT_GE(oslocks_in_init.load(), 1);
    EXPECT_EQ(internal::getm()->oslocks.load(), 0);
    for (int i = 0; i < 3; i++) EXPECT_EQ(pthread_once(&once_flag, once_init), 0);
    EXPECT_EQ(once_runs.load(), 1);
    EXPECT_EQ(internal::getm()->oslocks.load(), 0);
  });
}

// A thread_local whose constructor runs a while. Another goroutine on the
// same M must never see it half-built (namespace scope: the guard is set
// before the constructor runs) nor build it twice (function scope: the
// guard is set after).
struct SlowPerThread {
  SlowPerThread() {
    {
      std::lock_guard<std::mutex> g(mu);
      if (!tids.insert(static_cast<long>(syscall(SYS_gettid))).second) twice++;
    }
    spin_for(20ms);
    value = 42;
  }
  int value = 0;
  static inline std::mutex mu;
  static inline std::set<long> tids;
  static inline int twice = 0;
};

thread_local SlowPerThread ns_tls;

__attribute__((noinline)) int ns_tls_value() { return ns_tls.value; }

TEST_P(OsCode, ThreadLocalInitialiserAtNamespaceScope) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = reporting([&] {
    std::atomic<int> wrong{0};
    gort::run([&] { on_goroutines(workers() * 2, [&](int) { wrong += ns_tls_value() != 42; }); }, cfg());
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(SlowPerThread::twice, 0);
  });
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

__attribute__((noinline)) int local_tls_value() {
  static thread_local SlowPerThread t;
  return t.value;
}

TEST_P(OsCode, ThreadLocalInitialiserAtFunctionScope) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = reporting([&] {
    std::atomic<int> wrong{0};
    gort::run([&] { on_goroutines(workers() * 2, [&](int) { wrong += local_tls_value() != 42; }); }, cfg());
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(SlowPerThread::twice, 0);
  });
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

// ---- libstdc++'s own locks, reached from inlined code ----

TEST_P(OsCode, AtomicSharedPtr) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = reporting([&] {
    auto shared = std::make_shared<long>(0);
    std::atomic<long> swaps{0};
    int n = workers();
    constexpr int kOps = 20000;
    gort::run(
        [&] {
          on_goroutines(n, [&](int) {
            for (int i = 0; i < kOps; i++) {
              auto cur = std::atomic_load(&shared);
              auto next = std::make_shared<long>(*cur + 1);
              if (std::atomic_compare_exchange_strong(&shared, &cur, next)) swaps.fetch_add(1);
            }
          });
        },
        cfg());
    EXPECT_EQ(*shared, swaps.load());
    EXPECT_GT(swaps.load(), 0);
  });
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

// ---- threads the kernel blocks: sysmon hands their P to another M ----

class BlockedM : public OsCode {
 protected:
  void SetUp() override { internal::retake_blocked_allowed.store(true); }
};

// absl::Mutex is counted like pthread's; a waiter's M sleeps on absl's own
// futex, and its P must go to another M so that the holder (on another P)
// is not the only goroutine left to run.
TEST_P(BlockedM, AbslMutex) {
  GORT_SKIP_IN_RACE_BUILD("Debian's libabsl is not instrumented: TSan cannot see absl::Mutex");
  absl::Mutex mu;
  locked_counter(cfg(), workers(), [&](int, auto section) {
    absl::MutexLock g(&mu);
    section();
  });
}

// A library that knows nothing of gort reads a pipe with a plain blocking
// read(): its thread sleeps in the kernel holding a P. The writer needs
// that P when there is only one.
TEST_P(BlockedM, PlainBlockingReadOnAPipe) {
  auto child = reporting([&] {
    constexpr int kPipes = 3;
    int fds[kPipes][2];
    for (auto& p : fds) ASSERT_EQ(pipe(p), 0);
    std::atomic<int> got{0};
    gort::run(
        [&] {
          gort::WaitGroup wg;
          for (int i = 0; i < kPipes; i++) {
            wg.add(2);
            gort::go([&, i] {
              char c = 0;
              ssize_t r;
              do {
                r = read(fds[i][0], &c, 1);  // no gort::blocking: blocks the M
              } while (r < 0 && errno == EINTR);
              if (r == 1 && c == 'a' + i) got++;
              wg.done();
            });
            gort::go([&, i] {
              gort::sleep(absl::Milliseconds(5));
              spin_for(2ms);
              char c = static_cast<char>('a' + i);
              EXPECT_EQ(write(fds[i][1], &c, 1), 1);
              wg.done();
            });
          }
          wg.wait();
        },
        cfg());
    for (auto& p : fds) {
      close(p[0]);
      close(p[1]);
    }
    EXPECT_EQ(got.load(), kPipes);
  });
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

// A goroutine whose M lost its P to sysmon while the kernel blocked it, and
// found none free at its next runtime entry, runs on without one until it
// parks. If the wake-up came first (the park's unlock says "ready me at
// once"), it goes to the global queue and its M to sleep, so another M
// must be woken, or this one take a P that fell idle meanwhile. Every other
// M was asleep: with neither, the goroutine waited there for good (seen in
// the race build as a 10-minute hang of a context test).
TEST(BlockedMPark, WakeBeforeParkWithoutAPIsNotLost) {
  auto child = reporting([&] {
    // The case needs sysmon to take the P while usleep blocks its M; on a
    // loaded machine sysmon may not run in time, and the attempt is made
    // again (every attempt must resume, P or not).
    bool tested = false;
    for (int attempt = 0; attempt < 20 && !tested; attempt++) {
      std::atomic<bool> stop_busy{false};
      std::atomic<bool> lost_p{false};
      std::atomic<bool> resumed{false};
      gort::Config cfg;
      cfg.procs = 2;
      gort::run(
          [&] {
            gort::WaitGroup wg;
            // Both Ps stay busy while the goroutine below sleeps in the kernel.
            for (int i = 0; i < 2; i++) {
              wg.add(1);
              gort::go([&] {
                while (!stop_busy.load()) gort::yield();
                wg.done();
              });
            }
            wg.add(1);
            gort::go([&] {
              // libc's own sleep, which the runtime does not see (not the
              // hooked one, which would park): sysmon hands the P on.
              {
                gort::RawLibc raw;
                usleep(50 * 1000);
              }
              gort::go([] {});  // a runtime entry: no P is free
              lost_p = internal::getm()->p == nullptr;
              stop_busy = true;
              {
                gort::RawLibc raw;
                usleep(50 * 1000);  // the other Ms go to sleep
              }
              internal::park([](internal::G*, void*) { return false; }, nullptr, internal::WaitReason::kTest);
              resumed = true;
              wg.done();
            });
            wg.wait();
          },
          cfg);
      EXPECT_TRUE(resumed.load()) << "attempt " << attempt;
      tested = lost_p.load();
    }
    EXPECT_TRUE(tested) << "the P was never taken while the kernel blocked its M (20 attempts): nothing was tested";
  });
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

// ---- signal handlers ----

std::atomic<long> g_prof_ticks{0};

void on_prof(int) {
  // What a sampling profiler does: allocate a record, spin over it.
  void* p = std::malloc(64);
  spin_for(100us);
  std::free(p);
  g_prof_ticks.fetch_add(1, std::memory_order_relaxed);
}

// A SIGPROF handler with no SA_ONSTACK runs on the goroutine's stack, in
// the program's own code. Preempted there, its goroutine would resume on
// another thread with the handler's signal mask left on this one.
TEST_P(OsCode, ProfilerSignalHandler) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  auto child = reporting([&] {
    struct sigaction sa = {};
    sa.sa_handler = &on_prof;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGPROF, &sa, nullptr), 0);
    itimerval it = {};
    it.it_interval.tv_usec = 500;
    it.it_value.tv_usec = 500;
    ASSERT_EQ(setitimer(ITIMER_PROF, &it, nullptr), 0);
    std::atomic<long> masked{0};
    gort::run(
        [&] {
          on_goroutines(workers(), [&](int) {
            for (int r = 0; r < 200; r++) {
              spin_for(1ms);
              sigset_t cur;
              pthread_sigmask(SIG_SETMASK, nullptr, &cur);
              if (sigismember(&cur, SIGPROF)) masked++;
            }
          });
        },
        cfg());
    it = {};
    setitimer(ITIMER_PROF, &it, nullptr);
    ::signal(SIGPROF, SIG_IGN);
    EXPECT_EQ(masked.load(), 0);
    EXPECT_GT(g_prof_ticks.load(), 0);
  });
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

const auto kCases = ::testing::Values(Case{1, 1}, Case{1, 10}, Case{2, 1}, Case{2, 10}, Case{4, 1}, Case{4, 10});
INSTANTIATE_TEST_SUITE_P(Slices, OsCode, kCases, case_name);
INSTANTIATE_TEST_SUITE_P(Slices, BlockedM, kCases, case_name);

}  // namespace
}  // namespace gort::test

namespace gort::test {
namespace {

// ---- mistakes that would hang: fatal errors that name them ----

TEST(OsCodeDeath, ParkWhileHoldingAnOsLockIsFatal) {
  EXPECT_EXIT(
      {
        std::mutex mu;
        gort::run([&] {
          std::lock_guard<std::mutex> g(mu);
          gort::sleep(absl::Milliseconds(1));
        });
        ::_exit(0);
      },
      ::testing::ExitedWithCode(2), "fatal error: goroutine parked while holding an OS lock");
}

TEST(OsCodeDeath, YieldWhileInsideAStaticInitialiserIsFatal) {
  GORT_SKIP_IN_RACE_BUILD("TSan's own __cxa_guard_acquire runs instead of the counting one");
  EXPECT_EXIT(
      {
        gort::run([&] {
          gort::go([] {});
          static int v = [] {
            gort::yield();
            return 1;
          }();
          (void)v;
        });
        ::_exit(0);
      },
      ::testing::ExitedWithCode(2), "fatal error: goroutine yielded while holding an OS lock");
}

TEST(OsCodeDeath, ParkInsideBlockingIsFatal) {
  EXPECT_EXIT(
      {
        gort::run([&] { gort::blocking([] { gort::sleep(absl::Milliseconds(1)); }); });
        ::_exit(0);
      },
      ::testing::ExitedWithCode(2), "fatal error: goroutine parked inside gort::blocking");
}

// A preemption signal sent just before the goroutine entered blocking()
// must not interrupt f's system calls.
TEST(OsCodeBlocking, NoEintrRightAfterASlice) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<int> eintr{0};
  run_cfg(preempt_cfg(1, absl::Milliseconds(1)), [&] {
    for (int i = 0; i < 400; i++) {
      spin_for(1500us);
      int r = gort::blocking([] {
        timespec ts{0, 20000};
        return nanosleep(&ts, nullptr) == 0 ? 0 : errno;
      });
      if (r == EINTR) eintr++;
    }
  });
  EXPECT_EQ(eintr.load(), 0);
}

}  // namespace
}  // namespace gort::test

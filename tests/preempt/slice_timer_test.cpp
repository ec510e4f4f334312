// tests/preempt/slice_timer_test.cpp — the per-M slice timer
// (preempt/signal.cpp): a POSIX timer that delivers the preemption signal
// to the thread of a G whose slice ends, so that preemption does not wait
// for sysmon to get a CPU.
//
// The time slice is one hour in the first test and in the unsafe-point
// retries, so sysmon never asks on its own: only the timer can take the P
// from the spinner. The last test counts sysmon's wake-ups while the timers
// do the preempting.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "gmp/sched.hpp"
#include "gort/os.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "preempt/preempt.hpp"
#include "tests/preempt/helpers.hpp"

namespace {

using namespace std::chrono_literals;
using gort::test::preempt_cfg;
using gort::test::run_cfg;
using gort::test::Watchdog;

TEST(SliceTimer, FiresForTheArmedRunOnly) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<bool> spinning{true};
  std::atomic<bool> spinner_started{false};
  std::atomic<bool> main_ran{false};
  std::atomic<bool> stale_ran_main{false};
  Watchdog dog(10s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1, absl::Hours(1)), [&] {
    gort::go([&] {
      spinner_started.store(true);
      gort::test::spin_while(spinning);
    });
    // A plain thread arms P0's M's timer once the spinner holds the P.
    std::thread armer([&] {
      while (!spinner_started.load()) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(20ms);
      gort::internal::P* p = gort::internal::sched.allp[0];
      uint32_t tick = p->schedtick_seen.load();
      // A stale run's timer is ignored by the handler...
      gort::internal::arm_slice_timer(p, tick - 1, gort::internal::nanotime() + 1000000);
      std::this_thread::sleep_for(100ms);
      stale_ran_main.store(main_ran.load());
      // ...the current run's takes the P away.
      EXPECT_TRUE(gort::internal::arm_slice_timer(p, tick, gort::internal::nanotime() + 1000000));
    });
    // The main goroutine can only run again once the spinner is preempted.
    gort::sleep(absl::Milliseconds(1));
    main_ran.store(true);
    spinning.store(false);
    armer.join();
  });
  EXPECT_FALSE(dog.fired()) << "the slice timer did not preempt the spinner";
  EXPECT_FALSE(stale_ran_main.load()) << "a timer armed for an earlier run preempted";
}

TEST(SliceTimer, ArmedByTheThreadWhenACpuBoundGoroutineResumes) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<int> checked{0};
  std::atomic<int> wrong{0};
  run_cfg(preempt_cfg(1, absl::Milliseconds(2)), [&] {
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      uint32_t seen = gort::test::self_async_preempts();
      auto deadline = std::chrono::steady_clock::now() + 5s;
      while (checked.load() < 5 && std::chrono::steady_clock::now() < deadline) {
        gort::test::spin_for(500us);
        uint32_t now = gort::test::self_async_preempts();
        if (now == seen) continue;
        seen = now;
        // Resumed after a preemption: this run's slice timer is armed.
        gort::NoPreempt np;
        gort::internal::M* m = gort::internal::getm();
        if (m->slice_timer_state.load() != 2 || m->slice_timer_tick.load() != m->p->schedtick) {
          wrong.fetch_add(1);
        }
        checked.fetch_add(1);
      }
      wg.done();
    });
    wg.wait();
  });
  EXPECT_GE(checked.load(), 5);
  EXPECT_EQ(wrong.load(), 0);
}

// The slice is one hour, so sysmon never signals the spinner (nor does its
// backstop): the only request is a timer armed from a plain thread while the
// spinner is at an unsafe point. The handler must have the timer ask again
// (preempt/signal.cpp, retry_soon), or the spinner keeps the P for good and
// the main goroutine never runs.
template <typename UnsafeFor>
void expect_timer_retries_unsafe_point(UnsafeFor unsafe_for) {
  std::atomic<bool> spinning{true};
  std::atomic<bool> unsafe{false};
  std::atomic<bool> main_ran{false};
  Watchdog dog(10s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1, absl::Hours(1)), [&] {
    gort::go([&] {
      unsafe_for(&unsafe, 200ms);
      gort::test::spin_while(spinning);
    });
    std::thread armer([&] {
      while (!unsafe.load()) std::this_thread::sleep_for(1ms);
      gort::internal::P* p = gort::internal::sched.allp[0];
      EXPECT_TRUE(gort::internal::arm_slice_timer(p, p->schedtick_seen.load(), gort::internal::nanotime()));
    });
    gort::sleep(absl::Milliseconds(1));
    main_ran.store(true);
    spinning.store(false);
    armer.join();
  });
  EXPECT_FALSE(dog.fired()) << "the slice timer gave up after an unsafe point";
  EXPECT_TRUE(main_ran.load());
}

TEST(SliceTimer, RetriesAfterANoPreemptSection) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  expect_timer_retries_unsafe_point([](std::atomic<bool>* unsafe, std::chrono::milliseconds d) {
    gort::NoPreempt np;
    unsafe->store(true);
    gort::test::spin_for(d);
  });
}

TEST(SliceTimer, RetriesAfterAnOsLockIsReleased) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  static std::mutex mu;
  expect_timer_retries_unsafe_point([](std::atomic<bool>* unsafe, std::chrono::milliseconds d) {
    std::lock_guard<std::mutex> lock(mu);
    unsafe->store(true);
    gort::test::spin_for(d);
  });
}

// sysmon's wake-ups while CPU-bound goroutines keep every P busy: their
// slice timers preempt them, so sysmon paces itself (up to 10 ms between
// rounds, as Go's) instead of waking every tenth of a slice (about 1,000 a
// second before). Counted from its thread's voluntary context switches.
int64_t sysmon_sleeps() {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(e.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name != "gort-sysmon") continue;
    std::ifstream status(e.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stoll(line.substr(24));
    }
  }
  return -1;
}

TEST(SysmonPace, FewWakeUpsWhileSpinnersKeepEveryPBusy) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<bool> spinning{true};
  int64_t sleeps = -1;
  double seconds = 0;
  Watchdog dog(30s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(2), [&] {
    gort::WaitGroup wg;
    for (int i = 0; i < 2; i++) {
      wg.add(1);
      gort::go([&] {
        gort::test::spin_while(spinning);
        wg.done();
      });
    }
    // A plain thread counts, so that no goroutine of ours needs a P.
    std::thread counter([&] {
      std::this_thread::sleep_for(200ms);  // past sysmon's back-off
      int64_t s0 = sysmon_sleeps();
      auto t0 = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(1s);
      int64_t s1 = sysmon_sleeps();
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s0 >= 0 && s1 >= 0) sleeps = s1 - s0;
      spinning.store(false);
    });
    wg.wait();
    counter.join();
  });
  ASSERT_GE(sleeps, 0) << "no thread named gort-sysmon";
  // About 100 a second; the bound leaves room for a loaded machine's late
  // wake-ups, and is far below the 1,000 of a tenth-of-a-slice pace.
  EXPECT_LE(static_cast<double>(sleeps) / seconds, 300.0) << sleeps << " sysmon wake-ups in " << seconds << " s";
}

// The same with network work that only sysmon finds: on one P, two
// spinners keep the run queue from ever running dry, so the scheduler never
// polls, and a ping-pong over two pipes advances only when sysmon polls (every
// 10 ms) and injects the woken goroutine. Injecting is not activity for
// sysmon's back-off (Go's rule); when it was, sysmon stayed at its 20 µs pace
// (about 1,000 wake-ups a second here, 7,000 under an HTTP load).
TEST(SysmonPace, NetworkWorkSysmonInjectsDoesNotResetItsBackOff) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<bool> spinning{true};
  std::atomic<int> round_trips{0};
  int64_t sleeps = -1;
  double seconds = 0;
  Watchdog dog(30s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(1), [&] {
    auto there = gort::os::pipe();
    auto back = gort::os::pipe();
    ASSERT_TRUE(there.ok() && back.ok());
    gort::WaitGroup wg;
    wg.add(2);
    gort::go([&] {
      char c = 'x';
      while (spinning.load()) {
        if (!there->second.write(absl::MakeConstSpan(&c, 1)).ok()) break;
        if (auto n = back->first.read(absl::MakeSpan(&c, 1)); !n.ok() || *n != 1) break;
        round_trips.fetch_add(1);
      }
      (void)there->second.close();
      wg.done();
    });
    gort::go([&] {
      char c;
      for (;;) {
        auto n = there->first.read(absl::MakeSpan(&c, 1));
        if (!n.ok() || *n != 1 || !back->second.write(absl::MakeConstSpan(&c, 1)).ok()) break;
      }
      wg.done();
    });
    for (int i = 0; i < 2; i++) {
      wg.add(1);
      gort::go([&] {
        gort::test::spin_while(spinning);
        wg.done();
      });
    }
    std::thread counter([&] {
      std::this_thread::sleep_for(200ms);
      int64_t s0 = sysmon_sleeps();
      auto t0 = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(1s);
      int64_t s1 = sysmon_sleeps();
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s0 >= 0 && s1 >= 0) sleeps = s1 - s0;
      spinning.store(false);
    });
    counter.join();
    wg.wait();
  });
  ASSERT_GE(sleeps, 0) << "no thread named gort-sysmon";
  EXPECT_GT(round_trips.load(), 10) << "sysmon did not poll the network for the busy P";
  EXPECT_LE(static_cast<double>(sleeps) / seconds, 300.0) << sleeps << " sysmon wake-ups in " << seconds << " s";
}

}  // namespace

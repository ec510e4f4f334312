// tests/preempt/slice_timer_test.cpp — the per-M slice timer
// (preempt/signal.cpp): a POSIX timer that delivers the preemption signal
// to the thread of a G whose slice ends, so that preemption does not wait
// for sysmon to get a CPU.
//
// The time slice is one hour in the first test and in the unsafe-point
// retries, so sysmon never asks on its own: only the timer can take the P
// from the spinner.
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "gmp/sched.hpp"
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
        if (m->preemption.slice_timer_state.load() != gort::internal::SliceTimerState::kMade ||
            m->preemption.slice_timer_tick.load() != m->p->schedtick) {
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

}  // namespace

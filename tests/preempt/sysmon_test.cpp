// tests/preempt/sysmon_test.cpp — how often sysmon (preempt/sysmon.cpp)
// wakes while goroutines run: it paces itself up to 10 ms between rounds,
// as Go's does, because the slice timers preempt CPU-bound goroutines and
// what it injects from the network is not activity. Its wake-ups are
// counted from its thread's voluntary context switches (the thread is named
// gort-sysmon), by a plain thread, so that no goroutine of the test needs a
// P to count.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gort/os.hpp"
#include "gort/sync.hpp"
#include "tests/preempt/helpers.hpp"

namespace {

using namespace std::chrono_literals;
using gort::test::preempt_cfg;
using gort::test::run_cfg;
using gort::test::Watchdog;

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

struct WakeupRate {
  int64_t sleeps = -1;
  double seconds = 0;
  double per_second() const { return static_cast<double>(sleeps) / seconds; }
};

// On a plain thread: sysmon's wake-ups over one second, from 200 ms in
// (past its back-off from 20 µs); then clears *running.
WakeupRate count_wakeups(std::atomic<bool>* running) {
  WakeupRate r;
  std::this_thread::sleep_for(200ms);
  int64_t s0 = sysmon_sleeps();
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(1s);
  int64_t s1 = sysmon_sleeps();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s0 >= 0 && s1 >= 0) r.sleeps = s1 - s0;
  running->store(false);
  return r;
}

// n goroutines spinning in a call-free loop while *spinning, each done on wg.
void go_spinners(gort::WaitGroup* wg, const std::atomic<bool>* spinning, int n) {
  for (int i = 0; i < n; i++) {
    wg->add(1);
    gort::go([wg, spinning] {
      gort::test::spin_while(*spinning);
      wg->done();
    });
  }
}

// CPU-bound goroutines keep every P busy: their slice timers preempt them,
// so sysmon does not wake every tenth of a slice (about 1,000 a second
// before).
TEST(SysmonPace, FewWakeUpsWhileSpinnersKeepEveryPBusy) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<bool> spinning{true};
  WakeupRate rate;
  Watchdog dog(30s, [&] { spinning.store(false); });
  run_cfg(preempt_cfg(2), [&] {
    gort::WaitGroup wg;
    go_spinners(&wg, &spinning, 2);
    // A plain thread counts, so that no goroutine of ours needs a P.
    std::thread counter([&] { rate = count_wakeups(&spinning); });
    wg.wait();
    counter.join();
  });
  ASSERT_GE(rate.sleeps, 0) << "no thread named gort-sysmon";
  // About 100 a second; the bound leaves room for a loaded machine's late
  // wake-ups, and is far below the 1,000 of a tenth-of-a-slice pace.
  EXPECT_LE(rate.per_second(), 300.0) << rate.sleeps << " sysmon wake-ups in " << rate.seconds << " s";
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
  WakeupRate rate;
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
    go_spinners(&wg, &spinning, 2);
    std::thread counter([&] { rate = count_wakeups(&spinning); });
    counter.join();
    wg.wait();
  });
  ASSERT_GE(rate.sleeps, 0) << "no thread named gort-sysmon";
  EXPECT_GT(round_trips.load(), 0) << "sysmon did not poll the network for the busy P";
  EXPECT_LE(rate.per_second(), 300.0) << rate.sleeps << " sysmon wake-ups in " << rate.seconds << " s";
}

}  // namespace

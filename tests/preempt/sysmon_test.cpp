// tests/preempt/sysmon_test.cpp — how often sysmon (preempt/sysmon.cpp)
// wakes while goroutines run: it paces itself up to 10 ms between rounds,
// as Go's does, because the slice timers preempt CPU-bound goroutines and
// what it injects from the network is not activity. Its wake-ups are
// counted from its thread's voluntary context switches (the thread is named
// gort-sysmon), by a plain thread, so that no goroutine of the test needs a
// P to count; and, in child processes, the whole process's context switches
// and CPU beside a spinner and when idle.
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "gmp/diag/diag.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gort/os.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "netpoll/netpoll.hpp"
#include "preempt/preempt.hpp"
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

// ---- what sysmon takes from the poller is never lost ----

std::atomic<bool> g_sysmon_took{false};
bool (*g_netpoll)(int64_t, gort::internal::GQueue*) = nullptr;

// The poller as sysmon sees it, slowed once sysmon has taken a goroutine
// from it: for 300 ms that goroutine is runnable and on no run queue, while
// the runtime's only P runs out of work.
bool slow_sysmon_netpoll(int64_t timeout_ns, gort::internal::GQueue* out) {
  bool polled = g_netpoll(timeout_ns, out);
  if (timeout_ns == 0 && gort::internal::getm() == nullptr && !out->empty() &&
      !g_sysmon_took.exchange(true)) {
    std::this_thread::sleep_for(300ms);
  }
  return polled;
}

// Main parks on an empty pipe; a spinner writes to it and keeps the one P
// busy until sysmon's network poll (every 10 ms when no M polls) has taken
// main off the poller, then exits. The M, out of work, goes idle and runs
// the deadlock check while main is in sysmon's hands: no longer a poller
// waiter, not yet on a run queue. That check reported a deadlock (the race
// build hit it by itself, about once in 30 runs of a pipe test); sysmon now
// counts as an outside caller while it carries what it polled, as a plain
// thread's go() does, and main runs once sysmon injects it.
TEST(SysmonPoll, GoroutineSysmonTookFromThePollerIsNotADeadlock) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();  // the spinner never yields
  auto child = [] {
    gort::internal::SchedHooks hooks;
    gort::internal::install_diag_hooks(&hooks);
    gort::internal::install_netpoll_hooks(&hooks);
    gort::internal::install_sysmon_hooks(&hooks);
    gort::internal::install_slice_timer_hooks(&hooks);
    g_netpoll = hooks.netpoll;
    hooks.netpoll = &slow_sysmon_netpoll;
    auto body = [](void*, int* result) {
      gort::sleep(absl::Milliseconds(1));  // the poller has been polled once
      auto p = gort::os::pipe();
      if (!p.ok()) return;
      gort::go([&w = p->second] {
        char c = 'x';
        if (!w.write(absl::MakeConstSpan(&c, 1)).ok()) return;
        auto give_up = std::chrono::steady_clock::now() + 5s;
        while (!g_sysmon_took.load() && std::chrono::steady_clock::now() < give_up) {
        }
      });
      char c = 0;
      auto n = p->first.read(absl::MakeSpan(&c, 1));
      *result = n.ok() && *n == 1 && c == 'x' ? 7 : 1;
    };
    int r = gort::internal::run_scheduler(body, nullptr, preempt_cfg(1), hooks);
    EXPECT_TRUE(g_sysmon_took.load()) << "sysmon never polled main off the poller: the test proved nothing";
    EXPECT_EQ(r, 7);
  };
  GORT_EXPECT_SUBPROCESS_OK(30, gort::test::reporting(child));
}

// ---- work queued behind a goroutine that keeps its P ----

std::atomic<gort::internal::G*> g_reader{nullptr};

bool publish_reader(gort::internal::G* g, void*) {
  g_reader.store(g);
  return true;
}

// Parameter: Config::preempt. On: the running goroutine defers preemption
// (NoPreempt, as an OS lock held does); off: it never calls into gort.
class SysmonSteal : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Preempt, SysmonSteal, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "on" : "off";
                         });

// A write readies its reader on the writer's own P and wakes no M
// (ready_after_write: the writer is expected to park soon); a yield and a
// preemption requeue the same way. When the goroutine that then runs there
// keeps its P while the other P idles, sysmon wakes an M, which steals the
// reader. Before, the reader waited for as long as the other ran (here: the
// 5 s give-up, every time).
TEST_P(SysmonSteal, GoroutineQueuedBehindOneThatKeepsItsPIsStolen) {
  const bool preempt = GetParam();
  run_cfg(preempt_cfg(2, absl::Milliseconds(10), preempt), [&] {
    using namespace gort::internal;
    std::atomic<bool> ran{false};
    g_reader = nullptr;
    gort::go([&ran] {
      park(&publish_reader, nullptr, WaitReason::kTest);
      ran = true;
    });
    ASSERT_TRUE(gort::test::eventually([] {
      G* g = g_reader.load();
      return g != nullptr && g->status.load() == GStatus::kWaiting;
    }));
    {
      std::optional<gort::NoPreempt> np;
      if (preempt) np.emplace();
      auto give_up = std::chrono::steady_clock::now() + 5s;
      // The other P idle, and its M asleep rather than looking for work.
      int settled = 0;
      while (settled < 1000 && std::chrono::steady_clock::now() < give_up) {
        settled = sched.npidle.load() == 1 && sched.nmspinning.load() == 0 ? settled + 1 : 0;
      }
      ASSERT_EQ(settled, 1000) << "the other P never settled idle";
      G* g = g_reader.load();
      set_status(g, GStatus::kWaiting, GStatus::kRunnable);
      ready_after_write(g);
      ASSERT_EQ(sched.readied_after_write.load(), 1) << "not queued on this P";
      auto t0 = std::chrono::steady_clock::now();
      while (!ran.load() && std::chrono::steady_clock::now() < t0 + 5s) {
      }
      auto waited = std::chrono::steady_clock::now() - t0;
      EXPECT_TRUE(ran.load()) << "the goroutine queued behind this one did not run in 5 s";
      RecordProperty("waited_us", static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(waited).count()));
    }
  });
}

// ---- the whole process's cost: a spinner, an idle program ----

// A CPU-bound goroutine is preempted every slice; sysmon must not fall back
// to its 20 µs tick after each preemption (some 6,000 wake-ups a second,
// each taking the core from a goroutine on a small machine), nor, with
// preemption off, re-ask the spinner every 100 µs. It wakes at its paced
// rounds (about 100 a second; the tests above count
// sysmon's own sleeps). Counted here as the process's voluntary context
// switches: sysmon's sleeps, nearly nothing else. Parameter:
// Config::preempt.
class SysmonCpuBound : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Preempt, SysmonCpuBound, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "on" : "off";
                         });

TEST_P(SysmonCpuBound, FewContextSwitchesBesideASpinner) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  if (GetParam()) SKIP_WITHOUT_ASYNC_PREEMPTION();
  const bool preempt = GetParam();
  auto child = [preempt] {
    rusage r0{}, r1{};
    std::atomic<bool> spinning{true};
    std::atomic<bool> measured{false};
    gort::run(
        [&] {
          // Two Ps: with preemption off the spinner keeps its P, and the
          // sleeping main goroutine needs the other.
          gort::go([&] { gort::test::spin_while(spinning); });
          gort::sleep(absl::Milliseconds(50));  // let start-up settle
          getrusage(RUSAGE_SELF, &r0);
          gort::sleep(absl::Seconds(1));
          getrusage(RUSAGE_SELF, &r1);
          measured = true;
          spinning = false;
        },
        gort::test::preempt_cfg(2, absl::Milliseconds(10), preempt));
    ASSERT_TRUE(measured.load());
    int64_t voluntary = r1.ru_nvcsw - r0.ru_nvcsw;
    std::fprintf(stderr, "[info] preempt %s, one spinner for 1 s: %lld voluntary context switches\n",
                 preempt ? "on" : "off", static_cast<long long>(voluntary));
    // About 100 expected (a tenth-of-a-slice pace gave 1,000); the 20 µs
    // tick gave 5,000 and more, the 100 µs re-asking 10,000.
    EXPECT_LT(voluntary, 2500);
  };
  GORT_EXPECT_SUBPROCESS_OK(60, gort::test::reporting(child));
}

TEST(Sysmon, IdleProgramCostsNearlyNoCpu) {
  auto child = [] {
    for (int procs : {1, 4}) {
      rusage r0{}, r1{};
      gort::run(
          [&] {
            // A goroutine parked for good (nothing can wake it; the sleeping
            // main keeps the deadlock detector quiet).
            gort::go([] {
              gort::test::Event never;
              never.wait();
            });
            gort::sleep(absl::Milliseconds(100));  // let start-up settle
            getrusage(RUSAGE_SELF, &r0);
            gort::sleep(absl::Seconds(1));
            getrusage(RUSAGE_SELF, &r1);
          },
          gort::test::preempt_cfg(procs));
      auto us = [](const timeval& tv) { return int64_t{tv.tv_sec} * 1000000 + tv.tv_usec; };
      int64_t cpu_us = us(r1.ru_utime) - us(r0.ru_utime) + us(r1.ru_stime) - us(r0.ru_stime);
      int64_t switches = (r1.ru_nvcsw - r0.ru_nvcsw) + (r1.ru_nivcsw - r0.ru_nivcsw);
      std::fprintf(stderr, "[info] %d P idle for 1 s: %lld us CPU, %lld context switches\n", procs,
                   static_cast<long long>(cpu_us), static_cast<long long>(switches));
      EXPECT_LT(cpu_us, 50000) << procs << " P: an idle second cost " << cpu_us << " us of CPU";
      // sysmon at its 20 µs tick would switch 50,000 times a second.
      EXPECT_LT(switches, 1000) << procs << " P";
    }
  };
  GORT_EXPECT_SUBPROCESS_OK(60, gort::test::reporting(child));
}

}  // namespace

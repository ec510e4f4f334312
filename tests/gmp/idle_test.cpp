// tests/gmp/idle_test.cpp — no lost wake-ups (gmp/idle.cpp, find_runnable
// in gmp/schedule.cpp, the timer hand-shake in gmp/timer.cpp): whatever
// makes a goroutine runnable while every M is going idle, a P and an M come
// for it. Each step below is the only work there is at its moment, so one
// lost wake-up hangs the program; the child's watchdog then fails the test.
//
// The sources: a plain thread's channel send (the goroutine goes to the
// global queue from a thread with no P), a timer (sleep), a return from
// blocking() (the P may have been handed away), a timer armed by a plain
// thread (after_func; the timer goes to P 0's heap from outside), and the
// poller (a pipe written by a plain thread).
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gort/chan.hpp"
#include "gort/os.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/preempt/helpers.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

enum Step : int { kThreadSend, kSleep, kBlocking, kThreadTimer, kPipe, kSteps };

// One chain: a goroutine that goes through the steps in turn, and the plain
// thread that serves its requests.
struct Chain {
  gort::Chan<int> req = gort::make_chan<int>();
  gort::Chan<int> resp = gort::make_chan<int>(1);
  gort::os::File r, w;
  std::atomic<int64_t> steps{0};
};

void serve(Chain* c) {
  while (auto kind = c->req.recv()) {
    int i = *kind / kSteps;
    switch (*kind % kSteps) {
      case kThreadSend:
        c->resp.send(1);
        break;
      case kThreadTimer: {
        Chan<int> resp = c->resp;
        (void)gort::after_func(absl::Microseconds(i % 30), [resp]() mutable { resp.send(1); });
        break;
      }
      case kPipe:
        if (::write(c->w.fd(), "x", 1) != 1) c->resp.close();  // the goroutine then fails
        break;
    }
  }
}

void walk(Chain* c, int rounds) {
  char byte;
  for (int i = 0; i < rounds; i++) {
    int step = i % kSteps;
    switch (step) {
      case kThreadSend:
      case kThreadTimer:
        c->req.send(i * kSteps + step);
        ASSERT_TRUE(c->resp.recv().has_value()) << "step " << step;
        break;
      case kSleep:
        gort::sleep(absl::Microseconds(i % 50));
        break;
      case kBlocking:
        gort::blocking([i] { ::usleep(static_cast<useconds_t>(i % 40)); });
        break;
      case kPipe:
        c->req.send(i * kSteps + step);
        ASSERT_EQ(c->r.read(absl::MakeSpan(&byte, 1)).value_or(0), 1u);
        break;
    }
    c->steps++;
  }
}

TEST(IdleStress, EverySourceOfWakeUpsReachesAnIdleScheduler) {
  auto child = [] {
    for (int procs : {1, 2, 4}) {
      const int chains = procs == 1 ? 1 : procs - 1;
      constexpr int kRounds = stress_size(5000) / kSteps * kSteps;
      std::vector<std::unique_ptr<Chain>> cs;
      run_checked(procs, [&] {
        std::vector<std::thread> servers;
        WaitGroup wg;
        for (int k = 0; k < chains; k++) {
          auto c = std::make_unique<Chain>();
          auto p = gort::os::pipe();
          ASSERT_TRUE(p.ok()) << p.status();
          c->r = std::move(p->first);
          c->w = std::move(p->second);
          servers.emplace_back(serve, c.get());
          wg.add(1);
          gort::go([&wg, c = c.get()] {
            walk(c, kRounds);
            c->req.close();
            wg.done();
          });
          cs.push_back(std::move(c));
        }
        wg.wait();
        gort::blocking([&] {
          for (auto& t : servers) t.join();
        });
        for (auto& c : cs) {
          (void)c->r.close();
          (void)c->w.close();
        }
      });
      for (auto& c : cs) EXPECT_EQ(c->steps.load(), kRounds) << procs << " Ps";
    }
  };
  GORT_EXPECT_SUBPROCESS_OK(120, reporting(child));
}

// run() starts one M ahead of need (mprestart), idle: the first go()
// wakes it instead of creating a thread on the spawner's path. Nothing is
// started for one P, and a run that never spawns exits with it idle.
TEST(IdlePrestart, FirstGoWakesAThreadStartedAhead) {
  for (int procs : {1, 2, 4}) {
    int before = -1, after = -1, idle = -1;
    run_cfg(gort::Config{.procs = procs}, [&] {
      const int want = procs > 1 ? 2 : 1;
      EXPECT_TRUE(eventually([&] {
        auto st = gort::runtime_stats();
        return st.threads == want && st.idle_threads == want - 1;
      })) << procs << " Ps";
      before = gort::runtime_stats().threads;
      idle = gort::runtime_stats().idle_threads;
      gort::Chan<int> ran = gort::make_chan<int>(1);
      gort::go([ran]() mutable { ran.send(1); });
      (void)ran.recv();
      after = gort::runtime_stats().threads;
    });
    EXPECT_EQ(before, procs > 1 ? 2 : 1) << procs << " Ps";
    EXPECT_EQ(idle, procs > 1 ? 1 : 0) << procs << " Ps";
    // The goroutine ran on main's thread or on the one started ahead. (With
    // more Ps, the woken M may start another for the Ps still idle.)
    if (procs <= 2) {
      EXPECT_EQ(after, before) << procs << " Ps";
    }
    EXPECT_GE(after, before) << procs << " Ps";
  }
  // Started and never used: the run ends and joins it.
  run_cfg(gort::Config{.procs = 2}, [] {});
}

}  // namespace
}  // namespace gort::test

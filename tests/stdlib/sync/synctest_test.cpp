// tests/stdlib/sync/synctest_test.cpp — synctest bubbles (gort/synctest.hpp;
// gmp/bubble*.cpp): the fake clock's exact arithmetic for sleeps, timers,
// tickers and context deadlines, wait(), deadlocks with Go's texts and the
// members' tracebacks, misuse from outside, durability of gort's Mutex,
// RWMutex, Semaphore, WaitGroup and Cond, and a bubble running beside
// goroutines on real time. Each case runs at 1, 2 and 4 Ps; wall time is
// checked only as a generous bound (fake hours pass in real milliseconds).
#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <variant>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/net.hpp"
#include "gort/sync.hpp"
#include "gort/synctest.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"
#include "tests/testing.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::panic_message;
using gort::test::procs_name;
using gort::test::ProcsTest;
using gort::test::run_checked;
using namespace std::chrono_literals;

const absl::Time kEpoch = absl::FromUnixSeconds(946684800);  // 2000-01-01 UTC

class Synctest : public ProcsTest {};

TEST_P(Synctest, ClockStartsAt2000AndSleepsAreExact) {
  run_checked(procs(), [] {
    absl::Time real_before = absl::Now();
    gort::synctest::test([] {
      EXPECT_TRUE(gort::synctest::in_bubble());
      EXPECT_EQ(gort::now(), kEpoch);
      gort::sleep(absl::Hours(1));
      EXPECT_EQ(gort::now(), kEpoch + absl::Hours(1));
      gort::sleep(1500ms);
      EXPECT_EQ(gort::now() - kEpoch, absl::Hours(1) + absl::Milliseconds(1500));
      EXPECT_EQ(gort::since(kEpoch), absl::Hours(1) + absl::Milliseconds(1500));
    });
    EXPECT_FALSE(gort::synctest::in_bubble());
    EXPECT_LT(absl::Now() - real_before, absl::Seconds(30));
    EXPECT_GT(gort::now(), kEpoch + absl::Hours(24 * 365 * 20));  // real again
  });
}

// The retry policy: exponential backoff from 1 s, doubling, capped
// at 10 minutes, for 12 attempts.
TEST_P(Synctest, RetryWithExponentialBackoffToTenMinutes) {
  run_checked(procs(), [] {
    auto wall = std::chrono::steady_clock::now();
    gort::synctest::test([] {
      absl::Time start = gort::now();
      absl::Duration backoff = absl::Seconds(1), total;
      int attempts = 0;
      for (; attempts < 12; attempts++) {
        gort::sleep(backoff);
        total += backoff;
        backoff = std::min(backoff * 2, absl::Minutes(10));
      }
      // 1+2+...+512 s = 1023 s, then two of 600 s.
      EXPECT_EQ(total, absl::Seconds(1023 + 1200));
      EXPECT_EQ(gort::now() - start, total);
    });
    EXPECT_LT(std::chrono::steady_clock::now() - wall, 10s);
  });
}

TEST_P(Synctest, ContextWithOneHourTimeout) {
  run_checked(procs(), [] {
    gort::synctest::test([] {
      auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Hours(1));
      ASSERT_TRUE(ctx.deadline().has_value());
      EXPECT_EQ(*ctx.deadline(), kEpoch + absl::Hours(1));
      gort::sleep(absl::Hours(1) - absl::Seconds(1));
      EXPECT_TRUE(ctx.err().ok());
      ctx.done().recv();  // durable: the clock jumps to the deadline
      EXPECT_EQ(gort::now(), kEpoch + absl::Hours(1));
      EXPECT_EQ(ctx.err().code(), absl::StatusCode::kDeadlineExceeded);
      cancel();
    });
  });
}

TEST_P(Synctest, OneMinuteTickerReadSixtyTimes) {
  run_checked(procs(), [] {
    gort::synctest::test([] {
      auto t = gort::new_ticker(absl::Minutes(1));
      for (int i = 1; i <= 60; i++) {
        absl::Time v = t.chan().recv().value();
        EXPECT_EQ(v, kEpoch + absl::Minutes(i));
        EXPECT_EQ(gort::now(), kEpoch + absl::Minutes(i));
      }
      t.stop();
      EXPECT_EQ(gort::now() - kEpoch, absl::Hours(1));
    });
  });
}

TEST_P(Synctest, TimersAfterAndAfterFuncFireInFakeOrder) {
  run_checked(procs(), [] {
    gort::synctest::test([] {
      std::vector<int> order;
      gort::Mutex mu;
      auto timer = gort::new_timer(absl::Seconds(30));
      auto f = gort::after_func(absl::Seconds(10), [&] {
        std::lock_guard l(mu);
        order.push_back(10);
      });
      absl::Time at = gort::after(absl::Seconds(20)).recv().value();
      EXPECT_EQ(at, kEpoch + absl::Seconds(20));
      {
        std::lock_guard l(mu);
        order.push_back(20);
      }
      EXPECT_TRUE(timer.reset(absl::Seconds(5)));  // pending: fires at 25 s
      EXPECT_EQ(timer.chan().recv().value(), kEpoch + absl::Seconds(25));
      EXPECT_FALSE(timer.stop());
      std::lock_guard l(mu);
      EXPECT_EQ(order, (std::vector<int>{10, 20}));
    });
  });
}

TEST_P(Synctest, WaitReturnsOnceOthersAreDurablyBlocked) {
  run_checked(procs(), [] {
    gort::synctest::test([] {
      auto c = gort::make_chan<int>();
      std::atomic<int> stage{0};
      gort::go([&] {
        stage = 1;
        int v = c.recv().value();
        stage = v;
      });
      gort::synctest::wait();
      EXPECT_EQ(stage.load(), 1);  // parked in recv, its write visible
      c.send(7);
      gort::synctest::wait();
      EXPECT_EQ(stage.load(), 7);  // exited
      EXPECT_EQ(gort::now(), kEpoch);  // wait never moves the clock
    });
  });
}

TEST_P(Synctest, WaitMisuse) {
  run_checked(procs(), [] {
    EXPECT_EQ(panic_message([] { gort::synctest::wait(); }), "goroutine is not in a bubble");
    gort::synctest::test([] {
      auto hold = gort::make_chan<int>();
      gort::WaitGroup wg;
      wg.add(1);
      std::string second;
      gort::go([&] {
        // A second wait while the first is parked.
        gort::sleep(absl::Seconds(1));
        second = panic_message([] { gort::synctest::wait(); });
        hold.close();
        wg.done();
      });
      gort::synctest::wait();  // returns when the child sleeps
      hold.recv();
      wg.wait();
      EXPECT_EQ(second, "<no panic>");  // the first wait had returned by then
    });
  });
}

TEST_P(Synctest, NestedTestPanics) {
  run_checked(procs(), [] {
    gort::synctest::test([] {
      EXPECT_EQ(panic_message([] { gort::synctest::test([] {}); }),
                "synctest.Run called from within a synctest bubble");
    });
  });
}

TEST_P(Synctest, DeadlockPanicsWithTheBlockedGoroutines) {
  run_checked(procs(), [] {
    std::string text = panic_message([] {
      gort::synctest::test([] {
        auto c = gort::make_chan<int>();
        c.recv();  // nobody sends
      });
    });
    EXPECT_EQ(text.rfind("deadlock: all goroutines in bubble are blocked", 0), 0u) << text;
    EXPECT_NE(text.find("[chan receive (durable), synctest bubble "), std::string::npos) << text;
  }, /*all_exit=*/false);
}

TEST_P(Synctest, DeadlockOnAWaitGroup) {
  run_checked(procs(), [] {
    std::string text = panic_message([] {
      gort::synctest::test([] {
        gort::WaitGroup wg;
        wg.add(1);
        gort::go([] { gort::sleep(absl::Hours(1)); });
        wg.wait();  // nobody calls done; the sleeper exits at 1 h
      });
    });
    EXPECT_EQ(text.rfind("deadlock: all goroutines in bubble are blocked", 0), 0u) << text;
    EXPECT_NE(text.find("[sync.WaitGroup.Wait (durable), synctest bubble "), std::string::npos) << text;
  }, /*all_exit=*/false);
}

TEST_P(Synctest, MainExitedWithBlockedGoroutines) {
  run_checked(procs(), [] {
    std::string text = panic_message([] {
      gort::synctest::test([] {
        auto wg = std::make_shared<gort::WaitGroup>();
        wg->add(1);
        gort::go([wg] { wg->wait(); });  // nobody calls done
        gort::sleep(absl::Seconds(1));
      });
    });
    EXPECT_EQ(text.rfind("deadlock: main bubble goroutine has exited but blocked goroutines remain", 0), 0u)
        << text;
    EXPECT_NE(text.find("[sync.WaitGroup.Wait (durable), synctest bubble "), std::string::npos) << text;
  }, /*all_exit=*/false);
}

TEST_P(Synctest, ExceptionFromFIsRethrown) {
  run_checked(procs(), [] {
    try {
      gort::synctest::test([] {
        gort::sleep(absl::Seconds(5));
        throw std::runtime_error("boom");
      });
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "boom");
    }
  });
}

TEST_P(Synctest, BubbleChannelsAndTimersFromOutsidePanic) {
  run_checked(procs(), [] {
    gort::Chan<int> leaked;
    gort::Timer leaked_timer;
    auto ready = gort::make_chan<std::monostate>();
    auto finish = gort::make_chan<std::monostate>();
    std::vector<std::string> texts;
    gort::go([&] {
      ready.recv();
      texts.push_back(panic_message([&] { leaked.send(1); }));
      texts.push_back(panic_message([&] { leaked.recv(); }));
      texts.push_back(panic_message([&] { gort::select(gort::on_recv(leaked, [](auto) {}), gort::on_default([] {})); }));
      texts.push_back(panic_message([&] { leaked.close(); }));
      texts.push_back(panic_message([&] { leaked_timer.stop(); }));
      texts.push_back(panic_message([&] { leaked_timer.reset(absl::Seconds(1)); }));
      finish.send({});
    });
    gort::synctest::test([&] {
      leaked = gort::make_chan<int>(1);
      leaked_timer = gort::new_timer(absl::Hours(1));
      ready.send({});  // not the bubble's: not durable
      finish.recv();
      leaked_timer.stop();
    });
    ASSERT_EQ(texts.size(), 6u);
    EXPECT_EQ(texts[0], "send on synctest channel from outside bubble");
    EXPECT_EQ(texts[1], "receive on synctest channel from outside bubble");
    EXPECT_EQ(texts[2], "select on synctest channel from outside bubble");
    EXPECT_EQ(texts[3], "close of synctest channel from outside bubble");
    EXPECT_EQ(texts[4], "stop of synctest timer from outside bubble");
    EXPECT_EQ(texts[5], "reset of synctest timer from outside bubble");
    // Once the bubble has ended its timer is idle: a stop from anywhere is
    // harmless (a handle destroyed after its test).
    EXPECT_FALSE(leaked_timer.stop());
  });
}

// A bubble's mutex waits are durable (gort's addition to Go): a member
// waiting for a mutex held by a sleeping member lets the clock move.
TEST_P(Synctest, MutexRWMutexAndSemaphoreMadeInTheBubbleAreDurable) {
  run_checked(procs(), [] {
    gort::synctest::test([] {
      gort::Mutex mu;
      gort::RWMutex rw;
      gort::Semaphore sem(1);
      mu.lock();
      rw.lock();
      sem.acquire();
      gort::WaitGroup wg;
      wg.add(3);
      absl::Time got_mu, got_rw, got_sem;
      gort::go([&] { mu.lock(); got_mu = gort::now(); mu.unlock(); wg.done(); });
      gort::go([&] { rw.lock_shared(); got_rw = gort::now(); rw.unlock_shared(); wg.done(); });
      gort::go([&] { sem.acquire(); got_sem = gort::now(); sem.release(); wg.done(); });
      gort::sleep(absl::Minutes(5));
      mu.unlock();
      gort::sleep(absl::Minutes(5));
      rw.unlock();
      gort::sleep(absl::Minutes(5));
      sem.release();
      wg.wait();
      EXPECT_EQ(got_mu, kEpoch + absl::Minutes(5));
      EXPECT_EQ(got_rw, kEpoch + absl::Minutes(10));
      EXPECT_EQ(got_sem, kEpoch + absl::Minutes(15));
    });
  });
}

// A mutex made outside is not durable: the bubble's clock waits for the
// outside holder, and the test ends once it lets go.
TEST_P(Synctest, MutexMadeOutsideIsNotDurable) {
  run_checked(procs(), [] {
    gort::Mutex outside;
    outside.lock();
    std::atomic<bool> released{false};
    gort::go([&] {
      gort::sleep(absl::Milliseconds(30));  // real time
      released = true;
      outside.unlock();
    });
    gort::synctest::test([&] {
      outside.lock();  // not durable: no deadlock, no clock jump
      EXPECT_TRUE(released.load());
      EXPECT_EQ(gort::now(), kEpoch);
      outside.unlock();
    });
  });
}

TEST_P(Synctest, CondAndWaitGroupAreDurable) {
  run_checked(procs(), [] {
    gort::synctest::test([] {
      gort::Mutex mu;
      gort::Cond cond(mu);
      bool go_on = false;
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&] {
        std::unique_lock l(mu);
        while (!go_on) cond.wait();
        EXPECT_EQ(gort::now(), kEpoch + absl::Seconds(42));
        wg.done();
      });
      gort::sleep(absl::Seconds(42));
      {
        std::lock_guard l(mu);
        go_on = true;
      }
      cond.signal();
      wg.wait();
    });
  });
}

// A bubble beside goroutines on real time: the outside sleep takes real
// time while the bubble does hours in milliseconds.
TEST_P(Synctest, BubbleBesideRealTimeGoroutines) {
  run_checked(procs(), [] {
    auto done = gort::make_chan<absl::Duration>(1);
    gort::go([done] {
      absl::Time t0 = absl::Now();
      gort::sleep(absl::Milliseconds(20));
      done.send(absl::Now() - t0);
    });
    auto wall = absl::Now();
    gort::synctest::test([] {
      for (int i = 0; i < 100; i++) gort::sleep(absl::Hours(1));
      EXPECT_EQ(gort::now(), kEpoch + absl::Hours(100));
    });
    EXPECT_LT(absl::Now() - wall, absl::Seconds(20));
    EXPECT_GE(done.recv().value(), absl::Milliseconds(20));
  });
}

// Bubbles run side by side, each with its own clock.
TEST_P(Synctest, ConcurrentBubblesHaveTheirOwnClocks) {
  run_checked(procs(), [] {
    gort::WaitGroup wg;
    constexpr int kBubbles = 8;
    wg.add(kBubbles);
    for (int b = 0; b < kBubbles; b++) {
      gort::go([&wg, b] {
        gort::synctest::test([b] {
          gort::WaitGroup inner;
          inner.add(10);
          for (int i = 0; i < 10; i++) {
            gort::go([&inner, b, i] {
              gort::sleep(absl::Seconds((b + 1) * (i + 1)));
              inner.done();
            });
          }
          inner.wait();
          EXPECT_EQ(gort::now(), kEpoch + absl::Seconds((b + 1) * 10));
        });
        wg.done();
      });
    }
    wg.wait();
  });
}

// Many goroutines with channels: a pipeline with per-stage delays ends at
// the exact fake time.
TEST_P(Synctest, PipelineStress) {
  run_checked(procs(), [] {
    gort::synctest::test([] {
      constexpr int kStages = 8, kItems = 200;
      std::vector<gort::Chan<int>> cs;
      for (int i = 0; i <= kStages; i++) cs.push_back(gort::make_chan<int>(i % 2));
      for (int s = 0; s < kStages; s++) {
        gort::go([in = cs[s], out = cs[s + 1]] {
          for (int v : in) {
            gort::sleep(absl::Milliseconds(1));
            out.send(v + 1);
          }
          out.close();
        });
      }
      gort::go([in = cs[0]] {
        for (int i = 0; i < kItems; i++) in.send(i);
        in.close();
      });
      int n = 0;
      for (int v : cs[kStages]) {
        EXPECT_EQ(v, n + kStages);
        n++;
      }
      EXPECT_EQ(n, kItems);
      // Each stage sleeps 1 ms per item; stages overlap, so the last item
      // leaves after kItems + kStages - 1 ms at the least.
      EXPECT_GE(gort::now() - kEpoch, absl::Milliseconds(kItems));
    });
  });
}

// net::pipe is built on channels and timers: its reads, writes and
// deadlines are durable, on the fake clock.
TEST_P(Synctest, PipeDeadlinesOnTheFakeClock) {
  run_checked(procs(), [] {
    gort::synctest::test([] {
      auto [a, b] = gort::net::pipe();
      char buf[8];
      ASSERT_TRUE(a.set_read_deadline(gort::now() + absl::Minutes(5)).ok());
      auto r = a.read(absl::MakeSpan(buf));
      EXPECT_TRUE(gort::net::is_timeout_error(r.status())) << r.status();
      EXPECT_EQ(gort::now(), kEpoch + absl::Minutes(5));
      // A write before the deadline: the read returns at the write's time.
      ASSERT_TRUE(a.set_read_deadline(gort::now() + absl::Minutes(5)).ok());
      gort::go([&b] {
        gort::sleep(absl::Minutes(1));
        EXPECT_EQ(b.write(absl::MakeConstSpan("hi", 2)).value_or(0), 2u);
      });
      auto n = a.read(absl::MakeSpan(buf));
      ASSERT_TRUE(n.ok()) << n.status();
      EXPECT_EQ(*n, 2u);
      EXPECT_EQ(gort::now(), kEpoch + absl::Minutes(6));
      // std::chrono deadlines are relative to the bubble's clock too.
      ASSERT_TRUE(b.set_write_deadline(std::chrono::steady_clock::now() + 30s).ok());
      auto w = b.write(absl::MakeConstSpan("x", 1));  // nobody reads
      EXPECT_TRUE(gort::net::is_timeout_error(w.status())) << w.status();
      // From the std::chrono time point: exact but for the real time
      // between its two clock reads (gort/chrono.hpp, steady_to_time).
      EXPECT_LT(absl::AbsDuration(gort::now() - (kEpoch + absl::Minutes(6) + absl::Seconds(30))), absl::Milliseconds(1));
      EXPECT_TRUE(a.close().ok());
      EXPECT_TRUE(b.close().ok());
    });
  });
}

INSTANTIATE_TEST_SUITE_P(Procs, Synctest, ::testing::Values(1, 2, 4), procs_name);

}  // namespace
}  // namespace gort_stdlib_test

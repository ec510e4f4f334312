// tests/stdlib/sync/timer_chan_test.cpp — Go 1.23's timer channels (stdlib/sync/time.cpp,
// gort/time.hpp): once Timer::stop/reset or Ticker::stop/reset returns, no
// value from before it is received, not one already in the channel, nor
// one being sent on another thread at that moment; stop/reset report a
// delivered but unreceived value as pending; len and cap read 0.
//
// Ports of Go's time tests for these semantics (time/tick_test.go
// testTimerChan with asynctimerchan=0, sleep_test.go testStopResetResult,
// TestMultiWakeupTimer/Ticker, tick_test.go TestAfterTimes), and stress
// tests of stop/reset racing with the firing on 1, 2 and 4 Ps. Time is only
// ever a bound on waiting for something that must happen.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/time/clock.h"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;

// Takes a value waiting in ch, if any (never blocks).
bool take(const gort::Chan<absl::Time>& ch) {
  return gort::select(gort::on_recv(ch), gort::on_default()) == 0;
}

// Takes a value waiting in ch, if any, and says when it was sent.
std::optional<absl::Time> take_value(const gort::Chan<absl::Time>& ch) {
  std::optional<absl::Time> got;
  gort::select(gort::on_recv(ch, [&](std::optional<absl::Time> v) { got = v; }), gort::on_default());
  return got;
}

// Receives from ch within `limit` (a bound on something that must happen).
bool recv_within(const gort::Chan<absl::Time>& ch, absl::Duration limit) {
  bool got = false;
  auto bound = gort::new_timer(limit);
  gort::select(gort::on_recv(ch, [&](std::optional<absl::Time> v) { got = v.has_value(); }),
               gort::on_recv(bound.chan()));
  bound.stop();
  return got;
}

class TimerChan : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(TimerChan);

// ---- Go's testTimerChan, synchronous channels ----

// A Timer, or a Ticker made to look like one (Go's tickerTimer: stop and
// reset report whether it had been running).
struct TimerUnderTest {
  gort::Chan<absl::Time> c;
  std::function<bool()> stop;
  std::function<bool(absl::Duration)> reset;
  bool is_ticker = false;
};

TimerUnderTest timer_under_test(const gort::Timer& t) {
  return {t.chan(), [t] { return t.stop(); }, [t](absl::Duration d) { return t.reset(d); }, false};
}

TimerUnderTest ticker_under_test(const gort::Ticker& t) {
  auto stopped = std::make_shared<bool>(false);
  return {t.chan(),
          [t, stopped] {
            bool pending = !*stopped;
            *stopped = true;
            t.stop();
            return pending;
          },
          [t, stopped](absl::Duration d) {
            bool pending = !*stopped;
            *stopped = false;
            t.reset(d);
            return pending;
          },
          true};
}

void test_timer_chan(const TimerUnderTest& tim) {
  const gort::Chan<absl::Time>& c = tim.c;
  const absl::Duration kSched = absl::Milliseconds(10);
  constexpr int kTries = 100;
  // Go resets to 1 ns for "imminently"; 1 µs here keeps a Ticker from
  // firing on every pass of every scheduler loop meanwhile.
  const absl::Duration kSoon = absl::Microseconds(1);
  const absl::Duration kFar = absl::Seconds(10000);

  auto no_tick = [&](int line) { EXPECT_FALSE(take(c)) << "extra tick (line " << line << ")"; };
  auto assert_tick = [&](int line) {
    if (take(c)) return;
    for (int i = 0; i < kTries; i++) {
      gort::sleep(kSched);
      if (take(c)) return;
    }
    ADD_FAILURE() << "missing tick (line " << line << ")";
  };
  auto not_done = [&](const gort::Chan<bool>& done, int line) {
    EXPECT_NE(gort::select(gort::on_recv(done), gort::on_default()), 0u) << "early done (line " << line << ")";
  };
  auto wait_done = [&](const gort::Chan<bool>& done, int line) {
    for (int i = 0; i < kTries; i++) {
      gort::sleep(kSched);
      if (gort::select(gort::on_recv(done), gort::on_default()) == 0) return true;
    }
    ADD_FAILURE() << "never got done (line " << line << ")";
    return false;
  };

  // Simple stop; timer never in heap.
  tim.stop();
  no_tick(__LINE__);
  // Modify of a timer not in the heap.
  tim.reset(kFar);
  no_tick(__LINE__);
  // Modify of a timer in the heap; len and cap read 0.
  tim.reset(kSoon);
  gort::sleep(kSched);
  EXPECT_EQ(c.len(), 0u);
  EXPECT_EQ(c.cap(), 0u);
  assert_tick(__LINE__);

  // A tick that should have happened meanwhile is not received after a
  // reset (a Ticker ticks again within kSched).
  gort::sleep(kSched);
  tim.reset(kFar);
  no_tick(__LINE__);

  // Stop while a goroutine is blocked on the channel.
  tim.reset(kFar);
  auto done = gort::make_chan<bool>();
  not_done(done, __LINE__);
  gort::go([c, done] {
    c.recv();
    done.close();
  });
  gort::sleep(kSched);
  not_done(done, __LINE__);
  // Reset far away while it waits.
  tim.reset(absl::Seconds(20000));
  gort::sleep(kSched);
  not_done(done, __LINE__);
  // Imminent reset while it waits.
  tim.reset(kSoon);
  if (!wait_done(done, __LINE__)) return;
  // A Ticker has ticked again meanwhile; a Timer has stopped.
  if (tim.is_ticker) {
    assert_tick(__LINE__);
  } else {
    no_tick(__LINE__);
  }
  tim.stop();
  no_tick(__LINE__);

  // Again with select, two goroutines waiting.
  tim.reset(kFar);
  done = gort::make_chan<bool>(2);
  auto done1 = gort::make_chan<bool>();
  auto done2 = gort::make_chan<bool>();
  auto stop = gort::make_chan<bool>();
  for (auto d : {done1, done2}) {
    gort::go([c, done, d, stop] {
      gort::select(gort::on_recv(c, [&] { done.send(true); }), gort::on_recv(stop));
      d.close();
    });
  }
  gort::sleep(kSched);
  not_done(done, __LINE__);
  tim.reset(kSched / 2);
  gort::sleep(kSched);
  if (!wait_done(done, __LINE__)) return;
  tim.stop();
  stop.close();
  if (!wait_done(done1, __LINE__) || !wait_done(done2, __LINE__)) return;
  if (tim.is_ticker) {
    // An extra tick may have been sent on done before stop returned.
    gort::select(gort::on_recv(done), gort::on_default());
  }
  not_done(done, __LINE__);

  // Receivers blocked on a stopped timer get nothing.
  stop = gort::make_chan<bool>();
  done = gort::make_chan<bool>(2);
  for (int i = 0; i < 2; i++) {
    gort::go([c, done, stop] {
      gort::select(gort::on_recv(c, [] { ADD_FAILURE() << "unexpected data"; }), gort::on_recv(stop));
      done.send(true);
    });
  }
  gort::sleep(kSched);
  stop.close();
  if (!wait_done(done, __LINE__) || !wait_done(done, __LINE__)) return;

  // Stop and Reset block old values from being received (Go's proposal
  // 37196), and report a sent but unreceived value as pending.
  tim.reset(kSoon);
  gort::sleep(absl::Milliseconds(10));
  EXPECT_TRUE(tim.stop()) << "stop of a fired, unreceived timer must report it pending";
  no_tick(__LINE__);
  tim.reset(absl::Hours(1));
  no_tick(__LINE__);
  EXPECT_TRUE(tim.reset(kSoon)) << "reset of a running timer must report it pending";
  assert_tick(__LINE__);
  gort::sleep(absl::Milliseconds(10));
  if (tim.is_ticker) {
    assert_tick(__LINE__);
    gort::sleep(absl::Milliseconds(10));
  } else {
    no_tick(__LINE__);
  }
  // A Timer whose value was received has nothing pending; a Ticker does.
  EXPECT_EQ(tim.reset(absl::Hours(1)), tim.is_ticker);
  no_tick(__LINE__);
}

TEST_P(TimerChan, GoTestTimerChanTimer) {
  run_test([] {
    auto t = gort::new_timer(absl::Seconds(10000));
    test_timer_chan(timer_under_test(t));
    t.stop();
  });
}

TEST_P(TimerChan, GoTestTimerChanTicker) {
  run_test([] {
    auto t = gort::new_ticker(absl::Seconds(10000));
    test_timer_chan(ticker_under_test(t));
    t.stop();
  });
}

// ---- stale values: stop / reset racing with the firing ----

// Timers that fire within a few µs, stopped (or reset far away) after a
// random delay: whatever the race, stop/reset reports the arming as pending
// (nothing was received) and nothing is received then or later. Under Go's
// old semantics (and gort's before) a timer that had fired left its value
// in the channel and stop returned false.
void stale_value_stress(bool use_reset) {
  constexpr int kOwners = 6;
  constexpr int kRounds = 600;
  std::atomic<int> not_pending{0}, stale_now{0}, stale_later{0};
  Countdown cd(kOwners);
  // A stale value says when it was sent, against when the stop/reset that
  // should have kept it out began and returned: sent before the stop/reset
  // began means it sat in the channel through the drain; sent after it
  // returned means a firing got past the seq check.
  auto report = [](const char* what, int owner, int round, absl::Time sent, absl::Time began, absl::Time returned) {
    ADD_FAILURE() << what << ": owner " << owner << " round " << round << ", sent "
                  << absl::ToInt64Nanoseconds(sent - began) << " ns after the stop/reset began, which took "
                  << absl::ToInt64Nanoseconds(returned - began) << " ns";
  };
  for (int o = 0; o < kOwners; o++) {
    gort::go([&, o] {
      uint64_t rng = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(o + 1);
      struct Old {
        gort::Timer t;
        absl::Time began, returned;
      };
      std::vector<Old> timers;
      auto t = gort::new_timer(absl::Hours(1));
      absl::Time began = absl::Now(), returned = began;
      for (int r = 0; r < kRounds; r++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        if (r % 50 == 0) {
          // A fresh timer now and then; keep the old ones to check later.
          timers.push_back({t, began, returned});
          t = gort::new_timer(absl::Hours(1));
        }
        t.reset(absl::Microseconds(static_cast<int64_t>(rng % 40)));
        switch ((rng >> 8) % 3) {
          case 0: gort::yield(); break;
          case 1: {
            absl::Time end = absl::Now() + absl::Microseconds(static_cast<int64_t>((rng >> 12) % 80));
            while (absl::Now() < end) {
            }
            break;
          }
          default: break;
        }
        began = absl::Now();
        bool pending = use_reset ? t.reset(absl::Hours(1)) : t.stop();
        returned = absl::Now();
        if (!pending) not_pending++;
        if (auto v = take_value(t.chan())) {
          stale_now++;
          report("received right after", o, r, *v, began, returned);
        }
        if ((rng >> 20) % 4 == 0) {
          gort::sleep(absl::Microseconds(50));
          if (auto v = take_value(t.chan())) {
            stale_later++;
            report("received 50 us after", o, r, *v, began, returned);
          }
        }
      }
      timers.push_back({t, began, returned});
      gort::sleep(absl::Milliseconds(5));
      for (auto& old : timers) {
        if (auto v = take_value(old.t.chan())) {
          stale_later++;
          report("received at the end", o, -1, *v, old.began, old.returned);
        }
        old.t.stop();
      }
      cd.done();
    });
  }
  cd.wait();
  EXPECT_EQ(not_pending.load(), 0) << "stop/reset reported nothing pending, but nothing had been received";
  EXPECT_EQ(stale_now.load(), 0) << "a value from before stop/reset was received right after it";
  EXPECT_EQ(stale_later.load(), 0) << "a value from before stop/reset arrived later";
}

TEST_P(TimerChan, StopLeavesNoStaleValue) {
  run_test([] { stale_value_stress(false); });
}

TEST_P(TimerChan, ResetLeavesNoStaleValue) {
  run_test([] { stale_value_stress(true); });
}

// The deterministic case: a timer that fired long ago and was not received.
TEST_P(TimerChan, FiredUnreceivedValueIsDiscarded) {
  run_test([] {
    auto t = gort::new_timer(absl::Microseconds(1));
    gort::sleep(absl::Milliseconds(5));
    EXPECT_TRUE(t.stop());
    EXPECT_FALSE(take(t.chan()));
    EXPECT_FALSE(t.stop()) << "nothing is pending any more";
    auto u = gort::new_timer(absl::Microseconds(1));
    gort::sleep(absl::Milliseconds(5));
    EXPECT_TRUE(u.reset(absl::Hours(1)));
    EXPECT_FALSE(take(u.chan()));
    EXPECT_TRUE(u.stop());
    auto tick = gort::new_ticker(absl::Microseconds(50));
    gort::sleep(absl::Milliseconds(5));
    tick.stop();
    EXPECT_FALSE(take(tick.chan())) << "a tick sent before stop() was received";
    gort::sleep(absl::Milliseconds(5));
    EXPECT_FALSE(take(tick.chan())) << "a stopped ticker ticked";
    tick.reset(absl::Hours(1));
    EXPECT_FALSE(take(tick.chan()));
    tick.stop();
  });
}

// A timer pushed back again and again (a deadline renewed per request,
// which takes reset's lock-free path) fires once, not before the last time
// asked; once its value is received, a reset re-arms it (false: nothing
// was pending) and the next pushes go lock-free again.
TEST_P(TimerChan, PushedBackTimerFiresOnceAtItsLastTime) {
  run_test([] {
    auto t = gort::new_timer(absl::Milliseconds(20));
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < 999; i++) EXPECT_TRUE(t.reset(absl::Milliseconds(20))) << "round " << round;
      // Read before the last push, so that a pause between the two cannot
      // make the firing look early.
      const absl::Time last = absl::Now();
      EXPECT_TRUE(t.reset(absl::Milliseconds(20))) << "round " << round;
      std::optional<absl::Time> v = t.chan().recv();
      ASSERT_TRUE(v.has_value());
      EXPECT_GE(absl::Now() - last, absl::Milliseconds(18)) << "fired before the last push's time";
      EXPECT_FALSE(take(t.chan())) << "fired twice";
      EXPECT_FALSE(t.reset(absl::Milliseconds(20))) << "fired and received: nothing was pending";
    }
    EXPECT_TRUE(t.stop());
    EXPECT_FALSE(take(t.chan()));
  });
}

// Pushes without a lock racing with the runner: every timer comes due
// again and again while its owner keeps pushing it back by a little, so
// the runner often finds a pushed time and moves the timer up to it while
// the next push lands, on several Ps at once; and several goroutines push
// one shared timer at the same time. A timer must never fire before the
// time of the last push that returned true, nor carry a stale value past a
// reset, nor fire twice.
TEST_P(TimerChan, LockFreePushesRacingWithTheRunnerNeverFireEarly) {
  run_test([] {
    constexpr int kOwners = 8;
    constexpr int kRounds = 40;
    std::atomic<int> early{0}, twice{0}, lost{0};
    Countdown cd(kOwners);
    for (int o = 0; o < kOwners; o++) {
      gort::go([&, o] {
        auto t = gort::new_timer(absl::Microseconds(300));
        for (int r = 0; r < kRounds; r++) {
          // Pushes about as far apart as the timer's span, so that some
          // land as it comes due.
          for (int i = 0; i < 20; i++) {
            (void)t.reset(absl::Microseconds(200 + 10 * ((o + i) % 7)));
            gort::sleep(absl::Microseconds(10 * (i % 3)));
          }
          const absl::Time last = gort::now();
          (void)t.reset(absl::Microseconds(500));
          std::optional<absl::Time> v = t.chan().recv();
          if (!v.has_value()) {
            lost++;
          } else if (*v < last + absl::Microseconds(450)) {  // the value is absl::Now(), the timer runs on the monotonic clock
            early++;
          }
          if (take(t.chan())) twice++;
        }
        cd.done();
      });
    }
    // One timer, pushed by four goroutines at once, then settled.
    auto shared = gort::new_timer(absl::Hours(1));
    Countdown pushers(4);
    for (int p = 0; p < 4; p++) {
      gort::go([&, p] {
        for (int i = 0; i < 5000; i++) (void)shared.reset(absl::Hours(1) + absl::Nanoseconds(p * 5000 + i));
        pushers.done();
      });
    }
    pushers.wait();
    const absl::Time last = gort::now();
    EXPECT_TRUE(shared.reset(absl::Milliseconds(2)));
    std::optional<absl::Time> v = shared.chan().recv();
    ASSERT_TRUE(v.has_value());
    EXPECT_GE(*v, last + absl::Microseconds(1900)) << "the shared timer fired before its last push";
    EXPECT_FALSE(take(shared.chan()));
    cd.wait();
    EXPECT_EQ(early.load(), 0) << "fired before the last push's time";
    EXPECT_EQ(twice.load(), 0) << "fired twice";
    EXPECT_EQ(lost.load(), 0);
  });
}

// Tickers at a few µs stopped and reset while their ticks are being sent
// on other threads: after stop, no tick; after reset to an hour, no tick.
TEST_P(TimerChan, TickerStopAndResetRacingWithTicks) {
  run_test([] {
    constexpr int kOwners = 4;
    constexpr int kRounds = 300;
    std::atomic<int> stale{0};
    Countdown cd(kOwners);
    for (int o = 0; o < kOwners; o++) {
      gort::go([&, o] {
        auto tick = gort::new_ticker(absl::Microseconds(5 + o));
        for (int r = 0; r < kRounds; r++) {
          if (r % 3 == 0) take(tick.chan());
          if (r % 2 == 0) {
            tick.stop();
          } else {
            tick.reset(absl::Hours(1));
          }
          if (take(tick.chan())) stale++;
          gort::yield();
          if (take(tick.chan())) stale++;
          tick.reset(absl::Microseconds(5 + (r % 20)));
          gort::yield();
        }
        tick.stop();
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(stale.load(), 0) << "a tick from before stop/reset was received";
  });
}

// ---- Go's sleep_test.go testStopResetResult (golang/go#69312) ----

// Two 1 ms timers; whichever is received first, the other is stopped (or
// reset). If that reports nothing pending, its value must be receivable;
// with synchronous channels it always reports pending.
void stop_reset_result(bool use_stop) {
  auto stop_or_reset = [use_stop](const gort::Timer& t) {
    return use_stop ? t.stop() : t.reset(absl::Hours(1));
  };
  constexpr int kGoroutines = 100;
  constexpr int kIters = 40;
  std::atomic<int> lost{0}, not_pending{0};
  auto start = gort::make_chan<bool>();
  Countdown cd(kGoroutines);
  for (int g = 0; g < kGoroutines; g++) {
    gort::go([&] {
      start.recv();
      for (int j = 0; j < kIters; j++) {
        auto t1 = gort::new_timer(absl::Milliseconds(1));
        auto t2 = gort::new_timer(absl::Milliseconds(1));
        gort::select(gort::on_recv(t1.chan(),
                                   [&] {
                                     if (!stop_or_reset(t2)) {
                                       not_pending++;
                                       if (!recv_within(t2.chan(), absl::Seconds(10))) lost++;
                                     }
                                   }),
                     gort::on_recv(t2.chan(), [&] {
                       if (!stop_or_reset(t1)) {
                         not_pending++;
                         if (!recv_within(t1.chan(), absl::Seconds(10))) lost++;
                       }
                     }));
        t1.stop();
        t2.stop();
      }
      cd.done();
    });
  }
  start.close();
  cd.wait();
  EXPECT_EQ(lost.load(), 0) << "stop/reset said nothing was pending, and no value came";
  EXPECT_EQ(not_pending.load(), 0) << "an unreceived timer was reported as not pending";
}

TEST_P(TimerChan, GoTestStopResult) {
  run_test([] { stop_reset_result(true); });
}

TEST_P(TimerChan, GoTestResetResult) {
  run_test([] { stop_reset_result(false); });
}

// ---- Go's TestMultiWakeupTimer / TestMultiWakeupTicker ----

// Many goroutines waking one timer or ticker at once (Go's test of the
// same name: a stress case that crashed Go's runtime).
TEST_P(TimerChan, GoTestMultiWakeupTicker) {
  run_test([this] {
    int goroutines = procs() * 2;
    auto tick = gort::new_ticker(absl::Microseconds(1));
    Countdown cd(goroutines);
    for (int g = 0; g < goroutines; g++) {
      gort::go([&] {
        for (int i = 0; i < 2000; i++) {
          auto bound = gort::new_timer(absl::Milliseconds(1));
          gort::select(gort::on_recv(tick.chan()), gort::on_recv(bound.chan()));
          bound.stop();
        }
        cd.done();
      });
    }
    cd.wait();
    tick.stop();
  });
}

TEST_P(TimerChan, GoTestMultiWakeupTimer) {
  run_test([this] {
    int goroutines = procs() * 2;
    auto t = gort::new_timer(absl::Nanoseconds(1));
    Countdown cd(goroutines);
    for (int g = 0; g < goroutines; g++) {
      gort::go([&] {
        for (int i = 0; i < 10000; i++) {
          take(t.chan());
          t.reset(absl::Nanoseconds(1));
        }
        cd.done();
      });
    }
    cd.wait();
    t.stop();
  });
}

// ---- Go's TestAfterTimes ----

// The value is the time the timer fired, not the time it was received.
// (Bounded retries, as Go's test: a heavily loaded machine can fire late.)
TEST_P(TimerChan, GoTestAfterTimes) {
  run_test([] {
    bool ok = false;
    for (int i = 0; i < 10 && !ok; i++) {
      absl::Time start = absl::Now();
      auto c = gort::after(absl::Milliseconds(10));
      gort::sleep(absl::Milliseconds(100));
      std::optional<absl::Time> v = c.recv();
      ok = v.has_value() && *v - start < absl::Milliseconds(80);
    }
    EXPECT_TRUE(ok) << "after(10ms) received 100 ms later carried the receive time";
  });
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/sync/time_chrono_test.cpp — std::chrono durations and time
// points in gort/time.hpp and gort/context.hpp (gort/chrono.hpp): every call
// that takes an absl::Duration or absl::Time takes the chrono kind too, the
// absl calls stay unambiguous, and the chrono calls do what the absl ones
// do: sleep(20ms) parks at least 20 ms, with_timeout(ctx, 30ms) expires,
// steady_clock and system_clock deadlines expire, timers and tickers fire,
// and a duration too large for absl (hours::max()) means "never", not a
// time in the past.
//
// The conversions themselves: tests/gmp/chrono_test.cpp.
#include <atomic>
#include <chrono>
#include <concepts>
#include <functional>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::procs_name;
using gort::test::ProcsTest;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// ---- compile time: which calls take what ----

template <class D>
concept Sleeps = requires(D d) { gort::sleep(d); };
template <class D>
concept MakesTimers = requires(D d, std::function<void()> f) {
  { gort::new_timer(d) } -> std::same_as<gort::Timer>;
  { gort::after(d) } -> std::same_as<gort::Chan<absl::Time>>;
  { gort::after_func(d, f) } -> std::same_as<gort::Timer>;
  { gort::new_ticker(d) } -> std::same_as<gort::Ticker>;
};
template <class D>
concept Resets = requires(const gort::Timer& t, const gort::Ticker& k, D d) {
  { t.reset(d) } -> std::same_as<bool>;
  k.reset(d);
};
template <class D>
concept TimesOut = requires(const gort::Context& c, D d) {
  { gort::with_timeout(c, d) } -> std::same_as<std::pair<gort::Context, gort::CancelFunc>>;
  { gort::with_timeout_cause(c, d, absl::Status()) } -> std::same_as<std::pair<gort::Context, gort::CancelFunc>>;
};
template <class T>
concept Deadlines = requires(const gort::Context& c, T t) {
  { gort::with_deadline(c, t) } -> std::same_as<std::pair<gort::Context, gort::CancelFunc>>;
  { gort::with_deadline_cause(c, t, absl::Status()) } -> std::same_as<std::pair<gort::Context, gort::CancelFunc>>;
};

template <class D>
constexpr bool kTakesDuration = Sleeps<D> && MakesTimers<D> && Resets<D> && TimesOut<D>;

// Durations: absl's (still one exported function each, not ambiguous with
// the templates: a concept of an ambiguous call is not satisfied), gort's
// field type, and chrono's of any rep and period.
static_assert(kTakesDuration<absl::Duration>);
static_assert(kTakesDuration<gort::Duration>);
static_assert(kTakesDuration<std::chrono::nanoseconds> && kTakesDuration<std::chrono::milliseconds> &&
              kTakesDuration<std::chrono::hours>);
static_assert(kTakesDuration<std::chrono::duration<double>> && kTakesDuration<std::chrono::duration<int, std::centi>>);
static_assert(kTakesDuration<decltype(1.5s)> && kTakesDuration<const std::chrono::seconds&>);
// Not durations.
static_assert(!Sleeps<int> && !Sleeps<absl::Time> && !Sleeps<Clock::time_point>);
static_assert(!TimesOut<absl::Time> && !TimesOut<std::chrono::system_clock::time_point>);

// Time points: absl::Time, and chrono's of the clocks gort relates to it.
static_assert(Deadlines<absl::Time>);
static_assert(Deadlines<Clock::time_point> && Deadlines<std::chrono::system_clock::time_point>);
static_assert(Deadlines<std::chrono::sys_seconds> && Deadlines<std::chrono::time_point<Clock, std::chrono::milliseconds>>);
static_assert(!Deadlines<absl::Duration> && !Deadlines<std::chrono::milliseconds>);

// The absl calls resolve to the exported functions themselves.
static_assert(requires { static_cast<void (*)(absl::Duration)>(&gort::sleep); });
static_assert(requires { static_cast<gort::Timer (*)(absl::Duration)>(&gort::new_timer); });
static_assert(requires {
  static_cast<std::pair<gort::Context, gort::CancelFunc> (*)(const gort::Context&, absl::Duration)>(&gort::with_timeout);
});
// Braces still mean absl::Duration{} (a template cannot deduce from them).
static_assert(requires { gort::sleep({}); });

// ---- run time ----

// Receives from ch, or gives up after `limit` (a bound on something that
// must happen, never a speed check).
std::optional<absl::Time> recv_within(const gort::Chan<absl::Time>& ch, std::chrono::milliseconds limit) {
  std::optional<absl::Time> got;
  auto bound = gort::new_timer(limit);
  gort::select(gort::on_recv(ch, [&](std::optional<absl::Time> v) { got = v; }),
               gort::on_recv(bound.chan(), [](auto) {}));
  bound.stop();
  return got;
}

bool done_within(const gort::Context& ctx, std::chrono::milliseconds limit) {
  bool done = false;
  auto bound = gort::new_timer(limit);
  gort::select(gort::on_recv(ctx.done(), [&](auto) { done = true; }), gort::on_recv(bound.chan(), [](auto) {}));
  bound.stop();
  return done;
}

const absl::Status kDeadline = absl::DeadlineExceededError("context deadline exceeded");

class TimeChrono : public ProcsTest {};
INSTANTIATE_TEST_SUITE_P(Procs, TimeChrono, ::testing::Values(1, 2, 4), procs_name);

TEST_P(TimeChrono, SleepParksForAtLeastTheDuration) {
  run_test([] {
    auto t0 = Clock::now();
    gort::sleep(20ms);
    EXPECT_GE(Clock::now() - t0, 20ms);
    t0 = Clock::now();
    gort::sleep(std::chrono::duration<double, std::milli>(2.5));
    EXPECT_GE(Clock::now() - t0, 2500us);
    t0 = Clock::now();
    gort::sleep(std::chrono::hours::min());  // -InfiniteDuration: at once
    gort::sleep(-5s);
    EXPECT_LT(Clock::now() - t0, 1s);
  });
}

TEST_P(TimeChrono, WithTimeoutExpires) {
  run_test([] {
    auto t0 = Clock::now();
    auto [ctx, cancel] = gort::with_timeout(gort::background(), 30ms);
    ASSERT_TRUE(ctx.deadline().has_value());
    EXPECT_TRUE(done_within(ctx, 20s));
    EXPECT_GE(Clock::now() - t0, 25ms);  // the deadline is read on the wall clock
    EXPECT_EQ(ctx.err(), kDeadline);
    cancel();

    auto [cc, ccancel] = gort::with_timeout_cause(gort::background(), 5ms, absl::UnavailableError("slow backend"));
    EXPECT_TRUE(done_within(cc, 20s));
    EXPECT_EQ(cc.err(), kDeadline);
    EXPECT_EQ(gort::cause(cc), absl::UnavailableError("slow backend"));
    ccancel();
  });
}

TEST_P(TimeChrono, SteadyAndSystemClockDeadlinesExpire) {
  run_test([] {
    auto t0 = Clock::now();
    auto [steady, cancel_steady] = gort::with_deadline(gort::background(), Clock::now() + 30ms);
    auto [sys, cancel_sys] = gort::with_deadline(gort::background(), std::chrono::system_clock::now() + 30ms);
    for (const gort::Context* c : {&steady, &sys}) {
      ASSERT_TRUE(c->deadline().has_value());
      absl::Duration left = *c->deadline() - absl::Now();
      EXPECT_LT(left, absl::Milliseconds(31)) << left;
      EXPECT_TRUE(done_within(*c, 20s));
      EXPECT_EQ(c->err(), kDeadline);
    }
    EXPECT_GE(Clock::now() - t0, 25ms);
    cancel_steady();
    cancel_sys();
    // A steady time already past: expired at once.
    auto [past, cancel_past] = gort::with_deadline(gort::background(), Clock::now() - 1s);
    EXPECT_EQ(past.err(), kDeadline);
    cancel_past();
  });
}

// hours::max() is past absl::Duration's range: it saturates to
// InfiniteDuration ("never"), where a wrapping conversion would give a
// negative duration and an expired context.
TEST_P(TimeChrono, HugeDurationsMeanNever) {
  run_test([] {
    for (auto d : {std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::hours(1)),
                   std::chrono::nanoseconds::max()}) {
      auto [ctx, cancel] = gort::with_timeout(gort::background(), d);
      EXPECT_TRUE(ctx.err().ok());
      cancel();
    }
    auto [ctx, cancel] = gort::with_timeout(gort::background(), std::chrono::hours::max());
    ASSERT_TRUE(ctx.deadline().has_value());
    EXPECT_GT(*ctx.deadline(), absl::Now() + absl::Hours(24 * 365 * 100));
    auto [later, cancel_later] = gort::with_deadline(gort::background(), Clock::time_point::max());
    auto t = gort::new_timer(std::chrono::hours::max());
    gort::sleep(20ms);
    EXPECT_TRUE(ctx.err().ok()) << ctx.err();
    EXPECT_TRUE(later.err().ok()) << later.err();
    EXPECT_TRUE(t.stop()) << "a timer of hours::max() fired";
    cancel();
    cancel_later();
    // The other end: at once.
    auto [gone, cancel_gone] = gort::with_timeout(gort::background(), std::chrono::hours::min());
    EXPECT_EQ(gone.err(), kDeadline);
    cancel_gone();
  });
}

TEST_P(TimeChrono, TimersAndTickers) {
  run_test([] {
    auto t0 = Clock::now();
    auto t = gort::new_timer(10ms);
    EXPECT_TRUE(recv_within(t.chan(), 20s).has_value());
    EXPECT_GE(Clock::now() - t0, 10ms);
    EXPECT_FALSE(t.reset(5ms)) << "the value was received: nothing pending";
    EXPECT_TRUE(recv_within(t.chan(), 20s).has_value());
    EXPECT_FALSE(t.reset(1h));
    EXPECT_TRUE(t.stop()) << "armed for an hour: stop stops it";

    EXPECT_TRUE(recv_within(gort::after(5ms), 20s).has_value());

    gort::Chan<absl::Time> ran = gort::make_chan<absl::Time>(1);
    gort::after_func(5ms, [ran] { ran.send(absl::Now()); });
    EXPECT_TRUE(recv_within(ran, 20s).has_value());

    auto tick = gort::new_ticker(5ms);
    EXPECT_TRUE(recv_within(tick.chan(), 20s).has_value());
    tick.reset(std::chrono::duration<double, std::milli>(7.5));
    EXPECT_TRUE(recv_within(tick.chan(), 20s).has_value());
    tick.stop();
  });
}

}  // namespace
}  // namespace gort_stdlib_test

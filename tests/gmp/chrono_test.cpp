// tests/gmp/chrono_test.cpp — gort/chrono.hpp: std::chrono durations and time
// points as absl::Duration and absl::Time. Exact for integer reps, whatever
// the period; saturating to ±InfiniteDuration instead of overflowing;
// floating reps through absl::Seconds; system_clock exactly, steady_clock
// through steady_to_time, a clock with to_sys through system_clock; and
// gort::Duration, the configuration fields' type (Config::time_slice).
//
// The calls that take chrono values (sleep, with_timeout, set_deadline, ...)
// are tested where their areas are: tests/stdlib/sync/time_chrono_test.cpp
// and tests/stdlib/net/net_chrono_test.cpp.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ratio>
#include <type_traits>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gort/chrono.hpp"
#include "gort/runtime.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;
using gort::from_chrono;
using std::chrono::duration;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// ---- compile time ----

static_assert(gort::chrono_duration<std::chrono::milliseconds> && gort::chrono_duration<duration<double>> &&
              gort::chrono_duration<const std::chrono::hours&>);
static_assert(!gort::chrono_duration<absl::Duration> && !gort::chrono_duration<gort::Duration> &&
              !gort::chrono_duration<int64_t>);
static_assert(gort::chrono_time_point<std::chrono::steady_clock::time_point> &&
              gort::chrono_time_point<std::chrono::sys_seconds>);
static_assert(!gort::chrono_time_point<absl::Time> && !gort::chrono_time_point<std::chrono::seconds>);
static_assert(std::is_same_v<decltype(from_chrono(1s)), absl::Duration>);
static_assert(std::is_same_v<decltype(from_chrono(std::chrono::system_clock::now())), absl::Time>);

// gort::Duration: absl::Duration's layout, both kinds in, an absl::Duration out.
static_assert(sizeof(gort::Duration) == sizeof(absl::Duration));
static_assert(std::is_trivially_copyable_v<gort::Duration>);
static_assert(std::is_convertible_v<absl::Duration, gort::Duration>);
static_assert(std::is_convertible_v<std::chrono::milliseconds, gort::Duration>);
static_assert(std::is_convertible_v<duration<double>, gort::Duration>);
static_assert(std::is_convertible_v<gort::Duration, absl::Duration>);
static_assert(!std::is_convertible_v<int, gort::Duration>);
// Config stays an aggregate that takes either kind.
static_assert(requires { gort::Config{.procs = 1, .time_slice = 2ms}; });
static_assert(requires { gort::Config{.procs = 1, .time_slice = absl::Milliseconds(2)}; });

// ---- durations ----

TEST(Chrono, StandardPeriodsConvertExactly) {
  EXPECT_EQ(from_chrono(std::chrono::nanoseconds(1)), absl::Nanoseconds(1));
  EXPECT_EQ(from_chrono(std::chrono::microseconds(-3)), absl::Microseconds(-3));
  EXPECT_EQ(from_chrono(10ms), absl::Milliseconds(10));
  EXPECT_EQ(from_chrono(5s), absl::Seconds(5));
  EXPECT_EQ(from_chrono(2min), absl::Minutes(2));
  EXPECT_EQ(from_chrono(3h), absl::Hours(3));
  EXPECT_EQ(from_chrono(std::chrono::days(2)), absl::Hours(48));
  EXPECT_EQ(from_chrono(std::chrono::nanoseconds(0)), absl::ZeroDuration());
}

TEST(Chrono, OtherRepsAndPeriodsConvertExactly) {
  EXPECT_EQ(from_chrono(duration<int, std::centi>(7)), absl::Milliseconds(70));
  EXPECT_EQ(from_chrono(duration<unsigned, std::milli>(1500)), absl::Milliseconds(1500));
  EXPECT_EQ(from_chrono(duration<short, std::ratio<60>>(-2)), absl::Minutes(-2));
  EXPECT_EQ(from_chrono(duration<int, std::ratio<7, 2>>(3)), absl::Milliseconds(10500));
  EXPECT_EQ(from_chrono(duration<uint64_t>(5)), absl::Seconds(5));
  // A third of a second: absl's quarter-nanosecond tick, toward zero, as
  // absl's own division gives it.
  EXPECT_EQ(from_chrono(duration<int64_t, std::ratio<1, 3>>(1)), absl::Seconds(1) / 3);
  EXPECT_EQ(from_chrono(duration<int64_t, std::ratio<1, 3>>(-4)), -(absl::Seconds(4) / 3));
  EXPECT_EQ(from_chrono(duration<int64_t, std::pico>(1500)), absl::Nanoseconds(1.5));
}

// Out of absl::Duration's range: an infinity with the value's sign, never a
// wrapped (negative, "already expired") duration.
TEST(Chrono, HugeDurationsSaturate) {
  EXPECT_EQ(from_chrono(std::chrono::hours::max()), absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(std::chrono::hours::min()), -absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(std::chrono::minutes::max()), absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(duration<int64_t, std::ratio<86400 * 365>>(kMax)), absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(duration<int64_t, std::ratio<86400 * 365>>(-kMax)), -absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(duration<uint64_t, std::nano>(std::numeric_limits<uint64_t>::max())),
            absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(duration<uint64_t>(uint64_t{1} << 63)), absl::InfiniteDuration());
  // In range, however large: finite and exact.
  EXPECT_EQ(from_chrono(std::chrono::nanoseconds::max()), absl::Nanoseconds(kMax));
  EXPECT_EQ(from_chrono(std::chrono::seconds::max()), absl::Seconds(kMax));
  EXPECT_LT(from_chrono(std::chrono::seconds::max()), absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(std::chrono::milliseconds::min()), absl::Milliseconds(std::numeric_limits<int64_t>::min()));
}

TEST(Chrono, FloatingRepsGoThroughSeconds) {
  EXPECT_EQ(from_chrono(1.5s), absl::Milliseconds(1500));
  EXPECT_EQ(from_chrono(duration<double>(1.5)), absl::Milliseconds(1500));
  EXPECT_EQ(from_chrono(duration<double, std::milli>(0.25)), absl::Microseconds(250));
  EXPECT_EQ(from_chrono(duration<float, std::micro>(2.0f)), absl::Microseconds(2));
  EXPECT_EQ(from_chrono(duration<long double, std::nano>(3)), absl::Nanoseconds(3));
  EXPECT_EQ(from_chrono(duration<double, std::ratio<60>>(-0.5)), absl::Seconds(-30));
  EXPECT_EQ(from_chrono(duration<double>(INFINITY)), absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(duration<double>(-INFINITY)), -absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(duration<double>(1e300)), absl::InfiniteDuration());
  EXPECT_EQ(from_chrono(duration<double, std::ratio<3600>>(1e300)), absl::InfiniteDuration());
}

TEST(Chrono, AbslValuesPassThrough) {
  EXPECT_EQ(from_chrono(absl::Seconds(3)), absl::Seconds(3));
  EXPECT_EQ(from_chrono(absl::UnixEpoch()), absl::UnixEpoch());
}

// ---- time points ----

TEST(Chrono, SystemClockIsUnixTimeExactly) {
  using std::chrono::system_clock;
  EXPECT_EQ(from_chrono(std::chrono::sys_seconds(1700000000s)), absl::FromUnixSeconds(1700000000));
  EXPECT_EQ(from_chrono(std::chrono::time_point<system_clock, std::chrono::milliseconds>(1234ms)),
            absl::FromUnixMillis(1234));
  EXPECT_EQ(from_chrono(std::chrono::sys_seconds(-5s)), absl::FromUnixSeconds(-5));
  EXPECT_EQ(from_chrono(system_clock::time_point(std::chrono::nanoseconds(123456789))), absl::FromUnixNanos(123456789));
  EXPECT_EQ(from_chrono(std::chrono::sys_days(std::chrono::year(2000) / 1 / 1)),
            absl::FromCivil(absl::CivilDay(2000, 1, 1), absl::UTCTimeZone()));
  // max() is not special: the far future it is (2262, with nanoseconds).
  EXPECT_EQ(from_chrono(system_clock::time_point::max()),
            absl::UnixEpoch() + from_chrono(system_clock::duration::max()));
  absl::Duration off = from_chrono(system_clock::now()) - absl::Now();
  EXPECT_LT(absl::AbsDuration(off), absl::Seconds(1)) << off;
}

// steady_clock: as far from absl::Now() as from steady_clock::now().
TEST(Chrono, SteadyClockIsRelativeToNow) {
  using std::chrono::steady_clock;
  auto near = [](absl::Duration got, absl::Duration want) {
    return got > want - absl::Seconds(1) && got < want + absl::Seconds(1);
  };
  absl::Duration ahead = from_chrono(steady_clock::now() + 10s) - absl::Now();
  EXPECT_TRUE(near(ahead, absl::Seconds(10))) << ahead;
  absl::Duration behind = from_chrono(steady_clock::now() - 5s) - absl::Now();
  EXPECT_TRUE(near(behind, absl::Seconds(-5))) << behind;
  // Another duration type of the same clock.
  absl::Duration coarse =
      from_chrono(std::chrono::time_point_cast<std::chrono::minutes>(steady_clock::now() + 1h)) - absl::Now();
  EXPECT_TRUE(coarse > absl::Minutes(58) && coarse <= absl::Hours(1) + absl::Seconds(1)) << coarse;
  absl::Duration fractional =
      from_chrono(std::chrono::time_point<steady_clock, duration<double>>(steady_clock::now()) + 2.5s) - absl::Now();
  EXPECT_TRUE(near(fractional, absl::Milliseconds(2500))) << fractional;
  // The ends of steady time: far away on the right side, never wrapped.
  EXPECT_GT(from_chrono(steady_clock::time_point::max()), absl::Now() + absl::Hours(24 * 365 * 100));
  EXPECT_LT(from_chrono(steady_clock::time_point::min()), absl::Now() - absl::Hours(24 * 365 * 100));
  EXPECT_EQ(from_chrono(std::chrono::time_point<steady_clock, std::chrono::hours>(std::chrono::hours::max())),
            absl::InfiniteFuture());
}

TEST(Chrono, SteadyToTimeIsTheOneRelation) {
  auto since = from_chrono(std::chrono::steady_clock::now().time_since_epoch());
  absl::Duration off = gort::steady_to_time(since + absl::Seconds(3)) - absl::Now();
  EXPECT_TRUE(off > absl::Seconds(2) && off < absl::Seconds(4)) << off;
  EXPECT_EQ(gort::steady_to_time(absl::InfiniteDuration()), absl::InfiniteFuture());
  EXPECT_EQ(gort::steady_to_time(-absl::InfiniteDuration()), absl::InfinitePast());
}

// A clock with a static to_sys (C++20's clock_cast protocol) goes through
// system_clock: file_clock in libstdc++.
TEST(Chrono, ClockWithToSys) {
  absl::Duration off = from_chrono(std::chrono::file_clock::now()) - absl::Now();
  EXPECT_LT(absl::AbsDuration(off), absl::Seconds(1)) << off;
}

// ---- gort::Duration ----

TEST(Chrono, DurationFieldTakesBothKinds) {
  gort::Duration d = 250ms;
  EXPECT_EQ(d, absl::Milliseconds(250));
  d = absl::Seconds(2);
  EXPECT_EQ(d, absl::Seconds(2));
  d = 1.5s;
  EXPECT_EQ(d, absl::Milliseconds(1500));
  d = std::chrono::hours::max();
  EXPECT_EQ(d, absl::InfiniteDuration());
  EXPECT_EQ(gort::Duration(), absl::ZeroDuration());
  // absl's operators and functions take it as an absl::Duration.
  d = 2s;
  absl::Duration sum = d + absl::Seconds(1);
  EXPECT_EQ(sum, absl::Seconds(3));
  EXPECT_LT(d, absl::Seconds(3));
  EXPECT_TRUE(d != absl::InfiniteDuration());
  EXPECT_EQ(absl::ToInt64Milliseconds(d), 2000);
  EXPECT_EQ(absl::FormatDuration(d), "2s");
  d *= 2;
  EXPECT_EQ(d, absl::Seconds(4));

  gort::Config cfg;
  EXPECT_EQ(cfg.time_slice, absl::Milliseconds(10));
  cfg.time_slice = 5ms;
  EXPECT_EQ(cfg.time_slice, absl::Milliseconds(5));
  cfg.time_slice = absl::Milliseconds(7);
  EXPECT_EQ(absl::ToInt64Milliseconds(cfg.time_slice), 7);
}

}  // namespace
}  // namespace gort::test

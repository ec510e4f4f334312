// gort/chrono.hpp — std::chrono durations and time points wherever gort
// takes an absl::Duration or an absl::Time.
//
//   using namespace std::chrono_literals;
//   gort::sleep(10ms);                                        // = absl::Milliseconds(10)
//   auto [ctx, cancel] = gort::with_timeout(parent, 200ms);
//   conn.set_deadline(std::chrono::steady_clock::now() + 1s);
//   conn.set_read_deadline(std::chrono::system_clock::now() + 1s);
//   gort::net::ServerConfig cfg;
//   cfg.read_timeout = 5s;                                    // a gort::Duration field
//
// Every call of gort's headers that takes an absl::Duration has an inline
// overload for any std::chrono::duration (`chrono_duration` below), and
// every call that takes an absl::Time one for a std::chrono::time_point
// (`chrono_time_point`); both forward to the absl call through
// from_chrono(), so the library exports nothing new. The absl overloads
// stay as they are: a template constrained to chrono types is never a
// candidate for an absl::Duration argument, so `gort::sleep(absl::
// Milliseconds(5))` still picks the one function it always did. Fields of
// configuration structs (Config::time_slice, ServerConfig's timeouts) are
// gort::Duration: an absl::Duration that may also be assigned a chrono
// duration.
//
// Durations (from_chrono(std::chrono::duration<Rep, Period>)):
//   - integer reps convert exactly (to absl's quarter nanosecond for a
//     period that is not a whole number of them); a value outside
//     absl::Duration's range (about ±292 billion years: hours::max() is
//     out of it, nanoseconds::max() is not) saturates to
//     ±absl::InfiniteDuration(), as absl's own arithmetic and Go's
//     time.Duration arithmetic in the runtime saturate: a huge timeout
//     means "never", not a time in the past;
//   - floating reps go through absl::Seconds(double): rounded to a
//     quarter nanosecond, ±infinity and values past the range saturate,
//     NaN is +InfiniteDuration (-Inf with its sign bit set), as absl does.
//   Other reps (a user-defined arithmetic class) do not compile.
//
// Time points (from_chrono(std::chrono::time_point<Clock, Duration>)):
//   - system_clock (and high_resolution_clock, which is system_clock in
//     libstdc++): the Unix epoch plus time_since_epoch(), exactly;
//   - steady_clock: through steady_to_time() below, the one function that
//     relates steady time to the wall clock: absl::Now() + (tp -
//     steady_clock::now()). The deadline then means "that long from now",
//     as the steady time point did; a later step of the wall clock moves it,
//     as it moves every absl::Time deadline (the runtime turns deadlines
//     into its own monotonic clock when they are set, so a step after
//     that does not);
//   - a clock that follows C++20's clock_cast protocol with a static
//     `to_sys` (file_clock; utc_clock where the library completes it):
//     Clock::to_sys(tp), then as system_clock;
//   - any other clock, and std::chrono::local_t (a time with no time
//     zone), is a compile error that says so (a static_assert in
//     from_chrono). GCC 12 has no std::chrono::clock_cast, hence the
//     to_sys protocol by hand.
//   time_point::max() and min() are not special: system_clock's max() is
//   in the year 2262, far enough to mean "no deadline" in practice.
//
// Costs: a chrono argument costs one conversion (a few integer operations
// for the standard periods, two absl calls otherwise), plus two clock
// reads for a steady_clock time point. Everything here is thread-safe and
// never parks.
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <limits>
#include <ratio>
#include <type_traits>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gort/detail/api.hpp"

namespace gort {

// gort/time.hpp's now() (defined in libgort): the time, on a synctest
// bubble's fake clock on its goroutines.
GORT_API absl::Time now();

namespace internal {

template <class T>
struct IsChronoDuration : std::false_type {};
template <class Rep, class Period>
struct IsChronoDuration<std::chrono::duration<Rep, Period>> : std::true_type {};

template <class T>
struct IsChronoTimePoint : std::false_type {};
template <class Clock, class Dur>
struct IsChronoTimePoint<std::chrono::time_point<Clock, Dur>> : std::true_type {};

template <class>
inline constexpr bool kDependentFalse = false;

// The periods absl::FromChrono takes as they are (with int64_t counts).
template <class Period>
inline constexpr bool kAbslPeriod =
    std::is_same_v<Period, std::nano> || std::is_same_v<Period, std::micro> || std::is_same_v<Period, std::milli> ||
    std::is_same_v<Period, std::ratio<1>> || std::is_same_v<Period, std::ratio<60>> ||
    std::is_same_v<Period, std::ratio<3600>>;

}  // namespace internal

// Any std::chrono::duration (std::chrono::milliseconds, 1.5s, ...).
template <class T>
concept chrono_duration = internal::IsChronoDuration<std::remove_cvref_t<T>>::value;

// Any std::chrono::time_point. Clocks other than system_clock,
// steady_clock and those with a static to_sys are rejected by from_chrono
// with a static_assert that names the problem.
template <class T>
concept chrono_time_point = internal::IsChronoTimePoint<std::remove_cvref_t<T>>::value;

// A std::chrono::duration as an absl::Duration, saturating (see the top of
// the file).
template <class Rep, class Period>
absl::Duration from_chrono(std::chrono::duration<Rep, Period> d) {
  static_assert(std::is_arithmetic_v<Rep>,
                "gort::from_chrono: the duration's rep must be an integer or floating-point type");
  if constexpr (std::is_floating_point_v<Rep>) {
    return absl::Seconds(static_cast<double>(static_cast<long double>(d.count()) * Period::num / Period::den));
  } else {
    const Rep c = d.count();
    if constexpr (std::numeric_limits<Rep>::digits > 63) {  // uint64_t, __int128
      if (c > static_cast<Rep>(std::numeric_limits<int64_t>::max())) return absl::InfiniteDuration();
      if constexpr (std::is_signed_v<Rep>) {
        if (c < static_cast<Rep>(std::numeric_limits<int64_t>::min())) return -absl::InfiniteDuration();
      }
    }
    const auto n = static_cast<int64_t>(c);
    if constexpr (internal::kAbslPeriod<Period>) {
      // minutes and hours saturate in absl::FromChrono.
      return absl::FromChrono(std::chrono::duration<int64_t, Period>(n));
    } else if constexpr (Period::den == 1) {
      return absl::Seconds(n) * static_cast<int64_t>(Period::num);  // saturates
    } else {
      // n = q * den + r: whole seconds (saturating), then the remainder,
      // |r| < den, exactly to absl's tick.
      constexpr auto num = static_cast<int64_t>(Period::num);
      constexpr auto den = static_cast<int64_t>(Period::den);
      return absl::Seconds(n / den) * num + absl::Seconds(n % den) * num / den;
    }
  }
}

// Identity, so that generic code may call from_chrono on either kind.
inline absl::Duration from_chrono(absl::Duration d) { return d; }
inline absl::Time from_chrono(absl::Time t) { return t; }

// The one place gort relates steady_clock to the wall clock: the instant
// `since_epoch` past steady_clock's epoch, as the absl::Time that is as far
// from gort::now() as it is from steady_clock::now(). gort::now(), not
// absl::Now(): in a synctest bubble a deadline `steady_clock::now() + 1s`
// is one second away on the bubble's clock, whether or not the bubble
// fakes steady_clock too (gort/synctest.hpp). Both clocks are read
// once, back to back; the result is off by the time between the two reads
// (well under a microsecond) and saturates as absl's arithmetic does.
inline absl::Time steady_to_time(absl::Duration since_epoch) {
  const absl::Time wall = gort::now();
  const auto steady = std::chrono::steady_clock::now().time_since_epoch();
  return wall + (since_epoch - from_chrono(steady));
}

// A std::chrono::time_point as an absl::Time (see the top of the file for
// the clocks it takes).
template <class Clock, class Dur>
absl::Time from_chrono(std::chrono::time_point<Clock, Dur> tp) {
  if constexpr (std::is_same_v<Clock, std::chrono::system_clock>) {
    return absl::UnixEpoch() + from_chrono(tp.time_since_epoch());
  } else if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>) {
    return steady_to_time(from_chrono(tp.time_since_epoch()));
  } else if constexpr (requires { { Clock::to_sys(tp) } -> chrono_time_point; }) {
    return from_chrono(Clock::to_sys(tp));
  } else {
    static_assert(internal::kDependentFalse<Clock>,
                  "gort::from_chrono: this clock's time points cannot be converted to absl::Time; use "
                  "std::chrono::system_clock, std::chrono::steady_clock, or a clock with a static "
                  "to_sys() (C++20's clock_cast protocol)");
    return absl::InfinitePast();
  }
}

// An absl::Duration that may also be initialized or assigned from any
// std::chrono::duration; the type of configuration fields that hold a
// duration (Config::time_slice, net::ServerConfig's timeouts). It is an
// absl::Duration (derived, with no state of its own): absl's operators and
// functions take it as they take one.
class Duration : public absl::Duration {
 public:
  constexpr Duration() = default;
  constexpr Duration(absl::Duration d) noexcept : absl::Duration(d) {}  // NOLINT: implicit by design
  template <chrono_duration D>
  Duration(D d) : absl::Duration(from_chrono(d)) {}  // NOLINT: implicit by design
};

static_assert(sizeof(Duration) == sizeof(absl::Duration) && alignof(Duration) == alignof(absl::Duration),
              "gort::Duration must keep absl::Duration's layout (it replaced absl::Duration in ABI structs)");

}  // namespace gort

// gort/time.hpp — Go's time package: sleep, timers, tickers.
//
//   gort::sleep(absl::Milliseconds(5));            // parks; costs no thread
//   auto t = gort::new_timer(absl::Seconds(1));
//   gort::select(gort::on_recv(t.chan(), [](auto) { /* fired */ }),
//                gort::on_recv(done, [&](auto) { t.stop(); }));
//   auto tick = gort::new_ticker(absl::Milliseconds(100));
//   for (absl::Time when : tick.chan()) { ... }     // never ends by itself: a
//                                                  // ticker's channel is never closed
//   gort::after_func(absl::Seconds(2), [] { ... }); // runs in its own goroutine
//
// Every call that takes an absl::Duration also takes a std::chrono
// duration (gort/chrono.hpp): `gort::sleep(5ms)`, `gort::after(1s)`,
// `t.reset(250ms)`. Channels carry absl::Time either way.
//
// Timers live in per-P heaps run by the scheduler; a sleeping goroutine is
// parked, not a thread. Firing is O(log n) in the number of timers of that
// P; stop and reset are O(log n) and safe against a concurrent firing.
//
// Timer and Ticker channels behave as Go's since Go 1.23 (without
// GODEBUG=asynctimerchan=1): once stop() or reset() returns, no
// value from before the call is received, so the old `if (!t.stop())
// drain(t.chan())` dance is unnecessary (and would block). A value that was
// delivered but not received counts as pending: stop() and reset() return
// true for it and discard it. A slow receiver still sees at most one value
// waiting (a Ticker drops the ticks it is late for), and len() and cap() of
// these channels read 0, as in Go. stop does not close the channel.
//
// Timer and Ticker are copyable handles to shared state. A Timer keeps
// running when all handles are gone, until it fires (after_func's f still
// runs). A Ticker stops by itself once no copy of it and no copy of its
// channel is left, as Go 1.23 collects a ticker nothing refers to: at once,
// or at the first tick after the last channel copy went. So
// `for (absl::Time t : gort::new_ticker(d).chan())` ticks for as long as
// the loop runs, and a Ticker dropped without stop() does not tick for
// ever.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "absl/time/time.h"
#include "gort/chan.hpp"
#include "gort/chrono.hpp"
#include "gort/detail/api.hpp"

namespace gort {

// The current time (Go's time.Now): absl::Now(), except on a goroutine of a
// synctest bubble (gort/synctest.hpp), where it is the bubble's fake clock
// (2000-01-01 00:00:00 UTC at the bubble's start, moving only when every
// goroutine of the bubble is durably blocked). Sleeps, timers, tickers,
// context deadlines and the pipe's deadlines (net::pipe) all run on this
// clock; measure time with it, not with absl::Now(), in code that a test
// may run in a bubble. Costs a thread-local read beside absl::Now().
GORT_API absl::Time now();
// now() - t and t - now() (Go's time.Since and time.Until).
inline absl::Duration since(absl::Time t) { return now() - t; }
inline absl::Duration until(absl::Time t) { return t - now(); }

// Parks the calling goroutine for at least d (returns at once if d <= 0).
// From a plain thread, sleeps the thread.
GORT_API void sleep(absl::Duration d);
template <chrono_duration D>
void sleep(D d) {
  gort::sleep(from_chrono(d));
}

class GORT_API Timer {
 public:
  Timer() = default;
  // The channel the time is sent on when the timer fires (nil for timers
  // made by after_func).
  Chan<absl::Time> chan() const;
  // Prevents the timer from firing. Returns true if the call stops it or
  // discards a value it had sent that was not yet received; false if it had
  // been stopped, or had fired and its value was received. For an
  // after_func timer: true if f will not run, false if it has started (or
  // the timer was stopped). Never parks.
  bool stop() const;
  // Changes the timer to fire after d, discarding any value not yet
  // received from the previous arming. Returns what stop() would have.
  bool reset(absl::Duration d) const;
  template <chrono_duration D>
  bool reset(D d) const {
    return reset(from_chrono(d));
  }

  struct State;

 private:
  friend Timer new_timer(absl::Duration d);
  friend Timer after_func(absl::Duration d, std::function<void()> f);
  explicit Timer(std::shared_ptr<State> s) : s_(std::move(s)) {}
  std::shared_ptr<State> s_;
};

// A Timer that sends the current time on its channel after d.
[[nodiscard]] GORT_API Timer new_timer(absl::Duration d);
// A Timer that, after d, calls f in its own goroutine.
GORT_API Timer after_func(absl::Duration d, std::function<void()> f);
// new_timer(d).chan().
[[nodiscard]] GORT_API Chan<absl::Time> after(absl::Duration d);

template <chrono_duration D>
[[nodiscard]] Timer new_timer(D d) {
  return gort::new_timer(from_chrono(d));
}
template <chrono_duration D>
Timer after_func(D d, std::function<void()> f) {
  return gort::after_func(from_chrono(d), std::move(f));
}
template <chrono_duration D>
[[nodiscard]] Chan<absl::Time> after(D d) {
  return gort::after(from_chrono(d));
}

class GORT_API Ticker {
 public:
  Ticker() = default;
  Chan<absl::Time> chan() const;
  // Turns the ticker off; no more ticks are received, not even one sent
  // before the call. The channel is not closed.
  void stop() const;
  // Stops the ticker and resets its period to d; the next tick received
  // comes after d. Panics `non-positive interval for Ticker.Reset` if d <= 0.
  void reset(absl::Duration d) const;
  template <chrono_duration D>
  void reset(D d) const {
    reset(from_chrono(d));
  }

 private:
  friend Ticker new_ticker(absl::Duration d);
  explicit Ticker(std::shared_ptr<Timer::State> s) : s_(std::move(s)) {}
  std::shared_ptr<Timer::State> s_;
};

// A Ticker that sends the time on its channel every d. Panics
// `non-positive interval for NewTicker` if d <= 0.
[[nodiscard]] GORT_API Ticker new_ticker(absl::Duration d);
template <chrono_duration D>
[[nodiscard]] Ticker new_ticker(D d) {
  return gort::new_ticker(from_chrono(d));
}

}  // namespace gort

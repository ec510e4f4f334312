// gort/synctest.hpp — Go 1.25's testing/synctest: run a test's goroutines
// in a bubble with a fake clock, so that code with timeouts, retries and
// tickers is tested in microseconds and without flakes (docs/testing.md).
//
//   TEST(Retry, BacksOffToTenMinutes) {
//     gort::run([] {
//       gort::synctest::test([] {
//         absl::Time start = gort::now();        // 2000-01-01 00:00:00 UTC
//         retry_with_backoff(op);                 // sleeps 1 s, 2 s, ... 10 min
//         EXPECT_EQ(gort::now() - start, absl::Minutes(17) + absl::Seconds(3));
//       });
//     });
//   }
//
// test(f) runs f in a new goroutine inside a bubble. Every goroutine it
// starts, and every goroutine those start, belongs to the bubble. Inside,
// time (gort::now(), sleeps, timers, tickers, after, after_func, context
// deadlines, net::pipe deadlines) is a fake clock that starts at
// 2000-01-01 00:00:00 UTC and moves only when every goroutine of the
// bubble is durably blocked, jumping straight to the next timer. test
// returns when every goroutine of the bubble has exited.
//
// Durably blocked means only the bubble itself can unblock it: a send,
// receive or select on channels made in the bubble (a select only when all
// its channels are), a nil channel or an empty select, a sleep, a bubble
// timer's channel, Cond::wait, and a WaitGroup, Mutex, RWMutex or
// Semaphore made in the bubble (the last three are gort's addition: Go
// counts only WaitGroups). I/O on kernel descriptors, gort::blocking, OS
// locks and objects made outside the bubble are not durable: the clock
// waits for them.
//
// Errors (panic_error, Go's texts):
//   - every goroutine of the bubble blocked with no timer left:
//     "deadlock: all goroutines in bubble are blocked", followed by their
//     tracebacks (each marked "synctest bubble N"); the goroutines stay
//     blocked (leaked);
//   - f returned, others blocked: "deadlock: main bubble goroutine has
//     exited but blocked goroutines remain" (time stops once f returns);
//   - a send, receive, select or close on a bubble's channel from outside
//     it: "send on synctest channel from outside bubble", ...; a stop or
//     reset of a bubble's timer from outside: "stop of synctest timer from
//     outside bubble", ... (Go 1.25 makes these fatal; gort panics, so that
//     a test can check them);
//   - test inside a bubble: "synctest.Run called from within a synctest
//     bubble"; wait outside one: "goroutine is not in a bubble"; two waits
//     at once: "wait already in progress".
// An exception f throws is rethrown by test once the bubble is done.
//
// Thread-safety: test runs on a goroutine (inside gort::run); bubbles may
// run side by side, and beside goroutines on real time. Costs: a bubble's
// goroutines take its lock at each durable block and wake-up; goroutines
// outside bubbles pay one predicted branch per status change.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "gort/detail/api.hpp"

namespace gort::synctest {

struct Options {
  // A seeded schedule (docs/testing.md, "Reproducible schedules"): every
  // scheduling choice for the bubble's goroutines — which runnable one runs
  // next, select's case order, yields at calls that may park — is drawn
  // from the seed, so the same seed replays the same interleaving. Needs
  // one P (Config::procs = 1; else a panic) and nothing outside the bubble
  // running meanwhile; the bubble's goroutines are never preempted, so one
  // that never parks keeps the P. Unset: the environment variable
  // GORT_SCHEDSEED if set, else the ordinary scheduler. On a failure (an
  // exception, a deadlock) test prints "synctest: schedule seed N
  // (GORT_SCHEDSEED=N replays it)" to stderr.
  std::optional<uint64_t> seed;
  // In a seeded bubble, the chance of a yield at each call that may park
  // (a channel operation, select, a lock, a sleep): more yields, more
  // interleavings explored.
  double yield_probability = 0.25;
  // The standard clocks read the fake clock too, on the bubble's
  // goroutines: std::chrono::system_clock and steady_clock, clock_gettime,
  // gettimeofday and time (docs/testing.md, "The standard clocks": what is
  // faked and what cannot be). Off: only gort::now() and gort's timers are
  // fake, as in Go.
  bool fake_std_clocks = false;
};

// Runs f in a bubble and waits for all of its goroutines (Go's
// synctest.Test without the *testing.T).
GORT_API void test(std::function<void()> f, Options options = {});
// Waits until every other goroutine of the caller's bubble is durably
// blocked or has exited (Go's synctest.Wait). The clock does not move.
GORT_API void wait();
// Whether the calling goroutine belongs to a bubble.
GORT_API bool in_bubble();

// In a seeded bubble: a hash of the goroutines run so far, in order (each
// named by its creation order in the bubble), which tells schedules
// apart. 0 outside a seeded bubble.
GORT_API uint64_t schedule_hash();
// In a seeded bubble: its seed (what GORT_SCHEDSEED would replay); else
// nullopt. libgort_gtest prints it when an expectation fails in the bubble.
GORT_API std::optional<uint64_t> seed();

// Runs test(f) under `runs` seeds, first_seed, first_seed + 1, ..., to find
// order-dependent bugs; returns each run's final schedule_hash, in order.
// Stops at the first run that throws: prints its seed (as test does) and
// rethrows. Needs one P, as a seeded test does.
struct ExploreOptions {
  int runs = 100;
  uint64_t first_seed = 1;
  double yield_probability = 0.25;
  bool fake_std_clocks = false;
};
GORT_API std::vector<uint64_t> explore(std::function<void()> f, ExploreOptions options = {});

}  // namespace gort::synctest

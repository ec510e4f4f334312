// tests/preempt/helpers.hpp — what the preemption suites share on top of
// tests/testing.hpp (still the one way into the runtime's internals).
//
//   - run_cfg(cfg, body): gort::run with a full Config (time slice, preempt)
//     and the same tear-down leak checks as run_checked.
//   - Watchdog: a plain thread that, if the test has not finished within a
//     bound, runs a rescue action (typically: tell the spinners to stop), so
//     a runtime that fails to preempt makes the test fail instead of hang.
//   - SKIP_WITHOUT_ASYNC_PREEMPTION() (tests/testing.hpp): skips where the build has none.
//   - self_async_preempts(): the calling goroutine's count of asynchronous
//     preemptions (G::async_preempts).
//
// Goroutines that spin under heavy preemption record problems in atomics and
// the main goroutine checks them afterwards: gtest is linked statically, so
// its code is in the (preemptible) executable, and a failing EXPECT takes an
// OS mutex that a preempted goroutine could hold.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include <gtest/gtest-spi.h>

#include "gort/preempt.hpp"
#include "tests/testing.hpp"

namespace gort::test {

inline gort::Config preempt_cfg(int procs, absl::Duration slice = absl::Milliseconds(10),
                                bool preempt = true) {
  gort::Config cfg;
  cfg.procs = procs;
  cfg.time_slice = slice;
  cfg.preempt = preempt;
  return cfg;
}

// gort::run(body, cfg) with run_checked's leak checks.
template <class F>
void run_cfg(const gort::Config& cfg, F&& body, bool all_exit = true) {
  ResourceSnapshot before;
  gort::run(
      [&] {
        body();
        if (all_exit) expect_goroutines_settle(1);
      },
      cfg);
  expect_no_leaks(before);
}

// For GORT_EXPECT_SUBPROCESS_OK: gtest does not show the failures of a
// death-test child, only its stderr and exit status. reporting(child) runs
// child with every thread's results intercepted, prints the failures on
// stderr and exits with 1 if there were any.
template <class F>
auto reporting(F child) {
  return [child]() mutable {
    ::testing::TestPartResultArray results;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &results);
      child();
    }
    int failed = 0;
    for (int i = 0; i < results.size(); i++) {
      const ::testing::TestPartResult& r = results.GetTestPartResult(i);
      if (!r.failed()) continue;
      failed++;
      std::fprintf(stderr, "%s:%d: Failure\n%s\n", r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.message());
    }
    if (failed > 0) {
      std::fflush(nullptr);
      ::_exit(1);
    }
  };
}

inline uint32_t self_async_preempts() {
  internal::G* g = internal::getg();
  return g != nullptr ? g->async_preempts : 0;
}

// Runs `rescue` on a plain thread if disarm() has not been called within
// `limit`; fired() then says so. Joins in its destructor.
class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds limit, std::function<void()> rescue)
      : thread_([this, limit, rescue = std::move(rescue)] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return disarmed_; })) {
            fired_.store(true);
            lock.unlock();
            rescue();
            // Stay alive until disarmed, so that thread counts taken
            // around a gort::run do not see this thread vanish.
            lock.lock();
            cv_.wait(lock, [this] { return disarmed_; });
          }
        }) {}
  ~Watchdog() {
    disarm();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void disarm() {
    std::lock_guard<std::mutex> lock(mu_);
    disarmed_ = true;
    cv_.notify_all();
  }
  bool fired() const { return fired_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

// A call-free spin loop (the shape docs/preemption.md promises to preempt): counts
// until *flag turns false. noinline so its loop is one tight block of the
// executable's text.
__attribute__((noinline)) inline uint64_t spin_while(const std::atomic<bool>& flag) {
  uint64_t x = 0;
  while (flag.load(std::memory_order_relaxed)) x++;
  return x;
}

// Spins (call-free inner loop) for about `d` of wall time; the clock is
// read every few thousand iterations.
__attribute__((noinline)) inline uint64_t spin_for(std::chrono::nanoseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  uint64_t x = 0;
  do {
    for (int i = 0; i < 4096; i++) {
      x += static_cast<uint64_t>(i) ^ (x >> 3);
      asm volatile("" : "+r"(x));
    }
  } while (std::chrono::steady_clock::now() < end);
  return x;
}

}  // namespace gort::test

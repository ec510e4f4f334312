// tests/stdlib/helpers.hpp — what the stdlib suites share on top of
// tests/testing.hpp (which stays the one way into the runtime's internals).
//
//   - GORT_INSTANTIATE_STDLIB_PROCS(Suite): runs each TEST_P of a suite
//     deriving from gort::test::ProcsTest with 1, 2 and 4 Ps.
//   - Tracked: a payload that counts its constructions and destructions and
//     notices double destruction and use after destruction; it has no
//     default constructor.
//   - KeepAwake: a goroutine that keeps the deadlock detector quiet.
//   - on_threads_and_goroutines(body): runs body on two plain threads and
//     two goroutines at once and waits for all four.
//   - Parked: lets a test wait until a goroutine it started is
//     parked for a given reason (on a channel, a select, a Mutex...), so that
//     "the waiter was already blocked when X happened" is a fact, not a hope.
//
// The suites live outside namespace gort so that fixture names (Chan, Mutex,
// ...) do not hide the library's types; they spell gort:: in full.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "gort/chan.hpp"
#include "gort/sync.hpp"
#include "tests/testing.hpp"

#define GORT_INSTANTIATE_STDLIB_PROCS(Suite) \
  INSTANTIATE_TEST_SUITE_P(Procs, Suite, ::testing::Values(1, 2, 4), ::gort::test::procs_name)

namespace gort::test {

using internal::WaitReason;

// ---- a payload that audits its own lifetime ----

struct Tracked {
  static inline std::atomic<int64_t> live{0};
  static inline std::atomic<int64_t> constructed{0};
  static inline std::atomic<int64_t> destroyed{0};
  // Destroying, moving from or copying an object that is not alive.
  static inline std::atomic<int64_t> misuses{0};

  static void reset() {
    live = 0;
    constructed = 0;
    destroyed = 0;
    misuses = 0;
  }

  explicit Tracked(int v) : value(v) { born(); }
  Tracked(const Tracked& o) : value(o.value) {
    o.check();
    born();
  }
  Tracked(Tracked&& o) noexcept : value(o.value) {
    o.check();
    o.value = -1;
    born();
  }
  Tracked& operator=(const Tracked& o) {
    o.check();
    check();
    value = o.value;
    return *this;
  }
  Tracked& operator=(Tracked&& o) noexcept {
    o.check();
    check();
    value = o.value;
    o.value = -1;
    return *this;
  }
  ~Tracked() {
    if (magic != kAlive) {
      misuses.fetch_add(1);
    } else {
      live.fetch_sub(1);
    }
    magic = kDead;  // volatile: the store survives dead-store elimination
    destroyed.fetch_add(1);
  }

  int value;

 private:
  static constexpr uint32_t kAlive = 0x600d600d;
  static constexpr uint32_t kDead = 0xdeaddead;
  void born() {
    magic = kAlive;
    live.fetch_add(1);
    constructed.fetch_add(1);
  }
  void check() const {
    if (magic != kAlive) misuses.fetch_add(1);
  }
  volatile uint32_t magic = 0;
};

// ---- waiting for a goroutine to park ----

// True if g is parked for `reason`. The G must still exist (tests only ask
// about goroutines that cannot have exited yet).
inline bool is_parked(internal::G* g, WaitReason reason) {
  if (g == nullptr) return false;
  if (g->status.load(std::memory_order_acquire) != internal::GStatus::kWaiting) return false;
  return std::atomic_ref<WaitReason>(g->waitreason).load(std::memory_order_relaxed) == reason;
}

// A goroutine records itself with mark() right before it blocks; the test
// then waits for it with wait(reason).
class Parked {
 public:
  void mark() { g_.store(internal::getg(), std::memory_order_release); }
  bool now(WaitReason reason) const { return is_parked(g_.load(std::memory_order_acquire), reason); }
  // Bounded: false if the goroutine did not park within the limit.
  bool wait(WaitReason reason, std::chrono::milliseconds limit = std::chrono::seconds(20)) const {
    return eventually([&] { return now(reason); }, limit);
  }

 private:
  std::atomic<internal::G*> g_{nullptr};
};

// Keeps one goroutine running (it yields in a loop) for the scope of the
// object. While it runs the deadlock detector stays quiet, so a test can
// check what plain threads do with channels separately from whether the
// detector knows about them (ChanThread.PlainThread*DeadlockDetector* tests).
class KeepAwake {
 public:
  KeepAwake() {
    gort::go([this] {
      while (!stop_.load(std::memory_order_acquire)) gort::yield();
      exited_.set();
    });
  }
  ~KeepAwake() {
    stop_.store(true, std::memory_order_release);
    exited_.wait();
  }
  KeepAwake(const KeepAwake&) = delete;
  KeepAwake& operator=(const KeepAwake&) = delete;

 private:
  std::atomic<bool> stop_{false};
  Event exited_;
};

// Runs body on two plain threads and two goroutines at once (a sync type
// must serve both kinds of caller side by side) and returns when all four
// are done. Called in a goroutine, with a KeepAwake alive if the goroutines
// may all park while only the threads can wake them.
template <class F>
void on_threads_and_goroutines(F&& body) {
  auto finished = gort::make_chan<int>(4);
  auto run = [&body, finished] {
    body();
    finished.send(1);
  };
  std::thread t1(run);
  std::thread t2(run);
  for (int g = 0; g < 2; g++) gort::go(run);
  for (int i = 0; i < 4; i++) (void)finished.recv();
  t1.join();
  t2.join();
}

// Runs f and returns the what() of the gort::panic_error it throws, or
// "<no panic>" / "<other exception>".
template <class F>
std::string panic_message(F&& f) {
  try {
    f();
  } catch (const gort::panic_error& e) {
    return e.what();
  } catch (...) {
    return "<other exception>";
  }
  return "<no panic>";
}

inline gort::Config procs_cfg(int procs) {
  gort::Config cfg;
  cfg.procs = procs;
  return cfg;
}

}  // namespace gort::test

// tests/stdlib/sync/may_park_test.cpp — the rules for calls that may park,
// checked before they can turn into a hang or a late surprise:
//   - outside gort::run a plain thread that would wait (there is no
//     goroutine that could ever wake it) gets panic_error with the text
//     gort::go gives, while what does not wait still works
//     (gmp/sudog.hpp, may_wait);
//   - with Config::park_check or GORT_DEBUG=parkcheck=1, a call that may
//     park made under an OS lock is a fatal error even when it would not
//     park this time (gmp/lock.hpp, preempt_check_may_park).
// Every child that could hang has a watchdog (GORT_EXPECT_SUBPROCESS_OK).
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "gort/gort.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

constexpr const char* kNotRunning = ": the runtime is not running (call it inside gort::run)";

// Runs f, which must throw panic_error whose text is `op` + kNotRunning.
template <class F>
void expect_not_running(const std::string& op, F&& f) {
  try {
    f();
    ADD_FAILURE() << op << ": returned instead of panicking";
  } catch (const gort::panic_error& e) {
    EXPECT_EQ(std::string(e.what()), op + kNotRunning);
  }
}

// ---- outside gort::run ----

TEST(OutsideRun, WaitingPanicsAtOnceInsteadOfHanging) {
  auto child = [] {
    auto unbuffered = gort::make_chan<int>();
    expect_not_running("chan send", [&] { unbuffered.send(1); });
    expect_not_running("chan receive", [&] { (void)unbuffered.recv(); });
    auto full = gort::make_chan<int>(1);
    full.send(1);
    expect_not_running("chan send", [&] { full.send(2); });
    auto empty = gort::make_chan<int>(1);
    expect_not_running("chan receive", [&] { (void)empty.recv(); });
    expect_not_running("select", [&] {
      gort::select(gort::on_recv(empty, [](std::optional<int>) {}), gort::on_send(unbuffered, 3, [] {}));
    });
    gort::Chan<int> nil;
    expect_not_running("chan receive (nil chan)", [&] { (void)nil.recv(); });
    expect_not_running("select (no cases)", [] { gort::select(); });

    gort::WaitGroup wg;
    wg.add(1);
    expect_not_running("sync.WaitGroup.Wait", [&] { wg.wait(); });
    // A waiter that panicked may have left its count in the object (as a
    // Go program that recovers from a panic mid-Lock would): each object
    // here serves one check only.
    gort::Mutex held;
    held.lock();
    expect_not_running("sync.Mutex.Lock", [&] { held.lock(); });
    gort::Semaphore sem(1);
    sem.acquire(1);
    expect_not_running("semacquire", [&] { sem.acquire(1); });
    sem.release(1);
    gort::Mutex mu;
    gort::Cond cond(mu);
    mu.lock();
    expect_not_running("sync.Cond.Wait", [&] { cond.wait(); });
  };
  GORT_EXPECT_SUBPROCESS_OK(20, child);
}

TEST(OutsideRun, WhatDoesNotWaitStillWorks) {
  auto child = [] {
    // Before the run: fill a buffer, take an uncontended lock, count.
    auto ch = gort::make_chan<int>(2);
    ch.send(1);
    ch.send(2);
    EXPECT_EQ(gort::select(gort::on_send(ch, 3), gort::on_default()), 1u);  // full: default
    EXPECT_EQ(ch.recv(), 1);
    gort::Mutex mu;
    mu.lock();
    mu.unlock();
    gort::WaitGroup wg;
    wg.add(1);
    wg.done();
    wg.wait();
    int got = 0;
    gort::run([&] {
      got = *ch.recv();
      ch.send(7);  // for after the run
    });
    EXPECT_EQ(got, 2);
    // After it: what is buffered is still there; a wait panics again.
    EXPECT_EQ(ch.recv(), 7);
    expect_not_running("chan receive", [&] { (void)ch.recv(); });
    ch.close();
    EXPECT_EQ(ch.recv(), std::nullopt);  // closed and drained: no wait
  };
  GORT_EXPECT_SUBPROCESS_OK(20, child);
}

TEST(OutsideRun, APlainThreadDuringARunStillWaits) {
  // The rule is about having no run: a plain thread during one waits for
  // a goroutine as before (docs/channels.md, "Calling from plain threads").
  auto child = [] {
    gort::run([] {
      auto ch = gort::make_chan<int>();
      std::thread t([ch] { EXPECT_EQ(ch.recv(), 5); });
      gort::sleep(absl::Milliseconds(5));
      ch.send(5);
      gort::blocking([&] { t.join(); });
    });
  };
  GORT_EXPECT_SUBPROCESS_OK(20, child);
}

// ---- park_check: the OS-lock rule checked on every call that may park ----

// A goroutine that holds a std::mutex around a call that does not park
// this time (a buffered send with room, a receive with a value ready).
void latent_mistake() {
  std::mutex os_lock;
  auto ch = gort::make_chan<int>(1);
  std::lock_guard<std::mutex> hold(os_lock);
  ch.send(1);
  (void)ch.recv();
}

TEST(ParkCheck, OffALatentMistakePassesUnnoticed) {
  auto child = [] { gort::run([] { latent_mistake(); }); };
  GORT_EXPECT_SUBPROCESS_OK(20, child);
}

TEST(ParkCheck, ConfigMakesALatentMistakeFatalOnTheFirstRun) {
  EXPECT_EXIT(
      {
        gort::Config cfg;
        cfg.park_check = true;
        gort::run([] { latent_mistake(); }, cfg);
        ::_exit(0);
      },
      ::testing::ExitedWithCode(2), "fatal error: chan send while holding an OS lock");
}

TEST(ParkCheck, GortDebugTurnsItOn) {
  EXPECT_EXIT(
      {
        ::setenv("GORT_DEBUG", "parkcheck=1", 1);
        gort::run([] {
          std::mutex os_lock;
          gort::WaitGroup wg;  // counter 0: wait returns at once
          std::lock_guard<std::mutex> hold(os_lock);
          wg.wait();
        });
        ::_exit(0);
      },
      ::testing::ExitedWithCode(2), "fatal error: sync.WaitGroup.Wait while holding an OS lock");
}

TEST(ParkCheck, InsideBlockingOnlyACallThatParksIsAnError) {
  // blocking's f may ready a goroutine with a send that has room (the
  // docs allow calls that do not park there); park_check is about OS locks.
  auto child = [] {
    gort::Config cfg;
    cfg.park_check = true;
    gort::run(
        [] {
          auto ch = gort::make_chan<int>(1);
          gort::blocking([&] { ch.send(1); });
          EXPECT_EQ(ch.recv(), 1);
        },
        cfg);
  };
  GORT_EXPECT_SUBPROCESS_OK(20, child);
  EXPECT_EXIT(
      {
        gort::Config cfg;
        cfg.park_check = true;
        gort::run([] { gort::blocking([] { gort::sleep(absl::Milliseconds(1)); }); }, cfg);
        ::_exit(0);
      },
      ::testing::ExitedWithCode(2), "fatal error: goroutine parked inside gort::blocking");
}

TEST(ParkCheck, CallsThatObeyTheRulesRunAsBefore) {
  // The checks only read: a program that keeps the rules behaves the same
  // with them on, with several Ps and every kind of call involved.
  for (int procs : {1, 2, 4}) {
    gort::Config cfg;
    cfg.procs = procs;
    cfg.park_check = true;
    int64_t total = 0;
    gort::run(
        [&] {
          auto ch = gort::make_chan<int>(8);
          gort::Mutex mu;
          gort::WaitGroup wg;
          for (int w = 0; w < 8; w++) {
            wg.add(1);
            gort::go([&] {
              for (int v; (v = ch.recv().value_or(-1)) >= 0;) {
                std::lock_guard<gort::Mutex> g(mu);
                total += v;
              }
              wg.done();
            });
          }
          for (int i = 1; i <= 1000; i++) ch.send(i);
          ch.close();
          wg.wait();
          gort::sleep(absl::Microseconds(10));
        },
        cfg);
    EXPECT_EQ(total, 500500) << procs << " Ps";
  }
}

}  // namespace
}  // namespace gort_stdlib_test

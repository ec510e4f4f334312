// tests/gmp/switch_test.cpp — what a context switch (gmp/switch.cpp) must
// carry with the goroutine: errno and the C++ exception globals (the caught
// exceptions stack and std::uncaught_exceptions()), across Ms.
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

#include "tests/testing.hpp"

namespace gort::test {
namespace {

class Switch : public ProcsTest {};
GORT_INSTANTIATE_PROCS(Switch);

// Runs `workers` goroutines, each calling body(worker, sw) where sw() is a
// switch point: a yield, or a park that a plain thread readies. A goroutine
// readied by a plain thread goes to the global queue and resumes on whichever
// M takes it, so with several Ps many switch points resume on another M.
// Returns how many did.
//
// Main does not park meanwhile: while every goroutine waits for the plain
// thread, the runtime would (rightly, by its rules) report a deadlock.
template <class Body>
int64_t storm(int workers, Body body) {
  Bouncer bouncer;
  Countdown workers_done(workers);
  std::atomic<int64_t> migrations{0};
  std::thread server([&] { bouncer.serve(); });
  for (int w = 0; w < workers; w++) {
    gort::go([&, w] {
      int n = 0;
      auto sw = [&] {
        internal::M* before = current_m();
        if (n++ % 4 == 3) {
          gort::yield();
        } else {
          bouncer.bounce();
        }
        if (current_m() != before) migrations.fetch_add(1, std::memory_order_relaxed);
      };
      body(w, sw);
      workers_done.done();
    });
  }
  bool all_done = eventually([&] { return workers_done.left() == 0; }, std::chrono::seconds(120));
  EXPECT_TRUE(all_done);
  // The last worker sets the Countdown's event after its count reached 0:
  // wait for that too, or this frame (and the Countdown) is gone under it.
  // (The race detector caught the use after scope.) Main may park now: the
  // last worker is runnable, not waiting for the plain thread.
  if (all_done) workers_done.wait();
  bouncer.stop();
  server.join();
  return migrations.load();
}

// storm() again until some goroutine has changed M (with several Ps), so
// that the per-goroutine state really crossed threads; a short storm on a
// loaded machine can finish without a single migration. *rounds: storms run.
template <class Body>
int64_t storm_migrating(int workers, Body body, int* rounds) {
  int64_t migrations = 0;
  *rounds = 0;
  do {
    migrations += storm(workers, body);
    ++*rounds;
  } while (gort::procs() > 1 && migrations == 0 && *rounds < 20);
  return migrations;
}

TEST_P(Switch, ErrnoIsPerGoroutine) {
  run_test([this] {
    std::atomic<int64_t> wrong{0};
    int rounds = 0;
    int64_t migrations = storm_migrating(64, [&](int w, auto& sw) {
      for (int r = 0; r < 200; r++) {
        int v = w * 1000 + r + 1;
        write_errno(v);
        sw();
        if (read_errno() != v) wrong.fetch_add(1, std::memory_order_relaxed);
      }
    }, &rounds);
    EXPECT_EQ(wrong.load(), 0) << "errno changed across a switch (" << migrations
                               << " migrations)";
    if (procs() > 1) {
      EXPECT_GT(migrations, 0) << "no goroutine ever changed M";
    }
    RecordProperty("migrations", static_cast<int>(migrations));
  });
}

TEST_P(Switch, NewGoroutineStartsWithZeroErrno) {
  run_test([] {
    write_errno(1234);
    std::atomic<int> seen{-1};
    Countdown cd(1);
    gort::go([&] {
      seen = read_errno();
      write_errno(77);
      cd.done();
    });
    cd.wait();
    EXPECT_EQ(seen.load(), 0);
    EXPECT_EQ(read_errno(), 1234);
  });
}

// A goroutine parks inside a catch block and resumes, possibly on another
// M: std::current_exception() still refers to its own exception. Goroutines
// that run in between (on that M) see no current exception.
TEST_P(Switch, CaughtExceptionSurvivesParkInCatch) {
  run_test([this] {
    std::atomic<int64_t> wrong_own{0}, wrong_other{0}, wrong_after{0};
    int rounds = 0;
    int64_t migrations = storm_migrating(48, [&](int w, auto& sw) {
      for (int r = 0; r < 40; r++) {
        if (w % 3 == 0) {
          // An observer: between switches, nothing is being handled.
          if (std::current_exception() || std::uncaught_exceptions() != 0) {
            wrong_other.fetch_add(1, std::memory_order_relaxed);
          }
          sw();
          if (std::current_exception() || std::uncaught_exceptions() != 0) {
            wrong_other.fetch_add(1, std::memory_order_relaxed);
          }
          continue;
        }
        std::string name = "goroutine " + std::to_string(w) + " round " + std::to_string(r);
        try {
          throw std::runtime_error(name);
        } catch (const std::runtime_error& e) {
          sw();
          std::exception_ptr p = std::current_exception();
          bool ok = false;
          if (p) {
            try {
              std::rethrow_exception(p);
            } catch (const std::runtime_error& again) {
              ok = &again == &e && name == again.what();
            } catch (...) {
            }
          }
          if (!ok || std::uncaught_exceptions() != 0) wrong_own.fetch_add(1);
          // Nested: park inside a second handler, then the outer one is
          // still there.
          try {
            throw 42;
          } catch (int v) {
            sw();
            if (v != 42 || !std::current_exception()) wrong_own.fetch_add(1);
          }
          sw();
          if (std::current_exception() == nullptr || e.what() != name) wrong_own.fetch_add(1);
        }
        if (std::current_exception()) wrong_after.fetch_add(1);
      }
    }, &rounds);
    EXPECT_EQ(wrong_own.load(), 0) << "a goroutine lost or swapped its caught exception";
    EXPECT_EQ(wrong_other.load(), 0) << "a goroutine saw another goroutine's exception";
    EXPECT_EQ(wrong_after.load(), 0) << "an exception stayed current after its catch block";
    if (procs() > 1) {
      EXPECT_GT(migrations, 0);
    }
    RecordProperty("migrations", static_cast<int>(migrations));
    EXPECT_FALSE(std::current_exception());
  });
}

// A goroutine parks in a destructor that runs during stack unwinding:
// std::uncaught_exceptions() stays 1 for it, wherever it resumes, and is 0
// for everyone else.
TEST_P(Switch, UncaughtExceptionsSurviveParkDuringUnwinding) {
  run_test([this] {
    std::atomic<int64_t> wrong_own{0}, wrong_other{0}, caught{0};
    int rounds = 0;
    int64_t migrations = storm_migrating(48, [&](int w, auto& sw) {
      for (int r = 0; r < 40; r++) {
        if (w % 3 == 0) {
          if (std::uncaught_exceptions() != 0) wrong_other.fetch_add(1);
          sw();
          if (std::uncaught_exceptions() != 0 || std::current_exception()) wrong_other.fetch_add(1);
          continue;
        }
        struct ParkInDtor {
          decltype(sw)& sw_;
          std::atomic<int64_t>& wrong_;
          ~ParkInDtor() {
            if (std::uncaught_exceptions() != 1) wrong_.fetch_add(1);
            sw_();
            if (std::uncaught_exceptions() != 1) wrong_.fetch_add(1);
            sw_();
            if (std::uncaught_exceptions() != 1) wrong_.fetch_add(1);
          }
        };
        try {
          ParkInDtor guard{sw, wrong_own};
          throw std::runtime_error("unwinding " + std::to_string(w));
        } catch (const std::runtime_error& e) {
          if (std::string(e.what()) == "unwinding " + std::to_string(w)) caught.fetch_add(1);
          if (std::uncaught_exceptions() != 0) wrong_own.fetch_add(1);
        }
      }
    }, &rounds);
    EXPECT_EQ(wrong_own.load(), 0) << "uncaught_exceptions() changed across a switch in a destructor";
    EXPECT_EQ(wrong_other.load(), 0) << "a goroutine saw another goroutine's unwinding";
    EXPECT_EQ(caught.load(), 32 * 40 * rounds);
    if (procs() > 1) {
      EXPECT_GT(migrations, 0);
    }
    RecordProperty("migrations", static_cast<int>(migrations));
  });
}

// An exception thrown and caught entirely inside a goroutine, across
// switches, is an ordinary C++ exception: nothing escapes.
TEST_P(Switch, ExceptionCaughtAfterSwitchesInsideGoroutine) {
  run_test([] {
    std::atomic<int> caught{0};
    Countdown cd(100);
    for (int i = 0; i < 100; i++) {
      gort::go([&, i] {
        try {
          gort::yield();
          if (i >= 0) throw gort::panic_error("recovered " + std::to_string(i));
        } catch (const gort::panic_error& e) {
          gort::yield();
          if (std::string(e.what()) == "recovered " + std::to_string(i)) caught.fetch_add(1);
        }
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(caught.load(), 100);
  });
}

}  // namespace
}  // namespace gort::test

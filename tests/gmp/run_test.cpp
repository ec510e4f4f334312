// tests/gmp/run_test.cpp — gort::run (gmp/run.cpp): results, misuse,
// GORT_MAXPROCS, and shutdown with goroutines left behind.
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmp/sched.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

class Run : public ProcsTest {};
GORT_INSTANTIATE_PROCS(Run);

TEST(RunResult, ReturnsMainsInt) {
  ResourceSnapshot before;
  gort::Config cfg;
  cfg.procs = 2;
  EXPECT_EQ(gort::run([] { return 42; }, cfg), 42);
  EXPECT_EQ(gort::run([] { return -7; }, cfg), -7);
  EXPECT_EQ(gort::run([] {}, cfg), 0);
  int calls = 0;
  EXPECT_EQ(gort::run([&] { return ++calls; }, cfg), 1);
  EXPECT_EQ(calls, 1);
  expect_no_leaks(before);
}

TEST(RunResult, MainRunsAsGoroutineOneOnTheCallingThreadFirst) {
  int64_t id = -1;
  bool in_g = false;
  gort::run([&] {
    id = gort::goroutine_id();
    in_g = gort::in_goroutine();
  });
  EXPECT_EQ(id, 1);
  EXPECT_TRUE(in_g);
}

TEST(RunResult, RunsAgainAfterReturning) {
  ResourceSnapshot before;
  for (int procs : {1, 4, 2, 8, 1}) {
    std::atomic<int> n{0};
    gort::Config cfg;
    cfg.procs = procs;
    int r = gort::run(
        [&] {
          EXPECT_EQ(gort::procs(), procs);
          EXPECT_EQ(gort::goroutine_id(), 1);
          Countdown cd(100);
          for (int i = 0; i < 100; i++) {
            gort::go([&] {
              n.fetch_add(1);
              cd.done();
            });
          }
          cd.wait();
          return n.load();
        },
        cfg);
    EXPECT_EQ(r, 100);
  }
  expect_no_leaks(before);
}

// Each run builds its scheduler state fresh and its tear-down empties it
// again (gmp/run.cpp): what one run leaves behind (abandoned goroutines, a
// number of Ps the program chose, its counts) shows neither between runs
// nor in the next run. In a child: the environment is the test's own.
TEST(RunFreshState, NothingCarriesOverToTheNextRun) {
  auto child = [] {
    unsetenv("GORT_MAXPROCS");
    static Event never[8];
    gort::Config cfg;
    cfg.procs = 2;
    gort::run(
        [] {
          for (Event& e : never) gort::go([&e] { e.wait(); });
          EXPECT_EQ(gort::set_procs(3), 2);
          EXPECT_TRUE(internal::sched.custom_procs.load());
          EXPECT_TRUE(eventually([] {
            for (const Event& e : never) {
              if (!e.has_waiter()) return false;
            }
            return true;
          }));
        },
        cfg);
    // Between runs: nothing of the run is reachable.
    EXPECT_FALSE(internal::runtime.running.load());
    EXPECT_EQ(gort::procs(), 0);
    EXPECT_EQ(gort::num_goroutine(), 0);
    {
      internal::MutexLock lock(internal::sched.lock);
      EXPECT_TRUE(internal::sched.allm.empty());
      EXPECT_EQ(internal::sched.allg, nullptr);
      EXPECT_EQ(internal::sched.nallg, 0);
      EXPECT_EQ(internal::sched.pidle, nullptr);
    }
    EXPECT_EQ(internal::sched.allp.allocated(), 0);
    EXPECT_TRUE(internal::sched.stopping.load());
    EXPECT_THROW(gort::go([] {}), gort::panic_error);
    // The next run: the default number of Ps again, and only its own
    // goroutines.
    int default_procs = gort::run(
        [] {
          EXPECT_FALSE(internal::sched.custom_procs.load());
          EXPECT_EQ(gort::goroutine_id(), 1);
          EXPECT_EQ(gort::num_goroutine(), 1);
          gort::RuntimeStats st = gort::runtime_stats();
          EXPECT_EQ(st.goroutines_allocated, 1);
          EXPECT_EQ(st.stall_reports, 0);
          EXPECT_FALSE(internal::sched.gcwaiting.load());
          EXPECT_FALSE(internal::sched.world_owner.load());
          return gort::procs() == internal::default_procs() ? 1 : 0;
        },
        gort::Config{});
    EXPECT_EQ(default_procs, 1);
  };
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

// A plain thread's go() is counted (Runtime::external_go) from before it
// looks whether a run is under way: runs that start and end meanwhile must
// neither lose the count nor free what the call uses. Each call starts a
// goroutine, is dropped or panics; every run returns, and the count ends
// at zero.
TEST(RunFreshState, PlainThreadGoAcrossRuns) {
  auto child = [] {
    std::atomic<bool> stop{false};
    std::atomic<int> started{0};
    std::thread t([&] {
      while (!stop.load()) {
        try {
          gort::go([&] { started.fetch_add(1); });
        } catch (const gort::panic_error&) {
        }
      }
    });
    gort::Config cfg;
    cfg.procs = 2;
    for (int round = 0; round < 30; round++) {
      gort::run([] { gort::yield(); }, cfg);
    }
    stop = true;
    t.join();
    EXPECT_EQ(internal::runtime.external_go.load(), 0);
    EXPECT_EQ(internal::runtime.external_ops.load(), 0);
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

TEST_P(Run, NestedRunPanics) {
  run_test([this] {
    bool threw = false;
    try {
      gort::run([] {});
    } catch (const gort::panic_error& e) {
      threw = true;
      EXPECT_NE(std::string(e.what()).find("already running"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(threw);
    // The runtime is unharmed.
    EXPECT_EQ(gort::procs(), procs());
    Countdown cd(1);
    gort::go([&] { cd.done(); });
    cd.wait();
  });
}

TEST(RunMisuse, ConcurrentRunFromAnotherThreadPanics) {
  std::atomic<bool> threw{false};
  gort::run([&] {
    std::thread t([&] {
      try {
        gort::run([] {});
      } catch (const gort::panic_error&) {
        threw = true;
      }
    });
    t.join();
  });
  EXPECT_TRUE(threw.load());
}

// Every area plugs into the core through SchedHooks (stdlib/run_main.cpp);
// a run with one left unwired would lose it silently (no poller, no sysmon,
// no tracebacks): it is refused by name.
TEST(RunMisuse, UnwiredSchedHookIsAFatalErrorNamingIt) {
  gort::internal::SchedHooks hooks;  // nothing wired
  EXPECT_EXIT(
      {
        ::alarm(30);
        gort::internal::run_scheduler([](void*, int*) {}, nullptr, gort::Config{}, hooks);
      },
      ::testing::ExitedWithCode(2), "SchedHooks::netpoll is not wired(.|\n)*fatal error: gort::run: an area");
}

TEST(RunMisuse, GoOutsideRunPanics) {
  EXPECT_THROW(gort::go([] {}), gort::panic_error);
  EXPECT_THROW(gort::go([](int) {}, 1), gort::panic_error);
}

// A closure that cannot be started must not leak, whichever storage path
// `go` takes (inline in the G, or on the heap for large ones).
TEST(RunMisuse, GoOutsideRunDoesNotLeakTheClosure) {
  auto token = std::make_shared<int>(0);
  EXPECT_THROW(gort::go([token] {}), gort::panic_error);
  EXPECT_EQ(token.use_count(), 1) << "inline closure leaked";
  struct Big {
    std::shared_ptr<int> t;
    char pad[256] = {};
    void operator()() {}
  };
  EXPECT_THROW(gort::go(Big{token}), gort::panic_error);
  EXPECT_EQ(token.use_count(), 1) << "heap-allocated closure leaked when go() panicked";
}

// A plain thread keeps calling go() while run shuts down: each call starts
// a goroutine (before main returns), is dropped (while the runtime stops)
// or panics (once run has returned); none may touch the runtime's freed
// state or start threads nobody joins. In a subprocess: the failure mode is
// a fatal error or a crash.
TEST(RunMisuse, GoFromPlainThreadRacingShutdown) {
  auto child = [&] {
    for (int round = 0; round < 50; round++) {
      ResourceSnapshot before;
      std::atomic<bool> stop{false};
      std::atomic<int> threw{0};
      std::atomic<int> started{0};
      std::thread t;
      gort::Config cfg;
      cfg.procs = 2;
      gort::run(
          [&] {
            t = std::thread([&] {
              while (!stop.load()) {
                try {
                  gort::go([&] { started.fetch_add(1); });
                } catch (const gort::panic_error&) {
                  threw.fetch_add(1);
                  return;
                }
              }
            });
            eventually([&] { return started.load() > 0; });
          },
          cfg);
      // Once run has returned, go() from the plain thread must panic.
      EXPECT_TRUE(eventually([&] { return threw.load() > 0; }));
      stop = true;
      t.join();
      EXPECT_EQ(threw.load(), 1);
      expect_no_leaks(before);
    }
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

// Go abandons goroutines still around when main returns. run must still
// return, join its threads, destroy the closures of goroutines that never
// started, and leave a runtime that can run again.
TEST_P(Run, ShutdownWithParkedAndUnstartedGoroutines) {
  auto unstarted_token = std::make_shared<int>(0);
  ResourceSnapshot before;
  gort::Config cfg;
  cfg.procs = procs();
  // With several Ps another M may steal one of the "unstarted" goroutines
  // below and start it. Without asynchronous preemption it then runs to its
  // end (and destroys its closure) before that M sees the runtime stop; with
  // it, a preemption could leave it started and unfinished, and a started
  // goroutine still around at the end is abandoned with its closure, as in
  // Go (seen under ASan on a loaded host). Keeping the other Ps busy with
  // goroutines that cannot be preempted does not do it either: main's own P
  // may run one of them, and the M that sysmon then wakes to steal from
  // that P's queue takes these too.
  cfg.preempt = false;
  auto gate = std::make_unique<Gate>();  // never opened
  std::atomic<int> parked{0};
  gort::run(
      [&] {
        // Parked forever.
        for (int i = 0; i < 100; i++) {
          gort::go([&] {
            parked.fetch_add(1);
            gate->wait();
            ADD_FAILURE() << "a parked goroutine was resumed";
          });
        }
        ASSERT_TRUE(eventually([&] { return gate->waiting() == 100; }));
        // Never started: queued on this P (or stolen and run to the end).
        for (int i = 0; i < 50; i++) {
          gort::go([unstarted_token] { (void)unstarted_token; });
        }
        EXPECT_GE(gort::num_goroutine(), 101);
      },
      cfg);
  expect_no_leaks(before);
  EXPECT_EQ(parked.load(), 100);
  EXPECT_EQ(unstarted_token.use_count(), 1) << "closures of unstarted goroutines leaked";
  // And the runtime works again.
  EXPECT_EQ(gort::run([] {
              Countdown cd(10);
              for (int i = 0; i < 10; i++) gort::go([&] { cd.done(); });
              cd.wait();
              return 5;
            }, cfg),
            5);
  expect_no_leaks(before);
}

// docs/runtime.md: goroutines still around when main returns are abandoned, and
// run leaves "no leaks under ASan/LSan". A parked goroutine that owns heap
// memory through its stack frame must not make LeakSanitizer report a leak
// once run has returned. Only meaningful in a sanitizer build.
TEST(RunShutdown, AbandonedGoroutinesHeapIsNotReportedAsLeak) {
#ifndef GORT_ASAN
  GTEST_SKIP() << "needs LeakSanitizer (the build-asan configuration)";
#else
  auto child = [&] {
    gort::Config cfg;
    cfg.procs = 2;
    auto gate = new Gate();  // never opened; reachable from a global below
    static Gate* keep;
    keep = gate;
    gort::run(
        [&] {
          for (int i = 0; i < 10; i++) {
            gort::go([&] {
              std::unique_ptr<char[]> owned(new char[4096]);
              owned[0] = 1;
              keep->wait();
              ADD_FAILURE() << "resumed after main returned";
            });
          }
          eventually([&] { return keep->waiting() == 10; });
        },
        cfg);
    EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0)
        << "LeakSanitizer reports the heap of abandoned goroutines";
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
#endif
}

// Goroutines that are runnable forever (yield loops, several per P so that
// every yield has somewhere to go) when main returns. In a subprocess with
// a watchdog: the failure mode is a hang in run.
TEST_P(Run, ShutdownWithGoroutinesYieldingInLoops) {
  int p = procs();
  auto child = [&] {
    ResourceSnapshot before;
    gort::Config cfg;
    cfg.procs = p;
    std::atomic<int> started{0};
    gort::run(
        [&] {
          for (int i = 0; i < 4 * p; i++) {
            gort::go([&] {
              started.fetch_add(1);
              for (;;) gort::yield();
            });
          }
          eventually([&] { return started.load() == 4 * p; });
        },
        cfg);
    expect_no_leaks(before);
    EXPECT_EQ(gort::run([] { return 3; }, cfg), 3);
  };
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

// A goroutine that yields in a loop alone on its P when main returns: yield
// finds nothing else to run there, but run must still stop that M. Runs in a
// subprocess with a watchdog, because the failure mode is a hang in run.
TEST(RunShutdown, LoneYieldLoopOnAnotherPDoesNotHangRun) {
  // Also with asynchronous preemption off: yield is a gort call, and so a
  // cooperative preemption point.
  for (bool preempt : {true, false}) {
    auto child = [&] {
      gort::Config cfg;
      cfg.procs = 2;
      cfg.preempt = preempt;
      std::atomic<internal::M*> spinner_m{nullptr};
      bool separated = false;
      gort::run(
          [&] {
            // Started from a plain thread, the spinner goes to the global
            // queue; main keeps this P (it spins on the OS, not on
            // gort::yield), so the spinner runs on the other M, alone on the
            // other P.
            std::thread t([&] {
              gort::go([&] {
                for (;;) {
                  spinner_m.store(current_m());
                  gort::yield();
                }
              });
            });
            t.join();
            auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            while (!separated && std::chrono::steady_clock::now() < deadline) {
              internal::M* m = spinner_m.load();
              separated = m != nullptr && m != current_m();
              std::this_thread::yield();
            }
            // Shows in the failure message if run then hangs.
            std::fprintf(stderr, "main returns; spinner alone on the other M: %s\n",
                         separated ? "yes" : "no");
          },
          cfg);
      EXPECT_TRUE(separated) << "the spinner never ran on the other M";
    };
    GORT_EXPECT_SUBPROCESS_OK(10, child) << "Config::preempt=" << preempt;
  }
}

// GORT_MAXPROCS decides the number of Ps when Config::procs is 0. Each case
// runs in a child process so the environment does not leak into other tests.
TEST(RunMaxprocs, EnvironmentVariableSetsProcs) {
  auto procs_with_env = [](const char* value, int cfg_procs) {
    if (value) {
      setenv("GORT_MAXPROCS", value, 1);
    } else {
      unsetenv("GORT_MAXPROCS");
    }
    gort::Config cfg;
    cfg.procs = cfg_procs;
    return gort::run([] { return gort::procs(); }, cfg);
  };
  auto expect_procs = [&](const char* value, int cfg_procs, int want) {
    auto child = [&] {
      EXPECT_EQ(procs_with_env(value, cfg_procs), want)
          << "GORT_MAXPROCS=" << (value ? value : "(unset)") << " Config::procs=" << cfg_procs;
    };
    GORT_EXPECT_SUBPROCESS_OK(30, child);
  };
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  int affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(online);
  expect_procs("3", 0, 3);
  expect_procs("1", 0, 1);
  expect_procs("17", 0, 17);
  // An explicit Config::procs wins over the environment.
  expect_procs("3", 2, 2);
  // Unset or invalid: the CPUs this process may run on.
  expect_procs(nullptr, 0, affinity);
  expect_procs("zero", 0, affinity);
  expect_procs("0", 0, affinity);
  expect_procs("-4", 0, affinity);
  expect_procs("4x", 0, affinity);
  // The parent's environment is untouched.
  EXPECT_EQ(getenv("GORT_MAXPROCS"), nullptr);
}

// A goroutine parked on something only a plain thread will set later: the
// runtime cannot know the thread will, but docs/runtime.md lists outside threads
// among the things that can wake a goroutine, so this is not a deadlock.
TEST(RunExternalWake, PlainThreadReadiesParkedMainLater) {
  auto child = [&] {
    gort::Config cfg;
    cfg.procs = 2;
    int r = gort::run(
        [] {
          Event ev;
          std::thread t([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            ev.set();
          });
          ev.wait();
          t.join();
          return 7;
        },
        cfg);
    EXPECT_EQ(r, 7);
  };
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

TEST(RunExternalWake, PlainThreadSpawnsIntoIdleRuntimeLater) {
  auto child = [&] {
    gort::Config cfg;
    cfg.procs = 2;
    int r = gort::run(
        [] {
          Event ev;
          std::thread t([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            gort::go([&] { ev.set(); });
          });
          ev.wait();
          t.join();
          return 9;
        },
        cfg);
    EXPECT_EQ(r, 9);
  };
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

}  // namespace
}  // namespace gort::test

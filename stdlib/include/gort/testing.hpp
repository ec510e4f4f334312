// gort/testing.hpp — testing gort code with GoogleTest: test bodies that run
// inside gort::run, a fixture that runs each test at 1, 2, 4 and 8 Ps, a
// leak check (goroutines, OS threads and fds left behind, as Go's
// uber-go/goleak checks goroutines), and waiting on goroutine states
// instead of sleeping. Its own (static) library, libgort_gtest: link with
// `pkg-config --cflags --libs gort-gtest` (docs/testing.md).
//
//   #include <gort/gort.hpp>
//   #include <gort/testing.hpp>
//
//   GORT_TEST(Queue, ReceiverParksUntilSend) {    // the body is goroutine 1
//     auto ch = gort::make_chan<int>();
//     std::atomic<int64_t> id{0};
//     gort::go([&] { id = gort::goroutine_id(); EXPECT_EQ(*ch.recv(), 7); });
//     ASSERT_TRUE(gort::testing::eventually([&] { return id.load() != 0; }));
//     EXPECT_TRUE(gort::testing::wait_for_state(id.load(), "chan receive"));
//     ch.send(7);
//   }  // then: every goroutine the body started must exit, and no OS
//      // thread or fd it opened may outlive the run
//
//   class Pipeline : public gort::testing::ProcsTest {};
//   TEST_P(Pipeline, Drains) {
//     run_test([&] { EXPECT_EQ(gort::procs(), procs()); /* ... */ });
//   }
//   GORT_INSTANTIATE_PROCS(Pipeline);             // Procs/Pipeline.Drains/procs1 ... procs8
//
//   GORT_TEST_MAIN()                              // or link gtest_main / your own main
//
// Running a body in the runtime. gtest calls TestBody on its own thread
// and a fixture cannot wrap that call, so the body is handed over
// explicitly: run(body, options) from any TEST, TEST_F or TEST_P;
// run_test(body) in a fixture derived from RuntimeTest or ProcsTest (whose
// options_ a fixture may change); GORT_TEST(Suite, Name) for a TEST whose
// whole body runs there. run() starts gort::run with options.config
// (Config::park_check on by default), runs the body as the main goroutine,
// then checks for leaks:
//   - goroutines: every goroutine but main must exit within
//     options.leaks.timeout of the body's return; the failure lists the
//     survivors' tracebacks, as goleak does;
//   - OS threads and fds, once gort::run has returned (its own threads
//     joined, its own fds closed): none the body started or opened may
//     remain (the failure names each thread and where each fd points).
// A C++ exception that escapes the body is a test failure, as gtest makes
// it for TestBody (unless --gtest_catch_exceptions=0; then it ends the
// process as it would any goroutine). After a fatal failure or a
// GTEST_SKIP in the body the leak checks are skipped: what such a body
// leaves behind is no news.
//
// LeakCheck does the same checks around any stretch of code, also inside
// a running runtime: it takes a snapshot when constructed; its check_*()
// calls wait for the leftovers to go and return a ::testing::AssertionResult.
// Inside a run, threads are counted net of the runtime's own
// (gort::runtime_threads()), goroutines alive at the snapshot are not
// leaks, and files the runtime itself opens on first use (its symbolizer's
// debug information, signal::notify's pipe) can show up as fds: take the
// snapshot outside the run where you can, as run() does.
//
// Waiting instead of sleeping: eventually(pred) polls pred until it holds;
// wait_for_state(id, "chan receive") polls gort::stack(true) until
// goroutine `id`'s traceback header says `[chan receive]` (the states are
// Go's: "chan send", "select", "sync.Mutex.Lock", "sleep", "IO wait", ...;
// docs/debugging.md). Both return a ::testing::AssertionResult (use them in
// EXPECT_TRUE / ASSERT_TRUE) whose failure says what was last seen.
//
// GoogleTest and goroutines:
//   - A goroutine moves between OS threads, and gtest keeps some state per
//     thread: do not use SCOPED_TRACE in goroutines, and use
//     EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS (not EXPECT_NONFATAL_FAILURE)
//     around code that fails in the runtime, including run() itself.
//   - ASSERT_* returns from the function it is in: fine in the body,
//     but in another goroutine it may leave a waiter parked forever (and
//     the leak check waiting for it); use EXPECT_* there.
//   - Death tests: GORT_TEST_MAIN() (and init()) choose the "threadsafe"
//     style, which re-executes the test binary instead of forking a process
//     that may have runtime threads.
//   - With `using namespace gort;` in scope, `testing::` is ambiguous
//     between this namespace and GoogleTest's: write `::testing::`.
//
// Costs: run() costs a gort::run (threads started and joined) plus a
// listing of /proc/self/fd and /proc/self/task before and after, and a
// few milliseconds of settling; a passing goroutine check reads one
// counter. Tracebacks (gort::stack(true), which loads the debug information
// the first time, then walks every stack) are taken only to describe a
// failure, by a LeakCheck constructed inside a run, and by each poll of
// wait_for_state.
//
// Thread-safety: everything here may be called from any goroutine or
// thread; run() not while a run is active (gort::run does not nest).
// Parks: eventually() yields and wait_for_state() and the LeakCheck checks
// sleep (parking a calling goroutine) between polls; nothing else parks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "gort/chrono.hpp"
#include "gort/runtime.hpp"

namespace gort::testing {

// ---- leak checks ----

struct LeakOptions {
  bool goroutines = true;  // every goroutine started since the snapshot exits
  bool threads = true;     // every OS thread started since the snapshot exits
  bool fds = true;         // every fd opened since the snapshot is closed
  // A leftover goroutine with a frame whose function name contains one of
  // these is not a leak (goleak's IgnoreAnyFunction): for a library's
  // long-lived goroutine.
  std::vector<std::string> ignore_functions;
  // How long leftovers may take to go (a goroutine or thread on its way
  // out, an fd another thread is closing) before they are leaks.
  Duration timeout = absl::Seconds(10);
};

// A snapshot of the goroutines, OS threads and fds that exist, and checks
// that nothing was added since.
class LeakCheck {
 public:
  // Takes the snapshot. Inside a run, walks every goroutine's stack
  // (gort::stack(true)) to know which exist; outside, none do, and every
  // goroutine but the one that checks counts as started since.
  explicit LeakCheck(LeakOptions options = {});

  // Waits (up to options.timeout) until no goroutine exists besides those
  // of the snapshot, the caller and the ignored ones; the failure lists the
  // others' tracebacks. Passes trivially outside a run: call it before
  // main returns (gort::run abandons what is left).
  ::testing::AssertionResult check_goroutines() const;
  // Waits until there are no more OS threads than at the snapshot, the
  // runtime's own not counted; the failure names the threads that are new.
  ::testing::AssertionResult check_threads() const;
  // Waits until every fd opened since the snapshot is closed (an fd number
  // reused for another file counts as new); the failure lists them with
  // their /proc/self/fd targets.
  ::testing::AssertionResult check_fds() const;
  // The checks that options enable, one after another; every failure's
  // message.
  ::testing::AssertionResult check() const;

  const LeakOptions& options() const { return options_; }

 private:
  struct Fd {
    int fd;
    std::string target;
  };
  LeakOptions options_;
  std::vector<int64_t> goroutines_;  // ids at the snapshot (empty outside a run)
  int threads_ = 0;                  // OS threads net of the runtime's own
  std::vector<int> tids_;            // /proc/self/task at the snapshot
  std::vector<Fd> fds_;
};

// What /proc/self says: open fds, and OS threads (the runtime's included).
int count_fds();
int count_threads();
// The counts once they read the same twice a moment apart: a baseline that
// a thread still exiting, or an fd another thread is closing, does not
// inflate.
int settled_fd_count();
int settled_thread_count();

// ---- running a body in the runtime ----

// The configuration run() uses unless told otherwise: Config's defaults,
// with park_check on (a gort call that may park under an OS lock is a
// fatal error even when it does not park this time).
inline Config test_config() {
  Config cfg;
  cfg.park_check = true;
  return cfg;
}

struct RunOptions {
  Config config = test_config();
  LeakOptions leaks;
};

namespace detail {
void run_body(absl::FunctionRef<void()> body, const RunOptions& options, std::source_location where);
}  // namespace detail

// gort::run(body, options.config) with the leak checks of options.leaks
// (see the top of this header). Failures are reported at `where`, the
// caller's line. Blocks the calling thread until the run is over; not
// while a run is active.
template <class F>
  requires(std::is_invocable_v<F&>)
void run(F&& body, const RunOptions& options = {},
         std::source_location where = std::source_location::current()) {
  detail::run_body([&body] { (void)body(); }, options, where);
}

// A fixture whose tests run their bodies in the runtime:
//
//   class Server : public gort::testing::RuntimeTest {
//    protected:
//     Server() { options_.config.procs = 2; }
//   };
//   TEST_F(Server, Serves) { run_test([&] { /* ... */ }); }
class RuntimeTest : public ::testing::Test {
 protected:
  template <class F>
  void run_test(F&& body, std::source_location where = std::source_location::current()) {
    ::gort::testing::run(std::forward<F>(body), options_, where);
  }

  // What run_test passes to run(); change it in the constructor or SetUp.
  RunOptions options_;
};

// A fixture parameterized by the number of Ps: GORT_INSTANTIATE_PROCS(Suite)
// runs each TEST_P of a suite derived from it with 1, 2, 4 and 8, and
// run_test runs its body with that many (whatever options_.config.procs
// says). Bugs that need parallelism show at 2 and up; those of a single P's
// run queue at 1.
class ProcsTest : public RuntimeTest, public ::testing::WithParamInterface<int> {
 protected:
  int procs() const { return GetParam(); }

  template <class F>
  void run_test(F&& body, std::source_location where = std::source_location::current()) {
    RunOptions options = options_;
    options.config.procs = procs();
    ::gort::testing::run(std::forward<F>(body), options, where);
  }
};

// The parameter's name in test names: "procs4".
std::string procs_name(const ::testing::TestParamInfo<int>& info);

#define GORT_INSTANTIATE_PROCS(Suite) \
  INSTANTIATE_TEST_SUITE_P(Procs, Suite, ::testing::Values(1, 2, 4, 8), ::gort::testing::procs_name)

// A TEST whose body runs in the runtime with run()'s default options:
//
//   GORT_TEST(Chan, BufferedSendDoesNotPark) { ... }
#define GORT_TEST(Suite, Name)                                                 \
  static void GORT_TESTING_BODY_(Suite, Name)();                               \
  TEST(Suite, Name) { ::gort::testing::run(&GORT_TESTING_BODY_(Suite, Name)); } \
  static void GORT_TESTING_BODY_(Suite, Name)()
#define GORT_TESTING_BODY_(Suite, Name) gort_testing_body_##Suite##_##Name

// For a main of your own: InitGoogleTest with the "threadsafe" death-test
// style as the default (--gtest_death_test_style still overrides it), and
// any helper thread a sanitizer starts with the process's first thread
// started now, before a test counts threads.
void init(int* argc, char** argv);

// Defines main(): init, then RUN_ALL_TESTS() (on the main thread, outside
// the runtime; each test starts its own run).
#define GORT_TEST_MAIN()                  \
  int main(int argc, char** argv) {       \
    ::gort::testing::init(&argc, argv);   \
    return RUN_ALL_TESTS();               \
  }

// ---- waiting instead of sleeping ----

namespace detail {
// The loop behind eventually(): `poll` until it returns true or `timeout`
// passes (then once more); `why` is what the last failed poll said.
::testing::AssertionResult poll_until(bool (*poll)(void* arg, std::string* why), void* arg, Duration timeout);
}  // namespace detail

// Polls pred() — returning bool or a ::testing::AssertionResult, whose
// message the failure repeats — until it holds or `timeout` passes. A
// bound on waiting for something that must happen, never a speed check.
// Between polls a goroutine yields to the others on its P (and now and
// then the OS thread too); a plain thread yields its CPU. Never parks, so
// it spins: for what takes long, wait_for_state or a channel is cheaper.
template <class Pred>
  requires(std::is_invocable_v<Pred&>)
::testing::AssertionResult eventually(Pred pred, Duration timeout = absl::Seconds(10)) {
  auto poll = [](void* arg, std::string* why) -> bool {
    Pred& p = *static_cast<Pred*>(arg);
    if constexpr (std::is_same_v<std::decay_t<std::invoke_result_t<Pred&>>, ::testing::AssertionResult>) {
      ::testing::AssertionResult r = p();
      if (!r) *why = r.message();
      return static_cast<bool>(r);
    } else {
      return static_cast<bool>(p());
    }
  };
  return detail::poll_until(poll, &pred, timeout);
}

// One goroutine of a traceback dump (gort::stack(true), Go's format).
struct Goroutine {
  int64_t id = 0;
  // The header's state, without ", N minutes": "running", "runnable",
  // "chan receive", "select (no cases)", "sleep", "IO wait", ...
  std::string state;
  // The whole block, header to last line, each line ending in '\n'.
  std::string text;
  // Whether a frame (not the "created by" line) is of a function whose
  // name contains `function`.
  bool has_frame(std::string_view function) const;
};

// The goroutines of a dump, in its order: every line that starts with
// "goroutine <id> " begins one, which ends at the next blank line. Text
// around them (a panic line, other output) is skipped.
std::vector<Goroutine> parse_goroutines(std::string_view dump);
// parse_goroutines(gort::stack(true)): the caller first. Empty outside a run.
std::vector<Goroutine> all_goroutines();

// Polls the goroutines until goroutine `id` is in `state` (exactly, as the
// header says it). The failure says what its state was, or that it is
// gone, and holds the last dump.
::testing::AssertionResult wait_for_state(int64_t id, std::string_view state, Duration timeout = absl::Seconds(10));

// Polls until `count` goroutines for which which(g) holds are in `state`:
//
//   EXPECT_TRUE(wait_for_state([](const gort::testing::Goroutine& g) { return g.has_frame("worker"); },
//                              "sync.Mutex.Lock", /*count=*/4));
::testing::AssertionResult wait_for_state(absl::FunctionRef<bool(const Goroutine&)> which, std::string_view state,
                                          int count = 1, Duration timeout = absl::Seconds(10));

}  // namespace gort::testing

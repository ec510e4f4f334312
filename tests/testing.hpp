// tests/testing.hpp — the one header through which tests reach gort's
// internals, plus the helpers every suite shares. Those a user of gort
// would want too are public, in <gort/testing.hpp> (libgort_gtest, which
// the suites link with libgort_testing, tests/meson.build):
// the Procs fixture and GORT_INSTANTIATE_PROCS, the leak checks,
// eventually, the /proc counts, parsing tracebacks. This header adds what
// gort's own suites do with them:
//
//   - ProcsTest: gort::testing::ProcsTest, whose TEST_Ps run with 1, 2, 4
//     and 8 Ps (GORT_INSTANTIATE_PROCS(Suite); as google/marl's
//     marl_test.h does with its worker counts), with run_test(body,
//     all_exit) running the body through run_checked.
//   - run_checked(procs, body): gort::testing::run(body) with
//     Config::park_check, checking that the run has the Ps asked for; its
//     tear-down checks that nothing leaked: every goroutine but main has
//     exited before main returns, no fd was left open, and every runtime
//     thread was joined when run returned.
//   - Event, Gate, Countdown: tiny parking primitives built directly on
//     internal::park/ready, so that scheduler tests do not depend on stdlib/.
//     They tell the race detector their happens-before edges, as stdlib's
//     primitives do (docs/race.md): the scheduler itself orders nothing.
//   - rss_bytes, count_maps_lines: what /proc says of this process (and
//     count_fds, count_threads from <gort/testing.hpp>).
//   - read_errno/write_errno, current_m(): opaque accessors that the compiler
//     cannot hoist across a switch (see docs/runtime.md, "Thread state saved
//     per goroutine").
//   - SKIP_WITHOUT_ASYNC_PREEMPTION(): for tests that need it;
//     GORT_SKIP_IN_RACE_BUILD(reason): for other mechanisms that build lacks;
//     stress_size(n): a stress test's size, smaller in the race build.
//   - GORT_EXPECT_SUBPROCESS_OK: runs a statement in a death-test child with
//     a watchdog, for behaviour that could hang or kill the whole suite.
//   - has_frame, goroutine_block, count_goroutines, announced_block: reading
//     Go-format tracebacks (docs/debugging.md) in a death test's stderr,
//     sysmon's stall reports left out (gort::testing::parse_goroutines
//     reads the rest); die_in_goroutine and no_core_file for the death
//     tests that print them.
//
// Goroutine code must not use ASSERT_* (it returns from the lambda and may
// leave a waiter parked forever) nor SCOPED_TRACE (gtest keeps traces per
// thread, and goroutines migrate); use EXPECT_*.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <ostream>
#include <mutex>
#include <source_location>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gmp/diag/fatal.hpp"
#include "gmp/g.hpp"
#include "gmp/lock.hpp"
#include "gmp/m.hpp"
#include "gmp/p.hpp"
#include "gmp/runq.hpp"
#include "gmp/race/sanitizer.hpp"
#include "gmp/sched.hpp"
#include "gmp/stack.hpp"
#include "gmp/tls.hpp"
#include "gort/detail/race.hpp"
#include "gort/preempt.hpp"
#include "gort/runtime.hpp"
#include "gort/testing.hpp"

namespace gort::test {

using internal::G;

// ---- process resources ----

using gort::testing::count_fds;
using gort::testing::count_threads;
using gort::testing::settled_fd_count;
using gort::testing::settled_thread_count;

// Resident memory of this process, in bytes (/proc/self/statm).
inline size_t rss_bytes() {
  size_t size = 0, resident = 0;
  std::ifstream("/proc/self/statm") >> size >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

inline int count_maps_lines() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n++;
  return n;
}

// gort::testing::eventually as a bool, for the tests that keep or return
// the answer. Only a bound on waiting for something that must happen,
// never a speed check.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  return static_cast<bool>(gort::testing::eventually(std::move(pred), limit));
}

// The OS threads and fds before a gort::run (its goroutines are checked
// in the run: expect_goroutines_settle).
struct ResourceSnapshot {
  gort::testing::LeakCheck check{gort::testing::LeakOptions{.goroutines = false}};
};

// Checks, after gort::run returned, that its threads were joined and its fds
// closed (waiting a moment for a joined thread still listed in
// /proc/self/task: the kernel wakes pthread_join before it reaps the task).
inline void expect_no_leaks(const ResourceSnapshot& before) {
  EXPECT_TRUE(before.check.check_threads()) << "threads still exist after gort::run returned";
  EXPECT_TRUE(before.check.check_fds()) << "fds leaked by gort::run";
  EXPECT_EQ(gort::procs(), 0) << "the runtime still claims to run";
}

// Inside a goroutine: waits until only `n` goroutines exist.
inline void expect_goroutines_settle(int64_t n) {
  int64_t now = 0;
  eventually([&] { return (now = gort::num_goroutine()) == n; });
  EXPECT_EQ(now, n) << "goroutines leaked (still alive when main returns)";
}

// gort::testing::run(body) with `cfg` and the leak checks described above.
// `all_exit`: every goroutine the body started has exited before it returns.
// Config::park_check is on: a gort call that may park under an OS lock is
// a fatal error even when it does not park.
template <class F>
void run_checked(const gort::Config& cfg, F&& body, bool all_exit = true,
                 std::source_location where = std::source_location::current()) {
  gort::testing::RunOptions options;
  options.config = cfg;
  options.config.park_check = true;
  options.leaks.goroutines = all_exit;
  gort::testing::run(
      [&] {
        EXPECT_EQ(gort::procs(), cfg.procs);
        body();
      },
      options, where);
  EXPECT_EQ(gort::procs(), 0) << "the runtime still claims to run";
}
template <class F>
void run_checked(int procs, F&& body, bool all_exit = true,
                 std::source_location where = std::source_location::current()) {
  gort::Config cfg;
  cfg.procs = procs;
  run_checked(cfg, std::forward<F>(body), all_exit, where);
}

// For tests of the scheduler's order: a slice so long that no goroutine is
// asked to give up its P (a spawn or yield is then no preemption point,
// even in the slow race build).
inline gort::Config unpreempted_cfg(int procs) {
  gort::Config cfg;
  cfg.procs = procs;
  cfg.time_slice = absl::Hours(1);
  return cfg;
}

// ---- the fixture ----

// GORT_INSTANTIATE_PROCS(Suite) (gort/testing.hpp) runs its TEST_Ps with
// 1, 2, 4 and 8 Ps.
class ProcsTest : public gort::testing::ProcsTest {
 protected:
  template <class F>
  void run_test(F&& body, bool all_exit = true, std::source_location where = std::source_location::current()) {
    run_checked(procs(), std::forward<F>(body), all_exit, where);
  }
};

using gort::testing::procs_name;

// Skips a test that needs asynchronous preemption where the build has none:
// the race detector's (preemption is cooperative there, docs/race.md), a
// static link without preempt/gort_text.ld, another architecture.
#define SKIP_WITHOUT_ASYNC_PREEMPTION()                                                   \
  if (!gort::async_preemption_available()) {                                              \
    GTEST_SKIP() << "asynchronous preemption is not available in this build (TSan, not " \
                    "x86-64, or gort linked statically without its linker script)";       \
  }

// Skips the calling test in the race detector's build, for `reason` (a
// mechanism that build lacks or changes; docs/race.md, Limits).
#define GORT_SKIP_IN_RACE_BUILD(reason) \
  do {                                  \
    if (::gort::internal::kRaceEnabled) GTEST_SKIP() << "race build: " << (reason); \
  } while (0)

// A stress test's size: n, or a tenth of it (at least 1) in the race
// detector's build, where a new goroutine costs milliseconds and every
// access is checked (docs/race.md, Limits).
constexpr int stress_size(int n) { return internal::kRaceEnabled ? (n / 10 > 0 ? n / 10 : 1) : n; }

// ---- parking primitives for tests ----

// A one-shot event with at most one waiter. wait() parks the calling
// goroutine until set() (from any goroutine or plain thread).
class Event {
 public:
  void wait() {
    if (state_.load(std::memory_order_acquire) != kSet) internal::park(&publish, this, internal::WaitReason::kTest);
    internal::race_acquire(this);
  }
  void set() {
    internal::race_release(this);
    uintptr_t old = state_.exchange(kSet, std::memory_order_acq_rel);
    // `this` may be gone once the waiter runs again: touch only `old`.
    if (old != 0 && old != kSet) internal::ready(reinterpret_cast<G*>(old));
  }
  bool is_set() const { return state_.load(std::memory_order_acquire) == kSet; }
  // True once a goroutine is parked in wait() (its context is saved).
  bool has_waiter() const {
    uintptr_t s = state_.load(std::memory_order_acquire);
    return s != 0 && s != kSet;
  }
  // Only when nobody waits.
  void reset() { state_.store(0, std::memory_order_release); }

 private:
  static constexpr uintptr_t kSet = 1;
  // Runs after the waiter's context is saved; false: set() came first, so
  // the runtime readies the waiter at once.
  static bool publish(G* g, void* arg) {
    auto* self = static_cast<Event*>(arg);
    uintptr_t expected = 0;
    if (self->state_.compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(g), std::memory_order_acq_rel)) {
      return true;
    }
    // A second waiter would return at once, as if set(): a test bug.
    if (expected != kSet) internal::fatal("tests: a second goroutine waits on an Event (use a Gate)");
    return false;
  }
  std::atomic<uintptr_t> state_{0};
};

// The runtime's own lock word, as stdlib uses it: its holder is never
// preempted asynchronously (a goroutine preempted while holding a std::mutex
// can block its own M forever when the next goroutine there wants it), and
// park can release it once the parking goroutine is saved.
class WordLock {
 public:
  void lock() {
    w_.lock();
    internal::race_acquire(this);
  }
  void unlock() {
    internal::race_release(this);
    w_.unlock();
  }
  // Parks the calling goroutine (which holds the lock); the lock is released
  // on the next context, after the goroutine's context is saved.
  void park_and_unlock() {
    internal::race_release(this);
    internal::park(&internal::park_unlock<decltype(w_)>, &w_, internal::WaitReason::kTest);
  }

 private:
  // Ranked as a channel: a wait structure's lock, released by park.
  internal::WordLock<internal::LockRank::kChan> w_;
};

// Many goroutines wait() until somebody open()s it, once.
class Gate {
 public:
  void wait() {
    mu_.lock();
    if (open_) {
      mu_.unlock();
      return;
    }
    waiters_.push_back(internal::getg());
    mu_.park_and_unlock();
    internal::race_acquire(this);
  }
  void open() {
    std::vector<G*> w;
    internal::race_release(this);
    mu_.lock();
    open_ = true;
    w.swap(waiters_);
    mu_.unlock();
    for (G* g : w) internal::ready(g);
  }
  // Goroutines that are parked or about to park.
  size_t waiting() {
    mu_.lock();
    size_t n = waiters_.size();
    mu_.unlock();
    return n;
  }

 private:
  WordLock mu_;
  bool open_ = false;
  std::vector<G*> waiters_;
};

// A WaitGroup for one waiter: wait() parks until done() was called n times.
class Countdown {
 public:
  explicit Countdown(int64_t n) : n_(n) {
    if (n == 0) done_.set();
  }
  void done() {
    if (n_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.set();
  }
  void wait() { done_.wait(); }
  int64_t left() const { return n_.load(std::memory_order_acquire); }

 private:
  std::atomic<int64_t> n_;
  Event done_;
};

// Whether the running kernel is at least want_major.want_minor.
inline bool kernel_at_least(int want_major, int want_minor) {
  utsname u;
  if (uname(&u) != 0) return false;
  int major = 0, minor = 0;
  if (sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > want_major || (major == want_major && minor >= want_minor);
}

// Spawns n goroutines that wait at one gate, opens it once all wait, and
// waits until all have exited: n dead Gs on the free lists. false if they
// did not all start within 30 s (they have exited either way).
[[nodiscard]] inline bool burst_of_dead_goroutines(int n) {
  Gate gate;
  Countdown cd(n);
  for (int i = 0; i < n; i++) {
    gort::go([&] {
      gate.wait();
      cd.done();
    });
  }
  bool started = eventually([&] { return gate.waiting() == static_cast<size_t>(n); }, std::chrono::seconds(30));
  gate.open();
  cd.wait();
  return started;
}

// Whether a write just below lo, and one at the bottom of the guard
// under it, each kill the process (a guard page, not memory).
inline void expect_guard_below(char* lo) {
  EXPECT_DEATH(
      {
        volatile char* guard = lo - 1;
        *guard = 1;
      },
      "");
  EXPECT_DEATH(
      {
        volatile char* guard = lo - internal::kGuardSize;
        *guard = 1;
      },
      "");
}

// Parks goroutines in bounce() until a server goroutine running serve()
// readies them. The server runs on whichever M it runs on, and readied Gs go
// to its P (and get stolen from there): a bounce is a switch that often
// resumes the goroutine on another M.
class Bouncer {
 public:
  void bounce() {
    mu_.lock();
    parked_.push_back(internal::getg());
    mu_.park_and_unlock();
  }
  // Readies bounced goroutines until stop(); then returns. Runs on a
  // goroutine or a plain thread.
  void serve() {
    std::vector<G*> batch;
    for (;;) {
      bool stopping = stop_.load(std::memory_order_acquire);
      mu_.lock();
      batch.swap(parked_);
      mu_.unlock();
      for (G* g : batch) internal::ready(g);
      if (stopping && batch.empty()) return;
      batch.clear();
      gort::yield();
    }
  }
  // Call once every goroutine is done bouncing.
  void stop() { stop_.store(true, std::memory_order_release); }

 private:
  WordLock mu_;
  std::vector<G*> parked_;
  std::atomic<bool> stop_{false};
};

// ---- opaque accessors of per-thread state ----

// errno through calls the compiler cannot prove pure: `errno` itself is
// `*__errno_location()`, declared const, whose result GCC may keep in a
// register across a switch to another thread.
__attribute__((noipa)) inline int read_errno() {
  asm volatile("" ::: "memory");
  return errno;
}
__attribute__((noipa)) inline void write_errno(int v) {
  asm volatile("" ::: "memory");
  errno = v;
}

// The M (OS thread) running the caller right now.
inline internal::M* current_m() { return internal::getm(); }

// ---- the race detector ----

// A -Db_sanitize=thread build allows 8,000 live goroutines (docs/race.md;
// Go 1.19's limit is 8,128). race_scaled(n) is n, or what fits under the limit
// in that build; tests whose point is the large number itself skip with
// GORT_SKIP_OVER_RACE_LIMIT(n).
inline constexpr int kRaceGoroutines = 6000;
constexpr int race_scaled(int n) { return internal::kRaceEnabled && n > kRaceGoroutines ? kRaceGoroutines : n; }
#define GORT_SKIP_OVER_RACE_LIMIT(n)                                                  \
  do {                                                                                \
    if (::gort::internal::kRaceEnabled && (n) > ::gort::internal::kRaceLimitGoroutines) \
      GTEST_SKIP() << "the race detector allows 8000 live goroutines (docs/race.md)";  \
  } while (0)

// ---- subprocesses ----

// A child that hangs is sent SIGQUIT shortly before its alarm: inside
// gort::run that prints every goroutine and exits with status 2 (as Go's
// runtime does), so the failure shows where it hung. A POSIX timer, not a
// thread: the child's thread counts stay as they were.
inline void quit_before_alarm(unsigned seconds) {
  unsigned margin = seconds / 10 > 2 ? seconds / 10 : 2;
  if (seconds <= margin) return;
  struct sigevent ev = {};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGQUIT;
  timer_t t;
  if (::timer_create(CLOCK_MONOTONIC, &ev, &t) != 0) return;
  struct itimerspec at = {};
  at.it_value.tv_sec = seconds - margin;
  ::timer_settime(t, 0, &at, nullptr);
}

// Runs `child()` in a death-test child (a fresh process, so it may change
// the environment, hang or die without taking the suite down) and expects it
// to return with no failed expectation within `seconds`. A hang shows up as
// a goroutine dump (SIGQUIT, see quit_before_alarm) or "killed by signal
// 14" (SIGALRM). `child` is a callable (name a lambda first: gtest prints
// the statement's text when it fails).
#define GORT_EXPECT_SUBPROCESS_OK(seconds, child)                               \
  EXPECT_EXIT(                                                                  \
      {                                                                         \
        ::gort::test::quit_before_alarm(seconds);                               \
        ::alarm(seconds);                                                       \
        (child)();                                                              \
        std::fflush(nullptr);                                                   \
        ::_exit(::testing::Test::HasFailure() ? 1 : 0);                         \
      },                                                                        \
      ::testing::ExitedWithCode(0), "")

// A death-test matcher on the child's stderr from a predicate, for checks a
// regex cannot express (e.g. "the goroutine id the child announced").
class PredicateMatcher : public ::testing::MatcherInterface<const std::string&> {
 public:
  PredicateMatcher(std::function<bool(const std::string&)> pred, std::string what)
      : pred_(std::move(pred)), what_(std::move(what)) {}
  bool MatchAndExplain(const std::string& s, ::testing::MatchResultListener*) const override {
    return pred_(s);
  }
  void DescribeTo(std::ostream* os) const override { *os << what_; }

 private:
  std::function<bool(const std::string&)> pred_;
  std::string what_;
};

inline ::testing::Matcher<const std::string&> output_that(
    std::function<bool(const std::string&)> pred, std::string what) {
  return ::testing::MakeMatcher(new PredicateMatcher(std::move(pred), std::move(what)));
}

// Death-test children announce the goroutine that is about to die with
// announce_goroutine() ("gid=N;" on stderr); the matcher then expects
// `before` immediately followed by Go's "goroutine N [running]:" header.
inline void announce_goroutine() {
  std::string s = "gid=" + std::to_string(gort::goroutine_id()) + ";\n";
  ssize_t r = ::write(2, s.data(), s.size());
  (void)r;
}

inline ::testing::Matcher<const std::string&> goroutine_report(std::string before) {
  return output_that(
      [before](const std::string& out) {
        size_t at = out.find("gid=");
        if (at == std::string::npos) return false;
        size_t end = out.find(';', at);
        if (end == std::string::npos) return false;
        std::string id = out.substr(at + 4, end - at - 4);
        return out.find(before + "goroutine " + id + " [running]:") != std::string::npos;
      },
      "contains \"" + before + "goroutine <announced id> [running]:\"");
}

// ---- tracebacks ----

// Whether traceback text `out` has a frame of a function whose name
// contains `function`, with "<...>/<file>:<line>" on the line after it.
inline bool has_frame(const std::string& out, const std::string& function, const std::string& file,
                      int line) {
  std::string where = "/" + file + ":" + std::to_string(line);
  for (size_t at = out.find(function); at != std::string::npos; at = out.find(function, at + 1)) {
    size_t bol = out.rfind('\n', at);
    bol = bol == std::string::npos ? 0 : bol + 1;
    if (out[bol] == '\t' || out.compare(bol, 11, "created by ") == 0) continue;
    size_t eol = out.find('\n', at);
    if (eol == std::string::npos) return false;
    size_t next = out.find('\n', eol + 1);
    std::string loc = out.substr(eol + 1, next == std::string::npos ? std::string::npos : next - eol - 1);
    if (loc.size() > 1 && loc[0] == '\t' && loc.find(where) != std::string::npos) {
      // ":12" must not match ":123".
      size_t end = loc.find(where) + where.size();
      if (end == loc.size() || loc[end] == ' ') return true;
    }
  }
  return false;
}

// `out` without the stall reports sysmon printed into it ("gort: stall:"
// and the goroutine block after it, docs/debugging.md): on a loaded machine,
// and in the race build where nothing is preempted asynchronously, a test
// whose program is slow gets them beside the traceback it checks.
inline std::string without_stall_reports(const std::string& out) {
  static const std::string kStall = "gort: stall: ";
  std::string kept;
  size_t from = 0;
  for (size_t at = out.find(kStall); at != std::string::npos; at = out.find(kStall, at + 1)) {
    if (at != 0 && out[at - 1] != '\n') continue;
    // The report line, a blank line, the goroutine block, a blank line.
    size_t block = out.find("\n\n", at);
    size_t end = block == std::string::npos ? std::string::npos : out.find("\n\n", block + 2);
    kept.append(out, from, at - from);
    if (end == std::string::npos) return kept;
    from = end + 2;
    at = end + 1;
  }
  kept.append(out, from, std::string::npos);
  return kept;
}

// The part of `out` about goroutine `id`: from its header to the blank
// line after it (empty if it is not there). Stall reports do not count.
inline std::string goroutine_block(const std::string& whole, int64_t id) {
  for (gort::testing::Goroutine& g : gort::testing::parse_goroutines(without_stall_reports(whole))) {
    if (g.id == id) return std::move(g.text);
  }
  return "";
}

// The id that announce_goroutine() wrote in `out`, or -1; that goroutine's
// block.
inline int64_t announced_id(const std::string& out) {
  size_t at = out.find("gid=");
  return at == std::string::npos ? -1 : std::stoll(out.substr(at + 4));
}
inline std::string announced_block(const std::string& out) {
  int64_t id = announced_id(out);
  return id < 0 ? "" : goroutine_block(out, id);
}

// For death tests: on `procs` Ps, a goroutine announces itself and calls
// f() while main parks for good; the process is expected to die in f.
template <class F>
void die_in_goroutine(int procs, F f) {
  gort::Config cfg;
  cfg.procs = procs;
  gort::run(
      [&f] {
        gort::go([&f] {
          announce_goroutine();
          f();
        });
        Event never;
        never.wait();
      },
      cfg);
}

// A death test that dies of a signal writes no core file.
inline void no_core_file() {
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

// The ids of the goroutine headers ("goroutine N [" at the start of a
// line) in `out`, in order. Ids need not be consecutive: each P hands them
// out from its own batch (as Go's goidcache does).
inline std::vector<int64_t> goroutine_ids(const std::string& whole) {
  std::vector<int64_t> ids;
  for (const gort::testing::Goroutine& g : gort::testing::parse_goroutines(without_stall_reports(whole))) {
    ids.push_back(g.id);
  }
  return ids;
}

inline int count_goroutines(const std::string& whole) { return static_cast<int>(goroutine_ids(whole).size()); }

}  // namespace gort::test

// tests/gmp/diag/schedtrace_test.cpp — GORT_DEBUG=schedtrace=N[,scheddetail=1]:
// sysmon prints Go's SCHED lines (gmp/diag/schedtrace.cpp, preempt/sysmon.cpp).
// Each case runs in a child process (it sets GORT_DEBUG and reads what it
// printed on stderr).
#include "gmp/diag/schedtrace.hpp"

#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gmp/diag/fatal.hpp"
#include "gort/preempt.hpp"
#include "gort/time.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

int64_t field(const std::smatch& m, size_t i) { return std::stoll(m[i].str()); }

// Parks the calling goroutine on a timer; every P may go idle meanwhile.
void idle_for(absl::Duration d) { gort::sleep(d); }

// In a death-test child: runs `body` as main on `procs` Ps with
// GORT_DEBUG=env, then exits with status 0 (a hang: SIGALRM).
template <class F>
[[noreturn]] void run_traced(const char* env, int procs, F body) {
  ::alarm(60);
  setenv("GORT_DEBUG", env, 1);
  gort::Config cfg;
  cfg.procs = procs;
  gort::run(body, cfg);
  std::fflush(nullptr);
  ::_exit(0);
}

// Summary lines in Go's exact format, with counts that fit the run. The
// child marks its phases on stderr: CPU-bound goroutines on every P (more
// of them than Ps), then every P idle.
bool plausible_summary(const std::string& out, int procs, int spinners) {
  std::string per_p = "\\[\\d+";
  for (int i = 1; i < procs; i++) per_p += " \\d+";
  const std::regex re("SCHED (\\d+)ms: gomaxprocs=(\\d+) idleprocs=(\\d+) threads=(\\d+) "
                      "spinningthreads=(\\d+) idlethreads=(\\d+) syscallthreads=\\d+ runqueue=(\\d+) (" + per_p + "\\])");
  const std::regex num("\\d+");
  int traces = 0, busy_all = 0, idle_all = 0;
  int64_t last_ms = -1;
  bool in_idle = false;
  for (const std::string& line : lines_of(out)) {
    if (line == "phase idle") in_idle = true;
    if (line == "phase end") in_idle = false;
    if (line.rfind("SCHED", 0) != 0) continue;
    std::smatch m;
    if (!std::regex_match(line, m, re)) {
      std::fprintf(stderr, "not Go's format: %s\n", line.c_str());
      return false;
    }
    int64_t ms = field(m, 1), idle = field(m, 3), threads = field(m, 4);
    int64_t spinning = field(m, 5), idlethreads = field(m, 6), global = field(m, 7);
    // The first trace is at 0 ms, later ones never go back.
    if ((traces == 0 && ms != 0) || ms < last_ms) return false;
    last_ms = ms;
    traces++;
    if (field(m, 2) != procs || idle > procs) return false;
    // M0 and sysmon at least; sysmon never sleeps on the idle list. (A
    // spinning count may run ahead of the M it is for.)
    if (threads < 2 || idlethreads > threads - 1 || spinning > threads) return false;
    int64_t queued = global;
    std::string lists = m[8].str();
    for (std::sregex_iterator it(lists.begin(), lists.end(), num), end; it != end; ++it) {
      queued += std::stoll(it->str());
    }
    // Nothing but the spinners (and main) is ever runnable; a G stolen
    // between the reads of two rings counts twice.
    if (queued > 2 * (spinners + 1)) return false;
    if (!in_idle && idle == 0) busy_all++;
    if (in_idle && idle == procs && queued == 0) idle_all++;
  }
  // 450 ms at 10 ms: some 45 traces. Ask for far fewer (a loaded machine
  // deschedules sysmon), but some in each phase: the one with every P busy
  // and the one where sysmon, tracing, must not sleep until a P runs again.
  if (traces < 6 || busy_all < 1 || idle_all < 2) {
    std::fprintf(stderr, "traces=%d busy_all=%d idle_all=%d\n", traces, busy_all, idle_all);
    return false;
  }
  return true;
}

class SchedTraceSummary : public ProcsTest {};

TEST_P(SchedTraceSummary, GoFormatAndPlausibleCounts) {
  const int procs = GetParam();
  const int spinners = 2 * procs;
  auto busy_then_idle = [spinners] {
    std::atomic<bool> stop{false};
    Countdown left(spinners);
    for (int i = 0; i < spinners; i++) {
      gort::go([&] {
        while (!stop.load(std::memory_order_relaxed)) gort::yield();
        left.done();
      });
    }
    // Main parked, spinners busy. 300 ms: with 8 Ps on a loaded 2-CPU
    // machine, an M that the kernel deschedules while it is the spinning
    // one keeps a P idle until it runs again (wakep starts nobody while
    // one spins); a failure once showed that for 130 ms of 150.
    idle_for(absl::Milliseconds(300));
    stop.store(true);
    left.wait();
    internal::write_stderr("phase idle\n");
    idle_for(absl::Milliseconds(150));
    internal::write_stderr("phase end\n");
  };
  EXPECT_EXIT(run_traced("schedtrace=10", procs, busy_then_idle), ::testing::ExitedWithCode(0),
              output_that([=](const std::string& out) { return plausible_summary(out, procs, spinners); },
                          "SCHED lines in Go's format, with plausible counts in each phase"));
}

GORT_INSTANTIATE_PROCS(SchedTraceSummary);

// scheddetail=1: the header with Go's extra fields, then one line per P, M
// and G; a parked goroutine shows its wait reason, and the spinner (whose
// id it announced) runs on the M whose line names it.
bool plausible_detail(const std::string& out, int procs) {
  const std::regex header(
      "SCHED \\d+ms: gomaxprocs=" + std::to_string(procs) +
      " idleprocs=\\d+ threads=\\d+ spinningthreads=\\d+ idlethreads=\\d+ syscallthreads=\\d+ runqueue=\\d+ "
      "gcwaiting=[01] nmidlelocked=\\d+ stopwait=\\d+ sysmonwait=[01]");
  const std::regex pline(
      "  P(\\d+): status=[01234] schedtick=\\d+ syscalltick=\\d+ m=(-1|\\d+) runqsize=\\d+ "
      "gfreecnt=\\d+ timerslen=\\d+");
  const std::regex mline(
      "  M(\\d+): p=(-1|\\d+) curg=(-1|\\d+) mallocing=0 throwing=0 preemptoff= locks=\\d+ "
      "dying=0 spinning=(true|false) blocked=(true|false) lockedg=(-1|\\d+)");
  const std::regex gline("  G(\\d+): status=([0-6])\\(([^)]*)\\) m=(-1|\\d+) lockedm=(-1|\\d+)");
  size_t at = out.find("gid=");
  if (at == std::string::npos) return false;
  std::string spinner = out.substr(at + 4, out.find(';', at) - at - 4);
  int blocks = 0, ps = 0, parked_seen = 0, running_seen = 0;
  std::vector<std::string> ms_running_spinner;  // in this block
  for (const std::string& line : lines_of(out)) {
    std::smatch m;
    if (line.rfind("SCHED", 0) == 0) {
      if (!std::regex_match(line, header) || (blocks > 0 && ps != procs)) {
        std::fprintf(stderr, "bad header, or not %d P lines before: %s\n", procs, line.c_str());
        return false;
      }
      blocks++;
      ps = 0;
      ms_running_spinner.clear();
    } else if (line.rfind("  P", 0) == 0) {
      if (!std::regex_match(line, m, pline) || m[1].str() != std::to_string(ps)) {
        std::fprintf(stderr, "bad P line: %s\n", line.c_str());
        return false;
      }
      ps++;
    } else if (line.rfind("  M", 0) == 0) {
      if (!std::regex_match(line, m, mline)) {
        std::fprintf(stderr, "bad M line: %s\n", line.c_str());
        return false;
      }
      if (m[3].str() == spinner) ms_running_spinner.push_back(m[1].str());
    } else if (line.rfind("  G", 0) == 0) {
      if (!std::regex_match(line, m, gline)) {
        std::fprintf(stderr, "bad G line: %s\n", line.c_str());
        return false;
      }
      if (m[2].str() == "4" && m[3].str() == "test" && m[4].str() == "-1") parked_seen++;
      if (m[1].str() == spinner && m[2].str() == "2" && m[3].str().empty() &&
          ms_running_spinner.size() == 1 && ms_running_spinner[0] == m[4].str()) {
        running_seen++;
      }
    }
  }
  if (blocks < 3 || parked_seen < 1 || running_seen < 1) {
    std::fprintf(stderr, "blocks=%d parked=%d running=%d\n", blocks, parked_seen, running_seen);
    return false;
  }
  return true;
}

TEST(SchedTrace, DetailLines) {
  constexpr int kProcs = 2;
  auto parked_and_spinning = [] {
    Event never;
    gort::go([&] { never.wait(); });
    std::atomic<bool> stop{false};
    std::atomic<bool> spinning{false};
    Event spun;
    gort::go([&] {
      announce_goroutine();
      spinning.store(true);
      while (!stop.load(std::memory_order_relaxed)) {
      }
      spun.set();
    });
    // The 200 ms of traces count from when the spinner runs: on a loaded
    // machine (and in the race build) it may start late.
    while (!spinning.load()) idle_for(absl::Milliseconds(1));
    idle_for(absl::Milliseconds(200));
    stop.store(true);
    spun.wait();
    never.set();
  };
  EXPECT_EXIT(run_traced("scheddetail=1,schedtrace=10", kProcs, parked_and_spinning),
              ::testing::ExitedWithCode(0),
              output_that([](const std::string& out) { return plausible_detail(out, kProcs); },
                          "detailed SCHED blocks in Go's format naming the parked and the running goroutine"));
}

// The formatter itself, in-process, where the test controls what it sees:
// the calling goroutine runs on its M and P, another waits on an Event.
class SchedTraceFormat : public ProcsTest {};

TEST_P(SchedTraceFormat, NamesTheRunningAndTheParkedGoroutine) {
  run_test([this] {
    Event never;
    Event parked;
    int64_t waiter = 0;
    gort::go([&] {
      waiter = gort::goroutine_id();
      parked.set();
      never.wait();
    });
    parked.wait();
    EXPECT_TRUE(eventually([&] { return never.has_waiter(); }));
    std::string out;
    {
      // Neither preempted nor moved to another M while the state is read.
      gort::NoPreempt no;
      internal::M* m = current_m();
      std::string me = std::to_string(gort::goroutine_id());
      std::string mid = std::to_string(m->id);
      std::string pid = std::to_string(m->p->id);
      int64_t now = internal::nanotime();
      internal::schedtrace_format(now - 1500 * 1000 * 1000, now, true, &out);
      std::vector<std::string> lines = lines_of(out);
      EXPECT_TRUE(!lines.empty() &&
                  std::regex_match(lines[0], std::regex("SCHED 1500ms: gomaxprocs=" +
                                                        std::to_string(procs()) + " .* sysmonwait=[01]")))
          << out;
      int ps = 0;
      bool my_p = false, my_m = false, my_g = false, waiter_g = false;
      for (const std::string& l : lines) {
        if (l.rfind("  P", 0) == 0) ps++;
        if (l.rfind("  P" + pid + ": status=1 ", 0) == 0 && l.find(" m=" + mid + " ") != std::string::npos) {
          my_p = true;
        }
        if (l.rfind("  M" + mid + ": p=" + pid + " curg=" + me + " ", 0) == 0) my_m = true;
        if (l == "  G" + me + ": status=2() m=" + mid + " lockedm=-1") my_g = true;
        if (l == "  G" + std::to_string(waiter) + ": status=4(test) m=-1 lockedm=-1") waiter_g = true;
      }
      EXPECT_EQ(ps, procs());
      EXPECT_TRUE(my_p) << "P" << pid << " held by M" << mid << ":\n" << out;
      EXPECT_TRUE(my_m) << "M" << mid << " on P" << pid << " running G" << me << ":\n" << out;
      EXPECT_TRUE(my_g) << out;
      EXPECT_TRUE(waiter_g) << out;
      // The summary form: the same header fields and one queue per P.
      std::string summary;
      internal::schedtrace_format(0, 0, false, &summary);
      std::string per_p = "\\[\\d+";
      for (int i = 1; i < procs(); i++) per_p += " \\d+";
      EXPECT_TRUE(
          std::regex_match(summary, std::regex("SCHED 0ms: gomaxprocs=\\d+ idleprocs=\\d+ threads=\\d+ "
                                               "spinningthreads=\\d+ idlethreads=\\d+ syscallthreads=\\d+ runqueue=\\d+ " +
                                               per_p + "\\]\n")))
          << summary;
    }
    never.set();
  });
}

GORT_INSTANTIATE_PROCS(SchedTraceFormat);

// gomaxprocs and the per-P lines follow set_procs: the Ps in use, not the
// ones a shrink left allocated.
TEST(SchedTrace, FollowsSetProcs) {
  run_checked(2, [] {
    for (int n : {4, 1, 3}) {
      gort::set_procs(n);
      std::string summary, detail;
      internal::schedtrace_format(0, 0, false, &summary);
      internal::schedtrace_format(0, 0, true, &detail);
      std::string lists = "\\[\\d+";
      for (int i = 1; i < n; i++) lists += " \\d+";
      EXPECT_TRUE(std::regex_match(summary, std::regex("SCHED 0ms: gomaxprocs=" + std::to_string(n) +
                                                       " .* " + lists + "\\]\n")))
          << summary;
      int ps = 0;
      for (const std::string& l : lines_of(detail)) ps += l.rfind("  P", 0) == 0;
      EXPECT_EQ(ps, n) << detail;
    }
  });
}

// Off unless schedtrace is a positive number; scheddetail alone prints
// nothing (as in Go).
TEST(SchedTrace, OffPrintsNothing) {
  auto idle_then_done = [] {
    idle_for(absl::Milliseconds(50));
    internal::write_stderr("done\n");
  };
  for (const char* env : {"", "schedtrace=0", "scheddetail=1", "schedtrace=-5", "schedtrace=x"}) {
    EXPECT_EXIT(run_traced(env, 2, idle_then_done), ::testing::ExitedWithCode(0),
                output_that(
                    [](const std::string& out) {
                      return out.find("SCHED") == std::string::npos && out.find("done\n") != std::string::npos;
                    },
                    "no SCHED line"))
        << "GORT_DEBUG=" << env;
  }
}

}  // namespace
}  // namespace gort::test

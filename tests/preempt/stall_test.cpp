// tests/preempt/stall_test.cpp — the stall report (preempt/stall.cpp): a
// goroutine that keeps its P past the threshold because preemption keeps
// failing, or whose M the kernel keeps blocked outside gort::blocking, is
// reported once, with its frames; ordinary work is not reported; 0 turns
// the report off.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "gort/time.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kFile = "stall_test.cpp";

size_t count(const std::string& out, const std::string& what) {
  size_t n = 0;
  for (size_t at = out.find(what); at != std::string::npos; at = out.find(what, at + 1)) n++;
  return n;
}

// The report's goroutine block (after the "gort: stall:" line and its
// blank line, up to the next blank line). Not goroutine_block, which leaves
// stall reports out.
std::string reported_block(const std::string& out, int64_t id) {
  size_t at = out.find("gort: stall: goroutine " + std::to_string(id) + " ");
  size_t from = at == std::string::npos ? at : out.find("\n\n", at);
  if (from == std::string::npos) return "";
  from += 2;
  size_t end = out.find("\n\n", from);
  std::string b = out.substr(from, end == std::string::npos ? std::string::npos : end + 1 - from);
  return b.rfind("goroutine " + std::to_string(id) + " ", 0) == 0 ? b : "";
}

constexpr int kNoPreemptLine = __LINE__ + 4;
__attribute__((noinline)) void spins_without_yielding() {
  gort::NoPreempt np;
  asm volatile("");
  spin_for(800ms);
  asm volatile("");
}

void stalling_program(int procs) {
  ::alarm(60);
  gort::run(
      [] {
        Countdown done(1);
        gort::go([&] {
          announce_goroutine();
          spins_without_yielding();
          done.done();
        });
        done.wait();
      },
      preempt_cfg(procs));
  ::_exit(0);
}

TEST(StallReport, LoopThatCannotBePreemptedIsReportedOnce) {
  for (int procs : {1, 2}) {
    EXPECT_EXIT(
        {
          setenv("GORT_DEBUG", "stallreport=200", 1);
          stalling_program(procs);
        },
        ::testing::ExitedWithCode(0),
        output_that(
            [](const std::string& out) {
              int64_t id = announced_id(out);
              std::string line = "gort: stall: goroutine " + std::to_string(id) + " has run for ";
              std::string b = reported_block(out, id);
              return count(out, "gort: stall:") == 1 && out.find(line) != std::string::npos &&
                     out.find("inside a gort::NoPreempt scope") != std::string::npos &&
                     b.find("[running]:") != std::string::npos &&
                     has_frame(b, "spins_without_yielding()", kFile, kNoPreemptLine) &&
                     b.find("created by ") != std::string::npos;
            },
            "one report, naming the goroutine, why, and its frames"))
        << "procs=" << procs;
  }
}

TEST(StallReport, ZeroTurnsItOff) {
  EXPECT_EXIT(
      {
        setenv("GORT_DEBUG", "stallreport=0", 1);
        stalling_program(1);
      },
      ::testing::ExitedWithCode(0),
      output_that([](const std::string& out) { return out.find("gort: stall") == std::string::npos; },
                  "no report"));
}

// A read the kernel blocks, not wrapped in gort::blocking: sysmon hands
// its P to another M, and the goroutine stays blocked past the threshold.
// libc's own read, which blocks the thread (the hooked one would park).
constexpr int kReadLine = __LINE__ + 5;
__attribute__((noinline)) void blocked_in_read(int fd) {
  char c;
  asm volatile("");
  gort::RawLibc raw;
  ssize_t r = ::read(fd, &c, 1);
  asm volatile("" : : "r"(r));
}

TEST(StallReport, GoroutineBlockedInTheKernelIsReported) {
  GORT_SKIP_IN_RACE_BUILD("TSan holds back the signal that fetches the blocked stack");
  EXPECT_EXIT(
      {
        setenv("GORT_DEBUG", "stallreport=200", 1);
        ::alarm(60);
        int fds[2];
        if (::pipe(fds) != 0) ::_exit(3);
        std::thread writer([fd = fds[1]] {
          std::this_thread::sleep_for(800ms);
          if (::write(fd, "x", 1) != 1) ::_exit(4);
        });
        gort::run(
            [fd = fds[0]] {
              Countdown done(1);
              gort::go([&] {
                announce_goroutine();
                blocked_in_read(fd);
                done.done();
              });
              done.wait();
            },
            preempt_cfg(2));
        writer.join();
        ::_exit(0);
      },
      ::testing::ExitedWithCode(0),
      output_that(
          [](const std::string& out) {
            int64_t id = announced_id(out);
            std::string b = reported_block(out, id);
            // With the P retaken (membarrier available): "blocked in the
            // kernel outside gort::blocking"; without: a run that lasts.
            return count(out, "gort: stall:") == 1 &&
                   (out.find("has been blocked in the kernel outside gort::blocking for ") != std::string::npos ||
                    out.find("its thread is blocked in the kernel") != std::string::npos) &&
                   has_frame(b, "blocked_in_read(int)", kFile, kReadLine);
          },
          "one report with the blocked read's frames")) ;
}

// CPU-bound goroutines that are preempted every slice are not stalls.
TEST(StallReport, PreemptedWorkIsNotReported) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  if (!gort::async_preemption_available()) GTEST_SKIP() << "no asynchronous preemption in this build";
  EXPECT_EXIT(
      {
        setenv("GORT_DEBUG", "stallreport=150", 1);
        ::alarm(60);
        gort::run(
            [] {
              Countdown done(3);
              for (int i = 0; i < 3; i++) {
                gort::go([&] {
                  spin_for(600ms);
                  done.done();
                });
              }
              done.wait();
            },
            preempt_cfg(1));
        ::_exit(0);
      },
      ::testing::ExitedWithCode(0),
      output_that([](const std::string& out) { return out.find("gort: stall") == std::string::npos; },
                  "no report"));
}

// Many goroutines stalled at once (each blocked in libc's own read, which
// the runtime cannot see): three full reports in a window of ten
// thresholds, then one summary line for the others, and the count in
// runtime_stats.
TEST(StallReport, ManyStallsAreRateLimitedAndSummarised) {
  GORT_SKIP_IN_RACE_BUILD("TSan holds back the signal that fetches the blocked stack");
  EXPECT_EXIT(
      {
        setenv("GORT_DEBUG", "stallreport=100", 1);
        ::alarm(60);
        constexpr int kStalled = 12;
        int fds[2];
        if (::pipe(fds) != 0) ::_exit(3);
        int64_t reports = 0;
        gort::run(
            [&] {
              Countdown done(kStalled);
              for (int i = 0; i < kStalled; i++) {
                gort::go([&] {
                  blocked_in_read(fds[0]);
                  done.done();
                });
              }
              // Past one window (1 s): the summary is out.
              gort::sleep(absl::Milliseconds(1500));
              reports = gort::runtime_stats().stall_reports;
              if (::write(fds[1], std::string(kStalled, 'x').data(), kStalled) != kStalled) ::_exit(4);
              done.wait();
            },
            preempt_cfg(2));
        std::fprintf(stderr, "reports=%lld\n", static_cast<long long>(reports));
        ::_exit(0);
      },
      ::testing::ExitedWithCode(0),
      output_that(
          [](const std::string& out) {
            return count(out, "has been blocked in the kernel outside gort::blocking") == 3 &&
                   count(out, "more stalls in the last 1.000s not shown in full (goroutines") == 1 &&
                   out.find("reports=12\n") != std::string::npos;
          },
          "three full reports, one summary of the other nine, twelve counted"));
}

}  // namespace
}  // namespace gort::test

// tests/gmp/diag/panic_test.cpp — an exception escaping a goroutine is Go's
// unrecovered panic, reported with the stack where it was thrown
// (gmp/diag/panic.cpp), at each GORT_TRACEBACK level (gmp/diag/traceback.cpp),
// its line naming the exception's type (gmp/diag/exception.cpp).
//
// Each case runs in a death-test child and reads its stderr. The functions
// whose frames are looked for are noinline (noipa where GCC would clone
// them: the line table of a clone's cold part can be wrong) and make no
// tail calls.
#include <signal.h>
#include <stdlib.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "gort/chan.hpp"
#include "gort/time.hpp"
#include "tests/testing.hpp"

// Types of the user's own, in a namespace, for the panic line's type.
namespace acme::billing {
struct Overdrawn : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Frozen : gort::panic_error {
  using gort::panic_error::panic_error;
};
struct Receipt {
  int id;
};
}  // namespace acme::billing

namespace gort::test {
namespace {

constexpr const char* kFile = "panic_test.cpp";

gort::Config procs_cfg(int procs) {
  gort::Config cfg;
  cfg.procs = procs;
  return cfg;
}

constexpr int kThrowLine = __LINE__ + 3;
constexpr int kRecurseLine = __LINE__ + 4;
__attribute__((noinline)) void thrower(int depth) {
  if (depth == 0) throw std::runtime_error("boom at depth 3");
  asm volatile("");
  thrower(depth - 1);
  asm volatile("");
}

constexpr int kParkedLine = __LINE__ + 3;
__attribute__((noinline)) void parked_bystander(Event* e) {
  asm volatile("");
  e->wait();
  asm volatile("");
}

// Goroutine 2 parks in parked_bystander; the next one throws from
// thrower(3): four frames of it.
constexpr int kBystanderGoLine = __LINE__ + 6;
constexpr int kGoLine = __LINE__ + 7;
__attribute__((noinline)) void panic_program(int procs) {
  gort::run(
      [] {
        Event never;
        gort::go([&] { parked_bystander(&never); });
        gort::sleep(absl::Milliseconds(20));
        gort::go([] {
          announce_goroutine();
          thrower(3);
        });
        Event main_never;
        main_never.wait();
      },
      procs_cfg(procs));
}

bool shows_the_throw(const std::string& out) {
  std::string b = announced_block(out);
  size_t first = b.find('\n');
  size_t recurse = 0;
  for (size_t at = b.find("thrower(int)"); at != std::string::npos; at = b.find("thrower(int)", at + 1)) {
    recurse++;
  }
  return out.find("panic: boom at depth 3 [std::runtime_error]\n\ngoroutine ") != std::string::npos && first != std::string::npos &&
         b.find("[running]:\n") < first && has_frame(b, "thrower(int)", kFile, kThrowLine) &&
         has_frame(b, "thrower(int)", kFile, kRecurseLine) && recurse >= 4 &&
         // Where it was thrown comes first: nothing of the C++ runtime's
         // throwing machinery, nothing of gort's.
         b.find("thrower(", first) < b.find('\n', first + 1) && b.find("__cxa_throw") == std::string::npos &&
         b.find("gort::internal") == std::string::npos &&
         b.find("created by ") != std::string::npos && b.find(" in goroutine 1\n") != std::string::npos &&
         b.find(std::string(kFile) + ":" + std::to_string(kGoLine)) != std::string::npos;
}

TEST(PanicTraceback, ShowsTheFramesWhereItWasThrown) {
  for (int procs : {1, 2}) {
    EXPECT_EXIT(panic_program(procs), ::testing::ExitedWithCode(2),
                output_that(
                    [](const std::string& out) {
                      // single: only the panicking goroutine.
                      return shows_the_throw(out) && count_goroutines(out) == 1;
                    },
                    "the panicking goroutine's frames from the throw, and no other goroutine"))
        << "procs=" << procs;
  }
}

TEST(PanicTraceback, AllPrintsEveryGoroutine) {
  for (int procs : {1, 2}) {
    EXPECT_EXIT(
        {
          setenv("GORT_TRACEBACK", "all", 1);
          panic_program(procs);
        },
        ::testing::ExitedWithCode(2),
        output_that(
            [](const std::string& out) {
              std::string b = goroutine_block(out, 2);
              return shows_the_throw(out) && count_goroutines(out) == 3 &&
                     b.find("[test]:") != std::string::npos &&
                     has_frame(b, "parked_bystander(", kFile, kParkedLine) &&
                     b.find(std::string(kFile) + ":" + std::to_string(kBystanderGoLine)) != std::string::npos &&
                     out.find("gort::internal") == std::string::npos;
            },
            "the panicking goroutine, then main and the bystander with their frames"))
        << "procs=" << procs;
  }
}

TEST(PanicTraceback, NonePrintsOnlyTheMessage) {
  EXPECT_EXIT(
      {
        setenv("GORT_TRACEBACK", "none", 1);
        panic_program(2);
      },
      ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            return out.find("panic: boom at depth 3 [std::runtime_error]\n") != std::string::npos && count_goroutines(out) == 0;
          },
          "the panic message and no goroutine"));
}

TEST(PanicTraceback, SystemShowsTheRuntimesFrames) {
  for (const char* level : {"system", "2"}) {
    EXPECT_EXIT(
        {
          setenv("GORT_TRACEBACK", level, 1);
          panic_program(2);
        },
        ::testing::ExitedWithCode(2),
        output_that(
            [](const std::string& out) {
              std::string b = announced_block(out);
              return has_frame(b, "thrower(int)", kFile, kThrowLine) &&
                     b.find("gort::internal::goroutine_main") != std::string::npos &&
                     b.find(" pc=0x") != std::string::npos && count_goroutines(out) == 3;
            },
            "runtime frames, addresses, every goroutine"))
        << "GORT_TRACEBACK=" << level;
  }
}

TEST(PanicTraceback, CrashAbortsAfterTheTraceback) {
  EXPECT_EXIT(
      {
        setenv("GORT_TRACEBACK", "crash", 1);
        no_core_file();
        panic_program(2);
      },
      ::testing::KilledBySignal(SIGABRT),
      output_that(
          [](const std::string& out) {
            std::string b = announced_block(out);
            return out.find("panic: boom at depth 3 [std::runtime_error]\n\ngoroutine ") != std::string::npos &&
                   has_frame(b, "thrower(int)", kFile, kThrowLine) &&
                   b.find("gort::internal::goroutine_main") != std::string::npos && count_goroutines(out) == 3;
          },
          "the traceback at the system level, then SIGABRT"));
}

TEST(PanicTraceback, UnknownLevelIsReportedAndTheDefaultUsed) {
  EXPECT_EXIT(
      {
        setenv("GORT_TRACEBACK", "loud", 1);
        panic_program(2);
      },
      ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            return out.find("gort: GORT_TRACEBACK=loud: unknown value") != std::string::npos &&
                   shows_the_throw(out) && count_goroutines(out) == 1;
          },
          "a warning, then the default traceback"));
}

// The main goroutine's frames are its body's.
constexpr int kMainThrowLine = __LINE__ + 3;
__attribute__((noipa)) int main_gives_up() {
  asm volatile("");
  throw std::out_of_range("main gave up");
}

TEST(PanicTraceback, MainGoroutine) {
  EXPECT_EXIT({ gort::run([] { return main_gives_up(); }, procs_cfg(1)); }, ::testing::ExitedWithCode(2),
              output_that(
                  [](const std::string& out) {
                    std::string b = goroutine_block(out, 1);
                    return out.find("panic: main gave up [std::out_of_range]\n\ngoroutine 1 [running]:\n") != std::string::npos &&
                           has_frame(b, "main_gives_up()", kFile, kMainThrowLine) &&
                           b.find("created by") == std::string::npos;
                  },
                  "goroutine 1's frames from the throw, no creator"));
}

// A rethrow is reported from where it was rethrown (the first throw's
// frames are gone by then, as in Go's re-panic).
constexpr int kRethrowLine = __LINE__ + 7;
__attribute__((noinline)) void rethrower() {
  try {
    asm volatile("");
    thrower(0);
  } catch (const std::runtime_error&) {
    asm volatile("");
    throw;
  }
}

TEST(PanicTraceback, RethrowIsReportedWhereItWasRethrown) {
  EXPECT_EXIT(die_in_goroutine(2, rethrower), ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            std::string b = announced_block(out);
            return out.find("panic: boom at depth 3 [std::runtime_error]\n") != std::string::npos &&
                   has_frame(b, "rethrower()", kFile, kRethrowLine) && b.find("__cxa_rethrow") == std::string::npos;
          },
          "the rethrow site"));
}

// The standard library's frames between the user's code and the throw are
// shown (they are the user's calls).
constexpr int kAtLine = __LINE__ + 4;
__attribute__((noinline)) int index_out_of_range() {
  std::vector<int> v(3);
  asm volatile("" : : "r"(v.data()) : "memory");
  int x = v.at(10);
  asm volatile("");
  return x;
}

TEST(PanicTraceback, ThroughTheStandardLibrary) {
  EXPECT_EXIT(die_in_goroutine(1, index_out_of_range), ::testing::ExitedWithCode(2),
      output_that(
          [](const std::string& out) {
            std::string b = announced_block(out);
            return out.find("panic: vector::_M_range_check") != std::string::npos &&
                   out.find(" [std::out_of_range]\n") != std::string::npos &&
                   has_frame(b, "index_out_of_range()", kFile, kAtLine) &&
                   b.find("std::vector<int, std::allocator<int> >::at") != std::string::npos;
          },
          "std::vector::at's frames, then the caller"));
}

TEST(PanicTraceback, ExceptionNotDerivedFromStdException) {
  EXPECT_EXIT(die_in_goroutine(1, [] { throw 42; }), ::testing::ExitedWithCode(2),
              goroutine_report("panic: 42 [int]\n\n"));
}

// ---- the panic line names the exception's type (gmp/diag/exception.hpp) ----

TEST(PanicType, StdExceptionNamesItsTypeInBrackets) {
  EXPECT_EXIT(die_in_goroutine(1, [] { throw std::out_of_range("index 7 past the end"); }),
              ::testing::ExitedWithCode(2), goroutine_report("panic: index 7 past the end [std::out_of_range]\n\n"));
}

TEST(PanicType, UserTypeInANamespace) {
  EXPECT_EXIT(die_in_goroutine(1, [] { throw acme::billing::Overdrawn("account 12 overdrawn by 3"); }),
              ::testing::ExitedWithCode(2),
              goroutine_report("panic: account 12 overdrawn by 3 [acme::billing::Overdrawn]\n\n"));
}

// Rethrown from a handler of its base class: still its own (dynamic) type.
TEST(PanicType, DynamicTypeNotTheHandlersType) {
  EXPECT_EXIT(die_in_goroutine(1,
                               [] {
                                 try {
                                   throw acme::billing::Overdrawn("late fee");
                                 } catch (const std::exception&) {
                                   throw;
                                 }
                               }),
              ::testing::ExitedWithCode(2), goroutine_report("panic: late fee [acme::billing::Overdrawn]\n\n"));
}

// Strings and numbers print their value, as Go prints panic("...") and
// panic(42); anything else only its type.
TEST(PanicType, ValuesThatAreNotExceptions) {
  EXPECT_EXIT(die_in_goroutine(1, [] { throw "out of cheese"; }), ::testing::ExitedWithCode(2),
              goroutine_report("panic: out of cheese [const char*]\n\n"));
  EXPECT_EXIT(die_in_goroutine(1, [] { throw std::string("out of cheese"); }), ::testing::ExitedWithCode(2),
              goroutine_report("panic: out of cheese [std::string]\n\n"));
  EXPECT_EXIT(die_in_goroutine(1, [] { throw -7L; }), ::testing::ExitedWithCode(2),
              goroutine_report("panic: -7 [long]\n\n"));
  EXPECT_EXIT(die_in_goroutine(1, [] { throw acme::billing::Receipt{7}; }), ::testing::ExitedWithCode(2),
              goroutine_report("panic: [acme::billing::Receipt]\n\n"));
}

// The runtime's own panics are Go's texts exactly, without a type; so is
// a gort::panic_error the user throws. A class derived from it is the
// user's type and is named.
TEST(PanicType, RuntimePanicsKeepGosTextWithoutAType) {
  EXPECT_EXIT(die_in_goroutine(1,
                               [] {
                                 auto ch = gort::make_chan<int>();
                                 ch.close();
                                 ch.close();
                               }),
              ::testing::ExitedWithCode(2), goroutine_report("panic: close of closed channel\n\n"));
  EXPECT_EXIT(die_in_goroutine(1, [] { throw gort::panic_error("sync: negative WaitGroup counter"); }),
              ::testing::ExitedWithCode(2), goroutine_report("panic: sync: negative WaitGroup counter\n\n"));
  EXPECT_EXIT(die_in_goroutine(1, [] { throw acme::billing::Frozen("account 12 frozen"); }),
              ::testing::ExitedWithCode(2), goroutine_report("panic: account 12 frozen [acme::billing::Frozen]\n\n"));
}

// std::terminate without an exception is not a panic: the handler that
// was there before gort's (the default: abort with libstdc++'s message).
TEST(PanicTraceback, ExplicitTerminateIsNotAPanic) {
  EXPECT_EXIT(die_in_goroutine(1, [] { std::terminate(); }), ::testing::KilledBySignal(SIGABRT),
      output_that([](const std::string& out) { return out.find("panic:") == std::string::npos; }, "no panic report"));
}

}  // namespace
}  // namespace gort::test

// tests/netpoll/hook_proc_test.cpp — child processes, long calls and what
// the runtime shows of hooked calls (netpoll/hook/proc.cpp): children see
// their descriptors as the program made them; waits for children and name
// lookups hand the P off; dumps show Go's wait reasons; a goroutine in a
// system call is no stall; the thread limit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/netpoll/hook_helpers.hpp"

extern char** environ;

namespace {

using gort::test::close_pipe;
using gort::test::hooked_pipe;
using gort::test::ms_created;
using gort::test::Parked;
using gort::test::Pipe;
using gort::test::real_nonblock;
using gort::test::WaitReason;

class HookProc : public gort::test::ProcsTest {};
GORT_INSTANTIATE_HOOK_PROCS(HookProc);

// What a child says of its descriptor 0: the flags line of
// /proc/self/fdinfo/0 (octal), through a pipe.
std::string read_all(int fd) {
  std::string s;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

bool child_saw_blocking(const std::string& fdinfo) {
  size_t at = fdinfo.find("flags:");
  if (at == std::string::npos) return false;
  long flags = std::strtol(fdinfo.c_str() + at + 6, nullptr, 8);
  return (flags & O_NONBLOCK) == 0;
}

const char* kFdinfoArgv[] = {"/bin/cat", "/proc/self/fdinfo/0", nullptr};

// posix_spawn with the goroutine's pipe as the child's stdin (adddup2 of a
// close-on-exec end): the child sees a blocking descriptor; and the parent
// goes on parking on it.
TEST_P(HookProc, PosixSpawnChildSeesTheFlagsTheProgramSet) {
  run_test([] {
    Pipe in = hooked_pipe(), out = hooked_pipe();
    ASSERT_TRUE(real_nonblock(in.r));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in.r, 0);
    posix_spawn_file_actions_adddup2(&fa, out.w, 1);
    pid_t pid;
    ASSERT_EQ(::posix_spawn(&pid, kFdinfoArgv[0], &fa, nullptr, const_cast<char**>(kFdinfoArgv), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out.w);
    std::string info = read_all(out.r);
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_TRUE(child_saw_blocking(info)) << info;
    EXPECT_FALSE(real_nonblock(in.r)) << "a descriptor shared with a child keeps the program's flags";
    // The parent still parks on it (as an inherited descriptor now).
    Parked reader;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      reader.mark();
      char c = 0;
      EXPECT_EQ(::read(in.r, &c, 1), 1);
      wg.done();
    });
    EXPECT_TRUE(reader.wait(WaitReason::kIOWait));
    EXPECT_EQ(::write(in.w, "x", 1), 1);
    wg.wait();
    close_pipe(in);
    ::close(out.r);
  });
}

// fork and exec by hand: a descriptor without close-on-exec gets the
// program's flags back before the fork.
TEST_P(HookProc, ForkExecChildSeesTheFlagsTheProgramSet) {
  run_test([] {
    Pipe in = hooked_pipe(0), out = hooked_pipe();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(in.r, 0);
      ::dup2(out.w, 1);
      ::execv(kFdinfoArgv[0], const_cast<char**>(kFdinfoArgv));
      ::_exit(127);
    }
    ASSERT_GT(pid, 0);
    ::close(out.w);
    std::string info = read_all(out.r);
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(child_saw_blocking(info)) << info;
    close_pipe(in);
    ::close(out.r);
  });
}

TEST_P(HookProc, SystemAndPopenRunTheirChildren) {
  run_test([] {
    EXPECT_EQ(::system("exit 3"), 3 << 8);
    FILE* f = ::popen("echo popen-ok", "r");
    ASSERT_NE(f, nullptr);
    char buf[64] = {};
    EXPECT_NE(std::fgets(buf, sizeof buf, f), nullptr);
    EXPECT_EQ(std::string(buf), "popen-ok\n");
    EXPECT_EQ(::pclose(f), 0);
  });
}

// A goroutine that waits for a child hands its P off at once: on one P,
// another goroutine runs meanwhile.
TEST_P(HookProc, WaitingForAChildHandsThePOff) {
  run_test([] {
    pid_t pid;
    const char* argv[] = {"/bin/sleep", "0.2", nullptr};
    ASSERT_EQ(::posix_spawn(&pid, argv[0], nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    std::atomic<bool> waited{false};
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      int status;
      EXPECT_EQ(::waitpid(pid, &status, 0), pid);
      waited = true;
      wg.done();
    });
    int ticks = 0;
    while (!waited.load()) {
      gort::sleep(absl::Milliseconds(5));
      ticks++;
    }
    wg.wait();
    EXPECT_GT(ticks, 10) << "the P stayed with the waiting thread";
  });
}

// A numeric address is answered without a hand-off (no thread is made for
// it); a name goes through glibc's resolver as a long call.
TEST_P(HookProc, NameLookups) {
  run_test([] {
    int ms_before = ms_created();
    for (int i = 0; i < 200; i++) {
      addrinfo* res = nullptr;
      ASSERT_EQ(::getaddrinfo("127.0.0.1", "80", nullptr, &res), 0);
      ::freeaddrinfo(res);
    }
    EXPECT_LE(ms_created() - ms_before, 1) << "numeric lookups handed the P off";
    addrinfo* res = nullptr;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    ASSERT_EQ(::getaddrinfo("localhost", nullptr, &hints, &res), 0);
    ASSERT_NE(res, nullptr);
    EXPECT_EQ(reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    ::freeaddrinfo(res);
    EXPECT_EQ(::getaddrinfo("no-such-host.invalid", nullptr, &hints, &res), EAI_NONAME);
  });
}

// Dumps name hooked waits with Go's reasons: `IO wait` for a read,
// `sleep` for a libc sleep.
TEST(HookProcDump, SigquitShowsGosWaitReasons) {
  EXPECT_EXIT(
      {
        ::alarm(60);
        gort::run(
            [] {
              Pipe p = hooked_pipe();
              Parked reader, sleeper;
              gort::go([&] {
                reader.mark();
                char c;
                (void)!::read(p.r, &c, 1);
              });
              gort::go([&] {
                sleeper.mark();
                ::sleep(100);
              });
              reader.wait(WaitReason::kIOWait);
              sleeper.wait(WaitReason::kSleep);
              ::kill(::getpid(), SIGQUIT);
              gort::sleep(absl::Seconds(30));
            },
            gort::test::hook_cfg(2));
      },
      ::testing::ExitedWithCode(2),
      gort::test::output_that(
          [](const std::string& out) {
            // Ids come from per-P batches: the spawner may change P between
            // the two spawns.
            return std::regex_search(out, std::regex("goroutine [0-9]+ \\[IO wait\\]:\nread\\(\\)\n")) &&
                   std::regex_search(out, std::regex("goroutine [0-9]+ \\[sleep\\]:\nsleep\\(\\)\n")) &&
                   out.find("gort::internal") == std::string::npos;
          },
          "a goroutine [IO wait] in read(), one [sleep] in sleep(), no runtime frames"));
}

// Goroutines blocked in hooked calls, or in long calls (a child's wait),
// are not stalls: no report, however long they wait.
TEST(HookProcStall, HookedWaitsAreNoStalls) {
  EXPECT_EXIT(
      {
        setenv("GORT_DEBUG", "stallreport=100", 1);
        ::alarm(60);
        gort::run(
            [] {
              Pipe p = hooked_pipe();
              gort::WaitGroup wg;
              for (int i = 0; i < 20; i++) {
                wg.add(1);
                gort::go([&] {
                  char c;
                  (void)!::read(p.r, &c, 1);
                  wg.done();
                });
              }
              wg.add(1);
              gort::go([&] {
                pid_t pid;
                const char* argv[] = {"/bin/sleep", "0.4", nullptr};
                if (::posix_spawn(&pid, argv[0], nullptr, nullptr, const_cast<char**>(argv), environ) == 0) {
                  int status;
                  ::waitpid(pid, &status, 0);
                }
                wg.done();
              });
              ::usleep(500000);
              for (int i = 0; i < 20; i++) (void)!::write(p.w, "x", 1);
              wg.wait();
              close_pipe(p);
            },
            gort::test::hook_cfg(2));
        ::_exit(0);
      },
      ::testing::ExitedWithCode(0),
      gort::test::output_that([](const std::string& out) { return out.find("gort: stall") == std::string::npos; },
                              "no stall report"));
}

// More threads than the limit (goroutines blocked in long calls hold
// theirs): Go's text, and the process dies.
TEST(HookProcThreads, ThreadLimitIsGosThreadExhaustion) {
  EXPECT_EXIT(
      {
        setenv("GORT_MAXTHREADS", "6", 1);
        ::alarm(60);
        gort::run(
            [] {
              // Children that end when this process does: cat, reading a
              // pipe whose writer only this process holds.
              Pipe hold = hooked_pipe();
              for (int i = 0; i < 20; i++) {
                gort::go([&] {
                  posix_spawn_file_actions_t fa;
                  posix_spawn_file_actions_init(&fa);
                  posix_spawn_file_actions_adddup2(&fa, hold.r, 0);
                  pid_t pid;
                  const char* argv[] = {"/bin/cat", nullptr};
                  if (::posix_spawn(&pid, argv[0], &fa, nullptr, const_cast<char**>(argv), environ) == 0) {
                    int status;
                    ::waitpid(pid, &status, 0);
                  }
                  posix_spawn_file_actions_destroy(&fa);
                });
              }
              ::sleep(10);
            },
            gort::test::hook_cfg(2));
      },
      ::testing::ExitedWithCode(2), "runtime: program exceeds 6-thread limit\nfatal error: thread exhaustion");
}

}  // namespace

// tests/stdlib/os/exec_test.cpp — gort::exec (stdlib/os/exec.cpp), Go's os/exec:
// run / output / combined_output, exit statuses and signals in Go's words,
// pipes both ways, environment and working directory, $PATH lookup and its
// errors, kill and context cancellation, misuse (start twice, wait twice,
// pipes after start), many children at once on several Ps, and nothing
// left behind: no zombie, no fd, no goroutine (run_test checks the last
// two).
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "gort/context.hpp"
#include "gort/exec.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::msg;
using gort::test::must;
using gort::test::NetTest;

// Children of this process that are zombies (exited, not reaped).
int zombies() {
  int n = 0;
  DIR* d = opendir("/proc");
  if (d == nullptr) return -1;
  std::string self = std::to_string(getpid());
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string path = std::string("/proc/") + e->d_name + "/stat";
    FILE* f = fopen(path.c_str(), "r");
    if (f == nullptr) continue;
    char buf[512];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    std::string s(buf);
    size_t rp = s.rfind(')');
    if (rp == std::string::npos || rp + 4 >= s.size()) continue;
    char state = s[rp + 2];
    std::string rest = s.substr(rp + 4);
    std::string ppid = rest.substr(0, rest.find(' '));
    if (ppid == self && state == 'Z') n++;
  }
  closedir(d);
  return n;
}

class Exec : public NetTest {
 protected:
  void TearDown() override { EXPECT_EQ(zombies(), 0) << "a child was left unreaped"; }
};
GORT_INSTANTIATE_STDLIB_PROCS(Exec);

TEST_P(Exec, RunReportsExitStatusesInGoWords) {
  run_test([] {
    EXPECT_TRUE(gort::exec::command("true").run().ok());
    auto c = gort::exec::command("sh", {"-c", "exit 3"});
    absl::Status s = c.run();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnknown);
    EXPECT_EQ(msg(s), "exit status 3");
    EXPECT_EQ(c.exit_code(), 3);
    auto k = gort::exec::command("sh", {"-c", "kill -TERM $$"});
    s = k.run();
    EXPECT_EQ(msg(s), "signal: terminated");
    EXPECT_EQ(k.exit_code(), -1);
  });
}

TEST_P(Exec, OutputCapturesStdoutAndStderrGoesIntoTheError) {
  run_test([] {
    auto out = gort::exec::command("echo", {"hello", "world"}).output();
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, "hello world\n");
    auto bad = gort::exec::command("sh", {"-c", "echo partial; echo oops >&2; exit 2"}).output();
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(msg(bad.status()), "exit status 2: oops");
    auto both = gort::exec::command("sh", {"-c", "echo out; echo err >&2"}).combined_output();
    ASSERT_TRUE(both.ok()) << both.status();
    EXPECT_EQ(*both, "out\nerr\n");
  });
}

TEST_P(Exec, StdinFromAStringAndLargeOutput) {
  run_test([] {
    auto sort = gort::exec::command("sort", {"-r"});
    ASSERT_TRUE(sort.set_stdin("b\na\nc\n").ok());
    EXPECT_EQ(must(sort.output()), "c\nb\na\n");
    // 4 MiB through both pipes: the feeder and the reader both park.
    std::string big;
    for (int i = 0; i < 4 << 16; i++) big += "0123456789abcde\n";
    auto cat = gort::exec::command("cat");
    ASSERT_TRUE(cat.set_stdin(big).ok());
    auto out = cat.output();
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(*out == big) << out->size() << " bytes of " << big.size();
    // A child that reads nothing: the feeder gets EPIPE, nothing hangs.
    auto ignore = gort::exec::command("true");
    ASSERT_TRUE(ignore.set_stdin(big).ok());
    EXPECT_TRUE(ignore.run().ok());
  });
}

TEST_P(Exec, PipesBothWays) {
  run_test([] {
    auto cmd = gort::exec::command("tr", {"a-z", "A-Z"});
    auto in = must(cmd.stdin_pipe());
    auto out = must(cmd.stdout_pipe());
    ASSERT_TRUE(cmd.start().ok());
    EXPECT_GT(cmd.pid(), 0);
    gort::go([&in] {
      for (int i = 0; i < 100; i++) (void)in.write_string("line\n");
      (void)in.close();
    });
    std::string got;
    char buf[256];
    for (;;) {
      auto n = out.read(absl::MakeSpan(buf));
      ASSERT_TRUE(n.ok()) << n.status();
      if (*n == 0) break;
      got.append(buf, *n);
    }
    EXPECT_TRUE(cmd.wait().ok());
    std::string want;
    for (int i = 0; i < 100; i++) want += "LINE\n";
    EXPECT_EQ(got, want);
  });
}

TEST_P(Exec, EnvironmentAndDirectory) {
  gort::test::TempDir tmp;
  run_test([&] {
    auto c = gort::exec::command("sh", {"-c", "echo $GORT_X; pwd"});
    c.env = std::vector<std::string>{"GORT_X=42", "PATH=/usr/bin:/bin"};
    c.dir = tmp.path();
    EXPECT_EQ(must(c.output()), "42\n" + tmp.path() + "\n");
    setenv("GORT_INHERITED", "yes", 1);
    EXPECT_EQ(must(gort::exec::command("sh", {"-c", "echo $GORT_INHERITED"}).output()), "yes\n");
    unsetenv("GORT_INHERITED");
    auto nodir = gort::exec::command("true");
    nodir.dir = tmp.path() + "/missing";
    absl::Status s = nodir.run();
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(msg(s), "chdir " + tmp.path() + "/missing: No such file or directory");
  });
}

TEST_P(Exec, LookPathErrors) {
  run_test([] {
    absl::Status s = gort::exec::command("gort-no-such-program").run();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(msg(s), "exec: \"gort-no-such-program\": executable file not found in $PATH");
    s = gort::exec::command("/no/such/program").run();
    EXPECT_EQ(msg(s), "exec: \"/no/such/program\": stat /no/such/program: No such file or directory");
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
    gort::test::TempDir tmp;
    std::string plain = tmp.path() + "/not-executable";
    FILE* f = fopen(plain.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
    chmod(plain.c_str(), 0644);
    s = gort::exec::command(plain).run();
    EXPECT_EQ(msg(s), "exec: \"" + plain + "\": permission denied");
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
    auto p = gort::exec::look_path("sh");
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->back(), 'h');
    EXPECT_FALSE(gort::exec::look_path("").ok());
  });
}

TEST_P(Exec, MisuseIsAnErrorNotACrash) {
  run_test([] {
    auto c = gort::exec::command("true");
    EXPECT_EQ(c.wait(), absl::FailedPreconditionError("exec: not started"));
    EXPECT_EQ(c.kill(), absl::FailedPreconditionError("exec: not started"));
    EXPECT_EQ(c.pid(), -1);
    ASSERT_TRUE(c.start().ok());
    EXPECT_EQ(c.start(), absl::FailedPreconditionError("exec: already started"));
    EXPECT_EQ(c.stdout_pipe().status(), absl::FailedPreconditionError("exec: StdoutPipe after process started"));
    EXPECT_TRUE(c.wait().ok());
    EXPECT_EQ(c.wait(), absl::FailedPreconditionError("exec: Wait was already called"));
    EXPECT_EQ(c.kill(), absl::FailedPreconditionError("os: process already finished"));
    auto d = gort::exec::command("true");
    ASSERT_TRUE(d.stdout_pipe().ok());
    EXPECT_EQ(d.stdout_pipe().status(), absl::FailedPreconditionError("exec: Stdout already set"));
    EXPECT_TRUE(d.set_stdin("x").ok());
    EXPECT_EQ(d.stdin_pipe().status(), absl::FailedPreconditionError("exec: Stdin already set"));
    EXPECT_EQ(d.signal(0).code(), absl::StatusCode::kFailedPrecondition);  // not started
  });
}

TEST_P(Exec, KillEndsAWaitingGoroutine) {
  run_test([] {
    auto c = gort::exec::command("sleep", {"30"});
    ASSERT_TRUE(c.start().ok());
    absl::Status s;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      s = c.wait();  // parks on the pidfd
      wg.done();
    });
    gort::sleep(absl::Milliseconds(20));
    EXPECT_TRUE(c.kill().ok());
    wg.wait();
    EXPECT_EQ(msg(s), "signal: killed");
    EXPECT_EQ(c.signal(-1), absl::InvalidArgumentError("os: invalid signal -1"));
  });
}

TEST_P(Exec, ContextCancellationKillsTheChild) {
  run_test([] {
    auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(50));
    auto c = gort::exec::command_context(ctx, "sleep", {"30"});
    auto start = absl::Now();
    absl::Status s = c.run();
    EXPECT_EQ(msg(s), "signal: killed");
    EXPECT_LT(absl::Now() - start, absl::Seconds(20));
    cancel();
    // Already done: not even started.
    auto late = gort::exec::command_context(ctx, "true");
    EXPECT_EQ(late.run().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(late.pid(), -1);
    // Finishes first: the context's later cancellation is harmless.
    auto [ctx2, cancel2] = gort::with_cancel(gort::background());
    EXPECT_TRUE(gort::exec::command_context(ctx2, "true").run().ok());
    cancel2();
  });
}

TEST_P(Exec, DestroyingAStartedCmdKillsAndReapsIt) {
  run_test([] {
    pid_t pid;
    {
      auto c = gort::exec::command("sleep", {"30"});
      ASSERT_TRUE(c.start().ok());
      pid = c.pid();
      auto moved = std::move(c);  // the State moves; the child is the same
      EXPECT_EQ(moved.pid(), pid);
    }
    EXPECT_EQ(::kill(pid, 0), -1) << "the child outlived its Cmd";
    EXPECT_EQ(errno, ESRCH);
  });
}

TEST_P(Exec, ManyChildrenAtOnce) {
  run_test([] {
    constexpr int kChildren = 40;
    std::atomic<int> ok{0};
    gort::WaitGroup wg;
    for (int i = 0; i < kChildren; i++) {
      wg.add(1);
      gort::go([i, &ok, &wg] {
        auto out = gort::exec::command("sh", {"-c", "echo " + std::to_string(i) + "; exit " + std::to_string(i % 4)})
                       .output();
        if (i % 4 == 0) {
          if (out.ok() && *out == std::to_string(i) + "\n") ok++;
        } else if (!out.ok() && msg(out.status()) == "exit status " + std::to_string(i % 4)) {
          ok++;
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(ok.load(), kChildren);
  });
}

TEST_P(Exec, ChildInheritsNoDescriptorOfGorts) {
  run_test([] {
    auto p = gort::os::pipe();  // open in the parent: must not leak into the child
    ASSERT_TRUE(p.ok());
    auto out = gort::exec::command("ls", {"/proc/self/fd"}).output();
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<std::string> fds;
    for (size_t at = 0; at < out->size();) {
      size_t nl = out->find('\n', at);
      fds.push_back(out->substr(at, nl - at));
      at = nl == std::string::npos ? out->size() : nl + 1;
    }
    for (int fd : {p->first.fd(), p->second.fd()}) {
      EXPECT_EQ(std::count(fds.begin(), fds.end(), std::to_string(fd)), 0) << "fd " << fd << " leaked: " << *out;
    }
    for (const char* std_fd : {"0", "1", "2"}) EXPECT_EQ(std::count(fds.begin(), fds.end(), std_fd), 1) << *out;
  });
}

}  // namespace

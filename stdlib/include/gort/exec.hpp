// gort/exec.hpp — Go's os/exec: run other programs from goroutines.
//
// wait() parks the goroutine, not the thread: the child's pidfd sits in the
// netpoller and becomes readable when the child exits. Pipes to the child's
// stdin, stdout and stderr are gort::os::File ends that park too, so one
// goroutine can feed a child while another drains it.
//
//   gort::exec::Cmd cmd = gort::exec::command("sort", {"-r"});
//   cmd.set_stdin("b\na\nc\n");
//   absl::StatusOr<std::string> out = cmd.output();   // "c\nb\na\n"
//
//   // A child that must not outlive a deadline:
//   auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(2));
//   gort::exec::Cmd slow = gort::exec::command_context(ctx, "sleep", {"10"});
//   absl::Status s = slow.run();                      // "signal: killed" after 2 s
//
// Semantics follow Go's: the program name is looked up in $PATH unless it
// contains a slash; the child gets the parent's environment unless `env` is
// set; stdin, stdout and stderr are /dev/null unless given (inherit, a
// pipe, or a string for stdin); descriptors are not inherited (gort opens
// everything close-on-exec). Errors use Go's texts:
//   exec: "nosuch": executable file not found in $PATH      (NotFound)
//   fork/exec /no/such: No such file or directory            (errno's code)
//   exit status 3 / signal: killed                          (Unknown; see exit_code)
//   exec: already started, exec: not started, exec: Wait was already called,
//   exec: Stdout already set, exec: StdoutPipe after process started
//                                                            (FailedPrecondition)
//
// Thread-safety: a Cmd is used by one goroutine at a time, except kill(),
// which any goroutine may call while another waits. Costs: posix_spawn
// (vfork: no copy of the parent's memory), a pidfd and a poll descriptor
// per child, two descriptors per pipe.
//
// Lifetime: destroying a started Cmd that was not waited for kills the
// child and reaps it (no zombie is left behind; Go would leak it). A Cmd is
// move-only; a moved-from Cmd holds nothing (its child, if any, went with
// the move): its calls return absl::InvalidArgumentError("invalid argument")
// at once, pid() and exit_code() -1, as every I/O handle does
// (docs/standard-cpp.md, "Copying and moving handles"). The runtime must be
// running (inside gort::run).
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gort/context.hpp"
#include "gort/detail/api.hpp"
#include "gort/os.hpp"

namespace gort::exec {

// Where a standard stream of the child goes when no pipe was asked for.
enum class Stdio : uint8_t { kNull, kInherit };

class GORT_API Cmd {
 public:
  // Prefer command() / command_context(). `path` is used as given.
  Cmd(std::string path, std::vector<std::string> args);
  Cmd(Cmd&&) noexcept;
  Cmd& operator=(Cmd&&) noexcept;
  Cmd(const Cmd&) = delete;
  Cmd& operator=(const Cmd&) = delete;
  ~Cmd();

  // The program and its argv (args[0] is the name, as Go's Cmd.Args).
  std::string path;
  std::vector<std::string> args;
  // "KEY=value" entries; unset (nullopt) inherits the parent's environment.
  std::optional<std::vector<std::string>> env;
  // The working directory; empty: the parent's.
  std::string dir;
  Stdio stdin_mode = Stdio::kNull;
  Stdio stdout_mode = Stdio::kNull;
  Stdio stderr_mode = Stdio::kNull;

  // The child reads `data` on its stdin (a goroutine writes it through a
  // pipe and closes it; a child that stops reading early is fine).
  absl::Status set_stdin(std::string data);
  // Pipes to the child's streams, for this side (Go's StdinPipe, ...):
  // before start() only. Read a stdout/stderr pipe to its end before
  // calling wait() (the child may block writing to a full pipe); close a
  // stdin pipe when done writing (the child sees end of file).
  absl::StatusOr<os::File> stdin_pipe();
  absl::StatusOr<os::File> stdout_pipe();
  absl::StatusOr<os::File> stderr_pipe();

  // Starts the child; does not wait for it.
  absl::Status start();
  // Waits for the child to exit (parks), releases its resources, and
  // reports how it ended: OK for exit status 0.
  absl::Status wait();
  // start() then wait().
  absl::Status run();
  // Runs the child and returns what it wrote on stdout. On failure (a
  // non-zero exit) the error's message ends with what it wrote on stderr,
  // as Go's ExitError.Stderr: "exit status 1: <stderr>".
  absl::StatusOr<std::string> output();
  // Runs the child and returns stdout and stderr interleaved.
  absl::StatusOr<std::string> combined_output();

  // Sends SIGKILL (Go's Process.Kill); an error if not started or already
  // waited for. signal() sends another signal.
  absl::Status kill();
  absl::Status signal(int sig);

  // The child's pid once started, else -1.
  pid_t pid() const;
  // After wait(): the exit status, or -1 if a signal ended the child.
  int exit_code() const;

  struct State;

 private:
  friend Cmd command_context(Context ctx, std::string name, std::vector<std::string> args);
  absl::StatusOr<os::File> make_pipe(int which);
  absl::StatusOr<std::string> collect(bool combined);

  std::unique_ptr<State> st_;
};

// Go's exec.Command: `name` is looked up in $PATH at start() unless it
// contains a slash; argv is {name, args...}.
GORT_API Cmd command(std::string name, std::vector<std::string> args = {});
// As command(), and the child is killed (SIGKILL) if ctx is done before it
// exits.
GORT_API Cmd command_context(Context ctx, std::string name, std::vector<std::string> args = {});
// Go's exec.LookPath: the executable `file` would run, searched in $PATH
// when it has no slash.
GORT_API absl::StatusOr<std::string> look_path(const std::string& file);

}  // namespace gort::exec

// stdlib/os/exec.cpp — gort::exec::Cmd (Go's os/exec) on posix_spawn and a
// pidfd in the netpoller.
//
// Life of a Cmd:
//   | state    | how it gets there               | what is held                    |
//   |----------|---------------------------------|---------------------------------|
//   | created  | command()                       | child ends of pipes (raw fds)   |
//   | started  | start(): posix_spawn            | pid, pidfd (a polled os::File), |
//   |          |                                 | helpers (stdin writer, ctx watch)|
//   | waited   | wait(): waitid(P_PIDFD) reaped  | nothing; exit status            |
// The pidfd becomes readable when the child exits, so wait() is a RawConn
// read whose attempt is waitid(WNOHANG): no thread waits, no SIGCHLD is
// needed, and kill() through the pidfd can never hit a recycled pid. The
// pidfd is closed only after the helpers have finished, so a context
// watcher's kill is always aimed at this child (or at its zombie: ESRCH).
#include "gort/exec.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "gort/chan.hpp"
#include "gort/runtime.hpp"
#include "gort/sync.hpp"
#include "stdlib/net/net_error.hpp"
#include "gmp/os/sys.hpp"

extern char** environ;

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef PIDFD_NONBLOCK
#define PIDFD_NONBLOCK O_NONBLOCK
#endif

namespace gort::exec {

using internal::cat;
using internal::errno_code;
using internal::errno_text;

struct Cmd::State {
  std::optional<Context> ctx;
  std::atomic<bool> started{false};
  std::atomic<bool> waited{false};
  pid_t pid = -1;
  os::File pidfd;  // invalid without pidfd support: wait blocks a thread
  int exit_code = -1;
  int term_sig = 0;
  bool core_dumped = false;
  // The child's ends of pipes for fds 0, 1, 2 (-1: use the Stdio mode);
  // closed in the parent once the child has them.
  int child_fd[3] = {-1, -1, -1};
  std::optional<std::string> stdin_data;
  Chan<std::monostate> exited = make_chan<std::monostate>();
  WaitGroup helpers;

  // Serialises signals with the release of the pidfd.
  Mutex mu;
  bool reaped ABSL_GUARDED_BY(mu) = false;

  ~State() { close_child_ends(); }
  void close_child_ends() {
    int closed[3] = {-1, -1, -1};
    for (int i = 0; i < 3; i++) {
      int fd = child_fd[i];
      child_fd[i] = -1;
      // combined_output gives one descriptor for 1 and 2: close it once.
      if (fd >= 0 && fd != closed[0] && fd != closed[1]) internal::sys::close(fd);
      closed[i] = fd;
    }
  }
};

namespace {

absl::Status precondition(std::string_view what) { return absl::FailedPreconditionError(std::string(what)); }

// Go's rule (exec.findExecutable): a regular file with an execute bit set.
// (access(X_OK) answers yes to root for some files no one may execute.)
bool executable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

const char* const kStreamName[3] = {"Stdin", "Stdout", "Stderr"};

// Go's signal names are strsignal's, lower-cased first letter ("killed",
// "terminated", "segmentation fault").
std::string signal_text(int sig) {
  char buf[64];
  const char* s = sigabbrev_np(sig) != nullptr ? strsignal(sig) : nullptr;
  std::snprintf(buf, sizeof buf, "%s", s != nullptr ? s : "unknown signal");
  if (buf[0] >= 'A' && buf[0] <= 'Z') buf[0] = static_cast<char>(buf[0] - 'A' + 'a');
  return buf;
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, PIDFD_NONBLOCK)); }

absl::Status signal_locked(Cmd::State& st, int sig) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu);

absl::Status send_signal(Cmd::State& st, int sig) {
  if (!st.started.load()) return precondition("exec: not started");
  if (sig <= 0 || sig >= NSIG) return absl::InvalidArgumentError(cat("os: invalid signal ", sig));
  st.mu.lock();
  absl::Status r = signal_locked(st, sig);
  st.mu.unlock();
  return r;
}

absl::Status signal_locked(Cmd::State& st, int sig) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
  if (st.reaped) return precondition("os: process already finished");
  int err = 0;
  if (st.pidfd.valid()) {
    absl::Status s = st.pidfd.syscall_conn().control([&](int fd) {
      if (::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0) != 0) err = errno;
    });
    if (!s.ok()) err = ESRCH;
  } else if (::kill(st.pid, sig) != 0) {
    err = errno;  // not yet reaped (reaped is false): the pid is still ours
  }
  if (err == ESRCH) return precondition("os: process already finished");
  if (err != 0) return absl::Status(errno_code(err), cat("os: kill: ", errno_text(err)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> look_path(const std::string& file) {
  if (file.find('/') != std::string::npos) {
    struct stat st;
    if (::stat(file.c_str(), &st) != 0) {
      int e = errno;
      return absl::Status(errno_code(e), cat("exec: \"", file, "\": stat ", file, ": ", errno_text(e)));
    }
    if (!executable(file)) return absl::PermissionDeniedError(cat("exec: \"", file, "\": permission denied"));
    return file;
  }
  if (!file.empty()) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
    for (;;) {
      size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      std::string cand = cat(dir.empty() ? std::string_view(".") : dir, "/", file);
      if (executable(cand)) return cand;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  return absl::NotFoundError(cat("exec: \"", file, "\": executable file not found in $PATH"));
}

Cmd::Cmd(std::string p, std::vector<std::string> a)
    : path(std::move(p)), args(std::move(a)), st_(std::make_unique<State>()) {}

Cmd::Cmd(Cmd&&) noexcept = default;

Cmd& Cmd::operator=(Cmd&& o) noexcept {
  if (this != &o) {
    Cmd dying(std::move(*this));  // reaps our child, if any
    path = std::move(o.path);
    args = std::move(o.args);
    env = std::move(o.env);
    dir = std::move(o.dir);
    stdin_mode = o.stdin_mode;
    stdout_mode = o.stdout_mode;
    stderr_mode = o.stderr_mode;
    st_ = std::move(o.st_);
  }
  return *this;
}

Cmd::~Cmd() {
  if (st_ == nullptr || !st_->started.load() || st_->waited.load()) return;
  // Never leave a zombie (or a child nobody can reach) behind.
  (void)kill();
  (void)wait();
}

Cmd command(std::string name, std::vector<std::string> args) {
  std::vector<std::string> argv;
  argv.reserve(args.size() + 1);
  argv.push_back(name);
  for (std::string& a : args) argv.push_back(std::move(a));
  return Cmd(std::move(name), std::move(argv));
}

Cmd command_context(Context ctx, std::string name, std::vector<std::string> args) {
  Cmd c = command(std::move(name), std::move(args));
  c.st_->ctx = std::move(ctx);
  return c;
}

absl::StatusOr<os::File> Cmd::make_pipe(int which) {
  if (st_ == nullptr) return internal::invalid_error();  // moved from
  if (st_->started.load()) return precondition(cat("exec: ", kStreamName[which], "Pipe after process started"));
  if (st_->child_fd[which] >= 0 || (which == 0 && st_->stdin_data.has_value())) {
    return precondition(cat("exec: ", kStreamName[which], " already set"));
  }
  int p[2];
  // Blocking ends (the child expects ordinary stdio); the parent's end is
  // made non-blocking and polled.
  if (internal::sys::pipe2(p, O_CLOEXEC) != 0) return absl::Status(errno_code(errno), cat("pipe2: ", errno_text(errno)));
  int parent = which == 0 ? p[1] : p[0];
  int child = which == 0 ? p[0] : p[1];
  internal::sys::fcntl(parent, F_SETFL, internal::sys::fcntl(parent, F_GETFL) | O_NONBLOCK);
  absl::StatusOr<os::File> f = os::new_file(parent, which == 0 ? "|1" : "|0");
  if (!f.ok()) {
    internal::sys::close(child);
    return f.status();
  }
  st_->child_fd[which] = child;
  return f;
}

absl::StatusOr<os::File> Cmd::stdin_pipe() { return make_pipe(0); }
absl::StatusOr<os::File> Cmd::stdout_pipe() { return make_pipe(1); }
absl::StatusOr<os::File> Cmd::stderr_pipe() { return make_pipe(2); }

absl::Status Cmd::set_stdin(std::string data) {
  if (st_ == nullptr) return internal::invalid_error();
  if (st_->started.load()) return precondition("exec: already started");
  if (st_->child_fd[0] >= 0 || st_->stdin_data.has_value()) return precondition("exec: Stdin already set");
  st_->stdin_data = std::move(data);
  return absl::OkStatus();
}

absl::Status Cmd::start() {
  if (st_ == nullptr) return internal::invalid_error();
  State& st = *st_;
  if (st.started.load()) return precondition("exec: already started");
  if (st.ctx.has_value()) {
    absl::Status e = st.ctx->err();
    if (!e.ok()) {
      st.close_child_ends();
      return e;
    }
  }
  absl::StatusOr<std::string> exe = look_path(path);
  if (!exe.ok()) {
    st.close_child_ends();
    return exe.status();
  }
  // set_stdin: a pipe and a goroutine that feeds it.
  std::optional<os::File> feeder;
  if (st.stdin_data.has_value()) {
    std::optional<std::string> data = std::move(st.stdin_data);
    st.stdin_data.reset();
    absl::StatusOr<os::File> w = make_pipe(0);
    if (!w.ok()) return w.status();
    feeder = std::move(*w);
    st.stdin_data = std::move(data);
  }

  int devnull = -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  Stdio modes[3] = {stdin_mode, stdout_mode, stderr_mode};
  for (int i = 0; i < 3; i++) {
    int src = st.child_fd[i];
    if (src < 0 && modes[i] == Stdio::kNull) {
      if (devnull < 0) devnull = internal::sys::open("/dev/null", O_RDWR | O_CLOEXEC);
      src = devnull;
    }
    if (src >= 0) posix_spawn_file_actions_adddup2(&fa, src, i);
  }
  if (!dir.empty()) posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The child starts with no signal blocked, whatever this thread had.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (env.has_value()) {
    for (std::string& e : *env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  pid_t pid = -1;
  int err = posix_spawn(&pid, exe->c_str(), &fa, &attr, argv.data(), env.has_value() ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (devnull >= 0) internal::sys::close(devnull);
  st.close_child_ends();
  if (err != 0) {
    // chdir failed or exec did: Go reports both as fork/exec.
    return absl::Status(errno_code(err), cat(err == ENOENT && !dir.empty() && ::access(dir.c_str(), F_OK) != 0
                                                 ? cat("chdir ", dir)
                                                 : cat("fork/exec ", *exe),
                                             ": ", errno_text(err)));
  }
  st.pid = pid;
  st.started.store(true);
  int pfd = pidfd_open(pid);
  if (pfd >= 0) {
    absl::StatusOr<os::File> f = os::new_file(pfd, "pidfd");
    if (f.ok()) st.pidfd = std::move(*f);
  }
  if (feeder.has_value()) {
    st.helpers.add(1);
    gort::go([s = &st, w = std::move(*feeder), data = std::move(*st.stdin_data)]() mutable {
      (void)w.write_string(data);  // EPIPE when the child does not read it all: fine
      (void)w.close();
      s->helpers.done();
    });
    st.stdin_data.reset();
  }
  if (st.ctx.has_value()) {
    st.helpers.add(1);
    gort::go([s = &st] {  // the State, not the Cmd: a Cmd may be moved
      bool cancelled = false;
      gort::select(gort::on_recv(s->ctx->done(), [&] { cancelled = true; }), gort::on_recv(s->exited));
      if (cancelled) (void)send_signal(*s, SIGKILL);
      s->helpers.done();
    });
  }
  return absl::OkStatus();
}

absl::Status Cmd::wait() {
  if (st_ == nullptr) return internal::invalid_error();
  State& st = *st_;
  if (!st.started.load()) return precondition("exec: not started");
  if (st.waited.exchange(true)) return precondition("exec: Wait was already called");
  siginfo_t info{};
  int err = 0;
  if (st.pidfd.valid()) {
    absl::Status s = st.pidfd.syscall_conn().read([&](int fd) {
      info.si_pid = 0;
      if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(fd), &info, WEXITED | WNOHANG) != 0) {
        if (errno == EINTR) return false;
        err = errno;
        return true;
      }
      return info.si_pid != 0;  // 0: still running, wait for the pidfd
    });
    if (!s.ok() && err == 0) err = EIO;
  } else {
    err = gort::blocking([&] {
      int r;
      while ((r = ::waitid(P_PID, static_cast<id_t>(st.pid), &info, WEXITED)) != 0 && errno == EINTR) {
      }
      return r == 0 ? 0 : errno;
    });
  }
  st.exited.close();
  st.helpers.wait();  // the context watcher and the stdin feeder are done
  st.mu.lock();  // no signal in flight: the pid may be reused now
  st.reaped = true;
  st.pidfd = os::File();
  st.mu.unlock();
  if (err != 0) return absl::Status(errno_code(err), cat("wait: ", errno_text(err)));
  if (info.si_code == CLD_EXITED) {
    st.exit_code = info.si_status;
    if (st.exit_code == 0) return absl::OkStatus();
    return absl::UnknownError(cat("exit status ", st.exit_code));
  }
  st.term_sig = info.si_status;
  st.core_dumped = info.si_code == CLD_DUMPED;
  return absl::UnknownError(cat("signal: ", signal_text(st.term_sig), st.core_dumped ? " (core dumped)" : ""));
}

absl::Status Cmd::run() {
  absl::Status s = start();
  if (!s.ok()) return s;
  return wait();
}

absl::Status Cmd::signal(int sig) { return st_ == nullptr ? internal::invalid_error() : send_signal(*st_, sig); }

absl::Status Cmd::kill() { return signal(SIGKILL); }

pid_t Cmd::pid() const { return st_ != nullptr && st_->started.load() ? st_->pid : -1; }

int Cmd::exit_code() const { return st_ != nullptr ? st_->exit_code : -1; }

absl::StatusOr<std::string> Cmd::collect(bool combined) {
  absl::StatusOr<os::File> out = make_pipe(1);
  if (!out.ok()) return out.status();
  std::optional<os::File> errp;
  if (combined) {
    if (st_->child_fd[2] >= 0) return precondition("exec: Stderr already set");
    st_->child_fd[2] = st_->child_fd[1];
  } else if (st_->child_fd[2] < 0 && stderr_mode == Stdio::kNull) {
    absl::StatusOr<os::File> e = make_pipe(2);
    if (!e.ok()) return e.status();
    errp = std::move(*e);
  }
  absl::Status s = start();
  if (!s.ok()) return s;
  std::string errtext;
  WaitGroup wg;
  if (errp.has_value()) {
    wg.add(1);
    gort::go([&] {
      char buf[4096];
      for (;;) {
        auto n = errp->read(absl::MakeSpan(buf));
        if (!n.ok() || *n == 0) break;
        errtext.append(buf, *n);
      }
      wg.done();
    });
  }
  std::string text;
  char buf[16384];
  for (;;) {
    auto n = out->read(absl::MakeSpan(buf));
    if (!n.ok() || *n == 0) break;
    text.append(buf, *n);
  }
  wg.wait();
  s = wait();
  if (!s.ok()) {
    while (!errtext.empty() && errtext.back() == '\n') errtext.pop_back();
    if (!errtext.empty()) return absl::Status(s.code(), cat(s.message(), ": ", errtext));
    return s;
  }
  return text;
}

absl::StatusOr<std::string> Cmd::output() { return collect(false); }
absl::StatusOr<std::string> Cmd::combined_output() { return collect(true); }

}  // namespace gort::exec

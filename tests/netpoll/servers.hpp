// tests/netpoll/servers.hpp — real servers that a test or a benchmark
// starts and stops itself: redis-server, a throwaway PostgreSQL (initdb
// into a temporary directory, trust authentication on 127.0.0.1), and the
// http_server sample. Used outside gort::run (or from plain threads): they
// are ordinary child processes, reaped by the destructor.
//
// A server that cannot start (its program is not installed) leaves
// error() set; callers skip with that message. bootstrap installs them.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace gort::test {

// A TCP port on 127.0.0.1 that nobody listens on (bound and released: a
// race with other programs is possible, and harmless here).
inline int free_port() {
  int s = static_cast<int>(::syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t l = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &l);
  ::syscall(SYS_close, s);
  return ntohs(a.sin_port);
}

// Whether something accepts TCP connections on 127.0.0.1:port.
inline bool port_open(int port) {
  int s = static_cast<int>(::syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::syscall(SYS_connect, s, &a, sizeof a) == 0;
  ::syscall(SYS_close, s);
  return ok;
}

// A child process: argv[0] run with the given argv, optionally as another
// user (uid/gid >= 0), its stdout (and stderr) into `out_fd` if >= 0.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { stop(SIGTERM); }

  bool start(const std::vector<std::string>& argv, int out_fd = -1, uid_t uid = static_cast<uid_t>(-1),
             gid_t gid = static_cast<gid_t>(-1)) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      // Dies with the thread that started it (the test's main thread), even
      // if the test is killed.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (out_fd >= 0) {
        ::dup2(out_fd, 1);
        ::dup2(out_fd, 2);
      } else {
        int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        ::dup2(null, 2);
      }
      if (gid != static_cast<gid_t>(-1) && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0)) ::_exit(126);
      if (uid != static_cast<uid_t>(-1) && ::setuid(uid) != 0) ::_exit(126);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    return true;
  }

  // Sends sig and reaps the child (SIGKILL after 10 s).
  void stop(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    for (int i = 0; i < 1000; i++) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // Runs to its end; its exit status (-1 if it did not exit normally).
  int wait() {
    int status = 0;
    if (pid_ <= 0 || ::waitpid(pid_, &status, 0) != pid_) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  bool alive() {
    int status;
    return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
  }

 private:
  pid_t pid_ = -1;
};

inline bool wait_for_port(int port, Child& c, std::chrono::seconds limit = std::chrono::seconds(30)) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (port_open(port)) return true;
    if (!c.alive()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

inline std::string find_program(const char* pattern) {
  glob_t g{};
  std::string found;
  if (::glob(pattern, 0, nullptr, &g) == 0 && g.gl_pathc > 0) found = g.gl_pathv[g.gl_pathc - 1];
  ::globfree(&g);
  return found;
}

class RedisServer {
 public:
  RedisServer() {
    std::string exe = find_program("/usr/bin/redis-server");
    if (exe.empty()) {
      error_ = "redis-server is not installed (bootstrap installs it)";
      return;
    }
    port_ = free_port();
    if (!child_.start({exe, "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "",
                       "--appendonly", "no", "--maxclients", "10000"}) ||
        !wait_for_port(port_, child_)) {
      error_ = "redis-server did not start";
    }
  }
  int port() const { return port_; }
  const std::string& error() const { return error_; }

 private:
  Child child_;
  int port_ = 0;
  std::string error_;
};

// A PostgreSQL cluster of its own, in a temporary directory, removed at
// the end. As root the server runs as the `postgres` user (PostgreSQL
// refuses root), which owns the directory.
class PostgresServer {
 public:
  PostgresServer() {
    std::string bin = find_program("/usr/lib/postgresql/*/bin/initdb");
    if (bin.empty()) {
      error_ = "PostgreSQL is not installed (bootstrap installs the postgresql package)";
      return;
    }
    bin.resize(bin.size() - std::string("initdb").size());
    char tmpl[] = "/tmp/gort-pg.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    uid_t uid = static_cast<uid_t>(-1);
    gid_t gid = static_cast<gid_t>(-1);
    if (::geteuid() == 0) {
      passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr) {
        error_ = "running as root and there is no postgres user";
        return;
      }
      uid = pw->pw_uid;
      gid = pw->pw_gid;
      if (::chown(dir_.c_str(), uid, gid) != 0) {
        error_ = "chown of the data directory failed";
        return;
      }
    }
    std::string data = dir_ + "/data";
    Child init;
    if (!init.start({bin + "initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"}, -1,
                    uid, gid) ||
        init.wait() != 0) {
      error_ = "initdb failed";
      return;
    }
    port_ = free_port();
    if (!server_.start({bin + "postgres", "-D", data, "-p", std::to_string(port_), "-k", dir_, "-c",
                        "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c",
                        "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=16MB"},
                       -1, uid, gid) ||
        !wait_for_port(port_, server_) || !wait_ready(data + "/postmaster.pid")) {
      error_ = "postgres did not start";
    }
  }
  ~PostgresServer() {
    server_.stop(SIGINT);  // fast shutdown
    if (!dir_.empty()) {
      ::nftw(
          dir_.c_str(), [](const char* p, const struct stat*, int, FTW*) { return ::remove(p); }, 16,
          FTW_DEPTH | FTW_PHYS);
    }
  }
  int port() const { return port_; }
  std::string conninfo() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres";
  }
  const std::string& error() const { return error_; }

 private:
  // The port opens before the server accepts sessions ("the database
  // system is starting up"); its pid file's status line then says
  // "ready".
  bool wait_ready(const std::string& pidfile) {
    for (int i = 0; i < 3000 && server_.alive(); i++) {
      if (FILE* f = std::fopen(pidfile.c_str(), "r")) {
        char line[256];
        bool ready = false;
        while (std::fgets(line, sizeof line, f) != nullptr) ready |= std::strncmp(line, "ready", 5) == 0;
        std::fclose(f);
        if (ready) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  Child server_;
  std::string dir_;
  int port_ = 0;
  std::string error_;
};

// The http_server sample (its path in the environment variable
// GORT_HTTP_SERVER, set by the build), on a free port.
class SampleHttpServer {
 public:
  SampleHttpServer() {
    const char* exe = std::getenv("GORT_HTTP_SERVER");
    if (exe == nullptr || ::access(exe, X_OK) != 0) {
      error_ = "GORT_HTTP_SERVER does not name the http_server sample";
      return;
    }
    port_ = free_port();
    if (!child_.start({exe, "-listen", "127.0.0.1:" + std::to_string(port_), "-procs", "1"}) ||
        !wait_for_port(port_, child_)) {
      error_ = "the http_server sample did not start";
    }
  }
  int port() const { return port_; }
  const std::string& error() const { return error_; }

 private:
  Child child_;
  int port_ = 0;
  std::string error_;
};

}  // namespace gort::test

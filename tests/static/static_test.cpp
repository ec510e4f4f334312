// tests/static/static_test.cpp — a program linked against the static
// libgort.a: everything the runtime needs must be linked in by what the
// program calls, with no static constructor left behind by the linker.
//
// With a static library the linker takes only the archive members that
// resolve a symbol. A subsystem that installed itself from a static
// constructor in a file nobody calls (as sysmon once did) would be left
// out without a word. Each check below fails, or hangs into the watchdog,
// when one of the areas wired in by run_main (stdlib/run_main.cpp) is missing:
//
//   sysmon      a goroutine spinning on 1 P does not starve a second one
//               whose timer fires meanwhile (gort linked into the executable
//               has no async preemption, docs/preemption.md: sysmon sets the
//               cooperative flag, which the spinner's WaitGroup::add honours);
//   netpoll     a TCP echo over loopback on 1 P (the reader parks in the
//               poller);
//   oslock      parking while holding a std::mutex is a fatal error (the
//               interposed pthread entry points count the lock), in a child;
//   hooks       libc's blocking calls park goroutines: libstdc++'s
//               nanosleep (std::this_thread::sleep_for) and a pipe read;
//   exports     every interposed entry point of gmp/os/interpose.list is the
//               executable's own and exported to the shared libraries.
//
// Exit status 0 and "PASS" on success; a FAIL line and status 1 otherwise.
#include <gort/gort.hpp>
#include <dlfcn.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

// Seconds any one check may take before the watchdog calls it a hang.
constexpr unsigned kWatchdogSeconds = 60;

const char* g_check = "start";

void on_alarm(int) {
  char buf[160];
  int n = std::snprintf(buf, sizeof buf, "FAIL: %s: hung for %u s (not wired into a static build?)\n",
                        g_check, kWatchdogSeconds);
  (void)!write(2, buf, static_cast<size_t>(n));
  _exit(1);
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s: %s\n", g_check, what.c_str());
  std::exit(1);
}

void begin(const char* check) {
  g_check = check;
  alarm(kWatchdogSeconds);
}

// No libgort.so among the loaded objects: this is the static build.
void check_static() {
  begin("static");
  bool shared = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "libgort") != nullptr) {
          *static_cast<bool*>(arg) = true;
        }
        return 0;
      },
      &shared);
  if (shared) fail("libgort.so is loaded: the program is not linked against libgort.a");
}

void check_sysmon() {
  begin("sysmon");
  gort::Config cfg;
  cfg.procs = 1;
  int rc = gort::run(
      [] {
        std::atomic<bool> other_ran{false};
        auto done = gort::make_chan<int>();
        gort::go([&other_ran] {
          gort::WaitGroup wg;
          // Never blocks, never yields by itself: only a preemption request
          // (from sysmon) lets the other goroutine have the one P.
          while (!other_ran.load(std::memory_order_acquire)) {
            wg.add(1);
            wg.add(-1);
          }
        });
        // Parks on a timer before the spinner starts; the timer fires only
        // when the P's M schedules again, which takes a preemption.
        gort::go([&other_ran, done] {
          gort::sleep(absl::Milliseconds(1));
          other_ran.store(true, std::memory_order_release);
          done.send(1);
        });
        return *done.recv();
      },
      cfg);
  if (rc != 1) fail("gort::run returned " + std::to_string(rc));
}

void check_netpoll() {
  begin("netpoll");
  gort::Config cfg;
  cfg.procs = 1;
  std::string got;
  gort::run(
      [&got] {
        auto ln = gort::net::listen("tcp", "127.0.0.1:0");
        if (!ln.ok()) fail(ln.status().ToString());
        gort::go([&ln] {
          auto c = ln->accept();
          if (!c.ok()) fail(c.status().ToString());
          char buf[64];
          auto n = c->read(absl::MakeSpan(buf));
          if (!n.ok()) fail(n.status().ToString());
          if (!c->write(absl::MakeConstSpan(buf, *n)).ok()) fail("echo write");
        });
        auto c = gort::net::dial("tcp", ln->addr());
        if (!c.ok()) fail(c.status().ToString());
        constexpr std::string_view kMsg = "ping";
        if (!c->write(absl::MakeConstSpan(kMsg.data(), kMsg.size())).ok()) fail("write");
        char buf[64];
        auto n = c->read(absl::MakeSpan(buf));
        if (!n.ok()) fail(n.status().ToString());
        got.assign(buf, *n);
        return 0;
      },
      cfg);
  if (got != "ping") fail("echoed \"" + got + "\", want \"ping\"");
}

// In a child: a goroutine that parks holding a std::mutex must die with
// the fatal error, which only the interposed pthread_mutex_lock can see.
void check_oslock() {
  begin("oslock");
  int fds[2];
  if (pipe(fds) != 0) fail("pipe");
  pid_t pid = fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    gort::run([] {
      static std::mutex mu;
      std::lock_guard<std::mutex> hold(mu);
      gort::sleep(absl::Milliseconds(1));
      return 0;
    });
    _exit(0);  // the park was allowed: the lock went uncounted
  }
  close(fds[1]);
  std::string err;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) fail("waitpid");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 2 ||
      err.find("fatal error: ") == std::string::npos || err.find("while holding an OS lock") == std::string::npos) {
    fail("want exit status 2 and the OS-lock fatal error; got status " + std::to_string(status) +
         " and stderr:\n" + err);
  }
}

// The libc hooks: a goroutine's sleep in libstdc++ (std::this_thread::
// sleep_for, whose nanosleep libstdc++.so calls through the dynamic
// linker) and its read of a pipe park it: on one P, a hundred of each at
// once make no thread.
void check_hooks() {
  begin("hooks");
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer's runtime comes first in the link and defines read, pipe,
  // ... itself: the linker takes those and leaves the archive's hooks out
  // (docs/blocking-libraries.md, "Static links").
  return;
#endif
  gort::Config cfg;
  cfg.procs = 1;
  int threads = 0;
  gort::run(
      [&threads] {
        constexpr int kEach = 100;
        std::vector<std::array<int, 2>> pipes(kEach);
        for (auto& p : pipes) {
          if (::pipe(p.data()) != 0) fail("pipe");
        }
        gort::WaitGroup wg;
        for (int i = 0; i < kEach; i++) {
          wg.add(2);
          gort::go([&wg] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            wg.done();
          });
          gort::go([&wg, fd = pipes[i][0]] {
            char c;
            ssize_t n = ::read(fd, &c, 1);
            if (n != 1) fail("read returned " + std::to_string(n) + ": " + std::strerror(errno));
            wg.done();
          });
        }
        gort::sleep(absl::Milliseconds(20));
        for (auto& p : pipes) {
          if (::write(p[1], "x", 1) != 1) fail("write");
        }
        wg.wait();
        threads = gort::runtime_stats().threads;
        for (auto& p : pipes) {
          ::close(p[0]);
          ::close(p[1]);
        }
      },
      cfg);
  if (threads > 3) fail(std::to_string(threads) + " threads for goroutines that sleep and read: not parked?");
}

// Every interposed entry point (gmp/os/interpose.list) is the executable's
// own and exported: the dynamic linker gives it to every shared library.
void check_exports() {
  begin("exports");
  std::FILE* f = std::fopen(GORT_INTERPOSE_LIST, "r");
  if (f == nullptr) fail("cannot open " + std::string(GORT_INTERPOSE_LIST));
  char line[256];
  int n = 0;
  bool in_comment = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::string l(line);
    if (l.find("/*") != std::string::npos) in_comment = true;
    if (in_comment) {
      if (l.find("*/") != std::string::npos) in_comment = false;
      continue;
    }
    size_t b = l.find_first_not_of(" \t");
    size_t e = l.find(';');
    if (b == std::string::npos || e == std::string::npos || l[b] == '"' || l[b] == '}') continue;
    std::string name = l.substr(b, e - b);
    void* sym = dlsym(RTLD_DEFAULT, name.c_str());
    Dl_info info{};
    if (sym == nullptr || dladdr(sym, &info) == 0 || info.dli_fname == nullptr) fail(name + " is not found");
    void* main_exe = dlopen(nullptr, RTLD_NOW);
    if (dlsym(main_exe, name.c_str()) != sym) fail(name + " is not the executable's own");
    n++;
  }
  std::fclose(f);
  if (n < 100) fail("the list names only " + std::to_string(n) + " functions");
}

}  // namespace

int main() {
  std::signal(SIGALRM, &on_alarm);
  check_static();
  check_sysmon();
  check_netpoll();
  check_oslock();
  check_hooks();
  check_exports();
  alarm(0);
  std::printf("PASS (async preemption %s)\n", gort::async_preemption_available() ? "on" : "off");
  return 0;
}

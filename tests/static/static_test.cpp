// tests/static/static_test.cpp — a program linked against the static
// libgort.a as `pkg-config --static --libs gort` links it: everything the
// runtime needs must be linked in by what the program calls, with no
// static constructor left behind by the linker, and gort's code must lie
// where asynchronous preemption finds it (preempt/gort_text.ld).
//
// With a static library the linker takes only the archive members that
// resolve a symbol. A subsystem that installed itself from a static
// constructor in a file nobody calls (as sysmon once did) would be left
// out without a word. Each check below fails, or hangs into the watchdog,
// when one of the areas wired in by run_main (stdlib/run_main.cpp) is
// missing, or when the link did not place the code as the script says:
//
//   sysmon      a goroutine spinning on 1 P does not starve a second one
//               whose timer fires meanwhile (sysmon's request stops the
//               spinner, asynchronously or at its WaitGroup::add);
//   layout      preempt/gort_text.ld put gort's code in gort_text and
//               another archive's in gort_archives_text, and the runtime
//               preempts neither, only the program's own code;
//   preempt     asynchronous preemption is on, and stops a goroutine
//               spinning with no calls at all on 1 P so that another runs
//               (the preemption demo's spinner);
//   netpoll     a TCP echo over loopback on 1 P (the reader parks in the
//               poller);
//   oslock      parking while holding a std::mutex is a fatal error (the
//               interposed pthread entry points count the lock), in a child;
//   hooks       libc's blocking calls park goroutines: libstdc++'s
//               nanosleep (std::this_thread::sleep_for) and a pipe read;
//   exports     every interposed entry point of gmp/os/interpose.list is the
//               executable's own and exported to the shared libraries;
//   register    registering the executable makes the other archive's code
//               preemptible, never gort's.
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

#include "gmp/g.hpp"
#include "preempt/preempt.hpp"

// tests/static/other_archive.cpp, in a static archive of its own.
int other_archive_function(int x);

// The bounds preempt/gort_text.ld gives the sections (null without it).
extern "C" {
__attribute__((weak, visibility("hidden"))) extern const char __start_gort_text[];
__attribute__((weak, visibility("hidden"))) extern const char __stop_gort_text[];
__attribute__((weak, visibility("hidden"))) extern const char __start_gort_archives_text[];
__attribute__((weak, visibility("hidden"))) extern const char __stop_gort_archives_text[];
}

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

// The program's own code, as opposed to gort's and other archives'.
__attribute__((noinline)) int program_function(int x) { return x * 5 + 2; }

bool in_section(const void* f, const char* lo, const char* hi) {
  auto a = reinterpret_cast<uintptr_t>(f);
  return lo != nullptr && a >= reinterpret_cast<uintptr_t>(lo) && a < reinterpret_cast<uintptr_t>(hi);
}

const char* pc_kind_name(gort::internal::PcKind k) {
  switch (k) {
    case gort::internal::PcKind::kNo: return "not preemptible";
    case gort::internal::PcKind::kYes: return "preemptible";
    case gort::internal::PcKind::kClock: return "a clock function";
  }
  return "?";
}

void expect_kind(const char* what, const void* f, gort::internal::PcKind want) {
  auto got = gort::internal::pc_kind(reinterpret_cast<uintptr_t>(f));
  if (got != want) fail(std::string(what) + " is " + pc_kind_name(got) + ", want " + pc_kind_name(want));
}

const void* gort_function() { return reinterpret_cast<const void*>(&gort::async_preemption_available); }
const void* other_function() { return reinterpret_cast<const void*>(&other_archive_function); }
const void* own_function() { return reinterpret_cast<const void*>(&program_function); }

void check_layout() {
  begin("layout");
  if (!in_section(gort_function(), __start_gort_text, __stop_gort_text)) {
    fail("gort's code is not in gort_text: linked without preempt/gort_text.ld?");
  }
  if (!in_section(other_function(), __start_gort_archives_text, __stop_gort_archives_text)) {
    fail("the other archive's code is not in gort_archives_text");
  }
  if (in_section(own_function(), __start_gort_text, __stop_gort_text) ||
      in_section(own_function(), __start_gort_archives_text, __stop_gort_archives_text)) {
    fail("the program's own code is in one of the archives' sections");
  }
  gort::internal::preempt_ranges_init();
  expect_kind("the program's own code", own_function(), gort::internal::PcKind::kYes);
  expect_kind("gort's code", gort_function(), gort::internal::PcKind::kNo);
  expect_kind("the other archive's code", other_function(), gort::internal::PcKind::kNo);
}

// The preemption demo's spinner (samples/demo/preemption.cpp): no call in
// the loop, so only an asynchronous preemption lets the other goroutine,
// readied onto the same P, run and stop it. A failure hangs into the
// watchdog.
void check_preempt() {
  begin("preempt");
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  if (!gort::async_preemption_available()) fail("asynchronous preemption is not available");
#else
  return;  // no asynchronous preemption on this target or under TSan
#endif
  gort::Config cfg;
  cfg.procs = 1;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> spins{0};
  uint32_t preempts = 0;
  gort::run(
      [&] {
        auto done = gort::make_chan<int>();
        gort::go([&, done] {
          gort::go([&, done] {
            stop.store(true, std::memory_order_relaxed);
            done.send(1);
          });
          while (!stop.load(std::memory_order_relaxed)) {
            spins.store(spins.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
          }
          preempts = gort::internal::getg()->async_preempts;
          done.send(2);
        });
        (void)done.recv();
        (void)done.recv();
        return 0;
      },
      cfg);
  if (preempts == 0) fail("the other goroutine ran, but the spinner was never preempted asynchronously");
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

// Registering the executable (an address in the other archive's code)
// covers all of its code but gort's.
void check_register() {
  begin("register");
  if (!gort::register_preemptible_object(other_function())) fail("register_preemptible_object refused");
  expect_kind("the other archive's code, registered", other_function(), gort::internal::PcKind::kYes);
  expect_kind("gort's code, in the registered executable", gort_function(), gort::internal::PcKind::kNo);
}

}  // namespace

int main() {
  std::signal(SIGALRM, &on_alarm);
  check_static();
  check_sysmon();
  check_layout();
  check_preempt();
  check_netpoll();
  check_oslock();
  check_hooks();
  check_exports();
  check_register();
  alarm(0);
  std::printf("PASS (async preemption %s)\n", gort::async_preemption_available() ? "on" : "off");
  return 0;
}

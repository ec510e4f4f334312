// echo_server — a TCP echo server: one goroutine per connection, written as
// plain sequential read/write code; the netpoller parks a goroutine whose
// socket is not ready, so thousands of idle connections cost no threads.
//
// The server around that loop is gort::net::Server (gort/server.hpp, Go's
// http.Server lifecycle for any protocol):
//   - a bound on concurrent connections (max_conns: at the limit, accept
//     waits, as Go's netutil.LimitListener),
//   - an idle timeout (idle_timeout: how long wait_input waits),
//   - a graceful shutdown on SIGINT/SIGTERM: the signals arrive as values
//     on a channel (gort::signal::notify, Go's signal.Notify); the main
//     goroutine waits for one in a select, then Server::shutdown closes the
//     listener and the idle connections and waits for the rest, up to 5 s,
//     after which close() cuts them off.
//
// Usage: echo_server [-listen 127.0.0.1:7000] [-procs N] [-max-conns 10000]
//                    [-idle-timeout SECONDS]
// It prints "listening on HOST:PORT" once it accepts connections, so a port
// of 0 ("-listen 127.0.0.1:0") can be used and read back.
//
// Try it: echo_server & then `nc 127.0.0.1 7000` and type lines.
#include <gort/gort.hpp>

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

struct Options {
  std::string listen = "127.0.0.1:7000";
  int procs = 0;  // 0: GORT_MAXPROCS or the number of CPUs
  int max_conns = 10000;
  int idle_timeout_s = 300;  // 0: none
};

// One read and its echo. The buffer lives in this frame, which exists only
// while data is being handled: see handle(). 4 KiB, as Go's twin and
// docs/net.md: a larger frame costs a stack probe per page on every call
// (-fstack-clash-protection), a page that nothing else touches while many
// connections take turns (16 KiB cost 1.3 % of the server's CPU per
// 64-byte message).
[[gnu::noinline]] bool echo_some(gort::net::Conn& c) {
  char buf[4096];
  auto n = c.read(absl::MakeSpan(buf));
  if (!n.ok() || *n == 0) return false;  // error, closed, or EOF
  return c.write(absl::MakeConstSpan(buf, *n)).ok();
}

// Echoes everything it reads until end of stream, an error, the idle
// timeout or shutdown. Sequential code: wait_input parks this goroutine
// until bytes arrive, and marks the connection idle meanwhile, so that a
// shutdown closes it at once. (The buffer lives in echo_some's frame: an
// idle connection's goroutine keeps one stack page instead of two, which
// matters with tens of thousands of them.)
void handle(gort::net::ServerConn& c) {
  while (c.wait_input()) {
    if (!echo_some(*c.net_conn())) return;
  }
}

bool parse_int(std::string_view s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + (ch - '0');
  }
  *out = v;
  return true;
}

// Go-style flags: -name value, -name=value (one or two dashes).
bool parse_flags(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i++) {
    std::string_view a = argv[i];
    if (a.substr(0, 2) == "--") a.remove_prefix(2);
    else if (a.substr(0, 1) == "-") a.remove_prefix(1);
    else return false;
    std::string_view name = a, value;
    if (size_t eq = a.find('='); eq != std::string_view::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (name == "h" || name == "help") {
      return false;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return false;
    }
    if (name == "listen") o->listen = std::string(value);
    else if (name == "procs") { if (!parse_int(value, &o->procs)) return false; }
    else if (name == "max-conns") { if (!parse_int(value, &o->max_conns) || o->max_conns < 1) return false; }
    else if (name == "idle-timeout") { if (!parse_int(value, &o->idle_timeout_s)) return false; }
    else return false;
  }
  return true;
}

int serve(const Options& o) {
  auto ln = gort::net::listen("tcp", o.listen);
  if (!ln.ok()) {
    std::fprintf(stderr, "echo_server: %s\n", gort::error_text(ln).c_str());
    return 1;
  }
  // From here on SIGINT and SIGTERM arrive on this channel (Go's
  // signal.Notify) instead of ending the process: set up before the port
  // is announced.
  auto sigs = gort::make_chan<int>(1);
  gort::signal::notify(sigs, {SIGINT, SIGTERM});
  std::printf("listening on %s\n", ln->addr().c_str());
  std::fflush(stdout);

  gort::net::ServerConfig scfg;
  scfg.max_conns = o.max_conns;
  if (o.idle_timeout_s > 0) scfg.idle_timeout = absl::Seconds(o.idle_timeout_s);
  gort::net::Server srv(handle, scfg);
  auto served = gort::make_chan<absl::Status>(1);
  gort::go([&, served] { served.send(srv.serve(*ln)); });

  // Wait for SIGINT or SIGTERM (a channel value: gort::signal) or for the
  // accept loop to fail.
  bool stopping = false;
  absl::Status accept_err;
  gort::select(gort::on_recv(sigs, [&](std::optional<int>) { stopping = true; }),
               gort::on_recv(served, [&](std::optional<absl::Status> s) { accept_err = *s; }));
  gort::signal::stop(sigs);
  size_t open = srv.num_conns();
  auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(5));
  bool drained = srv.shutdown(ctx).ok();
  cancel();
  if (!drained) (void)srv.close();
  if (stopping) {
    (void)served.recv();
    std::fprintf(stderr, "echo_server: shutting down (%zu connection(s) closed%s)\n", open,
                 drained ? "" : ", some did not finish in time");
    return 0;
  }
  std::fprintf(stderr, "echo_server: accept: %s\n", gort::error_text(accept_err).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_flags(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [-listen 127.0.0.1:7000] [-procs N] [-max-conns N] "
                 "[-idle-timeout SECONDS]\n",
                 argv[0]);
    return 2;
  }
  gort::Config cfg;
  cfg.procs = o.procs;
  return gort::run([&o] { return serve(o); }, cfg);
}

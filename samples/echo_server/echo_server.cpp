// echo_server — a TCP echo server: one goroutine per connection, written as
// plain sequential read/write code; the netpoller parks a goroutine whose
// socket is not ready, so thousands of idle connections cost no threads.
//
// It also shows what a real server needs around that loop:
//   - a bound on concurrent connections (a gort::Semaphore taken before
//     accept, as Go's netutil.LimitListener does),
//   - an idle timeout (a read deadline renewed before every read),
//   - a graceful shutdown on SIGINT/SIGTERM: the signals arrive as values
//     on a channel (gort::signal::notify, Go's signal.Notify); the main
//     goroutine waits for one in a select, closes the listener (which wakes the blocked accept), closes every open
//     connection (which wakes their blocked reads) and waits for the
//     connection goroutines to finish.
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
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

namespace {

struct Options {
  std::string listen = "127.0.0.1:7000";
  int procs = 0;  // 0: GORT_MAXPROCS or the number of CPUs
  int max_conns = 10000;
  int idle_timeout_s = 300;  // 0: none
};

// The open connections, so that shutdown can close them. Handlers register
// their Conn while they run and unregister it before destroying it; close()
// from another goroutine is allowed and wakes the handler's blocked read.
class ConnSet {
 public:
  explicit ConnSet(int max_conns) : slots_(max_conns) {}

  // Waits for a free connection slot (parks while max_conns are open).
  void acquire_slot() { slots_.acquire(); }
  void release_slot() { slots_.release(); }

  // Registers c; false once shutdown has begun (the caller drops c).
  bool add(gort::net::Conn* c) {
    std::lock_guard lock(mu_);
    if (closing_) return false;
    conns_.insert(c);
    wg_.add(1);
    return true;
  }
  void remove(gort::net::Conn* c) {
    {
      std::lock_guard lock(mu_);
      conns_.erase(c);
    }
    wg_.done();
  }
  // Closes every registered connection; later add() calls fail.
  void close_all() {
    std::lock_guard lock(mu_);
    closing_ = true;
    for (gort::net::Conn* c : conns_) (void)c->close();
  }
  // Waits until every registered connection is removed, at most `limit`.
  bool wait(absl::Duration limit, const std::shared_ptr<ConnSet>& self) {
    auto done = gort::make_chan<std::monostate>();
    gort::go([self, done] {
      self->wg_.wait();
      done.close();
    });
    bool ok = false;
    gort::select(gort::on_recv(done, [&] { ok = true; }), gort::on_recv(gort::after(limit)));
    return ok;
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return conns_.size();
  }

 private:
  gort::Semaphore slots_;
  gort::Mutex mu_;
  bool closing_ = false;                          // guarded by mu_
  std::unordered_set<gort::net::Conn*> conns_;    // guarded by mu_
  gort::WaitGroup wg_;
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

// Echoes everything it reads until end of stream, an error or the idle
// timeout. Sequential code: wait_readable parks this goroutine until bytes
// arrive. (A plain `read` loop with the buffer in this frame works as well;
// waiting without the buffer on the stack keeps an idle connection's
// goroutine at one stack page instead of two, which matters with tens of
// thousands of them.)
void handle(gort::net::Conn& c, absl::Duration idle) {
  for (;;) {
    if (idle > absl::ZeroDuration()) (void)c.set_read_deadline(absl::Now() + idle);
    if (!c.wait_readable().ok()) return;  // timeout or closed
    if (!echo_some(c)) return;
  }
}

// Accepts until the listener is closed (or fails); one goroutine per
// connection.
absl::Status accept_loop(gort::net::Listener& ln, std::shared_ptr<ConnSet> conns,
                         absl::Duration idle) {
  for (;;) {
    conns->acquire_slot();
    auto c = ln.accept();
    if (!c.ok()) {
      conns->release_slot();
      return c.status();
    }
    gort::go([conns, idle](gort::net::Conn conn) {
      if (conns->add(&conn)) {
        handle(conn, idle);
        conns->remove(&conn);  // before ~Conn: close_all may not touch it after this
      }
      conns->release_slot();
    }, std::move(*c));
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
    std::fprintf(stderr, "echo_server: %s\n", std::string(ln.status().message()).c_str());
    return 1;
  }
  // From here on SIGINT and SIGTERM arrive on this channel (Go's
  // signal.Notify) instead of ending the process: set up before the port
  // is announced.
  auto sigs = gort::make_chan<int>(1);
  gort::signal::notify(sigs, {SIGINT, SIGTERM});
  std::printf("listening on %s\n", ln->addr().c_str());
  std::fflush(stdout);

  auto conns = std::make_shared<ConnSet>(o.max_conns);
  absl::Duration idle = absl::Seconds(o.idle_timeout_s);
  // The accept loop's result; written before accept_done is closed.
  absl::Status accept_err;
  auto accept_done = gort::make_chan<std::monostate>();
  gort::go([&ln, &accept_err, conns, idle, accept_done] {
    accept_err = accept_loop(*ln, conns, idle);
    accept_done.close();
  });

  // Wait for SIGINT or SIGTERM (a channel value: gort::signal) or for the
  // accept loop to fail.
  bool stopping = false;
  gort::select(gort::on_recv(sigs, [&](std::optional<int>) { stopping = true; }),
               gort::on_recv(accept_done));
  gort::signal::stop(sigs);
  size_t open = conns->size();
  (void)ln->close();   // wakes the blocked accept
  conns->close_all();  // wakes every blocked read (and so frees the slot accept may wait for)
  accept_done.recv();
  bool drained = conns->wait(absl::Seconds(5), conns);
  if (stopping) {
    std::fprintf(stderr, "echo_server: shutting down (%zu connection(s) closed%s)\n", open,
                 drained ? "" : ", some did not finish in time");
    return 0;
  }
  std::fprintf(stderr, "echo_server: accept: %s\n", std::string(accept_err.message()).c_str());
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

// samples/demo/echo.cpp — section 4: an echo server and 1,000 concurrent
// clients in one process on 2 Ps, all written as plain blocking code.
//
// The server is Go's classic shape: a goroutine per connection, each a
// read/write loop, under gort::net::Server (gort/server.hpp), which runs the
// accept loop and the shutdown. Every client is a goroutine too:
// it dials, waits until all clients are connected and the server has
// accepted them all (so 1,000 connections really are open at once), then
// sends its messages one at a time and checks every echo. No goroutine owns
// a thread: each one that waits for its socket is parked on the netpoller.
//
// Each connection costs two descriptors (client and server end), so the
// soft RLIMIT_NOFILE is raised to the hard limit; if even that is too low,
// fewer clients run and the section says so.
#include <gort/gort.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "demo.hpp"

namespace demo {
namespace {

constexpr int kClients = 1000;
constexpr int kMessages = 20;
constexpr size_t kMessageSize = 128;
// Descriptors beyond the connections: stdio, epoll, eventfd, the listener.
constexpr int kSpareFds = 64;

struct Totals {
  std::atomic<int> accepted{0};
  std::atomic<int> open{0};
  std::atomic<int> peak_open{0};
  std::atomic<int64_t> server_bytes{0};
  std::atomic<int64_t> messages_ok{0};
  std::atomic<int> clients_ok{0};
  std::atomic<int> errors{0};
};

// Raises the soft descriptor limit to the hard one; returns how many clients
// fit.
int clients_that_fit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return kClients;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit want = rl;
    want.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  if (rl.rlim_cur == RLIM_INFINITY) return kClients;
  int64_t fit = (static_cast<int64_t>(rl.rlim_cur) - kSpareFds) / 2;
  std::printf("  descriptor limit (RLIMIT_NOFILE): %llu\n", static_cast<unsigned long long>(rl.rlim_cur));
  return static_cast<int>(std::clamp<int64_t>(fit, 1, kClients));
}

void report_error(Totals* t, const char* what, const absl::Status& s) {
  // Only the first few: one systematic failure would print 1,000 lines.
  if (t->errors.fetch_add(1) < 5) std::printf("  %s: %s\n", what, gort::error_text(s).c_str());
}

void serve(gort::net::ServerConn& c, Totals* t) {
  t->accepted.fetch_add(1);
  int open = t->open.fetch_add(1) + 1;
  for (int peak = t->peak_open.load(); open > peak && !t->peak_open.compare_exchange_weak(peak, open);) {
  }
  char buf[4096];
  while (c.wait_input()) {
    auto n = c.read(absl::MakeSpan(buf));
    if (!n.ok() || *n == 0) break;  // the client closed (or failed): done
    if (!c.write(absl::MakeConstSpan(buf, *n)).ok()) break;
    t->server_bytes.fetch_add(static_cast<int64_t>(*n), std::memory_order_relaxed);
  }
  t->open.fetch_sub(1);
}  // the server closes the connection

void client(int id, std::string addr, gort::Chan<std::monostate> start, Totals* t,
            gort::WaitGroup* connected, gort::WaitGroup* finished) {
  auto c = gort::net::dial("tcp", addr);
  connected->done();
  if (!c.ok()) {
    report_error(t, "dial", c.status());
    finished->done();
    return;
  }
  // Nothing here should take seconds; a stuck exchange fails instead of
  // hanging the tour.
  (void)c->set_deadline(absl::Now() + absl::Seconds(20));
  start.recv();  // closed by the main goroutine: everyone starts together
  char msg[kMessageSize];
  char echo[kMessageSize];
  bool ok = true;
  for (int k = 0; k < kMessages && ok; k++) {
    std::snprintf(msg, sizeof msg, "client %d message %d ", id, k);
    for (size_t i = std::strlen(msg); i < sizeof msg; i++) msg[i] = static_cast<char>('a' + (i + k) % 26);
    if (auto w = c->write(absl::MakeConstSpan(msg, sizeof msg)); !w.ok()) {
      report_error(t, "write", w.status());
      ok = false;
      break;
    }
    // The echo may come back in pieces: a stream has no message boundaries.
    size_t got = 0;
    while (got < sizeof echo) {
      auto n = c->read(absl::MakeSpan(echo + got, sizeof echo - got));
      if (!n.ok() || *n == 0) {
        report_error(t, "read", n.ok() ? absl::DataLossError("connection closed early") : n.status());
        ok = false;
        break;
      }
      got += *n;
    }
    if (ok && std::memcmp(msg, echo, sizeof msg) != 0) {
      report_error(t, "echo", absl::DataLossError("echo differs from the message"));
      ok = false;
    }
    if (ok) t->messages_ok.fetch_add(1, std::memory_order_relaxed);
  }
  if (ok) t->clients_ok.fetch_add(1);
  (void)c->close();
  finished->done();
}

}  // namespace

bool echo_server() {
  header(4, "an echo server and 1,000 concurrent clients");
  int clients = clients_that_fit();
  if (clients < kClients) {
    std::printf("  only %d clients: the hard descriptor limit fits no more (2 descriptors each)\n",
                clients);
  }
  auto ln = gort::net::listen("tcp", "127.0.0.1:0");
  if (!ln.ok()) {
    std::printf("  listen: %s\n", gort::error_text(ln).c_str());
    return check(false, "echo server");
  }
  std::printf("  server on %s, %d Ps: one goroutine per connection (read, write back)\n"
              "  %d client goroutines: dial, wait until all are connected, then send\n"
              "  %d messages of %zu bytes each, one at a time, checking every echo\n",
              ln->addr().c_str(), gort::procs(), clients, kMessages, kMessageSize);
  std::fflush(stdout);

  Totals t;
  gort::WaitGroup connected, finished;
  auto start = Clock::now();
  gort::net::Server srv([&t](gort::net::ServerConn& c) { serve(c, &t); });
  auto served = gort::make_chan<absl::Status>(1);
  gort::go([&, served] { served.send(srv.serve(*ln)); });
  auto go_signal = gort::make_chan<std::monostate>();
  for (int i = 0; i < clients; i++) {
    connected.add(1);
    finished.add(1);
    gort::go(client, i, ln->addr(), go_signal, &t, &connected, &finished);
  }
  connected.wait();
  // Dialled is not yet accepted, and accepted is not yet served: a
  // connection's goroutine may still wait in a run queue behind a thousand
  // others (the global queue is looked at once in 61 turns, as in Go). Wait
  // (bounded) until every connection's goroutine runs, so that all
  // connections are open at the same moment.
  for (int i = 0; i < 5000 && t.open.load() < clients - t.errors.load(); i++) {
    gort::sleep(absl::Milliseconds(1));
  }
  double connect_ms = ms_since(start);
  std::printf("  %d connections open at once after %.1f ms\n", t.accepted.load(), connect_ms);
  std::fflush(stdout);
  auto exchange = Clock::now();
  go_signal.close();
  finished.wait();
  double exchange_ms = ms_since(exchange);
  // Every client has hung up: the shutdown closes the listener and waits
  // for the last handlers to see their end of stream.
  absl::Status shut = srv.shutdown(gort::background());
  absl::Status accept_result = served.recv().value_or(absl::OkStatus());
  if (!gort::net::is_server_closed(accept_result)) report_error(&t, "serve", accept_result);
  double ms = ms_since(start);

  int64_t messages = t.messages_ok.load();
  int64_t bytes = t.server_bytes.load();
  std::printf("  totals: %d connections (at most %d open at once), %lld messages echoed,\n"
              "          %lld bytes each way; exchange %.1f ms (%.0f messages/s), all in %.1f ms\n",
              t.accepted.load(), t.peak_open.load(), static_cast<long long>(messages),
              static_cast<long long>(bytes), exchange_ms,
              static_cast<double>(messages) / (exchange_ms / 1000.0), ms);
  gort::RuntimeStats st = gort::runtime_stats();
  std::printf("  runtime: %d Ps, %d Ms (OS threads) for %d goroutines\n", st.procs, st.threads,
              2 * clients + 2);
  int64_t want = int64_t{clients} * kMessages;
  return check(shut.ok() && t.clients_ok.load() == clients && messages == want &&
                   bytes == want * static_cast<int64_t>(kMessageSize) && t.peak_open.load() == clients,
               "every client got every echo back");
}

}  // namespace demo

// gort/server.hpp — serving a Listener: Go's http.Server lifecycle for any
// protocol, one goroutine per connection.
//
// A Server runs an accept loop on each Listener (or tls::Listener) given to
// serve() and a goroutine per accepted connection that calls the handler.
// It owns what every server otherwise writes by hand: the accept loop
// (NetFD's EMFILE back-off included), a connection limit, idle, read and
// write timeouts, the set of live connections, graceful shutdown and
// close.
//
//   gort::net::Server srv([](gort::net::ServerConn& c) {
//     char buf[4096];
//     while (c.wait_input()) {                    // idle here: shutdown closes it
//       auto n = c.read(absl::MakeSpan(buf));
//       if (!n.ok() || *n == 0) return;           // error or end of stream
//       if (!c.write(absl::MakeConstSpan(buf, *n)).ok()) return;
//     }
//   }, {.max_conns = 10000, .idle_timeout = absl::Seconds(60)});
//   auto ln = gort::net::listen("tcp", ":8080");
//   gort::go([&] { (void)srv.serve(*ln); });     // returns the closed error after shutdown
//   ... on SIGTERM:
//   auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(5));
//   if (!srv.shutdown(ctx).ok()) (void)srv.close();  // handlers still running: cut them off
//
// Lifecycle (Go's Server.Shutdown / Close):
//   - shutdown(ctx) closes the listeners (serve() returns
//     ServerClosedError()), closes every idle connection at once (one whose
//     handler is in wait_input), and waits until every handler has returned
//     or ctx is done (then it returns ctx's error and the remaining handlers
//     keep running: close() ends them). A handler that reaches wait_input
//     after shutdown began gets false.
//   - close() closes the listeners and every connection at once, whatever it
//     is doing (blocked calls return the closed error), and cancels
//     context(). It does not wait.
//   - ~Server closes and waits for the accept loops and the handlers to
//     return: destroy a Server from a goroutine, not from inside a handler.
//
// A connection counts as idle from the moment its handler calls
// wait_input() until the read (or write) that follows returns: a handler
// that blocks in read between requests without calling wait_input is busy
// as far as shutdown can tell, as in Go for a connection whose state is
// unknown.
//
// Timeouts (Go's IdleTimeout, ReadTimeout and WriteTimeout): a connection
// gets a read and a write deadline read_timeout and write_timeout after it
// is accepted and again each time wait_input() returns true (each request),
// and waits in wait_input() at most idle_timeout (read_timeout when
// idle_timeout is infinite). A call past its deadline fails with
// net::is_timeout_error; wait_input() then returns false.
//
// A handler that throws: the exception is caught, reported on stderr as
// `gort: panic serving 127.0.0.1:4711: std::out_of_range: vector::at` (Go's
// `http: panic serving ...`), and its connection is closed; the server goes
// on. The connection is closed when the handler returns (a TLS connection
// sends close_notify).
//
// Idle connections without a goroutine (Sessions). A server built from a
// session factory keeps each connection's state in the program's own
// object and runs it in turns: a turn is plain blocking code on a
// goroutine, and returns Next::kWaitInput to wait for the next input with
// no goroutine and no stack. The connection stays registered with the
// server's poller; when input comes, a goroutine from the warm pool runs
// the next turn; when the idle timeout passes or the server shuts down, the
// connection is closed and its session destroyed. Between a turn's end and
// that, the connection keeps its goroutine for ServerConfig::keep_goroutine
// (1 ms), so that a client that answers at once costs no more than with a
// goroutine per connection. Input already read ahead
// (what is left in buffer(), or what OpenSSL holds) runs the next turn at
// once instead. An idle connection costs its session, its descriptor's
// bookkeeping and a registration (docs/net.md, "Idle connections without a
// goroutine").
//
//   struct Echo : gort::net::Session {
//     gort::net::Next turn(gort::net::ServerConn& c) override {
//       std::string& in = c.buffer();               // pooled between turns
//       ...read into it, answer what is complete, leave the rest in `in`...
//       return gort::net::Next::kWaitInput;         // idle: no goroutine, no stack
//     }
//   };
//   gort::net::Server srv(gort::net::Sessions{[](gort::net::ServerConn&) {
//     return std::make_unique<Echo>();
//   }});
//
// Thread-safety: serve, shutdown, close and the counters may be called from
// any goroutine, concurrently. A ServerConn belongs to its handler's
// goroutine (its read and write may be used by other goroutines the handler
// starts and waits for, as a net::Conn's).
//
// Costs: per connection, a goroutine (its stack page) and a registration
// under the server's lock at its start and end; per request, no lock:
// wait_input is two atomic operations, a deadline when a timeout is set,
// and a wait that returns only with input there (a poll(2) only for a
// wake-up the poller does not vouch for; no read buffer is held while
// idle). A
// session's turn that waits for input within keep_goroutine costs two
// uncontended locks more (the server's list of kept goroutines, whose one
// timer ends the waits that last longer); after it, a registration with
// the server's poller and a new goroutine when input comes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gort/chrono.hpp"
#include "gort/context.hpp"
#include "gort/detail/api.hpp"
#include "gort/net.hpp"
#include "gort/tls.hpp"

namespace gort::net {

// The text of the error serve() returns after shutdown or close (Go's
// http.ErrServerClosed).
inline constexpr std::string_view kErrServerClosed = "gort: Server closed";
// absl::FailedPreconditionError(kErrServerClosed).
GORT_API absl::Status ServerClosedError();
GORT_API bool is_server_closed(const absl::Status& s);

struct ServerConfig {
  // At most this many connections at once; 0: no limit. At the limit the
  // accept loop waits for a connection to end before it accepts again
  // (Go's netutil.LimitListener): new clients wait in the kernel's backlog.
  int max_conns = 0;
  // How long wait_input waits for the next input; infinite: read_timeout.
  // The timeouts are gort::Duration: absl::Seconds(30) or 30s alike
  // (gort/chrono.hpp).
  Duration idle_timeout = absl::InfiniteDuration();
  // Read and write deadlines, from each request's start.
  Duration read_timeout = absl::InfiniteDuration();
  Duration write_timeout = absl::InfiniteDuration();
  // Sessions only: after a turn that ends with Next::kWaitInput, the
  // connection keeps its goroutine this long, parked on the descriptor as a
  // goroutine per connection waits, before it gives the goroutine back and
  // waits without one. Input within it runs the next turn on the same
  // goroutine, without a registration with the server's poller, a deadline
  // heap entry and a new goroutine (an HTTP keep-alive client's next request
  // comes within tens of microseconds on a LAN). 0: give it back at once.
  // Idle connections hold no stack once it has passed.
  Duration keep_goroutine = absl::Milliseconds(1);
};

class Server;
class ServerConn;
struct IdleConn;  // stdlib/net/server_impl.hpp

// How a session's turn ends.
enum class Next : uint8_t {
  kWaitInput,  // wait for the next input without a goroutine
  kClose,      // close the connection and destroy the session
};

// A connection's own state in a session server (see the top of the file).
// Destroyed when the connection ends, on whatever goroutine ends it.
class GORT_API Session {
 public:
  virtual ~Session();
  // One turn: plain blocking code on a goroutine. An exception is reported
  // as a handler's is and closes the connection.
  virtual Next turn(ServerConn& c) = 0;
};

// Makes the session of a new connection (null: close it at once).
struct Sessions {
  std::function<std::unique_ptr<Session>(ServerConn&)> make;
};

// One served connection, as its handler sees it: a net::Conn or a
// tls::Conn behind one interface, so that a handler serves both.
class GORT_API ServerConn {
 public:
  ServerConn(const ServerConn&) = delete;
  ServerConn& operator=(const ServerConn&) = delete;

  // Waits for the next input as an idle connection (see the top of the
  // file). True when input is there (or end of stream, which the next read
  // returns as 0); false on the idle timeout, on shutdown or close, and on
  // a connection error. Consumes nothing and holds no buffer.
  bool wait_input();

  // As net::Conn's (tls::Conn's for a TLS connection).
  absl::StatusOr<size_t> read(absl::Span<char> buf);
  absl::StatusOr<size_t> write(absl::Span<const char> buf);
  absl::StatusOr<size_t> write_string(std::string_view s) {
    return write(absl::MakeConstSpan(s.data(), s.size()));
  }
  absl::Status close_write();
  absl::Status set_read_deadline(absl::Time t);
  absl::Status set_write_deadline(absl::Time t);
  template <chrono_time_point T>
  absl::Status set_read_deadline(T t) {
    return set_read_deadline(from_chrono(t));
  }
  template <chrono_time_point T>
  absl::Status set_write_deadline(T t) {
    return set_write_deadline(from_chrono(t));
  }
  std::string local_addr() const;
  std::string remote_addr() const;

  // A read buffer the server pools: a connection holds one only while it
  // is not empty, so idle connections hold none (wait_input and the end of
  // a turn give an empty one back; a session's goroutine kept after its
  // turn keeps it, as it keeps its stack, until its wait ends). Keep input read ahead here: in a
  // session server a turn that ends with kWaitInput while it is not empty
  // runs the next turn at once.
  std::string& buffer();

  // The connection itself: exactly one is not null.
  net::Conn* net_conn() { return nc_; }
  tls::Conn* tls_conn() { return tc_; }

  // Done when the server is closed (close(), or ~Server): a handler's
  // outgoing calls (dials, database queries) can be cancelled with it.
  const Context& context() const;

 private:
  friend class Server;
  friend struct IdleConn;
  ServerConn(Server* srv, net::Conn* nc, tls::Conn* tc) : srv_(srv), nc_(nc), tc_(tc) {}

  // stdlib/net/server.cpp has the state machine.
  enum State : uint8_t { kActive, kIdle, kClosed };
  // wait_input's outcome for a kept goroutine (`kept`, the connection it
  // keeps, on the server's KeptList for the wait): input (the request
  // started), keep_goroutine passed (still idle, no deadline left), or the
  // end (shutdown, close, idle timeout, error). Without `kept`: kInput or
  // kEnd.
  enum class Waited : uint8_t { kInput, kLimit, kEnd };
  Waited wait_input_for(IdleConn* kept);
  absl::Status wait_strictly();
  // The net::Conn under the connection (a TLS one's socket); null if gone.
  net::Conn* transport();
  void start_request();
  void touch();
  absl::Status close_conn();
  // Gives the buffer back to the pool: an empty one, or any with `all`.
  void release_buffer(bool all = false);
  bool input_pending();

  Server* srv_;
  net::Conn* nc_;
  tls::Conn* tc_;
  std::atomic<uint8_t> state_{kActive};
  std::string* buf_ = nullptr;  // from the server's pool
  ServerConn* prev_ = nullptr;  // the server's list, under its lock
  ServerConn* next_ = nullptr;
};

class GORT_API Server {
 public:
  using Handler = std::function<void(ServerConn&)>;

  explicit Server(Handler handler, ServerConfig cfg = {});
  explicit Server(Sessions sessions, ServerConfig cfg = {});
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();

  // Accepts connections on ln and serves each on its own goroutine until
  // shutdown or close (then returns ServerClosedError()) or an accept error
  // (returned; ln stays open). Returns ServerClosedError() at once after
  // shutdown or close. ln must outlive the call. May park.
  absl::Status serve(Listener& ln);
  absl::Status serve(tls::Listener& ln);

  // See the top of the file. Returns OK once every handler has returned,
  // or ctx's error (ctx done first). Later calls wait the same way.
  absl::Status shutdown(const Context& ctx);
  // See the top of the file. Returns the first error closing a listener.
  absl::Status close();

  // Live connections (handlers not yet returned), and those of them idle
  // in wait_input.
  size_t num_conns() const;
  size_t num_idle() const;

  struct Impl;

 private:
  friend class ServerConn;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gort::net

// The server lifecycle (gort/server.hpp): accept loops, the set of live
// connections, idle tracking, shutdown and close.
//
// What is counted. `live` counts the accept loops in serve() and the
// connection goroutines, each from the moment it is counted (under mu, only
// while the server is open) until it has stopped touching the server.
// Shutdown waits for it to reach zero; once the server is shutting down
// nothing new is counted, so zero is final and `all_done` is closed once.
//
// A connection's state (ServerConn::State), an atomic word of its own, so
// that a request takes no server-wide lock:
//   kActive -> kIdle     wait_input begins (it then checks `stopping`)
//   kIdle   -> kActive   the first read, write or close_write after it
//                        returns (so a handler parked in read after it,
//                        as a TLS read waits for the rest of a record,
//                        still counts as idle), or wait_input failing
//   kIdle   -> kClosed   shutdown closes an idle connection
//   any     -> kClosed   close() closes every connection
// wait_input's store and its look at `stopping`, and shutdown's store of
// `stopping` and its scan, are sequentially consistent: either the scan
// sees kIdle and closes the connection, or wait_input sees `stopping`.
// A connection is on the list from its goroutine's start to its end; a
// closer only calls close on it under mu, and the goroutine leaves the list
// under mu before its Conn is destroyed.
#include <cstdio>
#include <exception>
#include <type_traits>
#include <string>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmp/diag/exception.hpp"
#include "gmp/os/clock.hpp"
#include "gort/chan.hpp"
#include "gort/runtime.hpp"
#include "gort/server.hpp"
#include "gort/sync.hpp"
#include "stdlib/net/net_fd.hpp"
#include "stdlib/net/room.hpp"
#include "stdlib/net/server_impl.hpp"

namespace gort::net {

absl::Status ServerClosedError() { return absl::FailedPreconditionError(std::string(kErrServerClosed)); }

bool is_server_closed(const absl::Status& s) {
  return s.code() == absl::StatusCode::kFailedPrecondition && std::string_view(s.message().data(), s.message().size()) == kErrServerClosed;
}

namespace {

// `gort: panic serving ADDR: TYPE: what` for the exception being handled,
// the type named as the unrecovered panic names it (gmp/diag/exception.hpp).
std::string describe_current(const std::string& addr) {
  internal::ExceptionInfo e = internal::current_exception_info();
  std::string type = e.go_panic ? "gort::panic_error" : e.type.empty() ? "unknown exception" : e.type;
  std::string line = absl::StrCat("gort: panic serving ", addr, ": ", type);
  if (!e.text.empty()) absl::StrAppend(&line, ": ", e.text);
  line += "\n";
  return line;
}

net::Conn* as_net(net::Conn& c) { return &c; }
net::Conn* as_net(tls::Conn&) { return nullptr; }
tls::Conn* as_tls(net::Conn&) { return nullptr; }
tls::Conn* as_tls(tls::Conn& c) { return &c; }

}  // namespace

template <class C>
IdleConnOf<C>::IdleConnOf(Server* srv, C c) : IdleConn(srv, as_net(conn), as_tls(conn)), conn(std::move(c)) {}

void report_panic(const ServerConn& sc) {
  std::string line = describe_current(sc.remote_addr());
  std::fwrite(line.data(), 1, line.size(), stderr);
}

template <class C>
void Server::Impl::run_conn(Server* srv, C conn) {
  if (sessions.make) {
    run_session(srv, std::move(conn));
    return;
  }
  ServerConn sc(srv, as_net(conn), as_tls(conn));
  bool open;
  {
    Hold lock(mu);
    open = !shutting_down;
    if (open) link_locked(&sc);
  }
  if (open) {
    sc.start_request();
    try {
      handler(sc);
    } catch (...) {
      report_panic(sc);
    }
  }
  sc.release_buffer(/*all=*/true);
  {
    Hold lock(mu);
    if (open) unlink_locked(&sc);
  }
  // Closed (a TLS connection sends close_notify) before the slot is given
  // back and the server may be destroyed.
  (void)conn.close();
  if (limited()) slots.release();
  leave();
}

template <class C>
void Server::Impl::run_session(Server* srv, C conn) {
  auto* ic = new IdleConnOf<C>(srv, std::move(conn));
  bool open;
  {
    Hold lock(mu);
    open = !shutting_down;
    if (open) link_locked(&ic->sc);
  }
  if (!open) {
    delete ic;  // closes the connection
    if (limited()) slots.release();
    leave();
    return;
  }
  ic->sc.start_request();
  try {
    ic->session = sessions.make(ic->sc);
  } catch (...) {
    report_panic(ic->sc);
  }
  if (ic->session == nullptr) {
    finish(ic);
    return;
  }
  run_turns(ic);
}

template <class L>
absl::Status Server::Impl::serve(Server* srv, L& ln) {
  {
    Hold lock(mu);
    if (shutting_down) return ServerClosedError();
    live++;
    listeners.emplace_back(&ln, [](void* p) { return static_cast<L*>(p)->close(); });
  }
  absl::Status result;
  for (;;) {
    if (limited() && !slots.acquire(stopping, 1).ok()) {
      result = ServerClosedError();
      break;
    }
    auto c = ln.accept();
    if (!c.ok()) {
      if (limited()) slots.release();
      Hold lock(mu);
      result = shutting_down ? ServerClosedError() : c.status();
      break;
    }
    if (!enter()) {
      (void)c->close();
      if (limited()) slots.release();
      result = ServerClosedError();
      break;
    }
    using C = std::decay_t<decltype(*c)>;
    go([this, srv](C conn) { run_conn(srv, std::move(conn)); }, std::move(*c));
    // A session's first turn usually ends at once (idle until its input):
    // run it now, so that its goroutine is free for the next connection.
    // Otherwise a burst of connections waiting in the backlog piles up a
    // run queue of first turns, each on a stack of its own, and those
    // stacks stay warm after the burst (docs/net.md, "What an idle
    // connection costs").
    if (sessions.make) yield();
  }
  {
    Hold lock(mu);
    std::erase_if(listeners, [&](const auto& l) { return l.first == static_cast<void*>(&ln); });
  }
  leave();  // the last touch of the server
  return result;
}

Server::Server(Handler handler, ServerConfig cfg)
    : impl_(std::make_unique<Impl>(std::move(handler), Sessions{}, cfg)) {
  if (cfg.max_conns < 0) throw panic_error("gort::net::Server: negative max_conns");
  if (!impl_->handler) throw panic_error("gort::net::Server: no handler");
}

Server::Server(Sessions sessions, ServerConfig cfg)
    : impl_(std::make_unique<Impl>(Handler{}, std::move(sessions), cfg)) {
  if (cfg.max_conns < 0) throw panic_error("gort::net::Server: negative max_conns");
  if (!impl_->sessions.make) throw panic_error("gort::net::Server: no session factory");
}

Session::~Session() = default;

Server::~Server() {
  (void)close();
  (void)impl_->all_done.recv();
}

absl::Status Server::serve(Listener& ln) { return impl_->serve(this, ln); }
absl::Status Server::serve(tls::Listener& ln) { return impl_->serve(this, ln); }

absl::Status Server::shutdown(const Context& ctx) {
  Impl& s = *impl_;
  {
    Hold lock(s.mu);
    s.begin_stop_locked();
    (void)s.close_listeners_locked();
    for (ServerConn* c = s.conns; c != nullptr; c = c->next_) {
      uint8_t idle = ServerConn::kIdle;
      if (c->state_.compare_exchange_strong(idle, ServerConn::kClosed, std::memory_order_seq_cst)) {
        (void)c->close_conn();
      }
    }
  }
  // Those idle without a goroutine have nobody to end them but us.
  for (IdleConn* ic : s.claim_all_idle()) s.finish(ic);
  absl::Status result;
  select(on_recv(s.all_done), on_recv(ctx.done(), [&] { result = ctx.err(); }));
  return result;
}

absl::Status Server::close() {
  Impl& s = *impl_;
  absl::Status result;
  {
    Hold lock(s.mu);
    s.begin_stop_locked();
    if (!s.closed) {
      s.closed = true;
      s.cancel_base();
    }
    result = s.close_listeners_locked();
    for (ServerConn* c = s.conns; c != nullptr; c = c->next_) {
      if (c->state_.exchange(ServerConn::kClosed, std::memory_order_seq_cst) != ServerConn::kClosed) {
        (void)c->close_conn();
      }
    }
  }
  for (IdleConn* ic : s.claim_all_idle()) s.finish(ic);
  return result;
}

size_t Server::num_conns() const {
  Hold lock(impl_->mu);
  return impl_->nconns;
}

size_t Server::num_idle() const {
  Hold lock(impl_->mu);
  size_t n = 0;
  for (ServerConn* c = impl_->conns; c != nullptr; c = c->next_) {
    n += c->state_.load(std::memory_order_relaxed) == ServerConn::kIdle;
  }
  return n;
}

// ServerConn

namespace {

bool ready_now(const Conn& c) {
  internal::NetFD* fd = internal::NetFDAccess::fd(c);
  return fd != nullptr && fd->input_queued();
}
}  // namespace

absl::Status ServerConn::wait_strictly() {
  // A stale wake-up would start a turn whose read waits with the goroutine
  // keep_goroutine was to give back (NetFD::wait_readable).
  return nc_ != nullptr ? internal::wait_readable_strict(*nc_) : tc_->wait_readable_strict();
}

net::Conn* ServerConn::transport() { return nc_ != nullptr ? nc_ : tc_->transport(); }

void ServerConn::start_request() {
  const ServerConfig& cfg = srv_->impl_->cfg;
  bool set_r = cfg.read_timeout != absl::InfiniteDuration() || cfg.idle_timeout != absl::InfiniteDuration();
  bool set_w = cfg.write_timeout != absl::InfiniteDuration();
  if (!set_r && !set_w) return;
  // Relative to one monotonic reading: a wall-clock deadline costs two
  // clock reads per side (absl::Now, then the poller's nanotime), and a
  // clock read about 44 ns on this project's VM.
  net::Conn* c = transport();
  if (c == nullptr) return;
  // Deferring the idle deadline needs no clock (a server with an idle
  // timeout and no other: a clock read fewer per request).
  int64_t now = set_w || cfg.read_timeout != absl::InfiniteDuration() ? internal::nanotime() : 0;
  if (set_r && set_w && cfg.read_timeout == cfg.write_timeout) {
    internal::set_deadline_after(*c, cfg.read_timeout, 'r' + 'w', now);
    return;
  }
  // No read timeout: the idle deadline goes, but its timer stays armed for
  // the next wait's (no stop and re-insert in the timer heap per request,
  // 2.35 % of an echo server's CPU on 1,000 connections).
  if (set_r && cfg.read_timeout == absl::InfiniteDuration()) internal::defer_read_deadline(*c, now);
  else if (set_r) internal::set_deadline_after(*c, cfg.read_timeout, 'r', now);
  if (set_w) internal::set_deadline_after(*c, cfg.write_timeout, 'w', now);
}

bool ServerConn::wait_input() { return wait_input_for(nullptr) == Waited::kInput; }

ServerConn::Waited ServerConn::wait_input_for(IdleConn* kept) {
  Server::Impl& s = *srv_->impl_;
  uint8_t st = kActive;
  if (!state_.compare_exchange_strong(st, kIdle, std::memory_order_seq_cst) && st != kIdle) return Waited::kEnd;
  if (s.stopping_flag.load(std::memory_order_seq_cst)) {
    touch();  // unless the shutdown's scan closed it meanwhile
    return Waited::kEnd;
  }
  // Input already known to be there (the last read left bytes queued, as
  // a streaming client keeps them; TLS records decrypted): no wait, so no
  // idle deadline to arm and then clear again, on every turn.
  bool queued = nc_ != nullptr ? ready_now(*nc_) : tc_->input_pending();
  absl::Duration idle = s.cfg.idle_timeout != absl::InfiniteDuration() ? s.cfg.idle_timeout : s.cfg.read_timeout;
  // An idle connection holds no buffer; a kept goroutine keeps it, as it
  // keeps its stack (run_turns gives it back if the wait ends without
  // input): two trips to the pool's lock per request fewer.
  if (kept == nullptr) release_buffer();
  int64_t now = !queued && (idle != absl::InfiniteDuration() || kept != nullptr) ? internal::nanotime() : 0;
  // A socket's wait whose request only defers the idle deadline (an idle
  // timeout, no read or write timeout: an echo server's) sets and defers
  // it inside the wait's hold of the descriptor (NetFD::wait_input): four
  // locked instructions fewer per request. A kept wait's deadline must be
  // set before it joins the kept list, whose sweeper may expire it.
  const ServerConfig& cfg = s.cfg;
  const bool in_wait = !queued && kept == nullptr && nc_ != nullptr && internal::NetFDAccess::fd(*nc_) != nullptr &&
                       cfg.idle_timeout != absl::InfiniteDuration() && cfg.read_timeout == absl::InfiniteDuration() &&
                       cfg.write_timeout == absl::InfiniteDuration();
  if (!queued && !in_wait && idle != absl::InfiniteDuration()) {
    if (net::Conn* c = transport(); c != nullptr) internal::set_deadline_after(*c, idle, 'r', now);
  }
  absl::Status err;
  bool evicted = false;
  // Strictly: true only with input there (as Go's server peeks at the
  // next request's first bytes before its read deadline starts). After a
  // stale wake-up the request's deadlines would replace the idle one, and
  // a read with no read timeout would wait for good; a kept goroutine's
  // turn would hold it past keep_goroutine.
  if (in_wait) {
    err = internal::wait_input_strict(*nc_, internal::deadline_after(idle, now), now);
  } else if (!queued) {
    if (kept != nullptr && s.kept.add(kept, now)) s.start_sweeper();
    err = wait_strictly();
    if (kept != nullptr) evicted = s.kept.remove(kept);
    // The sweeper ended the wait by expiring the read deadline (or did so
    // as input came): no deadline of the wait's is left behind.
    if (evicted) (void)set_read_deadline(absl::InfiniteFuture());
  }
  if (!err.ok()) {
    if (evicted && is_timeout_error(err) && state_.load(std::memory_order_acquire) == kIdle) {
      return Waited::kLimit;  // still idle: the caller takes it from here
    }
    touch();
    return Waited::kEnd;
  }
  if (state_.load(std::memory_order_acquire) == kClosed) return Waited::kEnd;
  // Still idle until the read that follows returns (see the top of the file).
  if (!in_wait) start_request();  // else deferred in the wait
  return Waited::kInput;
}

void ServerConn::touch() {
  uint8_t idle = kIdle;
  if (state_.load(std::memory_order_relaxed) == kIdle) {
    state_.compare_exchange_strong(idle, kActive, std::memory_order_acq_rel);
  }
}

std::string& ServerConn::buffer() {
  if (buf_ == nullptr) buf_ = srv_->impl_->buffers.get();
  return *buf_;
}

void ServerConn::release_buffer(bool all) {
  if (buf_ != nullptr && (all || buf_->empty())) srv_->impl_->buffers.put(std::exchange(buf_, nullptr));
}

bool ServerConn::input_pending() {
  return (buf_ != nullptr && !buf_->empty()) || (tc_ != nullptr && tc_->input_pending());
}

absl::Status ServerConn::close_conn() { return nc_ != nullptr ? nc_->close() : tc_->close(); }

absl::StatusOr<size_t> ServerConn::read(absl::Span<char> buf) {
  auto r = nc_ != nullptr ? nc_->read(buf) : tc_->read(buf);
  touch();
  return r;
}
absl::StatusOr<size_t> ServerConn::write(absl::Span<const char> buf) {
  touch();
  return nc_ != nullptr ? nc_->write(buf) : tc_->write(buf);
}
absl::Status ServerConn::close_write() {
  touch();
  return nc_ != nullptr ? nc_->close_write() : tc_->close_write();
}
absl::Status ServerConn::set_read_deadline(absl::Time t) {
  return nc_ != nullptr ? nc_->set_read_deadline(t) : tc_->set_read_deadline(t);
}
absl::Status ServerConn::set_write_deadline(absl::Time t) {
  return nc_ != nullptr ? nc_->set_write_deadline(t) : tc_->set_write_deadline(t);
}
std::string ServerConn::local_addr() const { return nc_ != nullptr ? nc_->local_addr() : tc_->local_addr(); }
std::string ServerConn::remote_addr() const { return nc_ != nullptr ? nc_->remote_addr() : tc_->remote_addr(); }
const Context& ServerConn::context() const { return srv_->impl_->base; }

}  // namespace gort::net

// stdlib/net/pipe.cpp — net::pipe() (Go's net.Pipe): PipeEnd and its
// deadlines. The protocol and its invariants are at the top of
// stdlib/net/pipe.hpp.
#include "stdlib/net/pipe.hpp"

#include "gort/time.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "gmp/lock.hpp"
#include "gort/net.hpp"
#include "stdlib/net/net_error.hpp"
#include "stdlib/net/net_fd.hpp"

namespace gort::internal {

namespace {

// The deadlines' "now", read in this one place: in a synctest bubble it is
// the bubble's fake clock, as the timers that close the deadline channels
// are bubble timers (docs/testing.md).
absl::Time pipe_now() { return gort::now(); }

// Whether a Signal has been closed, without waiting.
bool is_closed(const Signal& s) { return gort::select(on_recv(s), on_default()) == 0; }

absl::Status closed_pipe_error() { return absl::FailedPreconditionError(std::string(net::kErrClosedPipe)); }

}  // namespace

// ---- PipeDeadline ----

PipeDeadline::PipeDeadline() : cancel_(make_chan<std::monostate>()) {}

void PipeDeadline::set(absl::Time t) {
  MutexLock<Mutex> lock(mu_);
  // A timer that can no longer be stopped has fired: its goroutine closes
  // cancel_, now or in a moment. Wait for that, so that it cannot close a
  // channel this call re-arms (a double close) or leaves open.
  if (armed_ && !timer_.stop()) (void)cancel_.recv();
  armed_ = false;
  bool closed = is_closed(cancel_);
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) {  // no deadline
    if (closed) cancel_ = make_chan<std::monostate>();
    return;
  }
  absl::Duration d = t - pipe_now();
  if (d > absl::ZeroDuration()) {
    if (closed) cancel_ = make_chan<std::monostate>();
    timer_ = after_func(d, [c = cancel_] { c.close(); });
    armed_ = true;
    return;
  }
  if (!closed) cancel_.close();  // already past
}

Signal PipeDeadline::wait() {
  MutexLock<Mutex> lock(mu_);
  return cancel_;
}

void PipeDeadline::stop() {
  MutexLock<Mutex> lock(mu_);
  if (armed_ && !timer_.stop()) (void)cancel_.recv();  // as in set()
  armed_ = false;
}

// ---- PipeEnd ----

PipeEnd::PipeEnd(Chan<PipeChunk> rd_data, Chan<size_t> rd_took, Chan<PipeChunk> wr_data, Chan<size_t> wr_took,
                 Signal local_done, Signal remote_done)
    : rd_data_(std::move(rd_data)),
      rd_took_(std::move(rd_took)),
      wr_data_(std::move(wr_data)),
      wr_took_(std::move(wr_took)),
      rd_turn_(make_chan<std::monostate>(1)),
      wr_turn_(make_chan<std::monostate>(1)),
      local_done_(std::move(local_done)),
      remote_done_(std::move(remote_done)) {}

std::pair<PipeEnd*, PipeEnd*> PipeEnd::make_pair() {
  // data_x and took_x carry the direction end x reads; done_x is closed by
  // x's close.
  auto data_a = make_chan<PipeChunk>();
  auto data_b = make_chan<PipeChunk>();
  auto took_a = make_chan<size_t>(1);  // (pipe.hpp: a reader never parks on it)
  auto took_b = make_chan<size_t>(1);
  auto done_a = make_chan<std::monostate>();
  auto done_b = make_chan<std::monostate>();
  auto* a = new PipeEnd(data_a, took_a, data_b, took_b, done_a, done_b);
  auto* b = new PipeEnd(data_b, took_b, data_a, took_a, done_b, done_a);
  return {a, b};
}

void PipeEnd::release(PipeEnd* p) {
  (void)p->close();
  // A pending deadline's timer would otherwise outlive the end (harmless,
  // it closes its own copy of the channel, but a runtime timer and a
  // goroutine for nothing).
  p->rd_deadline_.stop();
  p->wr_deadline_.stop();
  delete p;
}

absl::Status PipeEnd::unsupported(std::string_view call) {
  return absl::UnimplementedError(cat(call, " pipe: unsupported operation"));
}

PipeStop PipeEnd::stopped(const Signal& deadline) const {
  if (closed_.load(std::memory_order_acquire)) return PipeStop::kClosed;
  if (is_closed(remote_done_)) return PipeStop::kPeerClosed;
  if (is_closed(deadline)) return PipeStop::kTimeout;
  return PipeStop::kNone;
}

PipeStop PipeEnd::take_turn(const Chan<std::monostate>& turn, const Signal& deadline) {
  size_t i = gort::select(on_send(turn, std::monostate{}), on_recv(local_done_), on_recv(remote_done_),
                          on_recv(deadline));
  return static_cast<PipeStop>(i);
}

void PipeEnd::give_turn(const Chan<std::monostate>& turn) { (void)turn.recv(); }  // full: never parks

PipeStop PipeEnd::next_chunk(const Signal& deadline, PipeChunk* c) {
  for (;;) {
    size_t i = gort::select(on_recv(rd_data_, [c](std::optional<PipeChunk> v) { *c = *v; }),  // never closed
                            on_recv(local_done_), on_recv(remote_done_), on_recv(deadline));
    if (i != 0) return static_cast<PipeStop>(i);
    if (c->n > 0) return PipeStop::kNone;
    rd_took_.send(0);
  }
}

namespace {

// A read's (and wait_readable's) status when stopped: OK for the peer's
// close, which is end of stream.
absl::Status read_stop_status(PipeStop s) {
  if (s == PipeStop::kClosed) return closed_error();
  if (s == PipeStop::kPeerClosed) return absl::OkStatus();
  return timeout_error();
}

// A write's: the peer's close is Go's io.ErrClosedPipe.
absl::Status write_stop_status(PipeStop s) {
  if (s == PipeStop::kClosed) return closed_error();
  if (s == PipeStop::kPeerClosed) return closed_pipe_error();
  return timeout_error();
}

}  // namespace

absl::StatusOr<size_t> PipeEnd::read(absl::Span<char> buf) {
  if (closed_.load(std::memory_order_acquire)) return closed_error();
  if (buf.empty()) return size_t{0};  // as a socket's read: at once
  Signal deadline = rd_deadline_.wait();
  size_t k = 0;
  PipeStop s = stopped(deadline);
  if (s == PipeStop::kNone) s = take_turn(rd_turn_, deadline);
  if (s == PipeStop::kNone) {
    PipeChunk c{};
    s = next_chunk(deadline, &c);
    if (s == PipeStop::kNone) {
      k = std::min(c.n, buf.size());
      std::memcpy(buf.data(), c.p, k);  // the writer waits for rd_took_ meanwhile
      rd_took_.send(k);
    }
    give_turn(rd_turn_);
  }
  if (s == PipeStop::kNone) return k;
  absl::Status st = read_stop_status(s);
  if (st.ok()) return size_t{0};  // end of stream
  return st;
}

absl::Status PipeEnd::wait_readable() {
  if (closed_.load(std::memory_order_acquire)) return closed_error();
  Signal deadline = rd_deadline_.wait();
  PipeStop s = stopped(deadline);
  if (s == PipeStop::kNone) s = take_turn(rd_turn_, deadline);
  if (s == PipeStop::kNone) {
    PipeChunk c{};
    s = next_chunk(deadline, &c);
    // Takes nothing: the writer offers the same bytes again, to the read
    // that follows. (Should the writer give up first, that read waits: a
    // stale wake-up, which wait_readable's contract allows.)
    if (s == PipeStop::kNone) rd_took_.send(0);
    give_turn(rd_turn_);
  }
  return s == PipeStop::kNone ? absl::OkStatus() : read_stop_status(s);
}

absl::StatusOr<size_t> PipeEnd::write(absl::Span<const char> buf) {
  Signal deadline = wr_deadline_.wait();
  PipeStop s = stopped(deadline);
  if (s == PipeStop::kNone) s = take_turn(wr_turn_, deadline);
  if (s == PipeStop::kNone) {
    const char* p = buf.data();
    size_t left = buf.size();
    // Offered at least once, so that a 0-byte write, as Go's, completes
    // only when a read meets it.
    for (bool once = true; once || left > 0; once = false) {
      size_t i = gort::select(on_send(wr_data_, PipeChunk{p, left}), on_recv(local_done_),
                              on_recv(remote_done_), on_recv(deadline));
      if (i != 0) {
        s = static_cast<PipeStop>(i);
        break;
      }
      size_t k = *wr_took_.recv();  // a reader that took the chunk always answers
      p += k;
      left -= k;
    }
    give_turn(wr_turn_);
  }
  if (s == PipeStop::kNone) return buf.size();
  return write_stop_status(s);
}

absl::Status PipeEnd::set_deadline(absl::Time t, int mode) {
  // As Go's: refused once either end is closed.
  if (closed_.load(std::memory_order_acquire)) return closed_error();
  if (is_closed(remote_done_)) return closed_pipe_error();
  if (mode != 'w') rd_deadline_.set(t);
  if (mode != 'r') wr_deadline_.set(t);
  return absl::OkStatus();
}

absl::Status PipeEnd::close() {
  if (closed_.exchange(true, std::memory_order_acq_rel)) return closed_error();
  local_done_.close();  // wakes this end's blocked calls and the peer's
  return absl::OkStatus();
}

}  // namespace gort::internal

namespace gort::net {

std::pair<Conn, Conn> pipe() {
  auto [a, b] = internal::PipeEnd::make_pair();
  return {internal::NetFDAccess::conn(a), internal::NetFDAccess::conn(b)};
}

}  // namespace gort::net

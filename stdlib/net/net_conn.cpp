// stdlib/net/net_conn.cpp — gort::net::Conn (Go's net.conn and TCPConn).
// Each call serves a socket (NetFD) or a pipe end (PipeEnd, net::pipe());
// which one is bit 0 of the handle (net.hpp).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <utility>

#include "gort/net.hpp"
#include "stdlib/net/net_error.hpp"
#include "stdlib/net/net_fd.hpp"
#include "stdlib/net/pipe.hpp"

namespace gort::net {

using internal::NetFD;
using internal::PipeEnd;

namespace {

std::string prefix(const NetFD* fd, std::string_view op) {
  return internal::op_prefix(op, fd->net(), fd->laddr(), fd->raddr());
}

absl::Status opt_result(const NetFD* fd, int err) {
  if (err == 0) return absl::OkStatus();
  return internal::io_error(err, prefix(fd, "set"), "setsockopt");
}

absl::Status deadline_result(int err) {
  return err == 0 ? absl::OkStatus() : internal::closed_error();
}

}  // namespace

Conn& Conn::operator=(Conn&& o) noexcept {
  // o's handle is taken first, so self-assignment keeps it; ~Conn of
  // `old` releases what this held.
  Conn old(std::move(o));
  std::swap(h_, old.h_);
  return *this;
}

Conn::~Conn() {
  if (is_pipe()) {
    PipeEnd::release(pipe_end());
  } else {
    internal::drop_fd(fd());
  }
}

absl::StatusOr<size_t> Conn::read(absl::Span<char> buf) {
  if (is_pipe()) return pipe_end()->read(buf);
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::StatusOr<size_t> {
    internal::IoResult r = fd->read(buf.data(), buf.size());
    if (r.err != 0) return internal::io_error(r.err, prefix(fd, "read"), "read");
    return r.n;
  });
}

absl::Status Conn::wait_readable() {
  if (is_pipe()) return pipe_end()->wait_readable();
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    int err = fd->wait_readable();
    return err == 0 ? absl::OkStatus() : internal::io_error(err, prefix(fd, "read"), "read");
  });
}

}  // namespace gort::net

namespace gort::internal {

absl::Status wait_readable_strict(net::Conn& c) {
  NetFD* fd = NetFDAccess::fd(c);
  if (fd == nullptr) return c.wait_readable();  // a pipe end, or nothing
  int err = fd->wait_readable(/*strict=*/true);
  return err == 0 ? absl::OkStatus() : io_error(err, net::prefix(fd, "read"), "read");
}

absl::Status wait_input_strict(net::Conn& c, int64_t idle, int64_t now) {
  NetFD* fd = NetFDAccess::fd(c);
  int err = fd->wait_input(idle, now);
  return err == 0 ? absl::OkStatus() : io_error(err, net::prefix(fd, "read"), "read");
}

void set_deadline_after(net::Conn& c, absl::Duration d, int mode, int64_t now) {
  if (NetFD* fd = NetFDAccess::fd(c); fd != nullptr) {
    (void)fd->set_deadline_after(d, mode, now);
    return;
  }
  absl::Time t = d == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + d;
  (void)(mode == 'r' ? c.set_read_deadline(t) : mode == 'w' ? c.set_write_deadline(t) : c.set_deadline(t));
}

void defer_read_deadline(net::Conn& c, int64_t now) {
  if (NetFD* fd = NetFDAccess::fd(c); fd != nullptr) {
    (void)fd->defer_read_deadline(now);
    return;
  }
  (void)c.set_read_deadline(absl::InfiniteFuture());
}

}  // namespace gort::internal

namespace gort::net {

absl::StatusOr<size_t> Conn::write(absl::Span<const char> buf) {
  if (is_pipe()) return pipe_end()->write(buf);
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::StatusOr<size_t> {
    internal::IoResult r = fd->write(buf.data(), buf.size());
    if (r.err != 0) return internal::io_error(r.err, prefix(fd, "write"), "write");
    return r.n;
  });
}

absl::Status Conn::set_deadline(absl::Time t) {
  if (is_pipe()) return pipe_end()->set_deadline(t, 'r' + 'w');
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    return deadline_result(fd->set_deadline(t, 'r' + 'w'));
  });
}

absl::Status Conn::set_read_deadline(absl::Time t) {
  if (is_pipe()) return pipe_end()->set_deadline(t, 'r');
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    return deadline_result(fd->set_deadline(t, 'r'));
  });
}

absl::Status Conn::set_write_deadline(absl::Time t) {
  if (is_pipe()) return pipe_end()->set_deadline(t, 'w');
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    return deadline_result(fd->set_deadline(t, 'w'));
  });
}

absl::Status Conn::close() {
  if (is_pipe()) return pipe_end()->close();
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    return fd->close() == 0 ? absl::OkStatus() : internal::closed_error();
  });
}

absl::Status Conn::close_write() {
  if (is_pipe()) return PipeEnd::unsupported("close_write");
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    int err = fd->shutdown(SHUT_WR);
    return err == 0 ? absl::OkStatus() : internal::io_error(err, prefix(fd, "close"), "shutdown");
  });
}

absl::Status Conn::close_read() {
  if (is_pipe()) return PipeEnd::unsupported("close_read");
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    int err = fd->shutdown(SHUT_RD);
    return err == 0 ? absl::OkStatus() : internal::io_error(err, prefix(fd, "close"), "shutdown");
  });
}

// A pipe end's addresses and network are all "pipe", as Go's pipeAddr.
std::string Conn::local_addr() const {
  if (is_pipe()) return "pipe";
  return h_ != 0 ? fd()->laddr() : std::string();
}

std::string Conn::remote_addr() const {
  if (is_pipe()) return "pipe";
  return h_ != 0 ? fd()->raddr() : std::string();
}

std::string Conn::network() const {
  if (is_pipe()) return "pipe";
  return h_ != 0 ? fd()->net() : std::string();
}

absl::Status Conn::set_no_delay(bool on) {
  if (is_pipe()) return PipeEnd::unsupported("set_no_delay");
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    return opt_result(fd, fd->setsockopt_int(IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0));
  });
}

absl::Status Conn::set_linger(int sec) {
  if (is_pipe()) return PipeEnd::unsupported("set_linger");
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    linger l{};
    l.l_onoff = sec >= 0 ? 1 : 0;
    l.l_linger = sec >= 0 ? sec : 0;
    return opt_result(fd, fd->setsockopt(SOL_SOCKET, SO_LINGER, &l, sizeof l));
  });
}

absl::Status Conn::set_keep_alive(bool on) {
  if (is_pipe()) return PipeEnd::unsupported("set_keep_alive");
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    return opt_result(fd, fd->setsockopt_int(SOL_SOCKET, SO_KEEPALIVE, on ? 1 : 0));
  });
}

absl::Status Conn::set_keep_alive_period(absl::Duration d) {
  if (is_pipe()) return PipeEnd::unsupported("set_keep_alive_period");
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    // Go: rounded up to whole seconds.
    int secs = static_cast<int>(absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1))));
    if (secs < 1) secs = 1;
    int err = fd->setsockopt_int(IPPROTO_TCP, TCP_KEEPIDLE, secs);
    if (err != 0) return opt_result(fd, err);
    return opt_result(fd, fd->setsockopt_int(IPPROTO_TCP, TCP_KEEPINTVL, secs));
  });
}

absl::Status Conn::set_read_buffer(int bytes) {
  if (is_pipe()) return PipeEnd::unsupported("set_read_buffer");
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    return opt_result(fd, fd->setsockopt_int(SOL_SOCKET, SO_RCVBUF, bytes));
  });
}

absl::Status Conn::set_write_buffer(int bytes) {
  if (is_pipe()) return PipeEnd::unsupported("set_write_buffer");
  return internal::with_fd(fd(), [&](NetFD* fd) -> absl::Status {
    return opt_result(fd, fd->setsockopt_int(SOL_SOCKET, SO_SNDBUF, bytes));
  });
}

int Conn::native_handle() const { return fd() != nullptr ? fd()->sysfd() : -1; }  // -1 for a pipe end

}  // namespace gort::net

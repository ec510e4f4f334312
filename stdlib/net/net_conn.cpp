// stdlib/net/net_conn.cpp — gort::net::Conn (Go's net.conn and TCPConn).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "gort/net.hpp"
#include "stdlib/net/net_error.hpp"
#include "stdlib/net/net_fd.hpp"

namespace gort::net {

using internal::NetFD;

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
  internal::move_fd(fd_, o.fd_);
  return *this;
}

Conn::~Conn() { internal::drop_fd(fd_); }

absl::StatusOr<size_t> Conn::read(absl::Span<char> buf) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::StatusOr<size_t> {
    internal::IoResult r = fd->read(buf.data(), buf.size());
    if (r.err != 0) return internal::io_error(r.err, prefix(fd, "read"), "read");
    return r.n;
  });
}

absl::Status Conn::wait_readable() {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    int err = fd->wait_readable();
    return err == 0 ? absl::OkStatus() : internal::io_error(err, prefix(fd, "read"), "read");
  });
}

absl::StatusOr<size_t> Conn::write(absl::Span<const char> buf) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::StatusOr<size_t> {
    internal::IoResult r = fd->write(buf.data(), buf.size());
    if (r.err != 0) return internal::io_error(r.err, prefix(fd, "write"), "write");
    return r.n;
  });
}

absl::Status Conn::set_deadline(absl::Time t) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return deadline_result(fd->set_deadline(t, 'r' + 'w'));
  });
}

absl::Status Conn::set_read_deadline(absl::Time t) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return deadline_result(fd->set_deadline(t, 'r'));
  });
}

absl::Status Conn::set_write_deadline(absl::Time t) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return deadline_result(fd->set_deadline(t, 'w'));
  });
}

absl::Status Conn::close() {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return fd->close() == 0 ? absl::OkStatus() : internal::closed_error();
  });
}

absl::Status Conn::close_write() {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    int err = fd->shutdown(SHUT_WR);
    return err == 0 ? absl::OkStatus() : internal::io_error(err, prefix(fd, "close"), "shutdown");
  });
}

absl::Status Conn::close_read() {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    int err = fd->shutdown(SHUT_RD);
    return err == 0 ? absl::OkStatus() : internal::io_error(err, prefix(fd, "close"), "shutdown");
  });
}

std::string Conn::local_addr() const { return fd_ != nullptr ? fd_->laddr() : std::string(); }

std::string Conn::remote_addr() const { return fd_ != nullptr ? fd_->raddr() : std::string(); }

std::string Conn::network() const { return fd_ != nullptr ? fd_->net() : std::string(); }

absl::Status Conn::set_no_delay(bool on) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return opt_result(fd, fd->setsockopt_int(IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0));
  });
}

absl::Status Conn::set_linger(int sec) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    linger l{};
    l.l_onoff = sec >= 0 ? 1 : 0;
    l.l_linger = sec >= 0 ? sec : 0;
    return opt_result(fd, fd->setsockopt(SOL_SOCKET, SO_LINGER, &l, sizeof l));
  });
}

absl::Status Conn::set_keep_alive(bool on) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return opt_result(fd, fd->setsockopt_int(SOL_SOCKET, SO_KEEPALIVE, on ? 1 : 0));
  });
}

absl::Status Conn::set_keep_alive_period(absl::Duration d) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    // Go: rounded up to whole seconds.
    int secs = static_cast<int>(absl::ToInt64Seconds(absl::Ceil(d, absl::Seconds(1))));
    if (secs < 1) secs = 1;
    int err = fd->setsockopt_int(IPPROTO_TCP, TCP_KEEPIDLE, secs);
    if (err != 0) return opt_result(fd, err);
    return opt_result(fd, fd->setsockopt_int(IPPROTO_TCP, TCP_KEEPINTVL, secs));
  });
}

absl::Status Conn::set_read_buffer(int bytes) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return opt_result(fd, fd->setsockopt_int(SOL_SOCKET, SO_RCVBUF, bytes));
  });
}

absl::Status Conn::set_write_buffer(int bytes) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return opt_result(fd, fd->setsockopt_int(SOL_SOCKET, SO_SNDBUF, bytes));
  });
}

int Conn::native_handle() const { return fd_ != nullptr ? fd_->sysfd() : -1; }

}  // namespace gort::net

// stdlib/net_listener.cpp — listen and Listener (Go's net/tcpsock_posix.go,
// unixsock_posix.go, sock_posix.go listenStream, fd_unix.go accept).
#include <sys/socket.h>

#include <string>

#include "gort/net.hpp"
#include "stdlib/net_addr.hpp"
#include "stdlib/net_error.hpp"
#include "stdlib/net_fd.hpp"
#include "stdlib/net_resolve.hpp"
#include "stdlib/net_sock.hpp"

namespace gort::net {

using detail::cat;

using detail::NetFD;
using detail::Network;
using detail::SockAddr;


absl::StatusOr<Listener> listen(std::string_view network, std::string_view address) {
  auto n = detail::parse_network(network);
  if (!n.ok()) return detail::wrap_error(cat("listen ", network), n.status());
  if (n->sotype != SOCK_STREAM) {
    return absl::InvalidArgumentError(cat("listen ", network, " ", address, ": address ",
                                                   address, ": unexpected address type"));
  }
  if (auto s = detail::runtime_check("listen"); !s.ok()) return s;
  auto fd = detail::listen_fd(*n, address);
  if (!fd.ok()) return fd.status();
  (*fd)->enable_close_notify();
  return Listener(*fd);
}

Listener& Listener::operator=(Listener&& o) noexcept {
  detail::move_fd(fd_, o.fd_);
  return *this;
}

Listener::~Listener() { detail::drop_fd(fd_); }

absl::StatusOr<Conn> Listener::accept() {
  return detail::with_fd(fd_, [&](NetFD* fd) -> absl::StatusOr<Conn> {
    int s = -1;
    SockAddr rsa;
    const char* syscall = "";
    int err = fd->accept(&s, &rsa, &syscall);
    std::string prefix = detail::op_prefix("accept", fd->net(), "", fd->laddr());
    if (err != 0) return detail::io_error(err, prefix, syscall);
    NetFD* c = NetFD::open(s, fd->family(), fd->sotype(), fd->net(), &err);
    if (c == nullptr) return detail::io_error(err, prefix, "epoll_ctl");
    c->set_addrs(detail::sock_name(s), detail::format_sockaddr(rsa));
    auto n = detail::parse_network(fd->net());
    if (n.ok()) detail::set_conn_defaults(c, *n);
    return Conn(c);
  });
}

std::string Listener::addr() const { return fd_ != nullptr ? fd_->laddr() : std::string(); }

std::string Listener::network() const { return fd_ != nullptr ? fd_->net() : std::string(); }

absl::Status Listener::close() {
  return detail::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return fd->close() == 0 ? absl::OkStatus() : detail::closed_error();
  });
}

absl::Status Listener::set_deadline(absl::Time t) {
  return detail::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return fd->set_deadline(t, 'r' + 'w') == 0 ? absl::OkStatus() : detail::closed_error();
  });
}

int Listener::native_handle() const { return fd_ != nullptr ? fd_->sysfd() : -1; }

}  // namespace gort::net

// stdlib/net/net_listener.cpp — listen and Listener (Go's net/tcpsock_posix.go,
// unixsock_posix.go, sock_posix.go listenStream, fd_unix.go accept).
#include <sys/socket.h>

#include <string>

#include "gort/net.hpp"
#include "stdlib/net/net_addr.hpp"
#include "stdlib/net/net_error.hpp"
#include "stdlib/net/net_fd.hpp"
#include "stdlib/net/net_resolve.hpp"
#include "stdlib/net/net_sock.hpp"

namespace gort::net {

using internal::cat;

using internal::NetFD;
using internal::Network;
using internal::SockAddr;


absl::StatusOr<Listener> listen(std::string_view network, std::string_view address) {
  auto n = internal::parse_network(network);
  if (!n.ok()) return internal::wrap_error(cat("listen ", network), n.status());
  if (n->sotype != SOCK_STREAM) {
    return absl::InvalidArgumentError(cat("listen ", network, " ", address, ": address ",
                                                   address, ": unexpected address type"));
  }
  if (auto s = internal::runtime_check("listen"); !s.ok()) return s;
  auto fd = internal::listen_fd(*n, address);
  if (!fd.ok()) return fd.status();
  (*fd)->enable_close_notify();
  return internal::NetFDAccess::listener(*fd);
}

Listener& Listener::operator=(Listener&& o) noexcept {
  internal::move_fd(fd_, o.fd_);
  return *this;
}

Listener::~Listener() { internal::drop_fd(fd_); }

absl::StatusOr<Conn> Listener::accept() {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::StatusOr<Conn> {
    int s = -1;
    SockAddr rsa;
    const char* syscall = "";
    int err = fd->accept(&s, &rsa, &syscall);
    std::string prefix = internal::op_prefix("accept", fd->net(), "", fd->laddr());
    if (err != 0) return internal::io_error(err, prefix, syscall);
    NetFD* c = NetFD::open(s, fd->family(), fd->sotype(), fd->net(), &err);
    if (c == nullptr) return internal::io_error(err, prefix, "epoll_ctl");
    SockAddr la = internal::sock_addr(s);
    c->set_addrs(internal::format_sockaddr(la), internal::format_sockaddr(rsa));
    auto n = internal::parse_network(fd->net());
    if (n.ok()) internal::set_conn_defaults(c, *n);
    if (n.ok() && n->proto == internal::Proto::kTcp && la.len != 0) {
      internal::peer_register(c, rsa, la, internal::PeerEnd::kAcceptor);
    }
    return internal::NetFDAccess::conn(c);
  });
}

std::string Listener::addr() const { return fd_ != nullptr ? fd_->laddr() : std::string(); }

std::string Listener::network() const { return fd_ != nullptr ? fd_->net() : std::string(); }

absl::Status Listener::close() {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return fd->close() == 0 ? absl::OkStatus() : internal::closed_error();
  });
}

absl::Status Listener::set_deadline(absl::Time t) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return fd->set_deadline(t, 'r' + 'w') == 0 ? absl::OkStatus() : internal::closed_error();
  });
}

int Listener::native_handle() const { return fd_ != nullptr ? fd_->sysfd() : -1; }

}  // namespace gort::net

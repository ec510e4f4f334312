// stdlib/net/net_packet.cpp — listen_packet and PacketConn (Go's
// net/udpsock_posix.go ReadFrom / WriteTo).
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
using internal::SockAddr;

absl::StatusOr<PacketConn> listen_packet(std::string_view network, std::string_view address) {
  auto n = internal::parse_network(network);
  if (!n.ok()) return internal::wrap_error(cat("listen ", network), n.status());
  if (n->proto != internal::Proto::kUdp) {
    return absl::InvalidArgumentError(cat("listen ", network, " ", address, ": address ",
                                                   address, ": unexpected address type"));
  }
  if (auto s = internal::runtime_check("listen"); !s.ok()) return s;
  auto fd = internal::listen_fd(*n, address);
  if (!fd.ok()) return fd.status();
  return internal::NetFDAccess::packet_conn(*fd);
}

PacketConn& PacketConn::operator=(PacketConn&& o) noexcept {
  internal::move_fd(fd_, o.fd_);
  return *this;
}

PacketConn::~PacketConn() { internal::drop_fd(fd_); }

absl::StatusOr<std::pair<size_t, std::string>> PacketConn::read_from(absl::Span<char> buf) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::StatusOr<std::pair<size_t, std::string>> {
    SockAddr from;
    internal::IoResult r = fd->recvfrom(buf.data(), buf.size(), &from);
    if (r.err != 0) {
      std::string prefix = internal::op_prefix("read", fd->net(), fd->laddr(), "");
      return internal::io_error(r.err, prefix, "recvfrom");
    }
    return std::pair<size_t, std::string>(r.n, internal::format_sockaddr(from));
  });
}

absl::StatusOr<size_t> PacketConn::write_to(absl::Span<const char> buf, std::string_view addr) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::StatusOr<size_t> {
    auto n = internal::parse_network(fd->net());
    if (!n.ok()) return n.status();
    auto addrs = internal::resolve_addr_list(background(), absl::InfiniteFuture(), *n, addr, internal::AddrFor::kDial);
    if (!addrs.ok()) {
      std::string prefix = internal::op_prefix("write", fd->net(), fd->laddr(), "");
      return internal::wrap_error(prefix, addrs.status());
    }
    // The first address this socket can reach: an AF_INET6 socket that is
    // not IPv6-only reaches IPv4 addresses as ::ffff:a.b.c.d.
    const SockAddr* to = nullptr;
    SockAddr mapped;
    for (const SockAddr& a : *addrs) {
      if (a.family() == fd->family()) {
        to = &a;
        break;
      }
      if (fd->family() == AF_INET6 && !n->ipv6only() && a.family() == AF_INET) {
        mapped = internal::to_inet6(a);
        to = &mapped;
        break;
      }
    }
    std::string prefix = internal::op_prefix("write", fd->net(), fd->laddr(), addr);
    if (to == nullptr) {
      return absl::InvalidArgumentError(
          cat(prefix, ": address ", addr, ": no suitable address found"));
    }
    internal::IoResult r = fd->sendto(buf.data(), buf.size(), *to);
    if (r.err != 0) return internal::io_error(r.err, prefix, "sendto");
    return r.n;
  });
}

absl::Status PacketConn::set_deadline(absl::Time t) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return fd->set_deadline(t, 'r' + 'w') == 0 ? absl::OkStatus() : internal::closed_error();
  });
}

absl::Status PacketConn::set_read_deadline(absl::Time t) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return fd->set_deadline(t, 'r') == 0 ? absl::OkStatus() : internal::closed_error();
  });
}

absl::Status PacketConn::set_write_deadline(absl::Time t) {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return fd->set_deadline(t, 'w') == 0 ? absl::OkStatus() : internal::closed_error();
  });
}

absl::Status PacketConn::close() {
  return internal::with_fd(fd_, [&](NetFD* fd) -> absl::Status {
    return fd->close() == 0 ? absl::OkStatus() : internal::closed_error();
  });
}

std::string PacketConn::local_addr() const { return fd_ != nullptr ? fd_->laddr() : std::string(); }

std::string PacketConn::network() const { return fd_ != nullptr ? fd_->net() : std::string(); }

namespace {

// SO_RCVBUF or SO_SNDBUF.
absl::Status set_buffer(NetFD* owned, int name, int bytes) {
  return internal::with_fd(owned, [&](NetFD* fd) -> absl::Status {
    int err = fd->setsockopt_int(SOL_SOCKET, name, bytes);
    if (err == 0) return absl::OkStatus();
    std::string prefix = internal::op_prefix("set", fd->net(), fd->laddr(), "");
    return internal::io_error(err, prefix, "setsockopt");
  });
}

}  // namespace

absl::Status PacketConn::set_read_buffer(int bytes) { return set_buffer(fd_, SO_RCVBUF, bytes); }

absl::Status PacketConn::set_write_buffer(int bytes) { return set_buffer(fd_, SO_SNDBUF, bytes); }

int PacketConn::native_handle() const { return fd_ != nullptr ? fd_->sysfd() : -1; }

}  // namespace gort::net

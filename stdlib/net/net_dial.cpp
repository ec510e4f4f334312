// stdlib/net/net_dial.cpp — dial (Go's net/dial.go dialSerial, sock_posix.go
// and fd_unix.go netFD.connect).
//
// For each resolved address in turn: a non-blocking socket, connect(2),
// then, if it is in progress, park until the socket is writable and read
// SO_ERROR. The context's deadline (and dial_timeout's, split between the
// addresses left as Go's partialDeadline does) becomes the socket's write
// deadline; its cancellation is watched by an interrupter goroutine that
// expires that deadline. The interrupter is always joined before dial
// returns, so it never outlives the socket it touches.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>
#include <utility>

#include "gort/chan.hpp"
#include "gort/net.hpp"
#include "gort/time.hpp"
#include "gort/runtime.hpp"
#include "stdlib/net/net_addr.hpp"
#include "stdlib/net/net_error.hpp"
#include "stdlib/net/net_fd.hpp"
#include "stdlib/net/net_resolve.hpp"
#include "stdlib/net/net_sock.hpp"
#include "gmp/os/sys.hpp"

namespace gort::net {

using internal::cat;

namespace {

using internal::NetFD;
using internal::Network;
using internal::SockAddr;

// Go's partialDeadline: the time for one of `remaining` addresses.
absl::StatusOr<absl::Time> partial_deadline(absl::Time now, absl::Time deadline, int remaining) {
  if (deadline == absl::InfiniteFuture()) return deadline;
  absl::Duration left = deadline - now;
  if (left <= absl::ZeroDuration()) return internal::timeout_error();
  absl::Duration timeout = left / remaining;
  const absl::Duration kSaneMinimum = absl::Seconds(2);
  if (timeout < kSaneMinimum) timeout = left < kSaneMinimum ? left : kSaneMinimum;
  return now + timeout;
}

// Waits for a connect in progress on fd, honouring ctx.
int wait_connected(NetFD* fd, const Context& ctx, absl::Time deadline, absl::Status* ctx_err) {
  if (deadline != absl::InfiniteFuture()) fd->set_deadline(deadline, 'w');
  Chan<std::monostate> ctx_done = ctx.done();
  if (ctx_done.is_nil()) {
    int err = fd->wait_connect();
    fd->set_deadline(absl::InfiniteFuture(), 'w');
    return err;
  }
  auto stop = make_chan<std::monostate>();
  auto result = make_chan<absl::Status>(1);
  gort::go([ctx, ctx_done, stop, result, fd] {
    absl::Status r;
    select(on_recv(ctx_done,
                   [&](std::optional<std::monostate>) {
                     fd->expire_write();  // wakes wait_connect with a timeout
                     r = ctx.err();
                   }),
           on_recv(stop, [](std::optional<std::monostate>) {}));
    result.send(std::move(r));
  });
  int err = fd->wait_connect();
  stop.close();
  *ctx_err = *result.recv();  // the interrupter is done with fd
  fd->set_deadline(absl::InfiniteFuture(), 'w');
  return err;
}

// One attempt. *self_connect: TCP connected to itself (retry).
absl::StatusOr<Conn> dial_one(const Context& ctx, const Network& n, const SockAddr& ra,
                              absl::Time deadline, bool* self_connect) {
  *self_connect = false;
  std::string raddr = internal::format_sockaddr(ra);
  std::string prefix = internal::op_prefix("dial", n.name, "", raddr);
  int err = 0;
  int s = internal::sys_socket(ra.family(), n.sotype, n.ipv6only(), &err);
  if (s < 0) return internal::io_error(err, prefix, "socket");
  std::optional<internal::PeerDial> dialing;
  if (n.proto == internal::Proto::kTcp) dialing.emplace(ra);
  bool in_progress = false;
  if (internal::sys::connect(s, ra.sa(), ra.len) != 0) {
    int e = errno;
    if (e == EINPROGRESS || e == EALREADY || e == EINTR) {
      in_progress = true;
    } else if (e != EISCONN) {
      internal::sys::close(s);
      return internal::io_error(e, prefix, "connect");
    }
  }
  // Registered after connect(2), as Go does: an unconnected TCP socket
  // polls as writable (and hung up).
  NetFD* fd = NetFD::open(s, ra.family(), n.sotype, n.name, &err);
  if (fd == nullptr) return internal::io_error(err, prefix, "epoll_ctl");
  Conn conn = internal::NetFDAccess::conn(fd);  // releases fd on every error path
  absl::Status ctx_err;
  if (in_progress) {
    err = wait_connected(fd, ctx, deadline, &ctx_err);
  }
  if (ctx_err.ok()) ctx_err = ctx.err();  // cancelled at the last moment
  if (!ctx_err.ok()) return internal::wrap_error(prefix, internal::ctx_error(ctx_err));
  if (err == internal::kErrTimeout) return internal::wrap_error(prefix, internal::timeout_error());
  if (err != 0) return internal::io_error(err, prefix, "connect");
  SockAddr la = internal::sock_addr(s);
  SockAddr pa = internal::peer_addr(s);
  if (n.proto == internal::Proto::kTcp && pa.len != 0 && la == pa) {
    *self_connect = true;
    return absl::UnavailableError(cat(prefix, ": connect: self connect"));
  }
  fd->set_addrs(internal::format_sockaddr(la), pa.len != 0 ? internal::format_sockaddr(pa) : raddr);
  internal::set_conn_defaults(fd, n);
  if (n.proto == internal::Proto::kTcp && pa.len != 0) {
    internal::peer_register(fd, la, pa, internal::PeerEnd::kDialer);
  }
  return conn;
}

absl::StatusOr<Conn> dial_impl(const Context& ctx, std::string_view network,
                               std::string_view address, absl::Time deadline) {
  auto n = internal::parse_network(network);
  if (!n.ok()) return internal::wrap_error(cat("dial ", network), n.status());
  if (auto s = internal::runtime_check("dial"); !s.ok()) return s;
  if (auto d = ctx.deadline(); d && *d < deadline) deadline = *d;
  if (auto e = ctx.err(); !e.ok()) {
    return internal::wrap_error(internal::op_prefix("dial", n->name, "", address), internal::ctx_error(e));
  }
  auto addrs = internal::resolve_addr_list(ctx, deadline, *n, address, internal::AddrFor::kDial);
  if (!addrs.ok()) return internal::wrap_error(cat("dial ", n->name), addrs.status());
  absl::Status first_err;
  int total = static_cast<int>(addrs->size());
  for (int i = 0; i < total; i++) {
    const SockAddr& ra = (*addrs)[i];
    if (auto e = ctx.err(); !e.ok()) {
      return internal::wrap_error(internal::op_prefix("dial", n->name, "", internal::format_sockaddr(ra)),
                                internal::ctx_error(e));
    }
    auto pd = partial_deadline(gort::now(), deadline, total - i);
    if (!pd.ok()) {
      if (first_err.ok()) {
        first_err = internal::wrap_error(
            internal::op_prefix("dial", n->name, "", internal::format_sockaddr(ra)), pd.status());
      }
      break;
    }
    // Go retries a TCP connection to itself (an unused local port dialed
    // from the ephemeral range) twice.
    for (int attempt = 0;; attempt++) {
      bool self_connect = false;
      auto c = dial_one(ctx, *n, ra, *pd, &self_connect);
      if (c.ok()) return c;
      if (self_connect && attempt < 2) continue;
      if (first_err.ok()) first_err = c.status();
      break;
    }
  }
  if (first_err.ok()) return absl::InvalidArgumentError(cat("dial ", n->name, ": missing address"));
  return first_err;
}

}  // namespace

absl::StatusOr<Conn> dial(std::string_view network, std::string_view address) {
  return dial_impl(background(), network, address, absl::InfiniteFuture());
}

absl::StatusOr<Conn> dial(const Context& ctx, std::string_view network, std::string_view address) {
  return dial_impl(ctx, network, address, absl::InfiniteFuture());
}

absl::StatusOr<Conn> dial_timeout(std::string_view network, std::string_view address,
                                  absl::Duration timeout) {
  // Go's Dialer.Timeout: 0 means none.
  absl::Time deadline = timeout == absl::ZeroDuration() ? absl::InfiniteFuture() : gort::now() + timeout;
  return dial_impl(background(), network, address, deadline);
}

}  // namespace gort::net

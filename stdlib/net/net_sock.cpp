// stdlib/net/net_sock.cpp — socket creation and default options.
#include "stdlib/net/net_sock.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "gmp/sched.hpp"
#include "gort/context.hpp"
#include "stdlib/net/net_resolve.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {

int sys_socket(int family, int sotype, bool ipv6only, int* err) {
  int s = sys::socket(family, sotype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) {
    *err = errno;
    return -1;
  }
  if (family == AF_INET6) {
    int v = ipv6only ? 1 : 0;
    sys::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof v);
  }
  if (sotype == SOCK_DGRAM && family != AF_UNIX) {
    int one = 1;
    sys::setsockopt(s, SOL_SOCKET, SO_BROADCAST, &one, sizeof one);
  }
  *err = 0;
  return s;
}

void set_conn_defaults(NetFD* fd, const Network& n) {
  if (n.proto != Proto::kTcp) return;
  int s = fd->sysfd();
  int one = 1;
  sys::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Go's defaultTCPKeepAlive: 15 s idle, 15 s between probes.
  int secs = 15;
  sys::setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  sys::setsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof secs);
  sys::setsockopt(s, IPPROTO_TCP, TCP_KEEPINTVL, &secs, sizeof secs);
  fd->enable_inq();
}

SockAddr sock_addr(int s) {
  SockAddr a;
  a.len = sizeof a.ss;
  if (::getsockname(s, a.sa(), &a.len) != 0) a.len = 0;
  return a;
}

SockAddr peer_addr(int s) {
  SockAddr a;
  a.len = sizeof a.ss;
  if (::getpeername(s, a.sa(), &a.len) != 0) a.len = 0;
  return a;
}

std::string sock_name(int s) { return format_sockaddr(sock_addr(s)); }

bool supports_ipv4map() {
  // 0 unknown, 1 no, 2 yes. A race only probes twice.
  static std::atomic<int> cached{0};
  int c = cached.load(std::memory_order_acquire);
  if (c != 0) return c == 2;
  bool ok = false;
  int s = sys::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s >= 0) {
    int zero = 0;
    SockAddr a;
    parse_ip("::ffff:127.0.0.1", &a);  // parses as AF_INET
    SockAddr m = to_inet6(a);
    ok = sys::setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) == 0 &&
         ::bind(s, m.sa(), m.len) == 0;
    sys::close(s);
  }
  cached.store(ok ? 2 : 1, std::memory_order_release);
  return ok;
}

absl::Status runtime_check(std::string_view op) {
  if (internal::runtime.running.load(std::memory_order_acquire)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      cat(op, ": the gort runtime is not running (call it inside gort::run)"));
}

absl::Status ctx_error(const absl::Status& ctx_err) {
  if (ctx_err.code() == absl::StatusCode::kCancelled) {
    return absl::CancelledError("operation was canceled");
  }
  if (ctx_err.code() == absl::StatusCode::kDeadlineExceeded) return timeout_error();
  return ctx_err;
}

// What a listening socket is bound to, for errors: Go prints the address
// it resolved (":80" for a wildcard given without a host).
namespace {

std::string listen_display(std::string_view address, const SockAddr& la, const Network& n) {
  if (n.proto == Proto::kUnix) return std::string(address);
  if (address.empty() || address.front() == ':') return cat(":", la.port());
  return format_sockaddr(la);
}

}  // namespace

// Resolves address for listening and creates a bound socket of type
// n.sotype (listening if a stream). Shared by listen and listen_packet.
absl::StatusOr<NetFD*> listen_fd(const Network& n, std::string_view address) {
  auto addrs = resolve_addr_list(background(), absl::InfiniteFuture(), n, address, AddrFor::kListen);
  if (!addrs.ok()) return wrap_error(cat("listen ", n.name), addrs.status());
  SockAddr la = addrs->front();
  std::string prefix = op_prefix("listen", n.name, "", listen_display(address, la, n));
  // "tcp"/"udp" on a wildcard address: one dual-stack socket, as Go does.
  if (n.family == AF_UNSPEC && is_wildcard(la) && supports_ipv4map()) {
    SockAddr w = wildcard_addr(AF_INET6);
    w.set_port(la.port());
    la = w;
  }
  int err = 0;
  int s = sys_socket(la.family(), n.sotype, n.ipv6only(), &err);
  if (s < 0) return io_error(err, prefix, "socket");
  if (n.proto == Proto::kTcp) {
    int one = 1;
    sys::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  }
  if (::bind(s, la.sa(), la.len) != 0) {
    err = errno;
    sys::close(s);
    return io_error(err, prefix, "bind");
  }
  if (n.sotype == SOCK_STREAM && ::listen(s, SOMAXCONN) != 0) {
    err = errno;
    sys::close(s);
    return io_error(err, prefix, "listen");
  }
  NetFD* fd = NetFD::open(s, la.family(), n.sotype, n.name, &err);
  if (fd == nullptr) return io_error(err, prefix, "epoll_ctl");
  fd->set_addrs(sock_name(s), "");
  if (n.proto == Proto::kUnix && !address.empty() && address.front() != '@') {
    fd->set_unlink_on_close(std::string(address));
  }
  return fd;
}

}  // namespace gort::internal

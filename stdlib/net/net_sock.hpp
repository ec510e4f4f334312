// stdlib/net/net_sock.hpp — socket creation and options shared by listen, dial
// and accept (Go's net/sock_posix.go, sockopt_posix.go, sock_cloexec.go).
#pragma once

#include "stdlib/net/room.hpp"

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "stdlib/net/net_addr.hpp"
#include "stdlib/net/net_fd.hpp"

namespace gort::internal {

// A non-blocking, close-on-exec socket with Go's default options
// (IPV6_V6ONLY as asked on AF_INET6; SO_BROADCAST on IP datagram sockets).
// Returns -1 with *err set on failure.
int sys_socket(int family, int sotype, bool ipv6only, int* err);

// Options Go sets on every TCP connection it dials or accepts: TCP_NODELAY,
// and keep-alive probes every 15 s. Errors are ignored, as in Go. Also
// TCP_INQ, which reads use to know when they emptied the socket
// (NetFD::enable_inq).
void set_conn_defaults(NetFD* fd, const Network& n);

// getsockname of s, formatted; "" on failure.
std::string sock_name(int s);
// getsockname / getpeername of s; len 0 on failure.
SockAddr sock_addr(int s);
SockAddr peer_addr(int s);

// Whether an AF_INET6 socket can also serve IPv4 (Go's supportsIPv4map);
// probed once.
bool supports_ipv4map();

// FailedPrecondition unless gort::run is active (the poller exists only
// then).
absl::Status runtime_check(std::string_view op);

// Resolves address (network n) for listening and returns a bound socket
// of type n.sotype, listening if a stream; a wildcard address on "tcp" or
// "udp" gets one dual-stack AF_INET6 socket, as in Go. Errors read
// "listen tcp 127.0.0.1:80: bind: Permission denied".
absl::StatusOr<NetFD*> listen_fd(const Network& n, std::string_view address);

// Go's mapErr: a context's error as a net error: "operation was canceled"
// (Cancelled) or "i/o timeout" (DeadlineExceeded).
absl::Status ctx_error(const absl::Status& ctx_err);

}  // namespace gort::internal

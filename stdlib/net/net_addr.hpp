// stdlib/net/net_addr.hpp — networks and addresses: Go's parseNetwork,
// SplitHostPort, parsePort, IP literals, and socket addresses to strings.
//
// Pure syntax, no I/O, except parse_port's service-name lookup. Errors are
// InvalidArgument with Go's texts and no operation prefix (the caller adds
// "dial tcp: " and the like).
#pragma once

#include "stdlib/net/room.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace gort::internal {

enum class Proto { kTcp, kUdp, kUnix };

struct Network {
  // As given: "tcp", "tcp4", "unix", ...; a string literal, so that a
  // socket keeps a pointer rather than a copy (NetFD::net).
  const char* name = "";
  Proto proto = Proto::kTcp;
  int family = AF_UNSPEC;  // AF_UNSPEC ("tcp", "udp"), AF_INET, AF_INET6, AF_UNIX
  int sotype = SOCK_STREAM;
  // "tcp6"/"udp6": IPv6 only; "tcp"/"udp": an AF_INET6 socket also serves IPv4.
  bool ipv6only() const { return family == AF_INET6; }
};

// "unknown network <name>".
absl::StatusOr<Network> parse_network(std::string_view name);

// A socket address of any family.
struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;

  int family() const { return ss.ss_family; }
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&ss); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&ss); }
  // IP families only.
  int port() const;
  void set_port(int port);
  bool operator==(const SockAddr& o) const;
};

// "1.2.3.4:80", "[::1]:80", "[fe80::1%eth0]:80" (IPv4-mapped IPv6 addresses
// print as IPv4, as Go's IP.String does), a Unix path, "@abstract", or ""
// (an unnamed Unix socket, or nothing).
std::string format_sockaddr(const sockaddr* sa, socklen_t len);
inline std::string format_sockaddr(const SockAddr& a) { return format_sockaddr(a.sa(), a.len); }

// An IP literal ("1.2.3.4", "::1", "fe80::1%eth0") with port 0; false if
// host is not one. IPv4-mapped IPv6 literals become AF_INET, as in Go.
bool parse_ip(std::string_view host, SockAddr* out);
// The IP wildcard / loopback address of family (AF_INET or AF_INET6), port 0.
SockAddr wildcard_addr(int family);
SockAddr loopback_addr(int family);
bool is_wildcard(const SockAddr& a);
// An AF_INET address as ::ffff:a.b.c.d (for AF_INET6 sockets); others as is.
SockAddr to_inet6(const SockAddr& a);

// Go's SplitHostPort; errors "address <hostport>: <why>".
absl::StatusOr<std::pair<std::string, std::string>> split_host_port(std::string_view hostport);
// A decimal port or a service name (looked up for proto); errors
// "address <addr>: invalid port", "lookup tcp/<port>: unknown port".
absl::StatusOr<int> parse_port(std::string_view port, std::string_view addr, Proto proto);

// A Unix socket address for path ("@name": abstract; "": autobind);
// EINVAL (as an errno) if too long.
int unix_sockaddr(std::string_view path, SockAddr* out);

}  // namespace gort::internal

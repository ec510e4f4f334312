// stdlib/net/net_addr.cpp — networks, host:port syntax, IP literals and
// socket addresses (Go's net/ipsock.go, net/dial.go parseNetwork,
// net/port.go parsePort).
#include "stdlib/net/net_addr.hpp"
#include "stdlib/net/net_error.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "absl/strings/numbers.h"
#include "gort/net.hpp"
#include "gort/runtime.hpp"

namespace gort::net {

using internal::cat;

absl::StatusOr<std::pair<std::string, std::string>> split_host_port(std::string_view hostport) {
  return internal::split_host_port(hostport);
}

std::string join_host_port(std::string_view host, std::string_view port) {
  if (host.find(':') != std::string_view::npos) return cat("[", host, "]:", port);
  return cat(host, ":", port);
}

}  // namespace gort::net

namespace gort::internal {

absl::StatusOr<Network> parse_network(std::string_view name) {
  static constexpr const char* kNames[] = {"tcp", "tcp4", "tcp6", "udp", "udp4", "udp6", "unix"};
  Network n;
  for (const char* k : kNames) {
    if (name == k) n.name = k;
  }
  if (name.starts_with("tcp") && *n.name != 0) {
    n.proto = Proto::kTcp;
    n.sotype = SOCK_STREAM;
  } else if (name.starts_with("udp") && *n.name != 0) {
    n.proto = Proto::kUdp;
    n.sotype = SOCK_DGRAM;
  } else if (name == "unix") {
    n.proto = Proto::kUnix;
    n.family = AF_UNIX;
    n.sotype = SOCK_STREAM;
    return n;
  } else {
    return absl::InvalidArgumentError(cat("unknown network ", name));
  }
  switch (name.back()) {
    case '4':
      n.family = AF_INET;
      break;
    case '6':
      n.family = AF_INET6;
      break;
    default:
      n.family = AF_UNSPEC;
  }
  return n;
}

int SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

void SockAddr::set_port(int port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(static_cast<uint16_t>(port));
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(static_cast<uint16_t>(port));
}

bool SockAddr::operator==(const SockAddr& o) const {
  if (family() != o.family()) return false;
  if (family() == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    auto* b = reinterpret_cast<const sockaddr_in*>(&o.ss);
    return a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
  }
  if (family() == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    auto* b = reinterpret_cast<const sockaddr_in6*>(&o.ss);
    return a->sin6_port == b->sin6_port && a->sin6_scope_id == b->sin6_scope_id &&
           std::memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) == 0;
  }
  return len == o.len && std::memcmp(&ss, &o.ss, len) == 0;
}

std::string format_sockaddr(const sockaddr* sa, socklen_t len) {
  if (sa == nullptr || len < sizeof(sa_family_t)) return "";
  char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
  switch (sa->sa_family) {
    case AF_INET: {
      auto* in = reinterpret_cast<const sockaddr_in*>(sa);
      inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
      return cat(buf, ":", ntohs(in->sin_port));
    }
    case AF_INET6: {
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
      int port = ntohs(in6->sin6_port);
      if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
        inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], buf, sizeof buf);
        return cat(buf, ":", port);
      }
      inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
      std::string host = buf;
      if (in6->sin6_scope_id != 0) {
        char ifname[IF_NAMESIZE];
        if (if_indextoname(in6->sin6_scope_id, ifname) != nullptr) {
          host += cat("%", ifname);
        } else {
          host += cat("%", in6->sin6_scope_id);
        }
      }
      return cat("[", host, "]:", port);
    }
    case AF_UNIX: {
      auto* un = reinterpret_cast<const sockaddr_un*>(sa);
      size_t off = offsetof(sockaddr_un, sun_path);
      if (len <= off) return "";
      size_t n = len - off;
      if (n > sizeof un->sun_path) n = sizeof un->sun_path;
      if (un->sun_path[0] == '\0') return cat("@", std::string_view(un->sun_path + 1, n - 1));
      return std::string(un->sun_path, strnlen(un->sun_path, n));
    }
    default:
      return "";
  }
}

bool parse_ip(std::string_view host, SockAddr* out) {
  *out = SockAddr{};
  if (host.empty() || host.size() >= INET6_ADDRSTRLEN + IF_NAMESIZE) return false;
  std::string h(host);
  if (h.find(':') == std::string::npos) {
    auto* in = reinterpret_cast<sockaddr_in*>(&out->ss);
    if (inet_pton(AF_INET, h.c_str(), &in->sin_addr) != 1) return false;
    in->sin_family = AF_INET;
    out->len = sizeof(sockaddr_in);
    return true;
  }
  std::string zone;
  if (size_t pct = h.find('%'); pct != std::string::npos) {
    zone = h.substr(pct + 1);
    h.resize(pct);
    if (zone.empty()) return false;
  }
  in6_addr a6;
  if (inet_pton(AF_INET6, h.c_str(), &a6) != 1) return false;
  if (IN6_IS_ADDR_V4MAPPED(&a6) && zone.empty()) {
    auto* in = reinterpret_cast<sockaddr_in*>(&out->ss);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, &a6.s6_addr[12], 4);
    out->len = sizeof(sockaddr_in);
    return true;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&out->ss);
  in6->sin6_family = AF_INET6;
  in6->sin6_addr = a6;
  if (!zone.empty()) {
    uint32_t idx = 0;
    if (!absl::SimpleAtoi(zone, &idx)) idx = if_nametoindex(zone.c_str());
    in6->sin6_scope_id = idx;
  }
  out->len = sizeof(sockaddr_in6);
  return true;
}

SockAddr wildcard_addr(int family) {
  SockAddr a;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.ss);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    a.len = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
    a.len = sizeof(sockaddr_in6);
  }
  return a;
}

SockAddr loopback_addr(int family) {
  SockAddr a;
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    a.len = sizeof(sockaddr_in6);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.ss);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.len = sizeof(sockaddr_in);
  }
  return a;
}

bool is_wildcard(const SockAddr& a) {
  if (a.family() == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (a.family() == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr);
  }
  return false;
}

SockAddr to_inet6(const SockAddr& a) {
  if (a.family() != AF_INET) return a;
  auto* in = reinterpret_cast<const sockaddr_in*>(&a.ss);
  SockAddr b;
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&b.ss);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = in->sin_port;
  in6->sin6_addr.s6_addr[10] = 0xff;
  in6->sin6_addr.s6_addr[11] = 0xff;
  std::memcpy(&in6->sin6_addr.s6_addr[12], &in->sin_addr, 4);
  b.len = sizeof(sockaddr_in6);
  return b;
}

namespace {

absl::Status addr_error(std::string_view addr, std::string_view why) {
  return absl::InvalidArgumentError(cat("address ", addr, ": ", why));
}

}  // namespace

absl::StatusOr<std::pair<std::string, std::string>> split_host_port(std::string_view hostport) {
  constexpr std::string_view kMissingPort = "missing port in address";
  constexpr std::string_view kTooManyColons = "too many colons in address";
  size_t i = hostport.rfind(':');
  if (i == std::string_view::npos) return addr_error(hostport, kMissingPort);
  std::string_view host;
  size_t j = 0, k = 0;
  if (hostport[0] == '[') {
    // The first ']' must come just before the last ':'.
    size_t end = hostport.find(']');
    if (end == std::string_view::npos) return addr_error(hostport, "missing ']' in address");
    if (end + 1 == hostport.size()) return addr_error(hostport, kMissingPort);
    if (end + 1 != i) {
      if (hostport[end + 1] == ':') return addr_error(hostport, kTooManyColons);
      return addr_error(hostport, kMissingPort);
    }
    host = hostport.substr(1, end - 1);
    j = 1;
    k = end + 1;
  } else {
    host = hostport.substr(0, i);
    if (host.find(':') != std::string_view::npos) return addr_error(hostport, kTooManyColons);
  }
  if (hostport.find('[', j) != std::string_view::npos) {
    return addr_error(hostport, "unexpected '[' in address");
  }
  if (hostport.find(']', k) != std::string_view::npos) {
    return addr_error(hostport, "unexpected ']' in address");
  }
  return std::pair<std::string, std::string>(std::string(host), std::string(hostport.substr(i + 1)));
}

absl::StatusOr<int> parse_port(std::string_view port, std::string_view addr, Proto proto) {
  if (port.empty()) return 0;  // Go: an empty port means 0
  std::string_view digits = port;
  bool neg = false;
  if (digits[0] == '+' || digits[0] == '-') {
    neg = digits[0] == '-';
    digits.remove_prefix(1);
  }
  bool numeric = !digits.empty();
  int64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      numeric = false;
      break;
    }
    if (n <= 0xFFFF) n = n * 10 + (c - '0');  // saturates well above the limit
  }
  if (numeric) {
    if (neg && n != 0) return addr_error(addr, "invalid port");
    if (n > 0xFFFF) return addr_error(addr, "invalid port");
    return static_cast<int>(n);
  }
  // A service name ("http"): the services database, which may be a file
  // or a remote service: outside the P.
  const char* proto_name = proto == Proto::kUdp ? "udp" : "tcp";
  std::string name(port);
  int found = -1;
  gort::blocking([&] {
    servent ent;
    servent* res = nullptr;
    char buf[1024];
    if (getservbyname_r(name.c_str(), proto_name, &ent, buf, sizeof buf, &res) == 0 && res != nullptr) {
      found = ntohs(static_cast<uint16_t>(res->s_port));
    }
  });
  if (found < 0) {
    return absl::InvalidArgumentError(cat("lookup ", proto_name, "/", port, ": unknown port"));
  }
  return found;
}

int unix_sockaddr(std::string_view path, SockAddr* out) {
  *out = SockAddr{};
  auto* un = reinterpret_cast<sockaddr_un*>(&out->ss);
  un->sun_family = AF_UNIX;
  size_t off = offsetof(sockaddr_un, sun_path);
  if (path.size() > sizeof un->sun_path) return EINVAL;
  std::memcpy(un->sun_path, path.data(), path.size());
  if (path.empty()) {
    out->len = static_cast<socklen_t>(off);  // autobind
  } else if (path[0] == '@') {
    un->sun_path[0] = '\0';  // abstract: no trailing NUL counted
    out->len = static_cast<socklen_t>(off + path.size());
  } else {
    out->len = static_cast<socklen_t>(off + path.size() + (path.size() < sizeof un->sun_path ? 1 : 0));
  }
  return 0;
}

}  // namespace gort::internal

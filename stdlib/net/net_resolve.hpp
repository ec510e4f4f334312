// stdlib/net/net_resolve.hpp — from "host:port" to socket addresses (Go's
// net/ipsock.go internetAddrList, net/lookup.go). Host names go to
// getaddrinfo inside gort::blocking; a context that can be cancelled gets
// the lookup its own goroutine so that cancellation need not wait for it.
#pragma once

#include "stdlib/net/room.hpp"

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gort/context.hpp"
#include "stdlib/net/net_addr.hpp"

namespace gort::internal {

// What the addresses are for (Go's op "dial" or "listen"); a packet
// socket's destination is resolved as for dial.
enum class AddrFor : bool { kDial = false, kListen = true };

// The addresses of `address` on network n, in the order to try them.
// IP networks: an empty host is the wildcard address (listen) or loopback
// (dial); listen puts IPv4 addresses first (Go's first(isIPv4)). Unix: the
// path. `deadline` (InfiniteFuture: none) bounds a lookup besides ctx.
// Errors carry no operation prefix ("address ...: missing port in address",
// "lookup host: no such host", "missing address").
absl::StatusOr<std::vector<SockAddr>> resolve_addr_list(const Context& ctx, absl::Time deadline,
                                                        const Network& n, std::string_view address,
                                                        AddrFor use);

// IPv4 and IPv6 addresses of a host name (or literal), port 0; family
// AF_UNSPEC, AF_INET or AF_INET6.
absl::StatusOr<std::vector<SockAddr>> lookup_ip(const Context& ctx, absl::Time deadline,
                                                std::string_view host, int family);

}  // namespace gort::internal

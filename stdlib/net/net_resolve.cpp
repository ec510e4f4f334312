// stdlib/net/net_resolve.cpp — name resolution and address lists.
#include "stdlib/net/net_resolve.hpp"

#include <arpa/inet.h>
#include <netdb.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "gort/chan.hpp"
#include "gort/net.hpp"
#include "gort/runtime.hpp"
#include "stdlib/net/net_error.hpp"
#include "stdlib/net/net_sock.hpp"

namespace gort::net {

namespace {

absl::StatusOr<std::vector<std::string>> lookup_host_impl(const Context& ctx,
                                                          std::string_view host) {
  if (auto s = internal::runtime_check("lookup"); !s.ok()) return s;
  auto addrs = internal::lookup_ip(ctx, absl::InfiniteFuture(), host, AF_UNSPEC);
  if (!addrs.ok()) return addrs.status();
  std::vector<std::string> out;
  for (auto& a : *addrs) {
    std::string s = internal::format_sockaddr(a);  // "ip:0" or "[ip]:0"
    std::string_view v = s;
    v.remove_suffix(2);
    if (!v.empty() && v.front() == '[') {
      v.remove_prefix(1);
      v.remove_suffix(1);
    }
    out.emplace_back(v);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> lookup_host(std::string_view host) {
  return lookup_host_impl(background(), host);
}

absl::StatusOr<std::vector<std::string>> lookup_host(const Context& ctx, std::string_view host) {
  return lookup_host_impl(ctx, host);
}

}  // namespace gort::net

namespace gort::internal {

namespace {

struct Lookup {
  std::vector<SockAddr> addrs;
  absl::Status status;
};

// getaddrinfo on this thread, outside the P.
Lookup getaddrinfo_blocking(const std::string& host, int family) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;  // one entry per address
  addrinfo* res = nullptr;
  int sys_err = 0;
  int rc = gort::blocking([&] {
    int r = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    sys_err = errno;
    return r;
  });
  Lookup out;
  if (rc != 0) {
    std::string prefix = cat("lookup ", host);
    switch (rc) {
      case EAI_NONAME:
#ifdef EAI_NODATA
      case EAI_NODATA:
#endif
        out.status = absl::NotFoundError(cat(prefix, ": no such host"));
        break;
      case EAI_AGAIN:
        out.status = absl::UnavailableError(cat(prefix, ": ", gai_strerror(rc)));
        break;
      case EAI_SYSTEM:
        out.status = io_error(sys_err, prefix, "");
        break;
      default:
        out.status = absl::UnknownError(cat(prefix, ": ", gai_strerror(rc)));
    }
    return out;
  }
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SockAddr a;
    std::memcpy(&a.ss, ai->ai_addr, ai->ai_addrlen);
    a.len = ai->ai_addrlen;
    a.set_port(0);
    bool dup = false;
    for (auto& b : out.addrs) dup = dup || b == a;
    if (!dup) out.addrs.push_back(a);
  }
  ::freeaddrinfo(res);
  if (out.addrs.empty()) out.status = absl::NotFoundError(cat("lookup ", host, ": no such host"));
  return out;
}

}  // namespace

absl::StatusOr<std::vector<SockAddr>> lookup_ip(const Context& ctx, absl::Time deadline,
                                                std::string_view host, int family) {
  SockAddr lit;
  if (parse_ip(host, &lit)) {
    if (family != AF_UNSPEC && lit.family() != family) {
      return absl::InvalidArgumentError(cat("address ", host, ": no suitable address found"));
    }
    return std::vector<SockAddr>{lit};
  }
  std::string h(host);
  if (h.find('\0') != std::string::npos) return absl::NotFoundError(cat("lookup ", h, ": no such host"));
  if (auto e = ctx.err(); !e.ok()) return wrap_error(cat("lookup ", h), ctx_error(e));
  // A lookup that cannot be cancelled runs right here.
  if (ctx.done().is_nil() && deadline == absl::InfiniteFuture()) {
    Lookup r = getaddrinfo_blocking(h, family);
    if (!r.status.ok()) return r.status;
    return std::move(r.addrs);
  }
  // Otherwise in a goroutine of its own, so that we can stop waiting for
  // it: getaddrinfo itself cannot be interrupted; it finishes (and its
  // result is dropped) in the background.
  Context c = ctx;
  CancelFunc cancel;
  if (deadline != absl::InfiniteFuture()) std::tie(c, cancel) = with_deadline(ctx, deadline);
  auto result = make_chan<std::shared_ptr<Lookup>>(1);
  gort::go([result, h, family] {
    result.send(std::make_shared<Lookup>(getaddrinfo_blocking(h, family)));
  });
  std::shared_ptr<Lookup> r;
  bool done = false;
  select(on_recv(result, [&](std::optional<std::shared_ptr<Lookup>> v) { r = std::move(*v); }),
         on_recv(c.done(), [&](std::optional<std::monostate>) { done = true; }));
  absl::Status ctx_err = c.err();
  if (cancel) cancel();
  if (done) return wrap_error(cat("lookup ", h), ctx_error(ctx_err));
  if (!r->status.ok()) return r->status;
  return std::move(r->addrs);
}

absl::StatusOr<std::vector<SockAddr>> resolve_addr_list(const Context& ctx, absl::Time deadline,
                                                        const Network& n, std::string_view address,
                                                        AddrFor use) {
  const bool for_listen = use == AddrFor::kListen;
  if (n.proto == Proto::kUnix) {
    if (address.empty() && !for_listen) return absl::InvalidArgumentError("missing address");
    SockAddr a;
    if (int e = unix_sockaddr(address, &a); e != 0) {
      return absl::InvalidArgumentError(cat("address ", address, ": path too long"));
    }
    return std::vector<SockAddr>{a};
  }
  std::string host;
  int port = 0;
  if (address.empty()) {
    if (!for_listen) return absl::InvalidArgumentError("missing address");
  } else {
    auto hp = split_host_port(address);
    if (!hp.ok()) return hp.status();
    host = std::move(hp->first);
    auto p = parse_port(hp->second, address, n.proto);
    if (!p.ok()) return p.status();
    port = *p;
  }
  std::vector<SockAddr> addrs;
  if (host.empty()) {
    int fam = n.family == AF_INET6 ? AF_INET6 : AF_INET;
    addrs.push_back(for_listen ? wildcard_addr(fam) : loopback_addr(fam));
  } else {
    auto r = lookup_ip(ctx, deadline, host, n.family);
    if (!r.ok()) return r.status();
    for (auto& a : *r) {
      if (n.family == AF_UNSPEC || a.family() == n.family) addrs.push_back(a);
    }
    if (addrs.empty()) {
      return absl::InvalidArgumentError(cat("address ", host, ": no suitable address found"));
    }
    if (for_listen) {
      // Listen on one address; Go prefers IPv4 ("localhost" is 127.0.0.1).
      for (auto& a : addrs) {
        if (a.family() == AF_INET) {
          std::swap(a, addrs.front());
          break;
        }
      }
    }
  }
  for (auto& a : addrs) a.set_port(port);
  return addrs;
}

}  // namespace gort::internal

// stdlib/net/net_peer.cpp — see net_peer.hpp.
//
// A NetFD's peer state (NetFD::peer_) moves one way:
//
//   kNone ──register, other end not here──> kWaiting ──other end registers──> kPaired
//     │                                        │
//     └──register, other end waiting──> kPaired └──close (peer_forget)──> kNone
//
// A dialer registers always (its peer may be accepted much later); an
// acceptor only if a dialer of ours has registered or is dialing its
// address (g_dialing, counted from before connect(2): an acceptor that sees
// neither has a client in another process).
//
// One more edge, kWaiting -> kNone, for a NetFD whose key a later
// registration of the same end takes over: impossible while its socket is
// open (a connection's endpoints are unique), possible for a Conn left
// open past the end of its run, whose socket the run closed.
//
// Every change is made under g_mu, and a kWaiting NetFD is in g_waiting
// (with its key in g_keys) exactly while it is kWaiting; pairing sets both
// ends to kPaired and removes the waiting one. A NetFD is forgotten in its
// close, before it can be freed, so g_waiting never holds a freed one.
// write() reads the state without the lock: kPaired never changes back.
#include "stdlib/net/net_peer.hpp"

#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "gmp/lock.hpp"
#include "netpoll/netpoll.hpp"
#include "stdlib/net/net_addr.hpp"
#include "stdlib/net/net_fd.hpp"

namespace gort::internal {
namespace {

// One end's address as a key: family, address and port, with IPv4-mapped
// IPv6 addresses as IPv4 (a dual-stack listener sees an IPv4 dialer that
// way).
struct Endpoint {
  uint8_t family = 0;  // 4 or 6
  uint8_t addr[16] = {};
  uint16_t port = 0;
  bool operator==(const Endpoint& o) const {
    return family == o.family && port == o.port && std::memcmp(addr, o.addr, sizeof addr) == 0;
  }
};

// A connection: its client and server ends. Unique among open connections.
struct Key {
  Endpoint client, server;
  bool operator==(const Key& o) const { return client == o.client && server == o.server; }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 0;
    for (const Endpoint* e : {&k.client, &k.server}) {
      uint64_t a, b;
      std::memcpy(&a, e->addr, 8);
      std::memcpy(&b, e->addr + 8, 8);
      h = (h ^ a ^ (b * 0x632BE59BD9B4E019ull) ^ (uint64_t{e->port} << 8 | e->family)) * 0x9E3779B97F4A7C15ull;
    }
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// The key of a loopback endpoint; false for any other.
bool loopback_endpoint(const SockAddr& a, Endpoint* k) {
  if (a.family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a.ss);
    const auto* ip = reinterpret_cast<const uint8_t*>(&in->sin_addr);
    if (ip[0] != 127) return false;
    k->family = 4;
    std::memcpy(k->addr, ip, 4);
    k->port = ntohs(in->sin_port);
    return true;
  }
  if (a.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.ss);
    const uint8_t* ip = in6->sin6_addr.s6_addr;
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    k->port = ntohs(in6->sin6_port);
    if (std::memcmp(ip, kMapped, 12) == 0) {
      if (ip[12] != 127) return false;
      k->family = 4;
      std::memcpy(k->addr, ip + 12, 4);
      return true;
    }
    if (!IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return false;
    k->family = 6;
    std::memcpy(k->addr, ip, 16);
    return true;
  }
  return false;
}

struct Waiting {
  NetFD* fd;
  PeerEnd end;
};

struct EndpointHash {
  size_t operator()(const Endpoint& e) const { return KeyHash()(Key{e, Endpoint{}}); }
};

RuntimeMutex<LockRank::kNetPeer> g_mu;
std::unordered_map<Key, Waiting, KeyHash> g_waiting ABSL_GUARDED_BY(g_mu);
std::unordered_map<NetFD*, Key> g_keys ABSL_GUARDED_BY(g_mu);
// Dials under way, by server address (PeerDial).
std::unordered_map<Endpoint, int, EndpointHash> g_dialing ABSL_GUARDED_BY(g_mu);

}  // namespace

void peer_register(NetFD* fd, const SockAddr& client, const SockAddr& server, PeerEnd end) {
  Key k;
  if (!loopback_endpoint(client, &k.client) || !loopback_endpoint(server, &k.server)) return;
  MutexLock lock(g_mu);
  auto it = g_waiting.find(k);
  if (it != g_waiting.end() && it->second.end != end) {
    NetFD* other = it->second.fd;
    g_keys.erase(other);
    g_waiting.erase(it);
    other->peer_tag_ = fd->pollable() ? poll_tag(fd->pd_) : 0;
    fd->peer_tag_ = other->pollable() ? poll_tag(other->pd_) : 0;
    other->peer_.store(NetFD::kPeerPaired, std::memory_order_release);
    fd->peer_.store(NetFD::kPeerPaired, std::memory_order_release);
    return;
  }
  if (end == PeerEnd::kAcceptor && g_dialing.find(k.server) == g_dialing.end()) {
    // No dialer of ours has registered this connection, and none is dialing
    // this address: the client is another process. Waiting would cost every
    // such connection an entry for its lifetime (idle_conns measured 160
    // bytes each).
    return;
  }
  if (it != g_waiting.end()) {
    // The same end of the same connection twice (see the top of the
    // file): the newer one is the live one.
    NetFD* old = it->second.fd;
    g_keys.erase(old);
    old->peer_.store(NetFD::kPeerNone, std::memory_order_relaxed);
    it->second = Waiting{fd, end};
  } else {
    g_waiting.emplace(k, Waiting{fd, end});
  }
  g_keys[fd] = k;
  fd->peer_.store(NetFD::kPeerWaiting, std::memory_order_relaxed);
}

void peer_forget(NetFD* fd) {
  if (fd->peer_.load(std::memory_order_acquire) != NetFD::kPeerWaiting) return;
  MutexLock lock(g_mu);
  auto k = g_keys.find(fd);
  if (k == g_keys.end()) return;  // paired meanwhile
  auto it = g_waiting.find(k->second);
  if (it != g_waiting.end() && it->second.fd == fd) g_waiting.erase(it);
  g_keys.erase(k);
  fd->peer_.store(NetFD::kPeerNone, std::memory_order_relaxed);
}

PeerDial::PeerDial(const SockAddr& server) {
  Endpoint e;
  if (!loopback_endpoint(server, &e)) return;
  MutexLock lock(g_mu);
  g_dialing[e]++;
  server_ = &server;
}

PeerDial::~PeerDial() {
  if (server_ == nullptr) return;
  Endpoint e;
  loopback_endpoint(*server_, &e);
  MutexLock lock(g_mu);
  auto it = g_dialing.find(e);
  if (it != g_dialing.end() && --it->second == 0) g_dialing.erase(it);
}

size_t peer_waiting() {
  MutexLock lock(g_mu);
  return g_waiting.size();
}

}  // namespace gort::internal

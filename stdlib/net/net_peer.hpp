// stdlib/net/net_peer.hpp — TCP connections whose two ends are both in this
// process (over loopback), found when they are made, so that a write to
// one runs the goroutine it wakes on the writer's P (docs/net-internals.md,
// "Connections within one process").
//
// Why: such a write makes the other end readable at once (loopback TCP
// delivers in the writer's system call), and its reader is best run where
// the data is hot, by the writer's P right after the writer parks. Left to
// the poller and to stealing, a connection's two goroutines end up on
// different CPUs and every message crosses between them: 2-P tcp_echo
// spent 12.2 µs of CPU per round trip that way, 9.0 µs with placement, at
// an hour when crossing cost most (docs/net-internals.md has the spread).
// The placement costs no system call: the write does for the other end's
// poll descriptor what a readable event would (poll_wake_reader), which
// only an end of ours can do, hence the exact pairing: the dialer's local
// address is the acceptor's remote address.
//
// Thread-safety: any goroutine or thread; a few short locks per loopback
// connection made or closed (never on reads or writes). Connections to or
// from other hosts cost a flag test per write; loopback connections from
// other processes, a lookup when accepted; loopback connections to other
// processes, an entry (about 160 bytes) while they are open.
#pragma once

#include "stdlib/net/room.hpp"

#include <cstddef>

namespace gort::internal {

class NetFD;
struct SockAddr;

enum class PeerEnd : bool { kDialer, kAcceptor };

// fd is one end of a new TCP connection from `client` to `server` (for
// the dialer its local and peer addresses, for the acceptor its peer and
// local ones). If the connection's other end is already here, both become
// in-process peers (NetFD::in_process_peer) and are forgotten; otherwise fd
// waits for it until it comes or fd closes. Connections that are not over
// loopback addresses are ignored.
void peer_register(NetFD* fd, const SockAddr& client, const SockAddr& server, PeerEnd end);

// A dial to `server` under way, from before connect(2) until the dialer has
// registered (or failed): an acceptor of that address registers to wait for
// its dialer only meanwhile, so that connections from other processes
// cost nothing. `server` must outlive this.
class PeerDial {
 public:
  explicit PeerDial(const SockAddr& server);
  ~PeerDial();
  PeerDial(const PeerDial&) = delete;
  PeerDial& operator=(const PeerDial&) = delete;

 private:
  const SockAddr* server_ = nullptr;  // null: not loopback
};

// fd is closing: it stops waiting for its other end. Cheap when fd never
// waited.
void peer_forget(NetFD* fd);

// Connections waiting for their other end (for tests: closes leave none).
size_t peer_waiting();

}  // namespace gort::internal

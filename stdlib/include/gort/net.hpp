// gort/net.hpp — Go's net package: blocking-style TCP, UDP and Unix-domain
// sockets on non-blocking descriptors and the netpoller.
//
// A goroutine that calls accept, read, write, read_from or dial on a socket
// that is not ready is parked on the netpoller; its thread runs other
// goroutines meanwhile. Code reads like Go's:
//
//   // An echo server.
//   auto ln = gort::net::listen("tcp", "127.0.0.1:8080");
//   if (!ln.ok()) return fail(ln.status());
//   for (;;) {
//     auto c = ln->accept();
//     if (!c.ok()) break;                        // e.g. the listener was closed
//     gort::go([c = std::move(*c)]() mutable {
//       char buf[4096];
//       for (;;) {
//         auto n = c.read(absl::MakeSpan(buf));
//         if (!n.ok() || *n == 0) return;         // error or end of stream
//         if (!c.write(absl::MakeConstSpan(buf, *n)).ok()) return;
//       }
//     });                                        // ~Conn closes the socket
//   }
//
//   // A client with a deadline.
//   auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(2));
//   auto c = gort::net::dial(ctx, "tcp", "localhost:8080");
//   cancel();
//
// Networks: "tcp", "tcp4", "tcp6", "unix" (stream), "udp", "udp4", "udp6"
// (datagrams; dial gives a connected Conn, listen_packet a PacketConn).
// Addresses are "host:port", "[ipv6]:port" or "[fe80::1%eth0]:port"; the
// port is a number or a service name; an empty host means the wildcard
// address for listen and the loopback address for dial; port 0 picks a free
// port. Unix addresses are paths ("@name" is an abstract socket). Addresses
// are reported the same way ("127.0.0.1:1234", "[::1]:80", "/tmp/sock").
// pipe() makes a connected pair of Conns in memory, with no socket (Go's
// net.Pipe), for tests.
//
// Errors are absl::Status values with Go's texts. A failed system call reads
// `op network local->remote: syscall: strerror` — for example
// `dial tcp 127.0.0.1:1: connect: Connection refused` — with the status
// code of its errno (ECONNREFUSED and ECONNRESET: Unavailable, ETIMEDOUT:
// DeadlineExceeded, EADDRINUSE: AlreadyExists, EADDRNOTAVAIL: Unavailable,
// ENOENT: NotFound, EACCES: PermissionDenied, EINVAL: InvalidArgument,
// EPIPE: FailedPrecondition, ...).
// Malformed input is InvalidArgument (`dial tcp: address 127.0.0.1: missing
// port in address`, `dial foo: unknown network foo`). Two errors are
// returned exactly, so that they can be compared: any call on a closed
// socket, including one that was blocked when another goroutine closed it,
// returns absl::FailedPreconditionError("use of closed network connection")
// (Go's net.ErrClosed); a call that was blocked past its deadline returns
// absl::DeadlineExceededError("i/o timeout") (os.ErrDeadlineExceeded).
// is_closed_error() and is_timeout_error() test for them. Print an error
// with gort::error_text(status) (gort/errors.hpp): Go's err.Error(), the
// message without absl's code prefix. A cancelled dial
// returns Cancelled (`dial tcp ...: operation was canceled`); a dial past
// its deadline DeadlineExceeded (`dial tcp ...: i/o timeout`).
//
// Which calls park: Listener::accept, Conn::read, Conn::write,
// PacketConn::read_from and write_to park the calling goroutine until the
// socket is ready, its deadline passes or it is closed (from a plain thread
// they sleep the thread in short slices). dial, dial_timeout, and
// listen/listen_packet/write_to given a host name (not a numeric address)
// may park too: names are resolved with getaddrinfo inside gort::blocking,
// so the P keeps running other goroutines. close, close_write, the
// set_*deadline calls, addresses and socket options never park (on a
// pipe() end, see there).
//
// Thread-safety: a Conn, Listener or PacketConn may be used by many
// goroutines at once, as in Go: concurrent reads are served one at a time,
// as are concurrent writes (a read and a write proceed in parallel); close()
// may be called from any goroutine and wakes every blocked call. An object
// must outlive the calls in progress on it: close it, let the blocked calls
// return, then destroy it. The descriptor itself is released only when the
// last call in progress has left, so its number is never reused under a
// blocked caller (Go's fdMutex).
//
// Costs: one descriptor and one poll descriptor (recycled) per socket, a
// heap object per Conn; read and write are one system call when the socket
// is ready, plus a park and a wake-up when it is not. accept and dial query
// the local and remote addresses once (two system calls) and format them.
// Writes never raise SIGPIPE (send with MSG_NOSIGNAL): writing to a peer
// that is gone is an error (EPIPE, ECONNRESET).
//
// The runtime must be running (inside gort::run, from goroutines or plain
// threads); destroy sockets before run returns. A socket still open when
// run returns (one kept past it, or owned by a goroutine that was
// abandoned, say parked in read) is closed by run: every later call on it
// fails as on a closed socket, and destroying it afterwards is harmless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gort/chrono.hpp"
#include "gort/detail/deadlines.hpp"
#include "gort/context.hpp"
#include "gort/detail/api.hpp"
#include "gort/errors.hpp"
#include "gort/rawconn.hpp"

namespace gort::internal {
class PipeEnd;  // stdlib/net/pipe.hpp: one end of net::pipe()
}  // namespace gort::internal

namespace gort::net {

// The message of the error returned by calls on a closed socket (Go's
// net.ErrClosed).
inline constexpr std::string_view kErrClosed = "use of closed network connection";
// The message of the error a net::pipe() end's write (and set_*deadline)
// returns once the other end is closed: absl::FailedPreconditionError, as
// a socket's EPIPE (Go's io.ErrClosedPipe).
inline constexpr std::string_view kErrClosedPipe = "io: read/write on closed pipe";

// True for absl::FailedPreconditionError("use of closed network connection").
GORT_API bool is_closed_error(const absl::Status& s);
// True for a deadline that expired: an I/O call's "i/o timeout" or a dial's
// timeout (the status code is DeadlineExceeded).
GORT_API bool is_timeout_error(const absl::Status& s);

// A stream connection (TCP or Unix), a connected datagram socket, or one
// end of an in-memory pipe (net::pipe() below). Move-only;
// closes the socket on destruction. A default-constructed or moved-from Conn
// holds no socket: its calls return absl::InvalidArgumentError("invalid
// argument") at once (Go's nil Conn), its queries "" or -1, and valid() is
// false; assigning to it makes it usable again. Listener, PacketConn,
// os::File, tls::Conn and exec::Cmd follow the same rule
// (docs/standard-cpp.md, "Copying and moving handles").
class GORT_API Conn : public ::gort::internal::ChronoDeadlines<Conn> {
 public:
  Conn() = default;
  Conn(Conn&& o) noexcept : h_(std::exchange(o.h_, 0)) {}
  Conn& operator=(Conn&& o) noexcept;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  // Reads up to buf.size() bytes; returns as soon as at least one byte is
  // available. 0 with OK means end of stream (the peer closed or shut down
  // its writing side; Go's io.EOF), or that buf is empty. May park.
  absl::StatusOr<size_t> read(absl::Span<char> buf);
  // Waits until the socket is readable: data has arrived, or end of stream,
  // or an error is pending (the read that follows reports them). Consumes
  // nothing. Fails like read on close and on the read deadline. May park.
  // Rarely, a wake-up is stale (an event for data an earlier read already
  // took, harvested after it): then the read that follows parks until data
  // comes, as it would have without this call.
  //
  // For servers that hold many idle connections: a goroutine parked here
  // needs no read buffer, so one whose buffer lives on its stack (in a
  // function called after this returns) keeps a single stack page while
  // idle instead of two. Go programs get the same from their allocator (a
  // fresh buffer is untouched memory); see docs/net.md. Costs a
  // zero-timeout poll(2) when called while data may already be there (the
  // last read did not drain the socket), none when it parks and the poller
  // wakes it: then, as after a drained read, the read that follows is the
  // only system call.
  absl::Status wait_readable();
  // Writes all of buf, parking while the socket buffer is full; returns
  // buf.size() unless an error occurs (then the status; some bytes may
  // have been sent). May park.
  absl::StatusOr<size_t> write(absl::Span<const char> buf);

  // Deadlines for future and blocked calls: once `t` passes, blocked and
  // later reads (writes) fail with absl::DeadlineExceededError("i/o
  // timeout"); a time already past fails them at once, even if data is
  // ready. absl::InfinitePast() and absl::InfiniteFuture() mean no deadline
  // (Go's zero time). A later call replaces the deadline (and makes the
  // socket usable again). Never park. Each also takes a std::chrono time
  // point (gort/chrono.hpp): `c.set_deadline(steady_clock::now() + 1s)`.
  absl::Status set_deadline(absl::Time t);
  absl::Status set_read_deadline(absl::Time t);
  absl::Status set_write_deadline(absl::Time t);
  using ChronoDeadlines::set_deadline;
  using ChronoDeadlines::set_read_deadline;
  using ChronoDeadlines::set_write_deadline;

  // Closes the socket: wakes blocked calls (they, and all later calls,
  // return the closed error). The descriptor is closed when the last
  // blocked call has left. Closing twice returns the closed error.
  absl::Status close();
  // Shuts down the writing side (the peer reads end of stream); reading
  // still works. TCP and Unix stream sockets.
  absl::Status close_write();
  // Shuts down the reading side.
  absl::Status close_read();

  // "127.0.0.1:1234", "[::1]:80", a Unix path (or "" for an unnamed one).
  std::string local_addr() const;
  std::string remote_addr() const;
  // The network it was dialed or accepted on ("tcp", "tcp6", "unix", ...).
  std::string network() const;

  // TCP options (Go's TCPConn). TCP_NODELAY is on by default, as in Go,
  // and keep-alive probes are enabled every 15 s.
  absl::Status set_no_delay(bool on);
  // sec < 0: the default (close returns at once, data is sent in the
  // background); 0: close discards unsent data and resets the connection;
  // > 0: as 0 after sec seconds.
  absl::Status set_linger(int sec);
  absl::Status set_keep_alive(bool on);
  absl::Status set_keep_alive_period(absl::Duration d);
  template <chrono_duration D>
  absl::Status set_keep_alive_period(D d) {
    return set_keep_alive_period(from_chrono(d));
  }
  absl::Status set_read_buffer(int bytes);
  absl::Status set_write_buffer(int bytes);

  // The socket's descriptor, for options this API lacks; -1 without a
  // socket (and for a pipe end). Valid until close(); do not read, write
  // or close it directly.
  int native_handle() const;
  // Raw access for a library that does its own I/O on the socket (Go's
  // SyscallConn; gort/rawconn.hpp). Valid while this Conn lives. A pipe
  // end has no descriptor: its RawConn's calls fail (Unimplemented).
  RawConn syscall_conn() const { return RawConn(fd(), false, is_pipe()); }
  bool valid() const { return h_ != 0; }
  explicit operator bool() const { return valid(); }

 private:
  friend struct internal::NetFDAccess;
  explicit Conn(internal::NetFD* fd) noexcept : h_(reinterpret_cast<uintptr_t>(fd)) {}
  explicit Conn(internal::PipeEnd* p) noexcept : h_(reinterpret_cast<uintptr_t>(p) | kPipeTag) {}

  bool is_pipe() const noexcept { return (h_ & kPipeTag) != 0; }
  // The socket, or null (no connection, or a pipe end).
  internal::NetFD* fd() const noexcept {
    return is_pipe() ? nullptr : reinterpret_cast<internal::NetFD*>(h_);
  }
  // Only when is_pipe().
  internal::PipeEnd* pipe_end() const noexcept {
    return reinterpret_cast<internal::PipeEnd*>(h_ & ~kPipeTag);
  }

  // A tagged pointer, one word: 0 (no connection), a NetFD* (bit 0 clear:
  // a socket) or a PipeEnd* with bit 0 set (net::pipe(); both types are
  // at least 8-byte aligned). So a socket's Conn stays 8 bytes and each of
  // its calls pays one test of a bit in a word it loads anyway. A common
  // polymorphic base would have put a vtable pointer at the front of
  // NetFD, whose first 32 bytes are laid out for the read and write paths
  // (stdlib/net/net_fd.hpp), and made every socket call an indirect one.
  static constexpr uintptr_t kPipeTag = 1;
  uintptr_t h_ = 0;
};

// A stream listener (TCP or Unix). Move-only; closes on destruction. A
// Unix listener removes its socket file when closed (unless abstract). A
// default-constructed or moved-from Listener holds nothing: its calls
// return absl::InvalidArgumentError("invalid argument"), as Conn's.
class GORT_API Listener {
 public:
  Listener() = default;
  Listener(Listener&& o) noexcept : fd_(std::exchange(o.fd_, nullptr)) {}
  Listener& operator=(Listener&& o) noexcept;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener();

  // Waits for and returns the next connection. Parks the goroutine (not
  // the thread). When the process or system is out of descriptors
  // (EMFILE/ENFILE) it sleeps, 5 ms doubling up to 1 s, and retries, as
  // Go's servers do. After close() (also while blocked), returns
  // the closed error.
  absl::StatusOr<Conn> accept();
  // The bound address, with the port chosen for ":0".
  std::string addr() const;
  std::string network() const;
  // Wakes a blocked accept; later calls fail with the closed error.
  absl::Status close();
  // A deadline for accept (see Conn::set_deadline).
  absl::Status set_deadline(absl::Time t);
  template <chrono_time_point T>
  absl::Status set_deadline(T t) {
    return set_deadline(from_chrono(t));
  }
  int native_handle() const;
  bool valid() const { return fd_ != nullptr; }
  explicit operator bool() const { return valid(); }

 private:
  friend struct internal::NetFDAccess;
  explicit Listener(internal::NetFD* fd) noexcept : fd_(fd) {}

  internal::NetFD* fd_ = nullptr;
};

// An unconnected datagram socket (UDP). Move-only; closes on destruction.
// Default-constructed or moved-from: calls return
// absl::InvalidArgumentError("invalid argument"), as Conn's.
class GORT_API PacketConn : public ::gort::internal::ChronoDeadlines<PacketConn> {
 public:
  PacketConn() = default;
  PacketConn(PacketConn&& o) noexcept : fd_(std::exchange(o.fd_, nullptr)) {}
  PacketConn& operator=(PacketConn&& o) noexcept;
  PacketConn(const PacketConn&) = delete;
  PacketConn& operator=(const PacketConn&) = delete;
  ~PacketConn();

  // Receives one datagram into buf (the excess of a longer one is
  // discarded) and returns its length and its sender's address. May park.
  absl::StatusOr<std::pair<size_t, std::string>> read_from(absl::Span<char> buf);
  // Sends buf as one datagram to addr ("host:port"). May park (while the
  // socket buffer is full, or to resolve a host name).
  absl::StatusOr<size_t> write_to(absl::Span<const char> buf, std::string_view addr);

  absl::Status set_deadline(absl::Time t);
  absl::Status set_read_deadline(absl::Time t);
  absl::Status set_write_deadline(absl::Time t);
  using ChronoDeadlines::set_deadline;
  using ChronoDeadlines::set_read_deadline;
  using ChronoDeadlines::set_write_deadline;
  absl::Status close();
  std::string local_addr() const;
  std::string network() const;
  absl::Status set_read_buffer(int bytes);
  absl::Status set_write_buffer(int bytes);
  int native_handle() const;
  bool valid() const { return fd_ != nullptr; }
  explicit operator bool() const { return valid(); }

 private:
  friend struct internal::NetFDAccess;
  explicit PacketConn(internal::NetFD* fd) noexcept : fd_(fd) {}

  internal::NetFD* fd_ = nullptr;
};

// Listens on a stream network: "tcp", "tcp4", "tcp6" ("host:port"; an
// empty host, 0.0.0.0 or [::] listens on every address, and for "tcp" on
// one dual-stack socket that reports "[::]:port", as in Go; a host name
// listens on its first IPv4 address) or "unix" (a path). TCP listeners set
// SO_REUSEADDR; the backlog is SOMAXCONN. Parks only to resolve a name.
GORT_API absl::StatusOr<Listener> listen(std::string_view network, std::string_view address);

// Opens a datagram socket bound to address: "udp", "udp4", "udp6".
GORT_API absl::StatusOr<PacketConn> listen_packet(std::string_view network, std::string_view address);

// Connects to address on network ("tcp*", "unix", "udp*"). Host names are
// resolved (getaddrinfo, inside gort::blocking) and their addresses tried
// in order until one accepts; the first error is returned if none does.
// With a context: its cancellation or deadline aborts the resolution and
// the connection attempt (Cancelled "operation was canceled" /
// DeadlineExceeded "i/o timeout"). Parks.
GORT_API absl::StatusOr<Conn> dial(std::string_view network, std::string_view address);
GORT_API absl::StatusOr<Conn> dial(const Context& ctx, std::string_view network, std::string_view address);
// dial with a time limit on the whole operation (resolution included); a
// zero timeout means none, as Go's DialTimeout.
GORT_API absl::StatusOr<Conn> dial_timeout(std::string_view network, std::string_view address,
                                  absl::Duration timeout);
template <chrono_duration D>
absl::StatusOr<Conn> dial_timeout(std::string_view network, std::string_view address, D timeout) {
  return dial_timeout(network, address, from_chrono(timeout));
}

// Go's net.Pipe: a synchronous, in-memory, full-duplex connection whose
// two ends are Conns. What one end writes the other reads, copied straight
// from the writer's buffer into the reader's: there is no buffering, so a
// write parks until reads on the other end have taken all of it, and each
// write is delivered whole before the next one starts. It is what tests of
// code written against Conn use, and a way to connect two goroutines:
//
//   auto [client, server] = gort::net::pipe();
//   gort::go([s = std::move(server)]() mutable {
//     char buf[64];
//     for (;;) {                                 // an echo server
//       auto n = s.read(absl::MakeSpan(buf));
//       if (!n.ok() || *n == 0) return;          // error or client closed
//       if (!s.write(absl::MakeConstSpan(buf, *n)).ok()) return;
//     }
//   });
//   client.write(absl::MakeConstSpan("ping", 4));  // parks until read
//   auto n = client.read(absl::MakeSpan(reply));   // "ping"
//   client.close();                                // the server reads EOF
//
// An end behaves as a socket's Conn (read, wait_readable, write, the
// deadline setters with their "i/o timeout", close with its closed error,
// valid), except that: close() on one end makes the other end's reads
// return end of stream (0, OK) and its writes and set_*deadline calls
// absl::FailedPreconditionError(kErrClosedPipe) (Go's io.ErrClosedPipe);
// local_addr(), remote_addr() and network() are "pipe"; native_handle() is
// -1; close_write, close_read, the TCP options and set_*_buffer return
// absl::UnimplementedError("<call> pipe: unsupported operation"), and so
// do the calls of syscall_conn()'s RawConn. A read with an empty buffer
// returns 0 at once. A write of 0 bytes parks until a read on the other
// end meets it, as in Go; that read lets it complete and goes on waiting
// (Go's returns 0, which here would mean end of stream).
//
// Thread-safety and lifetime as Conn's: any goroutine or plain thread may
// use an end; concurrent reads are served one at a time, as are concurrent
// writes; an end must outlive the calls in progress on it; the two ends
// may be destroyed in any order. read, wait_readable and write may park; close
// and the queries never park; a deadline setter, and the destruction of an
// end, may park for a moment (while a deadline that is firing finishes).
//
// Built from channels, select and timers only (stdlib/net/pipe.hpp): a
// blocked call waits on channels, a deadline is a timer, so it is the
// connection to use in synctest bubbles (docs/net.md). Costs: two heap objects and
// fourteen small channels per pipe, made by this call (which never parks);
// a hand-off between a write and a read is a few channel operations on
// each side and one copy of the bytes, no system call; a pending deadline
// is a runtime timer, and its firing runs a short goroutine. The runtime
// must be running; destroy the ends before run returns.
GORT_API std::pair<Conn, Conn> pipe();

// Go's SplitHostPort: "host:port", "[host]:port" or "[host%zone]:port" into
// host and port; InvalidArgument with Go's texts ("address 127.0.0.1:
// missing port in address", "too many colons in address", ...).
GORT_API absl::StatusOr<std::pair<std::string, std::string>> split_host_port(std::string_view hostport);
// Go's JoinHostPort: "host:port", or "[host]:port" if host contains a colon.
GORT_API std::string join_host_port(std::string_view host, std::string_view port);
// Go's LookupHost: the host's addresses as strings. A numeric address is
// returned as is. May park.
GORT_API absl::StatusOr<std::vector<std::string>> lookup_host(std::string_view host);
GORT_API absl::StatusOr<std::vector<std::string>> lookup_host(const Context& ctx, std::string_view host);

}  // namespace gort::net

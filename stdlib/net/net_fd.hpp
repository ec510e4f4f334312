// stdlib/net/net_fd.hpp — NetFD: a non-blocking socket registered with the
// netpoller, with Go's fdMutex discipline (internal/poll/fd_mutex.go,
// fd_unix.go).
//
// Invariants:
//   - `fdmu_` (FdMutex, stdlib/net/fd_mutex.hpp) counts the calls in progress
//     (refs), holds the closed bit and the read and write locks, in one
//     word. A call takes a ref on entry (failing with kErrClosing once the
//     closed bit is set) and drops it on exit; close() sets the bit, evicts
//     the poll descriptor's waiters (poll_evict), and drops its own ref. The
//     one who drops the last ref of a closed NetFD destroys it: poll_close,
//     then ::close. So the descriptor number cannot be reused while a
//     caller may still touch it, and poll_close never finds a parked G.
//     (The end of a run closes the fd of a NetFD still open and marks its
//     poll descriptor closing; poll_close then says so and destroy leaves
//     the fd number alone.)
//   - Readers hold the read lock, writers the write lock, while they do
//     I/O: the poll descriptor allows one waiter per mode. A goroutine
//     waiting for a lock holds a ref, so the NetFD outlives it; close wakes
//     it and it fails with kErrClosing.
//   - The memory belongs to the owner (Conn, Listener, PacketConn); release()
//     closes, waits until the destruction is complete (normally at once:
//     the blocked calls were evicted), then frees it.
//   - family_, sotype_, net_, laddr_, raddr_ are set before the NetFD is
//     shared and never change.
#pragma once

#include "stdlib/net/room.hpp"

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <string>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "gort/chan.hpp"
#include "gort/detail/race.hpp"
#include "gort/net.hpp"
#include "gort/os.hpp"
#include "stdlib/net/fd_mutex.hpp"
#include "stdlib/net/net_addr.hpp"
#include "stdlib/net/net_error.hpp"
#include "stdlib/net/net_peer.hpp"

namespace gort::internal {

struct PollDesc;

// Bytes moved and 0, an errno value or kErr*.
struct IoResult {
  size_t n = 0;
  int err = 0;
};

// What kind of descriptor a NetFD holds: how it writes (a socket with
// send(MSG_NOSIGNAL); a pipe or FIFO with write under a blocked SIGPIPE, so
// that a reader that went away is EPIPE, not the death of the process; any
// other file with write).
enum class FdKind : uint8_t { kSocket, kPipe, kFile };

// Not errno values: a NetFD without a poll descriptor cannot have deadlines
// (Go's os.ErrNoDeadline).
inline constexpr int kErrNoDeadline = -3;

class NetFD {
 public:
  // Registers the non-blocking socket `sysfd` with the poller. On failure
  // closes sysfd and returns null with *err set to an errno value.
  static NetFD* open(int sysfd, int family, int sotype, const char* net, int* err);
  // A descriptor gort did not create (os::File, os::new_file). With
  // `pollable` it must be non-blocking and is registered with the poller;
  // if the poller refuses it (a regular file: EPERM) it is used as a
  // blocking one: each call runs inside gort::blocking, and deadlines are
  // not supported. On failure (other than EPERM) returns null with *err
  // set, leaving sysfd open.
  static NetFD* open_file(int sysfd, FdKind kind, bool pollable, int* err);
  // Before sharing only: destroy leaves the descriptor open (its owner,
  // a library, closes it).
  void set_borrowed() { borrowed_ = true; }
  // Whether the descriptor is in the poller (parks) or used blocking.
  bool pollable() const { return pd_ != nullptr; }
  // Its poll descriptor (null if not pollable), for tests.
  internal::PollDesc* poll_desc() const { return pd_; }
  FdKind kind() const { return kind_; }

  // Go's RawConn.Control, Read and Write: `f` gets the descriptor while
  // the NetFD cannot be closed under it. raw_read / raw_write hold the
  // direction's lock and call f until it returns true, waiting for
  // readiness (or the deadline, or close) in between. 0 or kErr*.
  int raw_control(absl::FunctionRef<void(int)> f);
  int raw_io(int mode, absl::FunctionRef<bool(int)> f);

  NetFD(const NetFD&) = delete;
  NetFD& operator=(const NetFD&) = delete;

  int sysfd() const { return sysfd_; }
  int family() const { return family_; }
  int sotype() const { return sotype_; }
  bool is_stream() const { return sotype_ == SOCK_STREAM; }
  const char* net() const { return net_; }
  const std::string& laddr() const { return laddr_; }
  const std::string& raddr() const { return raddr_; }
  // Before sharing only.
  void set_addrs(std::string l, std::string r) {
    laddr_ = std::move(l);
    raddr_ = std::move(r);
  }
  // Both ends of this TCP connection are in this process (stdlib/net/net_peer.hpp):
  // a complete write wakes the other end's reader on the writer's P.
  // Acquire: once true, peer_tag_ is readable.
  bool in_process_peer() const { return peer_.load(std::memory_order_acquire) == kPeerPaired; }
  // Before sharing only: remove this path when closed (Unix listeners).
  void set_unlink_on_close(std::string path) { listening().unlink_path = std::move(path); }
  // Before sharing only: accept's out-of-descriptors backoff can be woken
  // by close (listeners).
  void enable_close_notify() { listening().closing = make_chan<std::monostate>(); }

  // Go's FD.Close: kErrClosing if already closed, else 0.
  int close();
  // Owner's release: close, wait for the calls in progress to leave, free.
  static void release(NetFD* fd);

  IoResult read(char* p, size_t len);
  // Waits until read would not block (data, end of stream or an error
  // pending), consuming nothing; 0 or an error as read's. A wake-up by the
  // poller is trusted, and may be stale (an event harvested for data an
  // earlier read took): read then waits in its turn. `strict` returns only
  // when input is there, for a caller that must not run a read that would
  // wait (a session's next turn): it trusts a wake-up by an event harvested
  // after it parked (poll_wait's `trusted`), looks at any other with
  // poll(2), and waits again if it was stale.
  int wait_readable(bool strict = false);
  // A server's wait for its connection's next request when the request has
  // no read or write timeout (ServerConn::wait_input): wait_readable(true)
  // with the read deadline set to `idle` (a nanotime, 0 none) for the wait
  // and deferred (defer_read_deadline) once input came, under the reader
  // lock the wait holds anyway. set_deadline_after and defer_read_deadline
  // would take a reference each: two locked instructions per call on the
  // word the read and the write lock too, some 10 ns each after a system
  // call (docs/server-cpu.md).
  int wait_input(int64_t idle, int64_t now);
  // The last read left bytes queued, so wait_readable would return at once
  // (a hint: false says nothing).
  bool input_queued() const { return rmore_.load(std::memory_order_relaxed); }
  // Writes everything (looping on partial writes) unless an error occurs;
  // n is what was written.
  IoResult write(const char* p, size_t len);
  IoResult recvfrom(char* p, size_t len, SockAddr* from);
  IoResult sendto(const char* p, size_t len, const SockAddr& to);
  // Returns 0 and a new non-blocking, close-on-exec socket in *s, or an
  // error; *syscall names the failed call.
  int accept(int* s, SockAddr* sa, const char** syscall);

  // Finishes a non-blocking connect that returned EINPROGRESS: waits until
  // the socket is writable (or the write deadline passes, or close) and
  // returns 0 or the connection's error (SO_ERROR).
  int wait_connect();

  // `t` as in Conn::set_deadline; mode 'r', 'w' or 'r' + 'w'.
  int set_deadline(absl::Time t, int mode);
  // The deadline `d` from `now` (nanotime(), read once by a caller that
  // sets several), without reading the wall clock: a server's per-request
  // timeouts. d infinite clears; d <= 0 expires.
  int set_deadline_after(absl::Duration d, int mode, int64_t now);
  // No read deadline, keeping the timer of a pending one for the next
  // (internal::poll_defer_deadline): a server's request without a read
  // timeout, between two idle deadlines.
  int defer_read_deadline(int64_t now);
  // Expires the write deadline now (interrupts a connect).
  int expire_write();

  int shutdown(int how);
  int setsockopt(int level, int name, const void* val, socklen_t len);
  int setsockopt_int(int level, int name, int v) { return setsockopt(level, name, &v, sizeof v); }
  // TCP only, before the descriptor is shared: asks the kernel to report
  // with each read how much data is left (TCP_INQ), so that a read which
  // fills its buffer exactly can still tell that it emptied the socket.
  // Without kernel support only a short read counts as emptying the
  // socket: the read after a full one tries the socket first.
  void enable_inq();

 private:
  NetFD(int sysfd, internal::PollDesc* pd, int family, int sotype, const char* net,
        FdKind kind = FdKind::kSocket)
      : sysfd_(sysfd),
        sotype_(sotype),
        pd_(pd),
        kind_(kind),
        unix_stream_(family == AF_UNIX && sotype == SOCK_STREAM),
        family_(family),
        net_(net) {}
  ~NetFD() = default;

  // The read and write locks of fdmu_, as capabilities for the
  // thread-safety annotations (they hold nothing).
  struct ABSL_LOCKABLE LockSide {};

  class IoLock;
  class Ref;

  void destroy();
  // After a complete write on a paired connection: the other end's reader,
  // if parked, runs on this P next (poll_wake_reader, ready_after_write).
  void wake_peer_reader();
  // Waits for readiness in mode; 0 or kErr*.
  // `trusted`: poll_wait's (mode 'r').
  int wait(int mode, bool* trusted = nullptr);
  // wait_readable's body: `before` runs under the reader lock before
  // anything else, `after` once input is there.
  template <class Before, class After>
  int wait_readable_with(bool strict, Before&& before, After&& after);
  // Go's pd.prepareRead / prepareWrite: 0, or kErr* if the NetFD is
  // closing or mode's deadline has passed (even when data is ready).
  int prepare(int mode);
  // Go's ignoringEINTRIO and the EAGAIN wait around it: calls `call` (a
  // system call returning -1 and errno on failure) until it succeeds,
  // retrying on EINTR and, after waiting for readiness in mode, on EAGAIN.
  // Returns its result, or -1 with *err the errno value or wait's kErr*.
  template <class F>
  ssize_t io_loop(int mode, int* err, F&& call);
  // raw_io's loop, with the direction's lock held.
  int raw_loop(int mode, absl::FunctionRef<bool(int)> f);
  // Sleeps `d` during accept's backoff; returns early when closed.
  void backoff_sleep(absl::Duration d);

  // What every read and write touches comes first, in 32 bytes. After its
  // system call the kernel's work has evicted the object; the flags sat at
  // offset 244 and fdmu_'s word at 168, three cache lines with sysfd_, and
  // perf annotate put most of NetFD::read's and rwunlock's samples on
  // those loads. Measured (docs/server-cpu.md): the echo server's user time
  // per message 2 % lower, the total within this host's noise; the object
  // is 8 bytes smaller. (Aligning it to 64 bytes cost an idle connection
  // 87 bytes of heap.)
  const int sysfd_;
  const int sotype_;
  internal::PollDesc* const pd_;
  const FdKind kind_;
  // Reads go through recvmsg to learn MSG_CTRUNC (see read_noctl). Kept
  // here with the hot fields rather than derived from family_, which lies
  // beyond them.
  const bool unix_stream_;
  // The last stream read was short, so the socket was empty when it
  // returned (see read()).
  bool rdrained_ ABSL_GUARDED_BY(rlock_) = false;
  // The last stream read left bytes queued (TCP_CM_INQ > 0): the next
  // wait_readable returns at once. Written under rlock_; atomic (relaxed)
  // for input_queued(), a hint read without it.
  std::atomic<bool> rmore_{false};
  // Set once by enable_inq(): stream reads may use recvmsg with TCP_CM_INQ.
  bool inq_ = false;
  // The last read filled its buffer (so the next one asks for TCP_CM_INQ
  // when inq_ is set).
  bool rfull_ ABSL_GUARDED_BY(rlock_) = false;
  bool borrowed_ = false;
  std::atomic<bool> destroyed_{false};
  // net_peer.cpp's state machine (the table at its top); only
  // in_process_peer() and write() read it outside that file.
  enum : uint8_t { kPeerNone, kPeerWaiting, kPeerPaired };
  std::atomic<uint8_t> peer_{kPeerNone};
  // Once paired: the other end's poll_tag (0 if it has no poll
  // descriptor). Written before peer_ turns kPeerPaired (release), never
  // after.
  uint64_t peer_tag_ = 0;
  friend void peer_register(NetFD*, const SockAddr&, const SockAddr&, PeerEnd);
  friend void peer_forget(NetFD*);
  LockSide rlock_;
  LockSide wlock_;
  // In the hole before fdmu_'s alignment (an idle connection pays for
  // every byte of this object: docs/net.md).
  const int family_;
  FdMutex fdmu_;

  const char* const net_;  // a Network::name literal, or "file"
  std::string laddr_, raddr_;
  // What only listeners use, out of line: a connection pays for every
  // byte of this object while it sits idle.
  struct Listening {
    std::string unlink_path;        // Unix listeners: removed by close()
    Chan<std::monostate> closing;  // closed by close() (accept's backoff)
  };
  Listening& listening() {
    if (listening_ == nullptr) listening_ = std::make_unique<Listening>();
    return *listening_;
  }
  std::unique_ptr<Listening> listening_;
};

// Go's `if !c.ok() { return syscall.EINVAL }`, for every call of Conn,
// Listener and PacketConn that reports an error: a default-constructed or
// moved-from one has no NetFD, and fails with "invalid argument" (the rule
// for every I/O handle: docs/standard-cpp.md).
// Otherwise returns call(fd).
template <class F>
auto with_fd(NetFD* fd, F&& call) -> decltype(call(fd)) {
  if (fd == nullptr) return invalid_error();
  return call(fd);
}

// c.wait_readable() with NetFD::wait_readable's `strict`: no stale wake-up.
absl::Status wait_readable_strict(net::Conn& c);
// NetFD::wait_input on c, a socket.
absl::Status wait_input_strict(net::Conn& c, int64_t idle, int64_t now);
// A server's timeout on c: its deadline(s) `mode` at `now` (nanotime())
// + d (NetFD::set_deadline_after); a pipe end takes the wall-clock form.
// Errors are dropped: a closed connection's next read reports its own.
void set_deadline_after(net::Conn& c, absl::Duration d, int mode, int64_t now);
// The nanotime `d` ns after `now`, saturated at kFarDeadline (never).
int64_t deadline_in(int64_t d, int64_t now);
// A timeout `d` from `now` as poll_set_deadline takes it: 0 (none) for an
// infinite d, 1 (expired) for d <= 0, else deadline_in.
int64_t deadline_after(absl::Duration d, int64_t now);
// NetFD::defer_read_deadline on c; a pipe end clears its read deadline.
void defer_read_deadline(net::Conn& c, int64_t now);

// The owners' (Conn, Listener, PacketConn) move assignment and destructor:
// the descriptor they held is released, and `to` takes `from`'s.
inline void move_fd(NetFD*& to, NetFD*& from) noexcept {
  if (&to == &from) return;
  if (to != nullptr) NetFD::release(to);
  to = std::exchange(from, nullptr);
}
inline void drop_fd(NetFD* fd) noexcept {
  if (fd != nullptr) NetFD::release(fd);
}

// The handles that own a NetFD (net::Conn, Listener, PacketConn, os::File)
// are made only here, as is a Conn that owns a pipe end
// (stdlib/net/pipe.hpp): their constructors from a NetFD (PipeEnd) are
// private, so the public API offers no way to wrap a raw one.
struct NetFDAccess {
  static net::Conn conn(NetFD* fd) noexcept { return net::Conn(fd); }
  static net::Conn conn(PipeEnd* p) noexcept { return net::Conn(p); }
  static net::Listener listener(NetFD* fd) noexcept { return net::Listener(fd); }
  static net::PacketConn packet_conn(NetFD* fd) noexcept { return net::PacketConn(fd); }
  static os::File file(NetFD* fd, std::string name) noexcept { return os::File(fd, std::move(name)); }
  // The descriptor behind a Conn (null for an empty one or a pipe end),
  // for tests.
  static NetFD* fd(const net::Conn& c) noexcept { return c.fd(); }
};

// What a read or a write does for the race detector (docs/race.md, I/O),
// as Go's package syscall does: a write reads its bytes and publishes
// everything the writer did so far (releases ioSync); a read that
// returned writes its bytes and acquires ioSync. Every write thus happens
// before every later read, of any descriptor: the two ends of a socket
// pair are two descriptors. race_io_write is called before the system call
// (a peer may read the bytes before it returns), race_io_read after it.
// Inline and empty outside race builds: they sit on every read and write.
inline char g_race_io_sync;  // Go's ioSync: one address for every descriptor

inline void race_io_write(const void* p, size_t len) {
  internal::race_release(&g_race_io_sync);
  internal::race_read_range(p, len);
}

inline void race_io_read(void* p, size_t n) {
  internal::race_write_range(p, n);
  internal::race_acquire(&g_race_io_sync);
}

// Deadline `t` as a poll deadline (a nanotime): 0 none, else > 0. `now`
// is the current nanotime.
int64_t poll_deadline(absl::Time t, int64_t now);

}  // namespace gort::internal

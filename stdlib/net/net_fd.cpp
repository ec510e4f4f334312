// stdlib/net/net_fd.cpp — NetFD: reference-counted non-blocking sockets on the
// netpoller. See the invariants in net_fd.hpp.
//
// Every I/O call follows Go's FD methods: take a ref and the direction's
// lock, fail at once if closed or past the deadline (poll_check, even when
// data is ready), then loop: try the system call; on EAGAIN park in
// poll_wait (which returns when the socket becomes ready, its deadline
// passes or it is closed) and try again.
#include "stdlib/net/net_fd.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "gmp/bubble.hpp"
#include "gmp/nbsyscall.hpp"
#include "gmp/sched.hpp"
#include "gort/runtime.hpp"
#include "gort/time.hpp"
#include "netpoll/netpoll.hpp"
#include "gmp/os/debugvars.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {

namespace {

// Go's maxRW: stream reads and writes are issued in pieces of at most 1 GiB.
constexpr size_t kMaxRW = size_t{1} << 30;

int from_poll(int r) {
  switch (r) {
    case internal::kPollOk:
      return 0;
    case internal::kPollErrClosing:
      return kErrClosing;
    case internal::kPollErrTimeout:
      return kErrTimeout;
    default:
      return EINVAL;
  }
}

// The socket calls go through gmp/os/sys.hpp (syscall(2)), not libc's
// wrappers: those are the interposed entry points (netpoll/hook/), and
// thread-cancellation points, which in a multi-threaded process cost two
// atomic updates of the thread's cancellation state per call (some 2 % of a
// loopback echo's CPU).

// write(2) to a pipe whose reader is gone raises SIGPIPE, which kills the
// process by default; a socket has MSG_NOSIGNAL, a pipe has no such flag.
// So the signal is blocked on this thread for the call, and one that the
// call raised is taken back before it is unblocked (sigtimedwait), unless
// it was already pending. gort's own code is never preempted
// asynchronously, so the goroutine cannot change threads in between. Two
// more system calls per write, on pipes only.
ssize_t write_nosigpipe(int fd, const void* p, size_t len) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  ssize_t n = sys::write(fd, p, len);
  if (n < 0 && errno == EPIPE && !sigismember(&old, SIGPIPE)) {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE)) {
      timespec zero{0, 0};
      while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    errno = EPIPE;
  }
  int saved = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return n;
}

// A TCP read that also learns how many bytes the socket still holds: the
// TCP_CM_INQ control message TCP_INQ asks for (Linux 4.18). *inq is -1 when
// the message is missing. The kernel reports 1, not 0, once a FIN has come,
// so 0 means "empty and open".
ssize_t read_inq(int fd, char* p, size_t len, int* inq) {
  iovec iov{p, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n = sys::recvmsg(fd, &m, 0);
  *inq = -1;
  if (n >= 0) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level == SOL_TCP && c->cmsg_type == TCP_CM_INQ) {
        std::memcpy(inq, CMSG_DATA(c), sizeof(int));
      }
    }
  }
  return n;
}

// recvmsg(2) with no room for ancillary data. A Unix stream read stops
// short after a message that carried descriptors, or at a change of
// sender while credentials are being passed, with the rest of the stream
// still queued; what it could not deliver it reports only as MSG_CTRUNC,
// which read(2) drops.
ssize_t read_noctl(int fd, char* p, size_t len, bool* ctrunc) {
  iovec iov{p, len};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  ssize_t n = sys::recvmsg(fd, &m, 0);
  *ctrunc = n >= 0 && (m.msg_flags & MSG_CTRUNC) != 0;
  return n;
}

// CLOCK_REALTIME minus the runtime's monotonic clock, in nanoseconds, read
// again at most once a millisecond. Servers set a deadline or two per
// request; this saves a wall-clock read on each. The offset only moves when
// the wall clock is slewed (by at most 0.5 µs per millisecond) or stepped;
// a step is seen within a millisecond.
std::atomic<int64_t> g_wall_off{0};
std::atomic<int64_t> g_wall_off_at{0};  // nanotime of the reading; 0: none

int64_t wall_offset(int64_t now) {
  int64_t at = g_wall_off_at.load(std::memory_order_acquire);
  if (at != 0 && now >= at && now - at < 1'000'000) return g_wall_off.load(std::memory_order_relaxed);
  int64_t off = absl::ToUnixNanos(absl::Now()) - internal::nanotime();
  g_wall_off.store(off, std::memory_order_relaxed);
  g_wall_off_at.store(now, std::memory_order_release);
  return off;
}

}  // namespace

void NetFD::enable_inq() {
  inq_ = is_stream() && setsockopt_int(SOL_TCP, TCP_INQ, 1) == 0;
}

int64_t deadline_in(int64_t d, int64_t now) {
  return d >= internal::kFarDeadline - now ? internal::kFarDeadline : now + d;
}

int64_t deadline_after(absl::Duration d, int64_t now) {
  if (d == absl::InfiniteDuration()) return 0;
  const int64_t ns = absl::ToInt64Nanoseconds(d);  // saturates
  return ns <= 0 ? 1 : deadline_in(ns, now);
}

int64_t poll_deadline(absl::Time t, int64_t now) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return 0;
  // In whole nanoseconds, with one library call rather than absl's
  // Duration arithmetic (three, on every deadline a server sets).
  // ToUnixNanos floors and saturates, so a time outside int64's range
  // (before 1678, after 2262) lands in the first or the last branch.
  // In a synctest bubble `t` is on the bubble's fake clock (gort::now()):
  // what is left of it is measured from there, and waited for in real time
  // (socket I/O is not durable), as Go's runtime poller does.
  internal::Bubble* b = internal::current_bubble();
  const int64_t wall = b == nullptr ? now + wall_offset(now) : b->now.load(std::memory_order_acquire);
  const int64_t tn = absl::ToUnixNanos(t);
  if (tn <= wall) return 1;  // any past nanotime: expired
  int64_t d;  // > 0; an overflow (a wall clock before 1970) is far too
  if (__builtin_sub_overflow(tn, wall, &d)) return internal::kFarDeadline;
  return deadline_in(d, now);
}

NetFD* NetFD::open(int sysfd, int family, int sotype, const char* net, int* err) {
  internal::PollDesc* pd = internal::poll_open(sysfd);
  if (pd == nullptr) {
    *err = errno;
    sys::close(sysfd);
    return nullptr;
  }
  *err = 0;
  return new NetFD(sysfd, pd, family, sotype, net);
}

NetFD* NetFD::open_file(int sysfd, FdKind kind, bool pollable, int* err) {
  internal::PollDesc* pd = nullptr;
  if (pollable) {
    pd = internal::poll_open(sysfd);
    // epoll refuses regular files and directories (EPERM): they never
    // block on readiness, so they are read and written blocking.
    if (pd == nullptr && errno != EPERM) {
      *err = errno;
      return nullptr;
    }
  }
  *err = 0;
  return new NetFD(sysfd, pd, AF_UNSPEC, 0, "file", kind);
}

void NetFD::destroy() {
  // Linux: the descriptor is gone even on EINTR; never retry. Not ours to
  // close when the run that opened it has closed it (poll_abandon_all).
  bool ours = pd_ == nullptr || internal::poll_close(pd_);
  if (ours && !borrowed_) sys::close(sysfd_);
  destroyed_.store(true, std::memory_order_release);
  // Nothing of *this may be touched from here on: release() may free it.
}

int NetFD::close() {
  // Waiters for either lock wake and fail; calls in progress are evicted
  // from the poll descriptor below.
  if (!fdmu_.incref_and_close()) return kErrClosing;
  peer_forget(this);
  // Go removes a Unix listener's file before closing the socket.
  if (listening_ != nullptr && !listening_->unlink_path.empty()) ::unlink(listening_->unlink_path.c_str());
  if (pd_ != nullptr) internal::poll_evict(pd_);  // blocked readers and writers wake with kErrClosing
  if (listening_ != nullptr && listening_->closing) listening_->closing.close();
  if (fdmu_.decref()) destroy();
  return 0;
}

void NetFD::release(NetFD* fd) {
  fd->close();
  // Calls still in progress were evicted and are on their way out; the
  // last one destroys the descriptor. (Normally nothing is left.)
  while (!fd->destroyed_.load(std::memory_order_acquire)) gort::yield();
  delete fd;
}

int NetFD::wait(int mode, bool* trusted) {
  // A blocking descriptor never says EAGAIN unless someone made it
  // non-blocking behind our back: report that rather than spin.
  if (pd_ == nullptr) return EAGAIN;
  return from_poll(internal::poll_wait(pd_, mode, trusted));
}

// Go's fd.readLock / fd.writeLock with the deferred unlock: the read or
// write lock of fdmu_ and a ref, for the guard's scope. err() is
// kErrClosing when the NetFD was closed before the lock was taken (then
// nothing is held); the caller then returns at once. A close while the lock
// is held evicts the holder's waits instead (poll_evict).
class ABSL_SCOPED_LOCKABLE NetFD::IoLock {
 public:
  IoLock(NetFD* fd, LockSide& side) ABSL_EXCLUSIVE_LOCK_FUNCTION(side)
      : fd_(fd), read_(&side == &fd->rlock_) {
    bool last;
    if (!fd->fdmu_.rwlock(read_, &last)) {
      if (last) fd->destroy();
      fd_ = nullptr;
    }
  }
  ~IoLock() ABSL_UNLOCK_FUNCTION() {
    if (fd_ != nullptr && fd_->fdmu_.rwunlock(read_)) fd_->destroy();
  }
  IoLock(const IoLock&) = delete;
  IoLock& operator=(const IoLock&) = delete;
  int err() const { return fd_ != nullptr ? 0 : kErrClosing; }

 private:
  NetFD* fd_;
  const bool read_;
};

// Go's fd.incref with the deferred decref, for the calls that use the
// descriptor without either direction's lock: a ref on the NetFD for the
// guard's scope, so that close cannot destroy it meanwhile. err() is
// kErrClosing when the NetFD was closed already (then nothing is held).
class NetFD::Ref {
 public:
  explicit Ref(NetFD* fd) : fd_(fd->fdmu_.incref() ? fd : nullptr) {}
  ~Ref() {
    if (fd_ != nullptr && fd_->fdmu_.decref()) fd_->destroy();
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  int err() const { return fd_ != nullptr ? 0 : kErrClosing; }

 private:
  NetFD* const fd_;
};

// Inline, as the check it replaces was: it is on every read and write.
__attribute__((always_inline)) inline int NetFD::prepare(int mode) {
  if (pd_ == nullptr) [[unlikely]] return 0;
  if (internal::debug.parkcheck != 0) [[unlikely]] internal::preempt_check_may_park("IO wait");
  int err = from_poll(internal::poll_check(pd_, mode));
  // A call that fails at once (its deadline passed, the descriptor closed)
  // never reaches poll_wait's preemption point. A goroutine looping on such
  // calls must still yield when sysmon asks: in a build without
  // asynchronous preemption (the race detector's) it would otherwise hold
  // its P for good.
  if (err != 0) [[unlikely]] internal::preempt_check();
  return err;
}

template <class F>
ssize_t NetFD::io_loop(int mode, int* err, F&& call) {
  for (;;) {
    // A blocking descriptor (a regular file) blocks the thread: hand the P
    // to another M meanwhile. A non-blocking call is where sysmon's request
    // to yield is honoured, when the call returns (gmp/nbsyscall.hpp): a
    // goroutine whose reads always find data never parks.
    ssize_t n;
    int e = 0;
    if (pd_ != nullptr) {
      internal::NbSyscall sc;
      n = call();
      if (n < 0) e = errno;
    } else {
      n = gort::blocking(call);
      if (n < 0) e = errno;
    }
    if (n >= 0) return n;
    if (e == EINTR) continue;
    if (e == EAGAIN && (e = wait(mode)) == 0) continue;
    *err = e;
    return -1;
  }
}

IoResult NetFD::read(char* p, size_t len) {
  IoLock io(this, rlock_);
  IoResult r;
  // Go: a zero-byte read returns at once (after taking the lock).
  if ((r.err = io.err()) != 0 || len == 0 || (r.err = prepare('r')) != 0) return r;
  if (is_stream()) len = std::min(len, kMaxRW);
  if (rdrained_) {
    // The last read drained the socket: unless readiness arrived since,
    // a read now would only say EAGAIN, so wait first.
    rdrained_ = false;
    if ((r.err = wait('r')) != 0) return r;
  }
  // recvmsg costs a little more than read, and a short read needs no
  // TCP_INQ to know it emptied the socket: ask only while reads come back
  // full.
  bool ask_inq = inq_ && rfull_;
  int inq = -1;
  bool ctrunc = false;
  ssize_t n = io_loop('r', &r.err, [&] {
    if (is_stream()) internal::poll_reset_ready(pd_, 'r');
    if (ask_inq) return read_inq(sysfd_, p, len, &inq);
    return unix_stream_ ? read_noctl(sysfd_, p, len, &ctrunc) : sys::read(sysfd_, p, len);
  });
  if (n < 0) return r;
  r.n = static_cast<size_t>(n);
  race_io_read(p, r.n);
  rfull_ = r.n == len;
  // A short read of a stream socket (TCP, Unix) took everything that was
  // queued, and so did one after which TCP reports nothing left (a read
  // that exactly fills a message-sized buffer, the usual request/response
  // pattern); data arriving later brings a new edge, hence readiness,
  // because the reset above came before the read. Not trusted: EOF (0);
  // datagrams; a read after which the kernel withheld ancillary data
  // (ctrunc: Unix descriptors or credentials, at whose boundary the read
  // stopped); and any read once the poller has seen a hang-up, an error or
  // urgent data (a read stops short at the urgent mark). For none of these
  // need another event come for what is still queued (docs/net-internals.md, "A
  // short read drains the socket").
  // A stream read after which TCP reports bytes still queued: the next
  // wait_readable has its answer without asking the kernel (a streaming
  // peer otherwise cost a server a poll(2) per read).
  rmore_.store(is_stream() && inq > 0, std::memory_order_relaxed);
  rdrained_ = is_stream() && n > 0 && (r.n < len || inq == 0) && !ctrunc &&
              !internal::poll_exceptional_seen(pd_);
  return r;
}

template <class Before, class After>
int NetFD::wait_readable_with(bool strict, Before&& before, After&& after) {
  IoLock io(this, rlock_);
  int err;
  if ((err = io.err()) != 0) return err;
  before();
  if ((err = prepare('r')) != 0) return err;
  if (rmore_.load(std::memory_order_relaxed)) {
    rmore_.store(false, std::memory_order_relaxed);  // one answer per read
    after();
    return 0;
  }
  for (;;) {
    if (!rdrained_) {
      // The same order as read's: readiness left after the peek came
      // from an event harvested after it.
      internal::poll_reset_ready(pd_, 'r');
      // poll, not recv(MSG_PEEK): a peek would consume a pending error
      // (the kernel clears it once reported), which belongs to the read.
      pollfd pfd{sysfd_, POLLIN | POLLRDHUP, 0};
      int n = sys::poll(&pfd, 1, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n != 0) break;  // data, end of stream or an error (poll's own failure: let read report)
    }
    rdrained_ = false;  // the wait consumes what read would have trusted
    // Woken by the poller: by an event harvested after the readiness was
    // reset (above, or by the read that drained the socket), so data, the
    // end of the stream or an error arrived since: trusted without another
    // poll, which cost a server one system call per message (3 where the
    // C floor makes 2; docs/server-cpu.md).
    // Strict: a wake-up the poller vouches for (an event harvested after
    // this goroutine parked; the reader lock makes it the only reader) is
    // input; any other is looked at with poll above, once per request of
    // a server's kept goroutine otherwise (docs/server-cpu.md).
    bool trusted = false;
    err = wait('r', strict ? &trusted : nullptr);
    if (err != 0 || !strict || trusted) break;
  }
  if (err == 0) after();
  return err;
}

int NetFD::wait_readable(bool strict) {
  return wait_readable_with(strict, [] {}, [] {});
}

int NetFD::wait_input(int64_t idle, int64_t now) {
  // Before prepare, as a separate call would be: a deadline that expired
  // in the last request must not fail this wait.
  return wait_readable_with(
      /*strict=*/true, [&] { if (pd_ != nullptr) internal::poll_set_deadline(pd_, idle, 'r', now); },
      [&] { if (pd_ != nullptr) internal::poll_defer_deadline(pd_, 'r', 0); });
}

void NetFD::wake_peer_reader() {
  // Loopback TCP has queued the data on the other end before send(2)
  // returned, as a rule: tell its reader now, sparing a poll. Where the
  // kernel defers delivery, the reader finds nothing and waits again for
  // the event the data brings. A writer preempted between the two calls
  // holds the woken G until it runs again: a delay, never a lost wake-up
  // (the G is runnable, and nobody else queues it).
  if (peer_tag_ == 0) return;
  if (G* g = poll_wake_reader(peer_tag_)) ready_after_write(g);
}

IoResult NetFD::write(const char* p, size_t len) {
  IoLock io(this, wlock_);
  IoResult r;
  if ((r.err = io.err()) != 0 || (r.err = prepare('w')) != 0) return r;
  race_io_write(p, len);
  for (;;) {
    size_t chunk = len - r.n;
    if (is_stream() || kind_ != FdKind::kSocket) chunk = std::min(chunk, kMaxRW);
    ssize_t n = io_loop('w', &r.err, [&] {
      switch (kind_) {
        case FdKind::kSocket:
          // send, not write: MSG_NOSIGNAL turns SIGPIPE into EPIPE.
          return sys::send(sysfd_, p + r.n, chunk, MSG_NOSIGNAL);
        case FdKind::kPipe:
          return write_nosigpipe(sysfd_, p + r.n, chunk);
        case FdKind::kFile:
          break;
      }
      return sys::write(sysfd_, p + r.n, chunk);
    });
    if (n < 0) break;
    r.n += static_cast<size_t>(n);
    if (r.n == len) {
      // The other end is ours and readable now: run its reader here.
      if (in_process_peer()) wake_peer_reader();
      break;
    }
    if (n == 0) {
      r.err = EIO;  // Go: io.ErrUnexpectedEOF; a socket never does this
      break;
    }
  }
  return r;
}

IoResult NetFD::recvfrom(char* p, size_t len, SockAddr* from) {
  IoLock io(this, rlock_);
  IoResult r;
  if ((r.err = io.err()) != 0 || (r.err = prepare('r')) != 0) return r;
  ssize_t n = io_loop('r', &r.err, [&] {
    from->len = sizeof from->ss;
    return sys::recvfrom(sysfd_, p, len, 0, from->sa(), &from->len);
  });
  if (n >= 0) {
    r.n = static_cast<size_t>(n);
    race_io_read(p, r.n);
  }
  return r;
}

IoResult NetFD::sendto(const char* p, size_t len, const SockAddr& to) {
  IoLock io(this, wlock_);
  IoResult r;
  if ((r.err = io.err()) != 0 || (r.err = prepare('w')) != 0) return r;
  race_io_write(p, len);
  ssize_t n = io_loop('w', &r.err, [&] { return sys::sendto(sysfd_, p, len, MSG_NOSIGNAL, to.sa(), to.len); });
  if (n >= 0) r.n = static_cast<size_t>(n);
  return r;
}

void NetFD::backoff_sleep(absl::Duration d) {
  if (listening_ == nullptr || !listening_->closing) {
    gort::sleep(d);
    return;
  }
  gort::Timer t = gort::new_timer(d);
  gort::select(gort::on_recv(t.chan(), [](std::optional<absl::Time>) {}),
         gort::on_recv(listening_->closing, [](std::optional<std::monostate>) {}));
  t.stop();
}

int NetFD::accept(int* s, SockAddr* sa, const char** syscall) {
  IoLock io(this, rlock_);
  int err;
  if ((err = io.err()) != 0 || (err = prepare('r')) != 0) return err;
  absl::Duration backoff = absl::ZeroDuration();
  for (;;) {
    sa->len = sizeof sa->ss;
    int fd = sys::accept4(sysfd_, sa->sa(), &sa->len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      *s = fd;
      return 0;
    }
    int e = errno;
    if (e == EINTR || e == ECONNABORTED) continue;  // Go retries both
    if (e == EAGAIN) {
      if ((err = wait('r')) != 0) return err;
      continue;
    }
    if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
      // Out of descriptors (or memory): the connection stays queued. Wait
      // for some to be freed, as Go's http.Server does: 5 ms doubling up
      // to 1 s; close() cuts the sleep short.
      backoff = backoff == absl::ZeroDuration() ? absl::Milliseconds(5)
                                                : std::min(backoff * 2, absl::Seconds(1));
      backoff_sleep(backoff);
      if (fdmu_.closed()) return kErrClosing;
      if ((err = prepare('r')) != 0) return err;
      continue;
    }
    *syscall = "accept4";
    return e;
  }
}

int NetFD::wait_connect() {
  // A closed NetFD fails here as wait() would have: kErrClosing.
  IoLock io(this, wlock_);
  int err;
  if ((err = io.err()) != 0) return err;
  for (;;) {
    if ((err = wait('w')) != 0) return err;
    int soerr = 0;
    socklen_t l = sizeof soerr;
    if (sys::getsockopt(sysfd_, SOL_SOCKET, SO_ERROR, &soerr, &l) != 0) return errno;
    if (soerr == EINPROGRESS || soerr == EALREADY || soerr == EINTR) continue;
    if (soerr == EISCONN) return 0;
    if (soerr == 0) {
      // Writable and no error: connected, unless the wake-up was spurious.
      sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      if (::getpeername(sysfd_, reinterpret_cast<sockaddr*>(&ss), &sl) == 0) return 0;
      continue;
    }
    return soerr;
  }
}

int NetFD::raw_control(absl::FunctionRef<void(int)> f) {
  Ref ref(this);
  if (ref.err() != 0) return ref.err();
  f(sysfd_);
  return 0;
}

int NetFD::raw_io(int mode, absl::FunctionRef<bool(int)> f) {
  if (mode == 'r') {
    IoLock io(this, rlock_);
    // f may leave data behind: the next read() must try before it waits;
    // or take what the last read() saw left.
    rdrained_ = false;
    rmore_.store(false, std::memory_order_relaxed);
    return io.err() != 0 ? io.err() : raw_loop(mode, f);
  }
  IoLock io(this, wlock_);
  return io.err() != 0 ? io.err() : raw_loop(mode, f);
}

int NetFD::raw_loop(int mode, absl::FunctionRef<bool(int)> f) {
  int err;
  if ((err = prepare(mode)) != 0) return err;
  for (;;) {
    // Go's rawConn.Read/Write: f reports done; otherwise wait for the
    // descriptor (an event that came while f ran is not lost: the poll
    // descriptor keeps it as readiness). A blocking descriptor's f blocks
    // by itself, inside gort::blocking.
    bool done = pd_ != nullptr ? f(sysfd_) : gort::blocking([&] { return f(sysfd_); });
    if (done) return 0;
    if ((err = wait(mode)) != 0) return err;
  }
}

int NetFD::set_deadline(absl::Time t, int mode) {
  // Closed first, then "no deadlines", in Go's order (setDeadlineImpl:
  // incref, then the runtimeCtx check).
  Ref ref(this);
  if (ref.err() != 0) return ref.err();
  if (pd_ == nullptr) return kErrNoDeadline;
  int64_t now = internal::nanotime();
  internal::poll_set_deadline(pd_, poll_deadline(t, now), mode, now);
  return 0;
}

int NetFD::set_deadline_after(absl::Duration d, int mode, int64_t now) {
  Ref ref(this);
  if (ref.err() != 0) return ref.err();
  if (pd_ == nullptr) return kErrNoDeadline;
  internal::poll_set_deadline(pd_, deadline_after(d, now), mode, now);
  return 0;
}

int NetFD::defer_read_deadline(int64_t now) {
  Ref ref(this);
  if (ref.err() != 0) return ref.err();
  if (pd_ == nullptr) return kErrNoDeadline;
  internal::poll_defer_deadline(pd_, 'r', now);
  return 0;
}

int NetFD::expire_write() {
  Ref ref(this);
  if (ref.err() != 0) return ref.err();
  internal::poll_set_deadline(pd_, 1, 'w');
  return 0;
}

int NetFD::shutdown(int how) {
  Ref ref(this);
  if (ref.err() != 0) return ref.err();
  // The other calls learn it from poll_check: the run that opened this
  // socket has ended and closed it, and sysfd_ may name another file now.
  if (internal::poll_check(pd_, 0) == internal::kPollErrClosing) return kErrClosing;
  return ::shutdown(sysfd_, how) == 0 ? 0 : errno;
}

int NetFD::setsockopt(int level, int name, const void* val, socklen_t len) {
  Ref ref(this);
  if (ref.err() != 0) return ref.err();
  if (internal::poll_check(pd_, 0) == internal::kPollErrClosing) return kErrClosing;  // as shutdown
  return sys::setsockopt(sysfd_, level, name, val, len) == 0 ? 0 : errno;
}

}  // namespace gort::internal

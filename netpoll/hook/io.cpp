// netpoll/hook/io.cpp — libc's data calls on descriptors, interposed: read
// and write in all their forms, accept, connect, sendfile. On a goroutine a
// call that would block parks it (hook.hpp); elsewhere, libc's own.
// Each function is defined under its own name: none of the 64-bit
// renames (open -> open64) of _FILE_OFFSET_BITS=64, nor fortify's wrappers.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <vector>

#include "gmp/os/interpose.hpp"
#include "netpoll/hook/hook.hpp"

using gort::internal::hook::get_errno;
using gort::internal::hook::set_errno;

using ReadFn = ssize_t (*)(int, void*, size_t);
using WriteFn = ssize_t (*)(int, const void*, size_t);
using ReadvFn = ssize_t (*)(int, const iovec*, int);
using PreadFn = ssize_t (*)(int, void*, size_t, off_t);
using PwriteFn = ssize_t (*)(int, const void*, size_t, off_t);
using PreadvFn = ssize_t (*)(int, const iovec*, int, off_t);
using RecvFn = ssize_t (*)(int, void*, size_t, int);
using SendFn = ssize_t (*)(int, const void*, size_t, int);
using RecvfromFn = ssize_t (*)(int, void*, size_t, int, sockaddr*, socklen_t*);
using SendtoFn = ssize_t (*)(int, const void*, size_t, int, const sockaddr*, socklen_t);
using RecvmsgFn = ssize_t (*)(int, msghdr*, int);
using SendmsgFn = ssize_t (*)(int, const msghdr*, int);
using RecvmmsgFn = int (*)(int, mmsghdr*, unsigned, int, timespec*);
using SendmmsgFn = int (*)(int, mmsghdr*, unsigned, int);
using AcceptFn = int (*)(int, sockaddr*, socklen_t*);
using Accept4Fn = int (*)(int, sockaddr*, socklen_t*, int);
using ConnectFn = int (*)(int, const sockaddr*, socklen_t);
using SendfileFn = ssize_t (*)(int, int, off_t*, size_t);

namespace {
GORT_NEXT_SLOT(ReadFn, read)
GORT_NEXT_SLOT(WriteFn, write)
GORT_NEXT_SLOT(ReadvFn, readv)
GORT_NEXT_SLOT(ReadvFn, writev)
GORT_NEXT_SLOT(PreadFn, pread)
GORT_NEXT_SLOT(PreadFn, pread64)
GORT_NEXT_SLOT(PwriteFn, pwrite)
GORT_NEXT_SLOT(PwriteFn, pwrite64)
GORT_NEXT_SLOT(PreadvFn, preadv)
GORT_NEXT_SLOT(PreadvFn, preadv64)
GORT_NEXT_SLOT(PreadvFn, pwritev)
GORT_NEXT_SLOT(PreadvFn, pwritev64)
GORT_NEXT_SLOT(RecvFn, recv)
GORT_NEXT_SLOT(SendFn, send)
GORT_NEXT_SLOT(RecvfromFn, recvfrom)
GORT_NEXT_SLOT(SendtoFn, sendto)
GORT_NEXT_SLOT(RecvmsgFn, recvmsg)
GORT_NEXT_SLOT(SendmsgFn, sendmsg)
GORT_NEXT_SLOT(RecvmmsgFn, recvmmsg)
GORT_NEXT_SLOT(SendmmsgFn, sendmmsg)
GORT_NEXT_SLOT(AcceptFn, accept)
GORT_NEXT_SLOT(Accept4Fn, accept4)
GORT_NEXT_SLOT(ConnectFn, connect)
GORT_NEXT_SLOT(SendfileFn, sendfile)
GORT_NEXT_SLOT(SendfileFn, sendfile64)

__attribute__((constructor(101))) void resolve_all() {
  (void)GORT_NEXT(read);
  (void)GORT_NEXT(write);
  (void)GORT_NEXT(readv);
  (void)GORT_NEXT(writev);
  (void)GORT_NEXT(pread);
  (void)GORT_NEXT(pread64);
  (void)GORT_NEXT(pwrite);
  (void)GORT_NEXT(pwrite64);
  (void)GORT_NEXT(preadv);
  (void)GORT_NEXT(preadv64);
  (void)GORT_NEXT(pwritev);
  (void)GORT_NEXT(pwritev64);
  (void)GORT_NEXT(recv);
  (void)GORT_NEXT(send);
  (void)GORT_NEXT(recvfrom);
  (void)GORT_NEXT(sendto);
  (void)GORT_NEXT(recvmsg);
  (void)GORT_NEXT(sendmsg);
  (void)GORT_NEXT(recvmmsg);
  (void)GORT_NEXT(sendmmsg);
  (void)GORT_NEXT(accept);
  (void)GORT_NEXT(accept4);
  (void)GORT_NEXT(connect);
  (void)GORT_NEXT(sendfile);
  (void)GORT_NEXT(sendfile64);
}

namespace hook = gort::internal::hook;
using gort::internal::FdType;
using gort::internal::PollDesc;

// The bytes of an iovec array that remain after `done` of them, in
// `scratch` (small arrays stay on the stack).
struct IovRest {
  iovec small[16];
  std::vector<iovec> big;
  const iovec* iov = nullptr;
  int n = 0;

  void set(const iovec* src, int cnt, size_t done) {
    int i = 0;
    while (i < cnt && done >= src[i].iov_len) done -= src[i++].iov_len;
    if (done == 0) {
      iov = src + i;
      n = cnt - i;
      return;
    }
    iovec* dst = small;
    if (cnt - i > 16) {
      big.assign(src + i, src + cnt);
      dst = big.data();
    } else {
      for (int k = i; k < cnt; k++) small[k - i] = src[k];
    }
    dst[0].iov_base = static_cast<char*>(dst[0].iov_base) + done;
    dst[0].iov_len -= done;
    iov = dst;
    n = cnt - i;
  }
};

size_t iov_len(const iovec* iov, int n) {
  size_t len = 0;
  for (int i = 0; i < n; i++) len += iov[i].iov_len;
  return len;
}

// Only a file: the system-call protocol on a goroutine (pread, pwrite:
// regular files and block devices; on anything else they fail at once).
template <class Call>
ssize_t file_io(int fd, Call&& call) {
  if (hook::mode() == hook::Mode::kPark && hook::lookup(fd) == gort::internal::kSlotFile) {
    return hook::in_syscall([&] { return hook::retry_own_eintr(call); });
  }
  return call();
}

// accept's descriptor, made non-blocking underneath for a goroutine.
int accept_common(int fd, sockaddr* sa, socklen_t* len, int flags) {
  hook::Mode m = hook::mode();
  if (m == hook::Mode::kThread) {
    int r = static_cast<int>(hook::thread_io(fd, 'r', [&] { return GORT_NEXT(accept4)(fd, sa, len, flags); }));
    if (r >= 0) hook::forget(r);
    return r;
  }
  int r = static_cast<int>(hook::io(fd, 'r', [&] { return GORT_NEXT(accept4)(fd, sa, len, flags | SOCK_NONBLOCK); }));
  if (r >= 0) hook::register_owned(r, FdType::kSocket, (flags & SOCK_NONBLOCK) != 0, (flags & SOCK_CLOEXEC) != 0);
  return r;
}

// The end of a non-blocking connect on a descriptor the program sees as
// blocking: its result, as a blocking connect reports it.
int connect_result(int fd) {
  int err = 0;
  socklen_t l = sizeof err;
  if (gort::internal::sys::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) return -1;
  if (err != 0) {
    set_errno(err);
    return -1;
  }
  return 0;
}

}  // namespace

extern "C" {

// ---- reads ----

GORT_INTERPOSE ssize_t read(int fd, void* buf, size_t n) {
  struct Ctx {
    int fd;
    void* buf;
    size_t n;
  } c{fd, buf, n};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    return gort::internal::sys::recv(c->fd, c->buf, c->n, MSG_DONTWAIT);
  };
  nw.rwf = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    iovec iov{c->buf, c->n};
    return ::preadv2(c->fd, &iov, 1, -1, RWF_NOWAIT);
  };
  nw.ctx = &c;
  return hook::io(fd, 'r', [&] { return GORT_NEXT(read)(fd, buf, n); }, nw);
}

GORT_INTERPOSE ssize_t readv(int fd, const iovec* iov, int cnt) {
  struct Ctx {
    int fd;
    const iovec* iov;
    int cnt;
  } c{fd, iov, cnt};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(c->iov);
    m.msg_iovlen = static_cast<size_t>(c->cnt);
    return gort::internal::sys::recvmsg(c->fd, &m, MSG_DONTWAIT);
  };
  nw.rwf = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    return ::preadv2(c->fd, c->iov, c->cnt, -1, RWF_NOWAIT);
  };
  nw.ctx = &c;
  return hook::io(fd, 'r', [&] { return GORT_NEXT(readv)(fd, iov, cnt); }, nw);
}

GORT_INTERPOSE ssize_t recv(int fd, void* buf, size_t n, int flags) {
  if ((flags & MSG_DONTWAIT) != 0) return GORT_NEXT(recv)(fd, buf, n, flags);
  struct Ctx {
    int fd;
    void* buf;
    size_t n;
    int flags;
  } c{fd, buf, n, flags};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    return gort::internal::sys::recv(c->fd, c->buf, c->n, c->flags | MSG_DONTWAIT);
  };
  nw.ctx = &c;
  return hook::io(fd, 'r', [&] { return GORT_NEXT(recv)(fd, buf, n, flags); }, nw);
}

GORT_INTERPOSE ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from, socklen_t* fromlen) {
  if ((flags & MSG_DONTWAIT) != 0) return GORT_NEXT(recvfrom)(fd, buf, n, flags, from, fromlen);
  struct Ctx {
    int fd;
    void* buf;
    size_t n;
    int flags;
    sockaddr* from;
    socklen_t* fromlen;
  } c{fd, buf, n, flags, from, fromlen};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    return gort::internal::sys::recvfrom(c->fd, c->buf, c->n, c->flags | MSG_DONTWAIT, c->from, c->fromlen);
  };
  nw.ctx = &c;
  return hook::io(fd, 'r', [&] { return GORT_NEXT(recvfrom)(fd, buf, n, flags, from, fromlen); }, nw);
}

GORT_INTERPOSE ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  if ((flags & MSG_DONTWAIT) != 0) return GORT_NEXT(recvmsg)(fd, msg, flags);
  struct Ctx {
    int fd;
    msghdr* msg;
    int flags;
  } c{fd, msg, flags};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    return gort::internal::sys::recvmsg(c->fd, c->msg, c->flags | MSG_DONTWAIT);
  };
  nw.ctx = &c;
  return hook::io(fd, 'r', [&] { return GORT_NEXT(recvmsg)(fd, msg, flags); }, nw);
}

GORT_INTERPOSE int recvmmsg(int fd, mmsghdr* vec, unsigned vlen, int flags, timespec* timeout) {
  PollDesc* pd;
  if ((flags & MSG_DONTWAIT) != 0 || vlen == 0 ||
      (hook::mode() == hook::Mode::kThread &&
       !(gort::internal::g_fd_owned_any.load(std::memory_order_relaxed) && hook::owned_blocking(fd, &pd)))) {
    return GORT_NEXT(recvmmsg)(fd, vec, vlen, flags, timeout);
  }
  // Blocking: the first message is waited for, then more until vlen,
  // unless MSG_WAITFORONE or the timeout (which the kernel, too, looks at
  // after each message) ends it.
  int64_t until = timeout != nullptr
                      ? gort::internal::nanotime() + timeout->tv_sec * 1000000000LL + timeout->tv_nsec
                      : 0;
  unsigned got = 0;
  while (got < vlen) {
    struct Ctx {
      int fd;
      mmsghdr* vec;
      unsigned vlen;
      int flags;
    } c{fd, vec + got, vlen - got, flags & ~MSG_WAITFORONE};
    hook::Nowait nw;
    nw.dontwait = [](void* p) -> ssize_t {
      auto* c = static_cast<Ctx*>(p);
      return ::syscall(SYS_recvmmsg, c->fd, c->vec, c->vlen, c->flags | MSG_DONTWAIT, nullptr);
    };
    nw.ctx = &c;
    ssize_t r = hook::io(fd, 'r', [&] { return GORT_NEXT(recvmmsg)(fd, c.vec, c.vlen, c.flags, nullptr); }, nw);
    if (r < 0) return got > 0 ? static_cast<int>(got) : -1;
    got += static_cast<unsigned>(r);
    if ((flags & MSG_WAITFORONE) != 0 || (until != 0 && gort::internal::nanotime() >= until)) break;
  }
  return static_cast<int>(got);
}

GORT_INTERPOSE ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  if (n > buflen) __builtin_trap();
  return read(fd, buf, n);
}

GORT_INTERPOSE ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  if (n > buflen) __builtin_trap();
  return recv(fd, buf, n, flags);
}

GORT_INTERPOSE ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags, sockaddr* from, socklen_t* fromlen) {
  if (n > buflen) __builtin_trap();
  return recvfrom(fd, buf, n, flags, from, fromlen);
}

// ---- writes ----

GORT_INTERPOSE ssize_t write(int fd, const void* buf, size_t n) {
  struct Ctx {
    int fd;
    const char* buf;
    size_t n;
    size_t done;
  } c{fd, static_cast<const char*>(buf), n, 0};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    return gort::internal::sys::send(c->fd, c->buf + c->done, c->n - c->done, MSG_DONTWAIT);
  };
  nw.rwf = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    iovec iov{const_cast<char*>(c->buf) + c->done, c->n - c->done};
    return ::pwritev2(c->fd, &iov, 1, -1, RWF_NOWAIT);
  };
  nw.ctx = &c;
  return hook::write_all(fd, n, c.done, [&] { return GORT_NEXT(write)(fd, c.buf + c.done, n - c.done); }, nw);
}

GORT_INTERPOSE ssize_t writev(int fd, const iovec* iov, int cnt) {
  struct Ctx {
    int fd;
    const iovec* iov;
    int cnt;
    size_t done;
    IovRest rest;
    const IovRest& at() {
      rest.set(iov, cnt, done);
      return rest;
    }
  } c{fd, iov, cnt, 0, {}};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    const IovRest& r = c->at();
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(r.iov);
    m.msg_iovlen = static_cast<size_t>(r.n);
    return gort::internal::sys::sendmsg(c->fd, &m, MSG_DONTWAIT);
  };
  nw.rwf = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    const IovRest& r = c->at();
    return ::pwritev2(c->fd, r.iov, r.n, -1, RWF_NOWAIT);
  };
  nw.ctx = &c;
  return hook::write_all(
      fd, iov_len(iov, cnt), c.done,
      [&] {
        const IovRest& r = c.at();
        return GORT_NEXT(writev)(fd, r.iov, r.n);
      },
      nw);
}

GORT_INTERPOSE ssize_t send(int fd, const void* buf, size_t n, int flags) {
  if ((flags & MSG_DONTWAIT) != 0) return GORT_NEXT(send)(fd, buf, n, flags);
  struct Ctx {
    int fd;
    const char* buf;
    size_t n;
    int flags;
    size_t done;
  } c{fd, static_cast<const char*>(buf), n, flags, 0};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    return gort::internal::sys::send(c->fd, c->buf + c->done, c->n - c->done, c->flags | MSG_DONTWAIT);
  };
  nw.ctx = &c;
  return hook::write_all(fd, n, c.done, [&] { return GORT_NEXT(send)(fd, c.buf + c.done, n - c.done, flags); }, nw);
}

GORT_INTERPOSE ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to, socklen_t tolen) {
  if ((flags & MSG_DONTWAIT) != 0) return GORT_NEXT(sendto)(fd, buf, n, flags, to, tolen);
  struct Ctx {
    int fd;
    const char* buf;
    size_t n;
    int flags;
    const sockaddr* to;
    socklen_t tolen;
    size_t done;
  } c{fd, static_cast<const char*>(buf), n, flags, to, tolen, 0};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    return gort::internal::sys::sendto(c->fd, c->buf + c->done, c->n - c->done, c->flags | MSG_DONTWAIT, c->to,
                                       c->tolen);
  };
  nw.ctx = &c;
  return hook::write_all(
      fd, n, c.done, [&] { return GORT_NEXT(sendto)(fd, c.buf + c.done, n - c.done, flags, to, tolen); }, nw);
}

GORT_INTERPOSE ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  if ((flags & MSG_DONTWAIT) != 0) return GORT_NEXT(sendmsg)(fd, msg, flags);
  // A partial send goes on with the bytes left and without the control
  // data, which went with the first part.
  struct Ctx {
    int fd;
    const msghdr* msg;
    int flags;
    size_t done;
    msghdr rest;
    IovRest iov;
    const msghdr* at() {
      if (done == 0) return msg;
      iov.set(msg->msg_iov, static_cast<int>(msg->msg_iovlen), done);
      rest = *msg;
      rest.msg_iov = const_cast<iovec*>(iov.iov);
      rest.msg_iovlen = static_cast<size_t>(iov.n);
      rest.msg_control = nullptr;
      rest.msg_controllen = 0;
      return &rest;
    }
  } c{fd, msg, flags, 0, {}, {}};
  hook::Nowait nw;
  nw.dontwait = [](void* p) -> ssize_t {
    auto* c = static_cast<Ctx*>(p);
    return gort::internal::sys::sendmsg(c->fd, c->at(), c->flags | MSG_DONTWAIT);
  };
  nw.ctx = &c;
  return hook::write_all(fd, iov_len(msg->msg_iov, static_cast<int>(msg->msg_iovlen)), c.done,
                         [&] { return GORT_NEXT(sendmsg)(fd, c.at(), flags); }, nw);
}

GORT_INTERPOSE int sendmmsg(int fd, mmsghdr* vec, unsigned vlen, int flags) {
  if ((flags & MSG_DONTWAIT) != 0 || vlen == 0) return GORT_NEXT(sendmmsg)(fd, vec, vlen, flags);
  // Blocking: every message goes, each waiting for room as it must.
  unsigned sent = 0;
  while (sent < vlen) {
    struct Ctx {
      int fd;
      mmsghdr* vec;
      unsigned vlen;
      int flags;
    } c{fd, vec + sent, vlen - sent, flags};
    hook::Nowait nw;
    nw.dontwait = [](void* p) -> ssize_t {
      auto* c = static_cast<Ctx*>(p);
      return ::syscall(SYS_sendmmsg, c->fd, c->vec, c->vlen, c->flags | MSG_DONTWAIT);
    };
    nw.ctx = &c;
    ssize_t r = hook::io(fd, 'w', [&] { return GORT_NEXT(sendmmsg)(fd, c.vec, c.vlen, flags); }, nw);
    if (r < 0) return sent > 0 ? static_cast<int>(sent) : -1;
    if (r == 0) break;
    sent += static_cast<unsigned>(r);
  }
  return static_cast<int>(sent);
}

// ---- files only: the system-call protocol ----

GORT_INTERPOSE ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  return file_io(fd, [&] { return GORT_NEXT(pread)(fd, buf, n, off); });
}
GORT_INTERPOSE ssize_t pread64(int fd, void* buf, size_t n, off64_t off) {
  return file_io(fd, [&] { return GORT_NEXT(pread64)(fd, buf, n, off); });
}
GORT_INTERPOSE ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  return file_io(fd, [&] { return GORT_NEXT(pwrite)(fd, buf, n, off); });
}
GORT_INTERPOSE ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  return file_io(fd, [&] { return GORT_NEXT(pwrite64)(fd, buf, n, off); });
}
GORT_INTERPOSE ssize_t preadv(int fd, const iovec* iov, int cnt, off_t off) {
  return file_io(fd, [&] { return GORT_NEXT(preadv)(fd, iov, cnt, off); });
}
GORT_INTERPOSE ssize_t preadv64(int fd, const iovec* iov, int cnt, off64_t off) {
  return file_io(fd, [&] { return GORT_NEXT(preadv64)(fd, iov, cnt, off); });
}
GORT_INTERPOSE ssize_t pwritev(int fd, const iovec* iov, int cnt, off_t off) {
  return file_io(fd, [&] { return GORT_NEXT(pwritev)(fd, iov, cnt, off); });
}
GORT_INTERPOSE ssize_t pwritev64(int fd, const iovec* iov, int cnt, off64_t off) {
  return file_io(fd, [&] { return GORT_NEXT(pwritev64)(fd, iov, cnt, off); });
}
GORT_INTERPOSE ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  if (n > buflen) __builtin_trap();
  return pread(fd, buf, n, off);
}
GORT_INTERPOSE ssize_t __pread64_chk(int fd, void* buf, size_t n, off64_t off, size_t buflen) {
  if (n > buflen) __builtin_trap();
  return pread64(fd, buf, n, off);
}

// ---- connections ----

GORT_INTERPOSE int accept(int fd, sockaddr* sa, socklen_t* len) { return accept_common(fd, sa, len, 0); }

GORT_INTERPOSE int accept4(int fd, sockaddr* sa, socklen_t* len, int flags) { return accept_common(fd, sa, len, flags); }

GORT_INTERPOSE int connect(int fd, const sockaddr* sa, socklen_t len) {
  hook::Mode m = hook::mode();
  PollDesc* pd = nullptr;
  if (m == hook::Mode::kThread) {
    if (!gort::internal::g_fd_owned_any.load(std::memory_order_relaxed) || !hook::owned_blocking(fd, &pd)) {
      return GORT_NEXT(connect)(fd, sa, len);
    }
  } else {
    uintptr_t v = hook::lookup(fd);
    if (!gort::internal::slot_is_pd(v)) return GORT_NEXT(connect)(fd, sa, len);
    pd = gort::internal::slot_pd(v);
    gort::internal::FdOrigin o = pd->origin.load(std::memory_order_relaxed);
    if (o == gort::internal::FdOrigin::kRuntime || pd->user_nonblock.load(std::memory_order_relaxed)) {
      return GORT_NEXT(connect)(fd, sa, len);
    }
    if (o == gort::internal::FdOrigin::kInherited) {
      // Blocking underneath, and it stays so: the thread waits, its P
      // handed off.
      return hook::in_syscall_block([&] { return hook::retry_own_eintr([&] { return GORT_NEXT(connect)(fd, sa, len); }); });
    }
  }
  // O_NONBLOCK underneath: connect, then wait for the outcome as blocking
  // connect would (SO_SNDTIMEO ends the wait with EINPROGRESS, as Linux's).
  int64_t deadline = hook::call_deadline(pd, 'w');
  for (;;) {
    int r = GORT_NEXT(connect)(fd, sa, len);
    if (r == 0) return 0;
    int err = get_errno();
    if (err == EINTR) continue;
    if (err != EINPROGRESS && err != EAGAIN) return -1;
    int w;
    if (m == hook::Mode::kPark) {
      w = hook::wait_fd(fd, reinterpret_cast<uintptr_t>(pd), 'w', deadline);
      if (w == hook::kRetry) w = 0;
    } else if (m == hook::Mode::kLocked) {
      w = hook::in_syscall_block([&] { return hook::thread_wait(fd, pd, 'w', deadline); });
    } else {
      w = hook::thread_wait(fd, pd, 'w', deadline);
    }
    if (w == ETIMEDOUT) {
      set_errno(EINPROGRESS);
      return -1;
    }
    if (w != 0) {
      set_errno(w);
      return -1;
    }
    if (err == EINPROGRESS) return connect_result(fd);
    // EAGAIN (a Unix socket's full backlog): try again now there is room.
  }
}

// ---- sendfile: a write, from a file ----

GORT_INTERPOSE ssize_t sendfile(int out, int in, off_t* off, size_t n) noexcept {
  size_t done = 0;
  return hook::write_all(out, n, done, [&] { return GORT_NEXT(sendfile)(out, in, off, n - done); }, {});
}

GORT_INTERPOSE ssize_t sendfile64(int out, int in, off64_t* off, size_t n) noexcept {
  size_t done = 0;
  return hook::write_all(out, n, done, [&] { return GORT_NEXT(sendfile64)(out, in, off, n - done); }, {});
}

}  // extern "C"

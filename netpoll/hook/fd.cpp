// netpoll/hook/fd.cpp — the life of a descriptor, interposed: what makes
// one (socket, socketpair, accept is in io.cpp, pipe, eventfd, timerfd,
// dup, open), what changes its flags (fcntl, ioctl(FIONBIO), SO_RCVTIMEO
// and SO_SNDTIMEO) and what closes it (close, dup2 over it, close_range,
// closefrom).
//
// A descriptor a goroutine makes is made non-blocking underneath (kOwned,
// hook.hpp): fcntl(F_GETFL) and ioctl(FIONBIO) then report and change the
// flag the program set, never the real one. One a plain thread makes (or
// any code outside a goroutine) is left as it is. A close, from anyone,
// wakes goroutines waiting on the descriptor (their calls fail with EBADF)
// before the number can be reused.
// Each function is defined under its own name: none of the 64-bit
// renames (open -> open64) of _FILE_OFFSET_BITS=64, nor fortify's wrappers.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "gmp/os/interpose.hpp"
#include "netpoll/hook/hook.hpp"

using gort::internal::hook::get_errno;
using gort::internal::hook::set_errno;

#ifndef SO_RCVTIMEO_NEW
#define SO_RCVTIMEO_NEW 66
#define SO_SNDTIMEO_NEW 67
#endif
#ifndef SO_RCVTIMEO_OLD
#define SO_RCVTIMEO_OLD 20
#define SO_SNDTIMEO_OLD 21
#endif

using SocketFn = int (*)(int, int, int);
using SocketpairFn = int (*)(int, int, int, int*);
using PipeFn = int (*)(int*);
using Pipe2Fn = int (*)(int*, int);
using EventfdFn = int (*)(unsigned, int);
using TimerfdFn = int (*)(clockid_t, int);
using DupFn = int (*)(int);
using Dup2Fn = int (*)(int, int);
using Dup3Fn = int (*)(int, int, int);
using CloseFn = int (*)(int);
using CloseRangeFn = int (*)(unsigned, unsigned, int);
using ClosefromFn = void (*)(int);
using FcntlFn = int (*)(int, int, ...);
using IoctlFn = int (*)(int, unsigned long, ...);
using SetsockoptFn = int (*)(int, int, int, const void*, socklen_t);
using OpenFn = int (*)(const char*, int, ...);
using OpenatFn = int (*)(int, const char*, int, ...);

namespace {
GORT_NEXT_SLOT(SocketFn, socket)
GORT_NEXT_SLOT(SocketpairFn, socketpair)
GORT_NEXT_SLOT(PipeFn, pipe)
GORT_NEXT_SLOT(Pipe2Fn, pipe2)
GORT_NEXT_SLOT(EventfdFn, eventfd)
GORT_NEXT_SLOT(TimerfdFn, timerfd_create)
GORT_NEXT_SLOT(DupFn, dup)
GORT_NEXT_SLOT(Dup2Fn, dup2)
GORT_NEXT_SLOT(Dup3Fn, dup3)
GORT_NEXT_SLOT(CloseFn, close)
GORT_NEXT_SLOT(CloseRangeFn, close_range)
GORT_NEXT_SLOT(ClosefromFn, closefrom)
GORT_NEXT_SLOT(FcntlFn, fcntl)
GORT_NEXT_SLOT(FcntlFn, fcntl64)
GORT_NEXT_SLOT(IoctlFn, ioctl)
GORT_NEXT_SLOT(SetsockoptFn, setsockopt)
GORT_NEXT_SLOT(OpenFn, open)
GORT_NEXT_SLOT(OpenFn, open64)
GORT_NEXT_SLOT(OpenatFn, openat)
GORT_NEXT_SLOT(OpenatFn, openat64)

__attribute__((constructor(101))) void resolve_all() {
  (void)GORT_NEXT(socket);
  (void)GORT_NEXT(socketpair);
  (void)GORT_NEXT(pipe);
  (void)GORT_NEXT(pipe2);
  (void)GORT_NEXT(eventfd);
  (void)GORT_NEXT(timerfd_create);
  (void)GORT_NEXT(dup);
  (void)GORT_NEXT(dup2);
  (void)GORT_NEXT(dup3);
  (void)GORT_NEXT(close);
  (void)GORT_NEXT(close_range);
  (void)GORT_NEXT(closefrom);
  (void)GORT_NEXT(fcntl);
  (void)GORT_NEXT(fcntl64);
  (void)GORT_NEXT(ioctl);
  (void)GORT_NEXT(setsockopt);
  (void)GORT_NEXT(open);
  (void)GORT_NEXT(open64);
  (void)GORT_NEXT(openat);
  (void)GORT_NEXT(openat64);
}

namespace hook = gort::internal::hook;
namespace gi = gort::internal;
using gi::FdOrigin;
using gi::FdType;
using gi::PollDesc;

bool on_goroutine() { return hook::mode() != hook::Mode::kThread; }

// A descriptor made by the call that asked `want_nonblock`: a goroutine's is
// the runtime's to wait on; anyone else's is noted as new.
void made(int fd, FdType type, bool want_nonblock, bool cloexec) {
  if (fd < 0) return;
  if (on_goroutine()) {
    hook::register_owned(fd, type, want_nonblock, cloexec);
  } else {
    hook::forget(fd);
  }
}

// fd's slot's PollDesc if the hooks (not a NetFD) own what the table knows.
PollDesc* hooked_pd(int fd) {
  uintptr_t v = gi::fd_slot_load(fd);
  if (!gi::slot_is_pd(v)) return nullptr;
  PollDesc* pd = gi::slot_pd(v);
  if (pd->netfd.load(std::memory_order_relaxed)) return nullptr;
  return pd;
}

// Before the number fd is closed (close, dup2 over it, close_range): its
// waiters wake (EBADF) and the poller forgets it while the number still
// names its file. A NetFD's descriptor closed behind gort's back is left
// for the NetFD to find.
void closing(int fd) {
  std::atomic<uintptr_t>* s = gi::fd_slot(fd);
  if (s == nullptr) return;
  uintptr_t v = s->load(std::memory_order_acquire);
  if (v == gi::kSlotEmpty) return;
  if (gi::slot_is_pd(v) && gi::slot_pd(v)->netfd.load(std::memory_order_relaxed)) return;
  if (!s->compare_exchange_strong(v, gi::kSlotEmpty, std::memory_order_acq_rel)) return;
  if (!gi::slot_is_pd(v)) return;
  PollDesc* pd = gi::slot_pd(v);
  int saved = get_errno();
  gi::poll_evict(pd);
  gi::poll_deregister(pd);
  set_errno(saved);
  gi::pd_unref(pd);
}

// fd2 is now a copy of fd (dup, dup2, dup3, F_DUPFD): it shares fd's open
// file description, with O_NONBLOCK set underneath if fd's was.
void duplicated(int fd, int fd2, bool cloexec) {
  if (fd2 < 0) return;
  PollDesc* src = hooked_pd(fd);
  if (src == nullptr || src->origin.load() != FdOrigin::kOwned) {
    hook::forget(fd2);
    return;
  }
  hook::register_owned(fd2, src->type, src->user_nonblock.load(), cloexec);
  if (PollDesc* pd = hooked_pd(fd2)) {
    pd->rcvtimeo.store(src->rcvtimeo.load());
    pd->sndtimeo.store(src->sndtimeo.load());
  }
}

void close_range_slots(unsigned first, unsigned last, bool cloexec_only) {
  constexpr unsigned kMax = unsigned{gi::kFdChunks} << gi::kFdChunkBits;
  if (first >= kMax) return;
  if (last >= kMax) last = kMax - 1;
  for (unsigned c = first >> gi::kFdChunkBits; c <= (last >> gi::kFdChunkBits); c++) {
    if (gi::g_fd_chunks[c].load(std::memory_order_acquire) == nullptr) continue;
    unsigned lo = std::max(first, c << gi::kFdChunkBits);
    unsigned hi = std::min(last, ((c + 1) << gi::kFdChunkBits) - 1);
    for (unsigned fd = lo; fd <= hi; fd++) {
      if (cloexec_only) {
        if (PollDesc* pd = hooked_pd(static_cast<int>(fd))) pd->cloexec.store(true);
      } else {
        closing(static_cast<int>(fd));
      }
    }
  }
}

// fcntl's argument: every command takes at most one, an int or a pointer,
// which va_arg reads as a long (the x86-64 and AArch64 ABIs pass both in a
// 64-bit register).
int fcntl_common(FcntlFn next, int fd, int cmd, long arg) {
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      int r = next(fd, cmd, arg);
      duplicated(fd, r, cmd == F_DUPFD_CLOEXEC);
      return r;
    }
    case F_GETFL: {
      int r = next(fd, cmd);
      PollDesc* pd = hooked_pd(fd);
      if (r >= 0 && pd != nullptr && pd->origin.load() == FdOrigin::kOwned) {
        r = (r & ~O_NONBLOCK) | (pd->user_nonblock.load() ? O_NONBLOCK : 0);
      }
      return r;
    }
    case F_SETFL: {
      PollDesc* pd = hooked_pd(fd);
      if (pd == nullptr) return next(fd, cmd, arg);
      bool owned = pd->origin.load() == FdOrigin::kOwned;
      int r = next(fd, cmd, owned ? (arg | O_NONBLOCK) : arg);
      if (r == 0) pd->user_nonblock.store((arg & O_NONBLOCK) != 0);
      return r;
    }
    case F_SETFD: {
      int r = next(fd, cmd, arg);
      if (r == 0) {
        if (PollDesc* pd = hooked_pd(fd)) pd->cloexec.store((arg & FD_CLOEXEC) != 0);
      }
      return r;
    }
    case F_SETLKW:
    case F_OFD_SETLKW:
      // A lock wait: as long as another process holds it.
      if (on_goroutine()) return hook::in_syscall_block([&] { return next(fd, cmd, arg); });
      return next(fd, cmd, arg);
    default:
      return next(fd, cmd, arg);
  }
}

void set_timeout(int fd, int name, const void* val, socklen_t len) {
  PollDesc* pd = hooked_pd(fd);
  if (pd == nullptr && on_goroutine() && gi::slot_is_pd(hook::lookup(fd))) pd = hooked_pd(fd);
  if (pd == nullptr || val == nullptr) return;
  int64_t ns = 0;
  if (len >= static_cast<socklen_t>(2 * sizeof(int64_t))) {
    // struct timeval on 64-bit targets; __kernel_sock_timeval (_NEW) is
    // the same pair of 64-bit numbers.
    const auto* t = static_cast<const int64_t*>(val);
    ns = t[0] * 1000000000 + t[1] * 1000;
  }
  if (ns < 0) ns = 0;
  (name == SO_RCVTIMEO_OLD || name == SO_RCVTIMEO_NEW ? pd->rcvtimeo : pd->sndtimeo).store(ns);
}

// open's mode argument, present only when the flags create a file.
mode_t open_mode(int flags, va_list ap) {
  if ((flags & O_CREAT) == 0 && (flags & O_TMPFILE) != O_TMPFILE) return 0;
  return static_cast<mode_t>(va_arg(ap, int));
}

template <class Call>
int opened(Call&& call) {
  int r = hook::mode() == hook::Mode::kPark ? hook::in_syscall(call) : call();
  if (r >= 0) hook::forget(r);
  return r;
}

}  // namespace

extern "C" {

GORT_INTERPOSE int socket(int domain, int type, int proto) noexcept {
  if (!on_goroutine()) {
    int r = GORT_NEXT(socket)(domain, type, proto);
    if (r >= 0) hook::forget(r);
    return r;
  }
  int r = GORT_NEXT(socket)(domain, type | SOCK_NONBLOCK, proto);
  made(r, FdType::kSocket, (type & SOCK_NONBLOCK) != 0, (type & SOCK_CLOEXEC) != 0);
  return r;
}

GORT_INTERPOSE int socketpair(int domain, int type, int proto, int sv[2]) noexcept {
  bool g = on_goroutine();
  int r = GORT_NEXT(socketpair)(domain, g ? type | SOCK_NONBLOCK : type, proto, sv);
  if (r == 0) {
    made(sv[0], FdType::kSocket, (type & SOCK_NONBLOCK) != 0, (type & SOCK_CLOEXEC) != 0);
    made(sv[1], FdType::kSocket, (type & SOCK_NONBLOCK) != 0, (type & SOCK_CLOEXEC) != 0);
  }
  return r;
}

GORT_INTERPOSE int pipe2(int fds[2], int flags) noexcept {
  bool g = on_goroutine();
  int r = GORT_NEXT(pipe2)(fds, g ? flags | O_NONBLOCK : flags);
  if (r == 0) {
    made(fds[0], FdType::kPipe, (flags & O_NONBLOCK) != 0, (flags & O_CLOEXEC) != 0);
    made(fds[1], FdType::kPipe, (flags & O_NONBLOCK) != 0, (flags & O_CLOEXEC) != 0);
  }
  return r;
}

GORT_INTERPOSE int pipe(int fds[2]) noexcept {
  if (!on_goroutine()) {
    int r = GORT_NEXT(pipe)(fds);
    if (r == 0) {
      hook::forget(fds[0]);
      hook::forget(fds[1]);
    }
    return r;
  }
  return pipe2(fds, 0);
}

GORT_INTERPOSE int eventfd(unsigned init, int flags) noexcept {
  bool g = on_goroutine();
  int r = GORT_NEXT(eventfd)(init, g ? flags | EFD_NONBLOCK : flags);
  made(r, FdType::kOther, (flags & EFD_NONBLOCK) != 0, (flags & EFD_CLOEXEC) != 0);
  return r;
}

GORT_INTERPOSE int timerfd_create(clockid_t clock, int flags) noexcept {
  bool g = on_goroutine();
  int r = GORT_NEXT(timerfd_create)(clock, g ? flags | TFD_NONBLOCK : flags);
  made(r, FdType::kOther, (flags & TFD_NONBLOCK) != 0, (flags & TFD_CLOEXEC) != 0);
  return r;
}

GORT_INTERPOSE int dup(int fd) noexcept {
  int r = GORT_NEXT(dup)(fd);
  duplicated(fd, r, false);
  return r;
}

GORT_INTERPOSE int dup2(int fd, int fd2) noexcept {
  if (fd == fd2) return GORT_NEXT(dup2)(fd, fd2);
  closing(fd2);
  int r = GORT_NEXT(dup2)(fd, fd2);
  duplicated(fd, r, false);
  return r;
}

GORT_INTERPOSE int dup3(int fd, int fd2, int flags) noexcept {
  if (fd != fd2) closing(fd2);
  int r = GORT_NEXT(dup3)(fd, fd2, flags);
  duplicated(fd, r, (flags & O_CLOEXEC) != 0);
  return r;
}

GORT_INTERPOSE int close(int fd) {
  closing(fd);
  return GORT_NEXT(close)(fd);
}

GORT_INTERPOSE int close_range(unsigned first, unsigned last, int flags) noexcept {
  if (first <= last) close_range_slots(first, last, (flags & CLOSE_RANGE_CLOEXEC) != 0);
  return GORT_NEXT(close_range)(first, last, flags);
}

GORT_INTERPOSE void closefrom(int low) noexcept {
  if (low >= 0) close_range_slots(static_cast<unsigned>(low), ~0U, false);
  GORT_NEXT(closefrom)(low);
}

GORT_INTERPOSE int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);
  va_end(ap);
  return fcntl_common(GORT_NEXT(fcntl), fd, cmd, arg);
}

GORT_INTERPOSE int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);
  va_end(ap);
  return fcntl_common(GORT_NEXT(fcntl64), fd, cmd, arg);
}

GORT_INTERPOSE int ioctl(int fd, unsigned long req, ...) noexcept {
  va_list ap;
  va_start(ap, req);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (req == FIONBIO && arg != nullptr) {
    PollDesc* pd = hooked_pd(fd);
    if (pd != nullptr && pd->origin.load() == FdOrigin::kOwned) {
      // The real flag stays set; the program's is recorded. A closed
      // descriptor still fails as the kernel's call would.
      if (gi::sys::fcntl(fd, F_GETFL) < 0) return -1;
      pd->user_nonblock.store(*static_cast<int*>(arg) != 0);
      return 0;
    }
    int r = GORT_NEXT(ioctl)(fd, req, arg);
    if (r == 0 && pd != nullptr) pd->user_nonblock.store(*static_cast<int*>(arg) != 0);
    return r;
  }
  int r = GORT_NEXT(ioctl)(fd, req, arg);
  if (r == 0 && (req == FIOCLEX || req == FIONCLEX)) {
    if (PollDesc* pd = hooked_pd(fd)) pd->cloexec.store(req == FIOCLEX);
  }
  return r;
}

GORT_INTERPOSE int setsockopt(int fd, int level, int name, const void* val, socklen_t len) noexcept {
  int r = GORT_NEXT(setsockopt)(fd, level, name, val, len);
  if (r == 0 && level == SOL_SOCKET &&
      (name == SO_RCVTIMEO_OLD || name == SO_SNDTIMEO_OLD || name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW)) {
    int saved = get_errno();
    set_timeout(fd, name, val, len);
    set_errno(saved);
  }
  return r;
}

// open and openat may block (a FIFO waits for its other end): on a
// goroutine, in the system-call protocol. The number they return is new.
GORT_INTERPOSE int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t m = open_mode(flags, ap);
  va_end(ap);
  return opened([&] { return GORT_NEXT(open)(path, flags, m); });
}

GORT_INTERPOSE int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t m = open_mode(flags, ap);
  va_end(ap);
  return opened([&] { return GORT_NEXT(open64)(path, flags, m); });
}

GORT_INTERPOSE int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t m = open_mode(flags, ap);
  va_end(ap);
  return opened([&] { return GORT_NEXT(openat)(dirfd, path, flags, m); });
}

GORT_INTERPOSE int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t m = open_mode(flags, ap);
  va_end(ap);
  return opened([&] { return GORT_NEXT(openat64)(dirfd, path, flags, m); });
}

}  // extern "C"

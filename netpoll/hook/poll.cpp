// netpoll/hook/poll.cpp — a library's own event loop on a goroutine: poll,
// ppoll, select, pselect, epoll_wait, epoll_pwait and epoll_pwait2,
// interposed. On a goroutine the call looks at its descriptors (the real
// call with a zero timeout); if nothing is ready it parks on each of them
// (poll_wait_any) until one has an event, one closes, or the timeout
// passes, and looks again. A call with a signal mask (ppoll, pselect,
// epoll_pwait) is made as it is, in the system-call protocol: it waits for
// a signal, which a parked goroutine could not receive.
// Each function is defined under its own name: none of the 64-bit
// renames (open -> open64) of _FILE_OFFSET_BITS=64, nor fortify's wrappers.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include <cstring>
#include <vector>

#include "gmp/os/interpose.hpp"
#include "netpoll/hook/hook.hpp"

using gort::internal::hook::get_errno;
using gort::internal::hook::set_errno;

using PollFn = int (*)(pollfd*, nfds_t, int);
using PpollFn = int (*)(pollfd*, nfds_t, const timespec*, const sigset_t*);
using SelectFn = int (*)(int, fd_set*, fd_set*, fd_set*, timeval*);
using PselectFn = int (*)(int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*);
using EpollWaitFn = int (*)(int, epoll_event*, int, int);
using EpollPwaitFn = int (*)(int, epoll_event*, int, int, const sigset_t*);
using EpollPwait2Fn = int (*)(int, epoll_event*, int, const timespec*, const sigset_t*);

namespace {
GORT_NEXT_SLOT(PollFn, poll)
GORT_NEXT_SLOT(PpollFn, ppoll)
GORT_NEXT_SLOT(SelectFn, select)
GORT_NEXT_SLOT(PselectFn, pselect)
GORT_NEXT_SLOT(EpollWaitFn, epoll_wait)
GORT_NEXT_SLOT(EpollPwaitFn, epoll_pwait)
GORT_NEXT_SLOT(EpollPwait2Fn, epoll_pwait2)

__attribute__((constructor(101))) void resolve_all() {
  (void)GORT_NEXT(poll);
  (void)GORT_NEXT(ppoll);
  (void)GORT_NEXT(select);
  (void)GORT_NEXT(pselect);
  (void)GORT_NEXT(epoll_wait);
  (void)GORT_NEXT(epoll_pwait);
  (void)GORT_NEXT(epoll_pwait2);
}

namespace hook = gort::internal::hook;
using gort::internal::PollDesc;

constexpr int64_t kNoDeadline = -1;

int64_t deadline_ms(int timeout_ms) {
  return timeout_ms < 0 ? kNoDeadline : gort::internal::nanotime() + int64_t{timeout_ms} * 1000000;
}

int64_t deadline_ts(const timespec* ts) {
  if (ts == nullptr) return kNoDeadline;
  return gort::internal::nanotime() + int64_t{ts->tv_sec} * 1000000000 + ts->tv_nsec;
}

int64_t deadline_tv(const timeval* tv) {
  if (tv == nullptr) return kNoDeadline;
  return gort::internal::nanotime() + int64_t{tv->tv_sec} * 1000000000 + int64_t{tv->tv_usec} * 1000;
}

// A thread's wait in the kernel (kLocked, or descriptors the poller cannot
// watch), until `deadline` (kNoDeadline: none): call(left), with the
// nanoseconds left (-1: no limit), made again with what is left while one
// of the runtime's own signals interrupts it. Nothing of the runtime's
// signals such a wait before (entersyscallblock stops the slice timer),
// but a CPU profile's SIGPROF can land on a thread on its way into the
// wait (its CPU clock ticks until it sleeps). Past the deadline: 0, as
// the timed-out wait.
template <class Call>
int wait_retrying(int64_t deadline, Call&& call) {
  int64_t left = deadline == kNoDeadline ? -1 : std::max<int64_t>(0, deadline - gort::internal::nanotime());
  for (;;) {
    uint32_t before = gort_own_signals;
    int r = call(left);
    if (!(r < 0 && get_errno() == EINTR && gort_own_signals != before)) return r;
    if (deadline != kNoDeadline) {
      left = deadline - gort::internal::nanotime();
      if (left <= 0) return 0;
    }
  }
}

// `left` as each call's timeout: milliseconds (rounded up), a timespec,
// a timeval; -1 / null for none. A timeout the kernel refuses (EINVAL)
// goes to it as the caller gave it.
int ms_of(int64_t left) {
  return left < 0 ? -1 : static_cast<int>(std::min<int64_t>((left + 999999) / 1000000, INT32_MAX));
}
const timespec* ts_of(const timespec* given, int64_t left, timespec* buf) {
  if (given != nullptr && (given->tv_sec < 0 || given->tv_nsec < 0 || given->tv_nsec >= 1000000000)) return given;
  if (left < 0) return nullptr;
  *buf = timespec{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
  return buf;
}
timeval* tv_of(timeval* given, int64_t left, timeval* buf) {
  if (given != nullptr && (given->tv_sec < 0 || given->tv_usec < 0 || given->tv_usec >= 1000000)) return given;
  if (left < 0) return nullptr;
  *buf = timeval{static_cast<time_t>(left / 1000000000), static_cast<suseconds_t>((left % 1000000000 + 999) / 1000)};
  return buf;
}

// The caller's look at its descriptors: the real call with a zero timeout.
// Its result and errno are kept for the caller to return.
struct Look {
  int (*call)(Look*) = nullptr;
  void* args = nullptr;
  int r = 0;
  int err = 0;
};

bool look(void* arg) {
  auto* l = static_cast<Look*>(arg);
  l->r = l->call(l);
  l->err = get_errno();
  return l->r != 0;
}

// The poller's descriptors for fds (those it can wait on), each with a
// reference for the wait.
struct Descs {
  PollDesc* small[16];
  std::vector<PollDesc*> big;
  int n = 0;

  void add(int fd) {
    if (fd < 0) return;
    uintptr_t v = hook::lookup(fd);
    if (!gort::internal::slot_is_pd(v)) return;
    PollDesc* pd = gort::internal::slot_pd(v);
    if (!gort::internal::pd_try_ref(pd)) return;
    if (gort::internal::fd_slot_load(fd) != v || gort::internal::pd_register(pd) != 0) {
      gort::internal::pd_unref(pd);
      return;
    }
    if (n < 16) {
      small[n++] = pd;
      return;
    }
    if (big.empty()) big.assign(small, small + 16);
    big.push_back(pd);
    n++;
  }
  PollDesc* const* data() const { return big.empty() ? small : big.data(); }
  ~Descs() {
    for (int i = 0; i < n; i++) gort::internal::pd_unref(data()[i]);
  }
};

// Parks until l's look finds something, or `deadline` (kNoDeadline: none)
// passes; returns what the look returned last (0 at the timeout), with its
// errno.
int park_until_ready(Look* l, const Descs& d, int64_t deadline) {
  if (look(l)) {
    set_errno(l->err);
    return l->r;
  }
  if (deadline != kNoDeadline && deadline <= gort::internal::nanotime()) return 0;
  if (!hook::may_park()) {
    // A signal handler's wait: its thread waits, looking every millisecond.
    for (;;) {
      timespec ms{0, 1000000};
      gort::internal::sys::nanosleep(&ms, nullptr);
      if (look(l)) {
        set_errno(l->err);
        return l->r;
      }
      if (deadline != kNoDeadline && deadline <= gort::internal::nanotime()) return 0;
    }
  }
  if (d.n == 0) {
    // Nothing the poller can wait on (no descriptors: a sleep).
    if (deadline == kNoDeadline) {
      hook::sleep_until(INT64_MAX);
    } else {
      hook::sleep_until(deadline);
    }
    return 0;
  }
  int small[16];
  std::vector<int> big;
  int* modes = small;
  if (d.n > 16) {
    big.resize(static_cast<size_t>(d.n));
    modes = big.data();
  }
  for (int i = 0; i < d.n; i++) modes[i] = 'r' + 'w';
  for (;;) {
    int w = gort::internal::poll_wait_any(d.data(), modes, d.n, deadline == kNoDeadline ? 0 : deadline, &look, l,
                                          gort::internal::WaitReason::kIOWait);
    if (look(l)) {
      set_errno(l->err);
      return l->r;
    }
    if (w == gort::internal::kPollErrTimeout ||
        (deadline != kNoDeadline && deadline <= gort::internal::nanotime())) {
      return 0;
    }
  }
}

// ---- poll ----

struct PollArgs {
  pollfd* fds;
  nfds_t n;
};

int poll_look(Look* l) {
  auto* a = static_cast<PollArgs*>(l->args);
  return GORT_NEXT(poll)(a->fds, a->n, 0);
}

int park_poll(pollfd* fds, nfds_t n, int64_t deadline) {
  PollArgs a{fds, n};
  Look l;
  l.call = &poll_look;
  l.args = &a;
  if (look(&l) || deadline == 0) {
    set_errno(l.err);
    return l.r;
  }
  Descs d;
  bool any = false;
  for (nfds_t i = 0; i < n; i++) {
    d.add(fds[i].fd);
    any |= fds[i].fd >= 0;
  }
  if (any && d.n == 0) {
    // Descriptors the poller cannot wait on: the thread waits, its P
    // handed off.
    return hook::in_syscall_block(
        [&] { return wait_retrying(deadline, [&](int64_t left) { return GORT_NEXT(poll)(fds, n, ms_of(left)); }); });
  }
  return park_until_ready(&l, d, deadline);
}

// ---- select ----

struct SelectArgs {
  int nfds;
  fd_set* in[3];
  fd_set out[3];
};

int select_look(Look* l) {
  auto* a = static_cast<SelectArgs*>(l->args);
  fd_set* p[3];
  for (int k = 0; k < 3; k++) {
    p[k] = nullptr;
    if (a->in[k] != nullptr) {
      a->out[k] = *a->in[k];
      p[k] = &a->out[k];
    }
  }
  timeval zero{0, 0};
  return GORT_NEXT(select)(a->nfds, p[0], p[1], p[2], &zero);
}

int park_select(int nfds, fd_set* r, fd_set* w, fd_set* e, int64_t deadline) {
  SelectArgs a{nfds, {r, w, e}, {}};
  Look l;
  l.call = &select_look;
  l.args = &a;
  int res;
  if (look(&l) || deadline == 0) {
    res = l.r;
  } else {
    Descs d;
    for (int fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
      if ((r != nullptr && FD_ISSET(fd, r)) || (w != nullptr && FD_ISSET(fd, w)) || (e != nullptr && FD_ISSET(fd, e))) {
        d.add(fd);
      }
    }
    res = park_until_ready(&l, d, deadline);
    if (res == 0) {
      for (auto& s : a.out) FD_ZERO(&s);
    }
  }
  if (res >= 0) {
    for (int k = 0; k < 3; k++) {
      if (a.in[k] != nullptr) *a.in[k] = a.out[k];
    }
  }
  set_errno(l.err);
  return res;
}

// ---- epoll ----

struct EpollArgs {
  int epfd;
  epoll_event* ev;
  int max;
};

int epoll_look(Look* l) {
  auto* a = static_cast<EpollArgs*>(l->args);
  return GORT_NEXT(epoll_wait)(a->epfd, a->ev, a->max, 0);
}

int park_epoll(int epfd, epoll_event* ev, int max, int64_t deadline) {
  EpollArgs a{epfd, ev, max};
  Look l;
  l.call = &epoll_look;
  l.args = &a;
  if (look(&l) || deadline == 0) {
    set_errno(l.err);
    return l.r;
  }
  Descs d;
  d.add(epfd);
  return park_until_ready(&l, d, deadline);
}

// kLocked: made as it is, with the P handed off if it will wait (until
// `deadline`: call(left), see wait_retrying).
template <class Now, class Call>
int locked(Now&& now, int64_t deadline, Call&& call) {
  int r = now();
  if (r != 0) return r;
  return hook::in_syscall_block([&] { return wait_retrying(deadline, call); });
}

}  // namespace

extern "C" {

GORT_INTERPOSE int poll(pollfd* fds, nfds_t n, int timeout) {
  switch (hook::mode()) {
    case hook::Mode::kThread:
      return GORT_NEXT(poll)(fds, n, timeout);
    case hook::Mode::kLocked:
      if (timeout == 0) return GORT_NEXT(poll)(fds, n, 0);
      return locked([&] { return GORT_NEXT(poll)(fds, n, 0); }, deadline_ms(timeout),
                    [&](int64_t left) { return GORT_NEXT(poll)(fds, n, ms_of(left)); });
    case hook::Mode::kPark:
      break;
  }
  return park_poll(fds, n, timeout == 0 ? 0 : deadline_ms(timeout));
}

GORT_INTERPOSE int __poll_chk(pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __builtin_trap();
  return poll(fds, n, timeout);
}

GORT_INTERPOSE int ppoll(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask) {
  hook::Mode m = hook::mode();
  if (m == hook::Mode::kThread) return GORT_NEXT(ppoll)(fds, n, ts, mask);
  if (mask != nullptr || m == hook::Mode::kLocked) {
    timespec zero{0, 0};
    return locked([&] { return GORT_NEXT(ppoll)(fds, n, &zero, mask); }, deadline_ts(ts), [&](int64_t left) {
      timespec buf;
      return GORT_NEXT(ppoll)(fds, n, ts_of(ts, left, &buf), mask);
    });
  }
  bool now = ts != nullptr && ts->tv_sec == 0 && ts->tv_nsec == 0;
  return park_poll(fds, n, now ? 0 : deadline_ts(ts));
}

GORT_INTERPOSE int __ppoll_chk(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask, size_t fdslen) {
  if (fdslen / sizeof(*fds) < n) __builtin_trap();
  return ppoll(fds, n, ts, mask);
}

GORT_INTERPOSE int select(int nfds, fd_set* r, fd_set* w, fd_set* e, timeval* tv) {
  hook::Mode m = hook::mode();
  if (m == hook::Mode::kThread) return GORT_NEXT(select)(nfds, r, w, e, tv);
  if (m == hook::Mode::kLocked) {
    // Linux leaves the time not slept in *tv.
    return hook::in_syscall_block([&] {
      return wait_retrying(deadline_tv(tv), [&](int64_t left) {
        timeval buf;
        timeval* t = tv_of(tv, left, &buf);
        int res = GORT_NEXT(select)(nfds, r, w, e, t);
        if (t == &buf) *tv = buf;
        return res;
      });
    });
  }
  if (nfds < 0 || (tv != nullptr && (tv->tv_sec < 0 || tv->tv_usec < 0))) {
    set_errno(EINVAL);
    return -1;
  }
  int64_t deadline = kNoDeadline;
  if (tv != nullptr) {
    deadline = (tv->tv_sec == 0 && tv->tv_usec == 0)
                   ? 0
                   : gort::internal::nanotime() + int64_t{tv->tv_sec} * 1000000000 + int64_t{tv->tv_usec} * 1000;
  }
  int res = park_select(nfds, r, w, e, deadline);
  if (tv != nullptr && deadline > 0) {
    // Linux's select leaves the time not slept in *tv.
    int64_t left = std::max<int64_t>(0, deadline - gort::internal::nanotime());
    tv->tv_sec = static_cast<time_t>(left / 1000000000);
    tv->tv_usec = static_cast<suseconds_t>(left % 1000000000 / 1000);
  }
  return res;
}

GORT_INTERPOSE int pselect(int nfds, fd_set* r, fd_set* w, fd_set* e, const timespec* ts, const sigset_t* mask) {
  hook::Mode m = hook::mode();
  if (m == hook::Mode::kThread) return GORT_NEXT(pselect)(nfds, r, w, e, ts, mask);
  if (mask != nullptr || m == hook::Mode::kLocked) {
    return hook::in_syscall_block([&] {
      return wait_retrying(deadline_ts(ts), [&](int64_t left) {
        timespec buf;
        return GORT_NEXT(pselect)(nfds, r, w, e, ts_of(ts, left, &buf), mask);
      });
    });
  }
  if (nfds < 0 || (ts != nullptr && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000))) {
    set_errno(EINVAL);
    return -1;
  }
  bool now = ts != nullptr && ts->tv_sec == 0 && ts->tv_nsec == 0;
  return park_select(nfds, r, w, e, now ? 0 : deadline_ts(ts));
}

GORT_INTERPOSE int epoll_wait(int epfd, epoll_event* ev, int max, int timeout) {
  switch (hook::mode()) {
    case hook::Mode::kThread:
      return GORT_NEXT(epoll_wait)(epfd, ev, max, timeout);
    case hook::Mode::kLocked:
      if (timeout == 0) return GORT_NEXT(epoll_wait)(epfd, ev, max, 0);
      return locked([&] { return GORT_NEXT(epoll_wait)(epfd, ev, max, 0); }, deadline_ms(timeout),
                    [&](int64_t left) { return GORT_NEXT(epoll_wait)(epfd, ev, max, ms_of(left)); });
    case hook::Mode::kPark:
      break;
  }
  return park_epoll(epfd, ev, max, timeout == 0 ? 0 : deadline_ms(timeout));
}

GORT_INTERPOSE int epoll_pwait(int epfd, epoll_event* ev, int max, int timeout, const sigset_t* mask) {
  hook::Mode m = hook::mode();
  if (m == hook::Mode::kThread) return GORT_NEXT(epoll_pwait)(epfd, ev, max, timeout, mask);
  if (mask != nullptr || m == hook::Mode::kLocked) {
    return locked([&] { return GORT_NEXT(epoll_pwait)(epfd, ev, max, 0, mask); }, deadline_ms(timeout),
                  [&](int64_t left) { return GORT_NEXT(epoll_pwait)(epfd, ev, max, ms_of(left), mask); });
  }
  return park_epoll(epfd, ev, max, timeout == 0 ? 0 : deadline_ms(timeout));
}

GORT_INTERPOSE int epoll_pwait2(int epfd, epoll_event* ev, int max, const timespec* ts, const sigset_t* mask) {
  hook::Mode m = hook::mode();
  if (m == hook::Mode::kThread) return GORT_NEXT(epoll_pwait2)(epfd, ev, max, ts, mask);
  if (mask != nullptr || m == hook::Mode::kLocked) {
    timespec zero{0, 0};
    return locked([&] { return GORT_NEXT(epoll_pwait2)(epfd, ev, max, &zero, mask); }, deadline_ts(ts),
                  [&](int64_t left) {
                    timespec buf;
                    return GORT_NEXT(epoll_pwait2)(epfd, ev, max, ts_of(ts, left, &buf), mask);
                  });
  }
  bool now = ts != nullptr && ts->tv_sec == 0 && ts->tv_nsec == 0;
  return park_epoll(epfd, ev, max, now ? 0 : deadline_ts(ts));
}

}  // extern "C"

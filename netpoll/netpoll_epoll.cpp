// netpoll/netpoll_epoll.cpp — the Linux poller: one epoll instance,
// edge-triggered, plus an eventfd that breaks a blocking wait.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "gmp/diag/fatal.hpp"
#include "gort/detail/race.hpp"
#include "gmp/trace.hpp"
#include "netpoll/netpoll_platform.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {
namespace {

int g_epfd = -1;
int g_breakfd = -1;
// Set while a wake-up is pending in the eventfd, so that many breaks cost
// one write (Go's netpollWakeSig).
std::atomic<uint32_t> g_break_pending{0};
// epoll_pwait2 (nanosecond timeouts) exists from Linux 5.11.
std::atomic<bool> g_have_pwait2{true};

constexpr uint64_t kBreakTag = ~uint64_t{0};

// Which waiters an event is for: 'r', 'w', 'r' + 'w', or 0.
int event_mode(uint32_t events) {
  int mode = 0;
  if (events & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) mode += 'r';
  if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) mode += 'w';
  return mode;
}

}  // namespace

void netpoll_init() {
  g_epfd = epoll_create1(EPOLL_CLOEXEC);
  if (g_epfd < 0) fatal("netpoll: epoll_create1 failed");
  g_breakfd = sys::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (g_breakfd < 0) fatal("netpoll: eventfd failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kBreakTag;
  if (epoll_ctl(g_epfd, EPOLL_CTL_ADD, g_breakfd, &ev) != 0) fatal("netpoll: epoll_ctl(eventfd) failed");
  g_break_pending.store(0);
}

void netpoll_shutdown() {
  if (g_epfd >= 0) sys::close(g_epfd);
  if (g_breakfd >= 0) sys::close(g_breakfd);
  g_epfd = g_breakfd = -1;
}

// The race detector (docs/race.md): the poller's epoll and eventfd calls
// are the runtime's, not synchronisation between goroutines
// (RaceIgnoreSync in each function below).
int netpoll_open(int fd, PollDesc*, uint64_t tag) {
  RaceIgnoreSync race;
  epoll_event ev{};
  // EPOLLPRI: urgent data (NetFD::read's drained sockets).
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
  ev.data.u64 = tag;
  if (epoll_ctl(g_epfd, EPOLL_CTL_ADD, fd, &ev) != 0) return errno;
  return 0;
}

int netpoll_modify(int fd, uint64_t tag) {
  RaceIgnoreSync race;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
  ev.data.u64 = tag;
  if (epoll_ctl(g_epfd, EPOLL_CTL_MOD, fd, &ev) != 0) return errno;
  return 0;
}

int netpoll_close(int fd) {
  RaceIgnoreSync race;
  epoll_event ev{};
  if (epoll_ctl(g_epfd, EPOLL_CTL_DEL, fd, &ev) != 0) return errno;
  return 0;
}

void netpoll_break() {
  RaceIgnoreSync race;
  uint32_t expected = 0;
  if (!g_break_pending.compare_exchange_strong(expected, 1)) return;
  uint64_t one = 1;
  int saved = errno;
  for (;;) {
    ssize_t n = sys::write(g_breakfd, &one, sizeof one);
    if (n == sizeof one || errno == EAGAIN) break;
    if (errno != EINTR) fatal("netpoll: eventfd write failed");
  }
  errno = saved;
}

bool netpoll(int64_t timeout_ns, GQueue* out) {
  TraceSourceScope source(TraceSource::kNetpoll);
  RaceIgnoreSync race;
  if (g_epfd < 0) return false;
  epoll_event events[128];
  int saved = errno;
  int n;
  uint32_t harvest = 0;
  for (;;) {
    harvest = netpoll_harvest_begin();
    // Not in the race detector's build: its ThreadSanitizer (GCC 12's)
    // intercepts epoll_wait but not epoll_pwait2, and holds back a signal
    // that lands on a thread blocked in a call it does not know (a SIGTERM
    // for an idle server, until its next timer).
    if (!kRaceEnabled && g_have_pwait2.load(std::memory_order_relaxed)) {
      timespec ts{};
      timespec* tp = nullptr;
      if (timeout_ns >= 0) {
        ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000);
        ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000);
        tp = &ts;
      }
      n = sys::epoll_pwait2(g_epfd, events, 128, tp);
      if (n < 0 && errno == ENOSYS) {
        g_have_pwait2.store(false);
        continue;
      }
    } else {
      int ms;
      if (timeout_ns < 0) {
        ms = -1;
      } else if (timeout_ns == 0) {
        ms = 0;
      } else if (timeout_ns < 1000000) {
        ms = 1;
      } else if (timeout_ns < int64_t{1000000} * 1000000000) {
        ms = static_cast<int>((timeout_ns + 999999) / 1000000);
      } else {
        ms = 1000000000;
      }
      n = sys::epoll_wait(g_epfd, events, 128, ms);
    }
    if (n >= 0) break;
    if (errno != EINTR) fatal("netpoll: epoll_wait failed");
    // A signal (e.g. SIGURG for another purpose) interrupted a blocking
    // wait: return so the caller re-evaluates timers.
    if (timeout_ns != 0) {
      n = 0;
      break;
    }
  }
  // Each event's descriptor, and then the G parked on it (at the top of
  // its own stack page), is a cache miss: a busy server's poll returns
  // dozens of events. Fetched ahead, a descriptor kDescAhead events ahead
  // and its G kWaiterAhead ahead, the misses overlap instead of following
  // one another.
  constexpr int kDescAhead = 8, kWaiterAhead = 4;
  int64_t woken = 0;  // taken off the waiter count once, at the end
  for (int i = 0; i < n && i < kDescAhead; i++) {
    if (events[i].data.u64 != kBreakTag) netpoll_prefetch_desc(events[i].data.u64);
  }
  for (int i = 0; i < n; i++) {
    if (i + kDescAhead < n && events[i + kDescAhead].data.u64 != kBreakTag) {
      netpoll_prefetch_desc(events[i + kDescAhead].data.u64);
    }
    if (i + kWaiterAhead < n && events[i + kWaiterAhead].data.u64 != kBreakTag) {
      const epoll_event& next = events[i + kWaiterAhead];
      netpoll_prefetch_waiter(next.data.u64, event_mode(next.events) == 'w' ? 'w' : 'r');
    }
    epoll_event& ev = events[i];
    if (ev.data.u64 == kBreakTag) {
      uint64_t buf;
      while (sys::read(g_breakfd, &buf, sizeof buf) > 0) {
      }
      g_break_pending.store(0);
      continue;
    }
    int mode = event_mode(ev.events);
    if (mode != 0) {
      netpoll_ready(ev.data.u64, mode, (ev.events & (EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0,
                    out, harvest, &woken);
    }
  }
  if (woken != 0) netpoll_waiters_done(woken);
  errno = saved;
  return true;
}

}  // namespace gort::internal

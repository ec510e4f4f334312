// Idle connections without a goroutine (gort/server.hpp, Sessions), and the
// pooled read buffers.
//
// A session's turn that ends with Next::kWaitInput and has no input read
// ahead keeps its goroutine, parked on the descriptor, for
// ServerConfig::keep_goroutine; input within it runs the next turn there.
// Then it gives its goroutine back: the connection goes into the server's own
// epoll set (level-triggered, EPOLLONESHOT) and into a heap of idle
// deadlines. One goroutine per server
// (watch) waits on that epoll set through the runtime's poller, as on any
// descriptor, so it parks like a reader and the deadlock detector counts it;
// its read deadline is the soonest idle deadline. When connections have
// input it takes them out and starts a goroutine per connection for their
// next turn; when deadlines pass it ends those connections.
//
// Who owns an idle connection: whoever takes it off IdlePoller's list under
// IdlePoller::mu (the watcher, for input or a deadline; shutdown and close,
// for all of them) runs its next turn or finishes it. An event names its
// connection by address, so none may be reported for one that left the
// list and may be gone: one-shot, an event disarms its connection, which
// is not re-armed before its next turn ends; the watcher takes a connection
// whose deadline passed out of the epoll set (EPOLL_CTL_DEL) before it lets
// go of the lock; and once shutdown or close has taken them all
// (IdlePoller::stopped), the watcher ignores what it harvested.
//
// A kept goroutine (ServerConfig::keep_goroutine) waits on its descriptor
// as any reader does, its connection on KeptList, oldest first; one
// goroutine per server (sweep_kept), while the list is not empty, sleeps
// until the oldest wait passes keep_goroutine and ends it by expiring the
// connection's read deadline. Whoever takes a connection off that list
// under KeptList::mu (its goroutine when the wait ends, or the sweeper)
// decides how the wait ended; the connection cannot end meanwhile, since
// its own goroutine is the one waiting.
//
// Lock order: Server::Impl::mu, then IdlePoller::mu; the buffer pool's lock
// is a leaf; KeptList::mu is taken alone (the sweeper expires a deadline
// under it, which takes only the runtime's locks).
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "gmp/os/clock.hpp"
#include "gort/runtime.hpp"
#include "gort/server.hpp"
#include "gort/time.hpp"
#include "netpoll/netpoll.hpp"
#include "stdlib/net/room.hpp"
#include "stdlib/net/server_impl.hpp"

namespace gort::net {

// The deadline heap (IdlePoller::heap; IdleConn::heap_index).

void IdlePoller::heap_swap(size_t i, size_t j) {
  std::swap(heap[i], heap[j]);
  heap[i]->heap_index = static_cast<int32_t>(i);
  heap[j]->heap_index = static_cast<int32_t>(j);
}

void IdlePoller::heap_up(size_t i) {
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (heap[parent]->deadline <= heap[i]->deadline) break;
    heap_swap(i, parent);
    i = parent;
  }
}

void IdlePoller::heap_down(size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < heap.size() && heap[l]->deadline < heap[m]->deadline) m = l;
    if (r < heap.size() && heap[r]->deadline < heap[m]->deadline) m = r;
    if (m == i) return;
    heap_swap(i, m);
    i = m;
  }
}

void IdlePoller::heap_push(IdleConn* ic) {
  ic->heap_index = static_cast<int32_t>(heap.size());
  heap.push_back(ic);
  heap_up(heap.size() - 1);
}

void IdlePoller::heap_remove(IdleConn* ic) {
  if (ic->heap_index < 0) return;
  size_t i = static_cast<size_t>(ic->heap_index);
  size_t last = heap.size() - 1;
  if (i != last) heap_swap(i, last);
  heap.pop_back();
  ic->heap_index = -1;
  if (i < heap.size()) {
    heap_down(i);
    heap_up(i);
  }
}

void IdlePoller::add_locked(IdleConn* ic) {
  ic->armed = true;
  ic->idle_prev = nullptr;
  ic->idle_next = armed;
  if (armed != nullptr) armed->idle_prev = ic;
  armed = ic;
}

void IdlePoller::remove_locked(IdleConn* ic) {
  if (ic->idle_prev != nullptr) ic->idle_prev->idle_next = ic->idle_next;
  else armed = ic->idle_next;
  if (ic->idle_next != nullptr) ic->idle_next->idle_prev = ic->idle_prev;
  ic->idle_prev = ic->idle_next = nullptr;
  ic->armed = false;
  heap_remove(ic);
}

// The buffer pool.

std::string* BufferPool::get() {
  {
    Hold lock(mu);
    if (!free.empty()) {
      std::string* b = free.back().release();
      free.pop_back();
      return b;
    }
  }
  return new std::string();
}

void BufferPool::put(std::string* b) {
  b->clear();
  if (b->capacity() <= kMaxCapacity) {
    Hold lock(mu);
    if (free.size() < kKeep) {
      free.emplace_back(b);
      return;
    }
  }
  delete b;
}

BufferPool::~BufferPool() = default;

IdlePoller::~IdlePoller() {
  // A watcher that never ran (a shutdown began as it was started).
  Hold lock(mu);
  if (ep != nullptr) {
    (void)ep->close();
    internal::NetFD::release(ep);
  }
}

// Kept goroutines.

bool KeptList::add(IdleConn* ic, int64_t now) {
  Hold lock(mu);
  ic->kept_since = now > 0 ? now : 1;
  ic->idle_prev = tail;
  ic->idle_next = nullptr;
  if (tail != nullptr) tail->idle_next = ic;
  else head = ic;
  tail = ic;
  if (sweeping) return false;
  sweeping = true;
  return true;
}

bool KeptList::remove(IdleConn* ic) {
  Hold lock(mu);
  bool evicted = ic->kept_since < 0;
  if (ic->kept_since > 0) unlink_locked(ic);
  ic->kept_since = 0;
  return evicted;
}

void KeptList::unlink_locked(IdleConn* ic) {
  if (ic->idle_prev != nullptr) ic->idle_prev->idle_next = ic->idle_next;
  else head = ic->idle_next;
  if (ic->idle_next != nullptr) ic->idle_next->idle_prev = ic->idle_prev;
  else tail = ic->idle_prev;
  ic->idle_prev = ic->idle_next = nullptr;
}

void Server::Impl::start_sweeper() {
  if (enter()) {
    go([this] { sweep_kept(); });
    return;
  }
  // Stopping: the shutdown closes idle connections, kept ones included,
  // which ends their waits.
  Hold lock(kept.mu);
  kept.sweeping = false;
}

void Server::Impl::sweep_kept() {
  // A stopping server waits for this goroutine: it naps no longer than
  // this, whatever keep_goroutine is.
  constexpr int64_t kMaxNap = 10 * 1000 * 1000;
  const int64_t keep_ns = std::min(absl::ToInt64Nanoseconds(cfg.keep_goroutine), internal::kFarDeadline);
  for (;;) {
    int64_t nap;
    {
      Hold lock(kept.mu);
      int64_t now = internal::nanotime();
      while (IdleConn* ic = kept.head) {
        if (now - ic->kept_since < keep_ns) break;
        kept.unlink_locked(ic);
        ic->kept_since = -1;
        // Expired now (absl::InfinitePast would mean "none", as Go's zero
        // Time does).
        if (net::Conn* c = ic->sc.transport(); c != nullptr) {
          internal::set_deadline_after(*c, absl::ZeroDuration(), 'r', now);
        }
      }
      if (kept.head == nullptr || stopping_flag.load(std::memory_order_acquire)) {
        kept.sweeping = false;
        break;
      }
      nap = std::min(keep_ns - (now - kept.head->kept_since), kMaxNap);
    }
    gort::sleep(absl::Nanoseconds(nap));
  }
  leave();
}

// Turns.

void Server::Impl::run_turns(IdleConn* ic) {
  ServerConn& sc = ic->sc;
  for (;;) {
    Next next = Next::kClose;
    try {
      next = ic->session->turn(sc);
    } catch (...) {
      report_panic(sc);
    }
    if (next != Next::kWaitInput || sc.state_.load(std::memory_order_acquire) == ServerConn::kClosed) break;
    if (sc.input_pending()) {
      sc.start_request();  // input read ahead: the next turn now
      continue;
    }
    if (cfg.keep_goroutine > absl::ZeroDuration() && keep.acquire()) {
      // Parked on the descriptor for a while first (ServerConfig::keep_goroutine):
      // a client that answers at once gets its next turn on this goroutine,
      // with the (empty) buffer it kept.
      ServerConn::Waited w = sc.wait_input_for(ic);
      keep.release(w == ServerConn::Waited::kInput);
      if (w == ServerConn::Waited::kInput) continue;
      if (w == ServerConn::Waited::kEnd) break;
    }
    sc.release_buffer();
    if (arm(ic)) return;  // idle: this goroutine ends, the connection waits
    break;
  }
  finish(ic);
}

void Server::Impl::finish(IdleConn* ic) {
  {
    Hold lock(mu);
    unlink_locked(&ic->sc);
  }
  ic->sc.release_buffer(/*all=*/true);
  (void)ic->sc.close_conn();  // a TLS connection sends close_notify
  delete ic;                  // the session, then the connection
  if (limited()) slots.release();
  leave();
}

bool Server::Impl::arm(IdleConn* ic) {
  ServerConn& sc = ic->sc;
  uint8_t st = ServerConn::kActive;
  // Already idle after a wait_input whose input this turn left unread.
  if (!sc.state_.compare_exchange_strong(st, ServerConn::kIdle, std::memory_order_seq_cst) &&
      st != ServerConn::kIdle) {
    return false;
  }
  if (stopping_flag.load(std::memory_order_seq_cst)) return false;
  // Idle, the connection's deadline is the server's own (the heap below);
  // the ones its last request set would keep its poll descriptor's timers.
  if (cfg.read_timeout != absl::InfiniteDuration() || cfg.idle_timeout != absl::InfiniteDuration() ||
      cfg.write_timeout != absl::InfiniteDuration()) {
    (void)sc.set_read_deadline(absl::InfiniteFuture());
    (void)sc.set_write_deadline(absl::InfiniteFuture());
  }
  bool start = false;
  {
    Hold lock(idle.mu);
    if (idle.stopped) return false;
    if (!idle.started) {
      idle.epfd = ::epoll_create1(EPOLL_CLOEXEC);
      int err = 0;
      if (idle.epfd >= 0) idle.ep = internal::NetFD::open_file(idle.epfd, internal::FdKind::kFile, true, &err);
      if (idle.ep == nullptr) {
        if (idle.epfd >= 0) ::close(idle.epfd);
        idle.epfd = -1;
        return false;  // no poller: the connection ends rather than idling with a goroutine
      }
      idle.started = start = true;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.ptr = ic;
    if (::epoll_ctl(idle.epfd, ic->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, ic->fd(), &ev) != 0) return false;
    ic->in_epoll = true;
    const int64_t now = internal::nanotime();
    ic->armed_tick = KeepCredit::tick(now);
    idle.add_locked(ic);
    absl::Duration d = cfg.idle_timeout != absl::InfiniteDuration() ? cfg.idle_timeout : cfg.read_timeout;
    // An infinite timeout saturates to kFarDeadline: none.
    ic->deadline = internal::deadline_in(absl::ToInt64Nanoseconds(d), now);
    if (ic->deadline != internal::kFarDeadline) {
      idle.heap_push(ic);
      // The soonest deadline is the watcher's read deadline.
      if (idle.heap.front() == ic) (void)idle.ep->set_deadline_after(absl::Nanoseconds(ic->deadline - now), 'r', now);
    }
  }
  if (start) {
    // The watcher counts in `live`, unless a shutdown began meanwhile: then
    // it has already claimed or will claim this connection (idle.stopped),
    // and the poller is released with the server.
    bool counted;
    {
      Hold lock(mu);
      counted = !shutting_down;
      if (counted) live++;
    }
    if (counted) go([this] { watch(); });
  }
  return true;
}

std::vector<IdleConn*> Server::Impl::claim_all_idle() {
  std::vector<IdleConn*> out;
  Hold lock(idle.mu);
  idle.stopped = true;
  while (IdleConn* ic = idle.armed) {
    idle.remove_locked(ic);
    out.push_back(ic);
  }
  if (idle.ep != nullptr) (void)idle.ep->close();  // the watcher wakes and leaves
  return out;
}

void Server::Impl::watch() {
  constexpr int kBatch = 128;
  epoll_event evs[kBatch];
  std::vector<IdleConn*> ready, expired;
  internal::NetFD* ep;  // released only here, below
  {
    Hold lock(idle.mu);
    ep = idle.ep;
  }
  for (;;) {
    int n = 0;
    int err = ep->raw_io('r', [&](int fd) {
      n = ::epoll_wait(fd, evs, kBatch, 0);
      return n != 0 && !(n < 0 && errno == EINTR);
    });
    bool stop;
    int64_t now;
    {
      Hold lock(idle.mu);
      stop = idle.stopped;
      for (int i = 0; i < n && !stop; i++) {
        auto* ic = static_cast<IdleConn*>(evs[i].data.ptr);
        if (!ic->armed) continue;
        idle.remove_locked(ic);
        ready.push_back(ic);
      }
      now = internal::nanotime();
      while (!stop && !idle.heap.empty() && idle.heap.front()->deadline <= now) {
        IdleConn* ic = idle.heap.front();
        idle.remove_locked(ic);
        (void)::epoll_ctl(idle.epfd, EPOLL_CTL_DEL, ic->fd(), nullptr);
        expired.push_back(ic);
      }
      if (!stop) {
        if (idle.heap.empty()) (void)idle.ep->set_deadline(absl::InfiniteFuture(), 'r');
        else (void)idle.ep->set_deadline_after(absl::Nanoseconds(idle.heap.front()->deadline - now), 'r', now);
      }
    }
    // An answer within keep_goroutine earns a kept goroutine (KeepCredit).
    int64_t keep_ticks = absl::ToInt64Nanoseconds(cfg.keep_goroutine) / 100000;
    uint16_t now_tick = KeepCredit::tick(now);
    for (IdleConn* ic : ready) {
      if (keep_ticks > 0 && static_cast<uint16_t>(now_tick - ic->armed_tick) <= std::min<int64_t>(keep_ticks, 65535)) {
        keep.earn();
      }
      ic->sc.touch();
      if (ic->sc.state_.load(std::memory_order_acquire) == ServerConn::kClosed) {
        go([this, ic] { finish(ic); });
      } else {
        go([this, ic] {
          ic->sc.start_request();
          run_turns(ic);
        });
      }
    }
    for (IdleConn* ic : expired) {
      ic->sc.state_.store(ServerConn::kClosed, std::memory_order_release);
      go([this, ic] { finish(ic); });
    }
    ready.clear();
    expired.clear();
    if (stop || err == internal::kErrClosing) break;
  }
  {
    Hold lock(idle.mu);
    idle.ep = nullptr;
  }
  internal::NetFD::release(ep);
  leave();
}

}  // namespace gort::net

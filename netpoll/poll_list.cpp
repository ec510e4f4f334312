// netpoll/poll_list.cpp — waiting on the list of one or several poll
// descriptors: a second goroutine on a descriptor whose slot is taken, a
// wait with its own timeout (SO_RCVTIMEO), and the libc hooks' poll,
// select and epoll_wait, which wait for any of several descriptors.
//
// A wait (PollWait, on the waiter's stack) has one node on each
// descriptor's list. Its state:
//
//   | state         | meaning                                   | next                    |
//   |---------------|-------------------------------------------|-------------------------|
//   | kArmed        | joined, not parked (looking at the level) | kParked (park commits), |
//   |               |                                           | kFired (a waker)        |
//   | kParked       | parked; counted in the poller's waiters   | kFired (a waker readies)|
//   | kFired | why  | ended: an event, a timeout or a close     | (final)                 |
//
// A waker (an event of a descriptor, its close, the wait's timer) CASes the
// state to kFired; it readies the goroutine only if it found kParked. The
// park's commit CASes kArmed -> kParked, and finds kFired if a waker came
// first: the goroutine then does not sleep.
//
// No event is missed: the waiter counts itself in each descriptor's `nwl`
// (seq_cst) and then looks at the descriptors' level with a system call
// (poll with a zero timeout, or the hooked call's own look); the poller
// loads `nwl` after the kernel reported an event (netpoll_ready). Either
// the poller sees the waiter, or the waiter's look sees what the event
// reported (edge-triggered epoll reports each new arrival, and the level
// look sees all of them).
//
// Memory: a waker touches a wait only under the list lock of the node it
// found it through (the waiter unlinks each node under that lock before
// its frame goes), or, for the timer, before it sets timer_done, which the
// waiter waits for when timer_stop says the timer had already fired.
//
// Lock order: a descriptor's wl_lock is a leaf (a waker readies goroutines
// under it: ready takes no lock that could be held while taking wl_lock).
#include <poll.h>
#include <sched.h>

#include <atomic>
#include <vector>

#include "gmp/sched.hpp"
#include "gmp/os/sys.hpp"
#include "gmp/tls.hpp"
#include "netpoll/netpoll.hpp"
#include "netpoll/poll_desc.hpp"

namespace gort::internal {

extern std::atomic<int64_t> g_netpoll_waiters;

namespace {

constexpr uint32_t kArmed = 0;
constexpr uint32_t kParked = 1;
constexpr uint32_t kFired = 2;
constexpr uint32_t kStateMask = 3;
constexpr uint32_t kWhyEvent = 0 << 2;
constexpr uint32_t kWhyTimeout = 1 << 2;
constexpr uint32_t kWhyClosing = 2 << 2;

// Modes as bits: what an event of mode 'r', 'w' or 'r' + 'w' ends.
constexpr int kBitR = 1;
constexpr int kBitW = 2;
int mode_bits(int mode) {
  if (mode == 'r') return kBitR;
  if (mode == 'w') return kBitW;
  return kBitR | kBitW;
}

}  // namespace

struct PollWait {
  G* g = nullptr;
  std::atomic<uint32_t> state{kArmed};
  Timer timer;
  std::atomic<bool> timer_done{false};
};

struct ListNode {
  ListNode* prev = nullptr;
  ListNode* next = nullptr;
  PollWait* w = nullptr;
  int bits = 0;
};

namespace {

// Ends w for `why`; with `out`, a parked waiter is made runnable onto it,
// else readied.
void fire(PollWait* w, uint32_t why, GQueue* out) {
  uint32_t s = w->state.load(std::memory_order_acquire);
  for (;;) {
    if ((s & kStateMask) == kFired) return;
    if (w->state.compare_exchange_weak(s, kFired | why, std::memory_order_acq_rel)) break;
  }
  if (s != kParked) return;  // not asleep yet: its commit sees kFired
  // seq_cst: as unblock's (poll_desc.cpp), for the deadlock check.
  g_netpoll_waiters.fetch_sub(1, std::memory_order_seq_cst);
  G* g = w->g;
  if (out != nullptr) {
    set_status(g, GStatus::kWaiting, GStatus::kRunnable);
    out->push_back(g);
  } else {
    ready(g);
  }
}

bool commit(G*, void* arg) {
  auto* w = static_cast<PollWait*>(arg);
  // Counted before the commit can be seen, so that the count never says
  // fewer than are asleep (a waker's decrement follows its CAS).
  g_netpoll_waiters.fetch_add(1, std::memory_order_seq_cst);
  uint32_t expected = kArmed;
  if (w->state.compare_exchange_strong(expected, kParked, std::memory_order_acq_rel)) return true;
  g_netpoll_waiters.fetch_sub(1, std::memory_order_seq_cst);
  return false;  // a waker came first: do not sleep
}

void timer_fired(Timer* t, int64_t, uint32_t) {
  auto* w = static_cast<PollWait*>(t->arg);
  fire(w, kWhyTimeout, nullptr);
  w->timer_done.store(true, std::memory_order_release);
}

// Joins pd's list; false if pd is closing (nothing joined).
bool join(PollDesc* pd, ListNode* n) {
  MutexLock lock(pd->wl_lock);
  if (pd->closing.load(std::memory_order_seq_cst)) return false;
  n->prev = nullptr;
  n->next = pd->wl_head;
  if (pd->wl_head != nullptr) pd->wl_head->prev = n;
  pd->wl_head = n;
  // Dekker with netpoll_ready's load (see the top).
  pd->nwl.fetch_add(1, std::memory_order_seq_cst);
  return true;
}

void leave(PollDesc* pd, ListNode* n) {
  MutexLock lock(pd->wl_lock);
  if (pd->abandoned.load(std::memory_order_relaxed)) return;  // the run ended: the list was dropped
  if (n->prev != nullptr) {
    n->prev->next = n->next;
  } else {
    pd->wl_head = n->next;
  }
  if (n->next != nullptr) n->next->prev = n->prev;
  pd->nwl.fetch_sub(1, std::memory_order_relaxed);
}

struct LevelOne {
  int fd;
  short events;
};

bool level_one(void* arg) {
  auto* a = static_cast<LevelOne*>(arg);
  pollfd p{a->fd, a->events, 0};
  return sys::poll(&p, 1, 0) > 0;
}

}  // namespace

void pd_wake_list(PollDesc* pd, int mode, GQueue* out) {
  const int bits = mode_bits(mode);
  MutexLock lock(pd->wl_lock);
  for (ListNode* n = pd->wl_head; n != nullptr; n = n->next) {
    if ((n->bits & bits) != 0) fire(n->w, kWhyEvent, out);
  }
}

void pd_wake_list_closing(PollDesc* pd) {
  MutexLock lock(pd->wl_lock);
  for (ListNode* n = pd->wl_head; n != nullptr; n = n->next) fire(n->w, kWhyClosing, nullptr);
}

int poll_wait_any(PollDesc* const* pds, const int* modes, int n, int64_t deadline, bool (*level)(void*),
                  void* arg, WaitReason reason) {
  G* g = getg();
  PollWait w;
  w.g = g;
  // Most waits are on one or a few descriptors.
  ListNode small[8];
  std::vector<ListNode> big;
  ListNode* nodes = small;
  if (n > 8) {
    big.resize(static_cast<size_t>(n));
    nodes = big.data();
  }
  int joined = 0;
  bool closing = false;
  for (; joined < n; joined++) {
    nodes[joined].w = &w;
    nodes[joined].bits = mode_bits(modes[joined]);
    if (!join(pds[joined], &nodes[joined])) {
      closing = true;
      break;
    }
  }
  bool timer_armed = false;
  if (!closing && !level(arg)) {
    if (deadline > 0) {
      w.timer.f = &timer_fired;
      w.timer.arg = &w;
      timer_add(&w.timer, deadline, 0);
      timer_armed = true;
    }
    if (g != nullptr) {
      park(&commit, &w, reason);
    } else {
      // A plain thread cannot park: it sleeps on poll(2) a slice at a time
      // (close and the timeout are noticed within one).
      while ((w.state.load(std::memory_order_acquire) & kStateMask) != kFired) {
        if (level(arg)) break;
        timespec ts{0, 1000000};
        sys::nanosleep(&ts, nullptr);
      }
    }
  }
  for (int i = 0; i < joined; i++) leave(pds[i], &nodes[i]);
  if (timer_armed && !timer_stop(&w.timer)) {
    // It fired (or is firing): its function still touches w.
    while (!w.timer_done.load(std::memory_order_acquire)) sched_yield();
  }
  if (closing) return kPollErrClosing;
  uint32_t s = w.state.load(std::memory_order_acquire);
  if ((s & kStateMask) != kFired) return kPollOk;  // the level look found something
  if ((s & ~kStateMask) == kWhyClosing) return kPollErrClosing;
  if ((s & ~kStateMask) == kWhyTimeout) return kPollErrTimeout;
  return kPollOk;
}

int poll_wait_list(PollDesc* pd, int mode, int64_t deadline) {
  int err = poll_check(pd, mode);
  if (err != kPollOk) return err;
  LevelOne l{pd->fd, static_cast<short>(mode == 'r' ? POLLIN | POLLPRI | POLLRDHUP : POLLOUT)};
  return poll_wait_any(&pd, &mode, 1, deadline, &level_one, &l, WaitReason::kIOWait);
}

}  // namespace gort::internal

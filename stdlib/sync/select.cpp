// stdlib/sync/select.cpp — Go's select (runtime/select.go).
//
// 1. Shuffle the non-nil cases into a random poll order (uniform choice
//    among ready cases) and sort their distinct channels by address into the
//    lock order (two selects over the same channels in opposite order lock
//    them in the same order, so they cannot deadlock).
// 2. Lock them all; take the first ready case in poll order.
// 3. Otherwise, with a default, unlock and return it.
// 4. Otherwise enqueue one Sudog per case, all sharing a `done` flag, and
//    park; park's unlock function releases all the locks. The first waker
//    that flips `done` wins and records its Sudog in g->param.
// 5. Woken: relock, unlink the losing Sudogs still queued, unlock.
//
// Buffered channels (stdlib/sync/chan_ring.hpp): a case is polled with the
// ring's lock-free operations (the lock is held anyway, for the queues).
// Step 4 follows the ring's parking protocol: after every Sudog is queued
// and the waiting flags are set, the buffered cases are polled once more in
// poll order before parking, and a ready one is completed as in step 2 (no
// waker can have taken our Sudogs: we hold every lock). A buffered case
// woken with success == false (close, or a value taken by someone faster)
// means "poll again": the select starts over.
#include <algorithm>
#include <new>
#include <type_traits>
#include <vector>

#include "gmp/bubble.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gmp/trace.hpp"
#include "stdlib/sync/chan_core.hpp"
#include "stdlib/sync/chan_ring.hpp"

namespace gort::internal {
namespace {

struct LockSet {
  ChanCore** chans;
  int n;
};

// A set of locks as long as the select's cases, which the thread-safety
// analysis cannot count; the order checker (lock_rank) sees each lock.
void lock_all(const LockSet& ls) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (int i = 0; i < ls.n; i++) ls.chans[i]->lock.lock();
}

void unlock_all(const LockSet& ls) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (int i = ls.n - 1; i >= 0; i--) ls.chans[i]->lock.unlock();
}

bool park_unlock_all(G*, void* arg) {
  unlock_all(*static_cast<LockSet*>(arg));
  return true;
}

constexpr int kInline = 8;

enum class Poll { kNotReady, kDone, kReceived, kClosed };

// A buffered case's ring operation; does not wake anyone.
Poll poll_ring(SelectCase& sc) {
  ChanCore* c = sc.c;
  RingResult r = sc.is_send ? ring_send(c, sc.elem) : ring_recv(c, sc.elem);
  if (r == RingResult::kWouldBlock) return Poll::kNotReady;
  if (r == RingResult::kClosed) return Poll::kClosed;
  return sc.is_send ? Poll::kDone : Poll::kReceived;
}

// After a buffered case moved a value (locks held): serves the waiters
// that move lets through, unlocks everything, wakes them.
Poll complete_ring(SelectCase& sc, Poll p, const LockSet* ls) {
  lifetime_probe();
  WakeList wl;
  if (p != Poll::kClosed) settle(sc.c, &wl);
  unlock_all(*ls);
  wl.wake_all();
  return p;
}

// Polls one case with every lock held. If it is ready, completes it,
// unlocks everything and says how it went.
Poll poll_case(SelectCase& sc, const LockSet* ls) {
  ChanCore* c = sc.c;
  if (c->cap > 0) {
    Poll p = poll_ring(sc);
    if (p == Poll::kNotReady) return p;
    return complete_ring(sc, p, ls);
  }
  if (sc.is_send) {
    if (c->closed) {
      unlock_all(*ls);
      return Poll::kClosed;
    }
    if (Sudog* r = c->recvq.dequeue()) {
      elem_move(c->et, r->elem, sc.elem);
      r->success = true;
      unlock_all(*ls);
      sudog_ready(r);
      return Poll::kDone;
    }
    return Poll::kNotReady;
  }
  if (Sudog* s = c->sendq.dequeue()) {
    recv_from_sender(c, s, sc.elem);
    unlock_all(*ls);
    sudog_ready(s);
    return Poll::kReceived;
  }
  if (c->closed) {
    unlock_all(*ls);
    return Poll::kClosed;
  }
  return Poll::kNotReady;
}

// The result of a completed case, locks released.
int finish(SelectCase& sc, int i, Poll p) {
  if (sc.is_send) {
    if (p == Poll::kClosed) throw panic_error("send on closed channel");
  } else {
    sc.received = p == Poll::kReceived;
  }
  return i;
}

// Locks held: takes this select's Sudogs (but the winner, which a waker
// already took) off their queues and publishes the flags of the buffered
// channels among them.
void unlink_all(SelectCase* cases, Sudog* waiters, int npoll, Sudog* winner) {
  for (int k = 0; k < npoll; k++) {
    Sudog& w = waiters[k];
    if (&w == winner || !w.queued) continue;
    if (cases[w.case_index].is_send) w.c->sendq.remove(&w); else w.c->recvq.remove(&w);
  }
  for (int k = 0; k < npoll; k++) {
    if (waiters[k].c->cap > 0) publish_waiting(waiters[k].c);
  }
}

}  // namespace

namespace {

int selectgo_impl(SelectCase* cases, int n, bool block) {
  int inline_poll[kInline];
  ChanCore* inline_locks[kInline];
  // Raw storage: the Sudogs are only built if the select has to block, so
  // a select that finds a ready case does not pay for zeroing them.
  static_assert(std::is_trivially_destructible_v<Sudog>);
  alignas(Sudog) unsigned char inline_waiters[kInline * sizeof(Sudog)];
  std::vector<int> heap_poll;
  std::vector<ChanCore*> heap_locks;
  std::vector<Sudog> heap_waiters;
  int* poll = inline_poll;
  ChanCore** locks = inline_locks;
  Sudog* waiters = reinterpret_cast<Sudog*>(inline_waiters);
  if (n > kInline) {
    heap_poll.resize(static_cast<size_t>(n));
    heap_locks.resize(static_cast<size_t>(n));
    heap_waiters.resize(static_cast<size_t>(n));
    poll = heap_poll.data();
    locks = heap_locks.data();
    waiters = heap_waiters.data();
  }

  // Poll order: a uniform shuffle of the non-nil cases (inside-out
  // Fisher-Yates).
  int npoll = 0;
  // Durable in a bubble only if every channel is the bubble's (Go's
  // select: one outside channel could be made ready from outside).
  bool all_bubble = true;
  for (int i = 0; i < n; i++) {
    if (!is_chan(cases[i].c)) [[unlikely]] {
      if (cases[i].c != nullptr) panic_moved_from("select on");
      continue;
    }
    if (cases[i].c->bubble_id != 0) [[unlikely]] {
      check_chan_bubble(cases[i].c, "select on");
    } else {
      all_bubble = false;
    }
    int j = static_cast<int>(sched_randn(static_cast<uint32_t>(npoll + 1)));  // a seeded bubble's draw
    poll[npoll] = poll[j];
    poll[j] = i;
    npoll++;
  }
  if (npoll == 0) {
    if (!block) return -1;
    block_forever(WaitReason::kSelectNoCases, "select with no cases was woken");
  }
  // Lock order: distinct channels by address.
  for (int k = 0; k < npoll; k++) locks[k] = cases[poll[k]].c;
  std::sort(locks, locks + npoll);
  int nlocks = static_cast<int>(std::unique(locks, locks + npoll) - locks);
  LockSet ls{locks, nlocks};

  for (;;) {
    lock_all(ls);
    for (int k = 0; k < npoll; k++) {
      int i = poll[k];
      if (Poll p = poll_case(cases[i], &ls); p != Poll::kNotReady) return finish(cases[i], i, p);
    }
    if (!block) {
      unlock_all(ls);
      return -1;
    }

    // Block on every case at once.
    G* self = getg();
    if (self == nullptr && !thread_may_wait()) [[unlikely]] {
      unlock_all(ls);
      thread_wait_outside_run(WaitReason::kSelect);
    }
    Note note;
    std::atomic<uint32_t> done{0};
    Sudog* winner = nullptr;
    bool buffered = false;
    for (int k = 0; k < npoll; k++) {
      int i = poll[k];
      ChanCore* c = cases[i].c;
      Sudog& w = *new (&waiters[k]) Sudog{};
      w.g = self;
      w.note = &note;
      w.elem = cases[i].elem;
      w.c = c;
      w.select_done = &done;
      w.won = &winner;
      w.case_index = i;
      if (cases[i].is_send) c->sendq.push(&w); else c->recvq.push(&w);
      if (c->cap > 0) {
        buffered = true;
        (cases[i].is_send ? c->send_waiting : c->recv_waiting).store(1, std::memory_order_seq_cst);
      }
    }
    if (buffered) {
      // The ring's Dekker re-check, every lock still held.
      for (int k = 0; k < npoll; k++) {
        int i = poll[k];
        if (cases[i].c->cap == 0) continue;
        Poll p = poll_ring(cases[i]);
        if (p == Poll::kNotReady) continue;
        unlink_all(cases, waiters, npoll, nullptr);
        return finish(cases[i], i, complete_ring(cases[i], p, &ls));
      }
    }
    sudog_block(&waiters[0], &park_unlock_all, &ls, all_bubble ? WaitReason::kSynctestSelect : WaitReason::kSelect);

    // Whoever woke us is done; we still go back to every channel.
    lifetime_probe();
    lock_all(ls);
    unlink_all(cases, waiters, npoll, winner);
    unlock_all(ls);
    if (winner == nullptr) fatal("select: woken without a winning case");
    int i = winner->case_index;
    if (cases[i].c->cap > 0 && !winner->success) continue;  // poll again
    if (cases[i].is_send) {
      if (!winner->success) throw panic_error("send on closed channel");
    } else {
      cases[i].received = winner->success;
    }
    return i;
  }
}

}  // namespace

// Every case releases as its operation would (chan_core.hpp, RaceChanOp):
// whichever runs, the value or the close was published first. Only the
// case that ran acquires.
int selectgo(SelectCase* cases, int n, bool block) {
  GORT_TRACE_BLOCKING_CALL();
  if (block) preempt_check_may_park("select"); else preempt_check();
  if constexpr (kRaceEnabled) {
    for (int i = 0; i < n; i++) {
      if (is_chan(cases[i].c)) race_chan_start(cases[i].c, cases[i].is_send);
    }
    int i;
    {
      RaceIgnore ignore;
      i = selectgo_impl(cases, n, block);
    }
    if (i >= 0) race_chan_done(cases[i].c, cases[i].is_send);
    return i;
  }
  return selectgo_impl(cases, n, block);
}

}  // namespace gort::internal

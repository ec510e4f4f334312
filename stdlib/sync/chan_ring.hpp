// stdlib/sync/chan_ring.hpp — the buffered channel: a bounded lock-free ring
// that sends and receives use without the channel lock, and the protocol
// that parks and wakes goroutines around it under the lock.
//
// THE RING (Vyukov's bounded MPMC queue, laid out as crossbeam-channel's
// "array" flavor: https://github.com/crossbeam-rs/crossbeam, array.rs).
// head (next position to receive) and tail (next position to send) are
// lap | index, index < cap, lap a multiple of one_lap = 2 * mark_bit, where
// mark_bit is the power of two above cap. Every slot has a stamp saying
// whose turn it is:
//
//   stamp == tail       free, for the sender that claims position tail
//   stamp == head + 1   holds the value for the receiver that claims head
//
// A sender claims its position with a CAS on tail, moves its value in and
// publishes stamp = tail + 1; a receiver claims with a CAS on head, moves
// the value out and publishes stamp = head + one_lap (free for the sender
// one lap later). A slot's element is constructed by the send that fills
// it and destroyed by the receive that empties it; a slot no value has
// reached is never written. Its stamp is stored as stamp - index, so the
// initial stamp (index: free for lap 0) is stored as 0 and a zeroed ring is
// a ready one: make_chan writes nothing into a large ring, whose untouched
// pages then stay the kernel's shared zero page (a buffer of 1 << 28 costs
// what the values that passed through it touched, as in Go, where
// untouched buffer pages cost nothing either). Between claim and publish a
// position is in flight;
// whoever reaches it meanwhile waits: a few growing rounds of pause, then
// sched_yield. The yield matters: on a busy machine the claimer's thread
// may be descheduled inside its window, and a waiter that only spun would
// burn its whole time slice (measured: 3x slower buffered_1x1 with two
// other processes running). The window
// is a move of T: for non-trivial T that is user code, which asynchronous
// preemption could interrupt, so the claimer holds acquirem across it (a
// receiver spinning on the same P would otherwise wait forever).
//
// CLOSE is mark_bit in tail, set by fetch_or under the lock. A send's CAS
// and close's fetch_or are ordered on tail: a send whose CAS came first is
// in the ring and will be received; any later send sees the mark and
// panics. A receive reports closed only when tail without the mark equals
// head: closed and drained.
//
// PARKING. The lock and the queues (recvq, sendq) are kept only for
// waiters. The flags recv_waiting / send_waiting mirror "the queue is not
// empty"; whoever changes a queue stores them before unlocking
// (publish_waiting). The lock-free side reads them to decide whether it has
// to take the lock at all. A lost wake-up is ruled out Dekker-style:
//
//   receiver, ring looked empty              sender, after its CAS on tail
//     lock; recvq.push(w)                      (move in, publish stamp)
//     recv_waiting = 1       seq_cst store     recv_waiting?  seq_cst load
//     ring_recv: tail        seq_cst load        yes: lock; settle; unlock
//     still empty: park (unlock after switch)
//
// The four marked operations (the CAS is seq_cst too) are in one total
// order: either the sender's load comes after the flag store and it settles
// under the lock, where the queue is exact, or the receiver's load of tail
// comes after the CAS and it sees the claim, so it does not park (it spins
// until the stamp is published, then takes the value itself). Mirrored for
// a sender on a full ring: send_waiting = 1, then load head; a receiver
// loads send_waiting after its CAS on head. A select registers on all its
// channels, sets the flags, then re-polls its buffered cases the same way
// while it still holds every lock.
//
// settle (lock held) is the wake-up: while a receiver is queued and the
// ring yields a value, move that value into the receiver's slot and wake it
// (Go's direct hand-off; ready() puts it in this P's runnext); while a
// sender is queued and the ring takes its value, move it in and wake the
// sender; repeat until neither moves, since serving one side makes room
// for the other. Values always leave through the ring's head, so each
// sender's values arrive in order. When the ring op fails (a lock-free
// operation got there first), a plain Sudog goes back to the front of its
// queue; a select's Sudog was already won (select_done), so that select
// is woken with success == false and polls again.
//
// On a buffered channel success == false therefore means "look again".
// close wakes every waiter that way: a receiver drains what is left (also
// values whose sends are still in flight) and then sees closed; a sender
// sees the mark and panics.
//
// Memory orders:
//   CAS on tail / head               seq_cst   claims the position; Dekker
//   stamp load / store               acquire / release   passes the slot's
//                                              contents to its next owner
//   head / tail load when the ring   seq_cst   Dekker's second load; tail's
//     looks full / empty                       load also sees close's mark
//   flag store of 1, flag load       seq_cst   Dekker
//   flag store of 0                  relaxed   at worst a lock taken for
//                                              nothing; the lock orders it
//   tail.fetch_or(mark) in close     seq_cst   under the lock
//
// Races considered: a send racing close (above); a receiver woken by close
// while a send is in flight (it spins for the stamp, then gets the value);
// a value stolen by a lock-free receiver between the notifier's flag load
// and its settle (the ring op fails, the Sudog keeps its place, and the
// stealer's own post-receive check covers any sender); a stale select
// Sudog left in a queue (dequeue drops it; until then the flag stays up,
// which costs a lock, not a wake-up).
#pragma once

#include "stdlib/sync/room.hpp"

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "gmp/os/cpu.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "stdlib/sync/chan_core.hpp"

namespace gort::internal {

enum class RingResult { kOk, kWouldBlock, kClosed };

// crossbeam's Backoff: spin a little longer each time, then give the CPU
// away (an in-flight claimer's thread may have been descheduled).
class Backoff {
 public:
  void spin() {
    for (uint32_t i = 0; i < (1u << (step_ < kSpinLimit ? step_ : kSpinLimit)); i++) cpu_relax();
    if (step_ <= kSpinLimit) step_++;
  }
  void snooze() {
    if (step_ <= kSpinLimit) {
      for (uint32_t i = 0; i < (1u << step_); i++) cpu_relax();
      step_++;
    } else {
      sched_yield();
    }
  }

 private:
  static constexpr uint32_t kSpinLimit = 6;
  uint32_t step_ = 0;
};

// No asynchronous preemption while a position is in flight and T's move or
// destructor (user code) runs.
class InFlight {
 public:
  explicit InFlight(const ElemType* et) : m_(et->trivial ? nullptr : getm()) {
    if (m_) acquirem(m_);
  }
  ~InFlight() {
    if (m_) releasem(m_);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  M* m_;
};

// The stamp of the slot at `index` (stored relative to it, see above). A
// plain uint64_t accessed atomically: the zeroed bytes of a fresh ring are
// such objects already, with no constructor run over them.
inline uint64_t load_stamp(char* slot, uint64_t index) {
  return __atomic_load_n(reinterpret_cast<uint64_t*>(slot), __ATOMIC_ACQUIRE) + index;
}
inline void store_stamp(char* slot, uint64_t index, uint64_t stamp) {
  __atomic_store_n(reinterpret_cast<uint64_t*>(slot), stamp - index, __ATOMIC_RELEASE);
}

// Moves *elem into the ring: kOk, kWouldBlock (full) or kClosed (*elem is
// untouched unless kOk).
inline RingResult ring_send(ChanCore* c, void* elem) {
  InFlight guard(c->et);
  const uint64_t mark = c->mark_bit;
  const uint64_t one_lap = c->mark_bit * 2;
  uint64_t tail = c->tail.load(std::memory_order_relaxed);
  for (Backoff b;;) {
    if (tail & mark) return RingResult::kClosed;
    uint64_t index = tail & (mark - 1);
    uint64_t lap = tail & ~(one_lap - 1);
    char* slot = c->slot(index);
    uint64_t stamp = load_stamp(slot, index);
    if (stamp == tail) {
      uint64_t next = index + 1 < c->cap ? tail + 1 : lap + one_lap;
      if (c->tail.compare_exchange_weak(tail, next, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
        elem_move(c->et, slot + c->elem_off, elem);
        store_stamp(slot, index, tail + 1);
        return RingResult::kOk;
      }
      b.spin();
    } else if (stamp + one_lap == tail + 1) {
      // The slot still holds last lap's value: full, unless its receiver
      // has claimed it and is moving it out.
      uint64_t head = c->head.load(std::memory_order_seq_cst);
      if (head + one_lap == tail) return RingResult::kWouldBlock;
      b.snooze();
      tail = c->tail.load(std::memory_order_relaxed);
    } else {
      b.snooze();
      tail = c->tail.load(std::memory_order_relaxed);
    }
  }
}

// Moves the head value into *out (uninitialised storage): kOk, kWouldBlock
// (empty) or kClosed (closed and drained).
inline RingResult ring_recv(ChanCore* c, void* out) {
  InFlight guard(c->et);
  const uint64_t mark = c->mark_bit;
  const uint64_t one_lap = c->mark_bit * 2;
  uint64_t head = c->head.load(std::memory_order_relaxed);
  for (Backoff b;;) {
    uint64_t index = head & (mark - 1);
    uint64_t lap = head & ~(one_lap - 1);
    char* slot = c->slot(index);
    uint64_t stamp = load_stamp(slot, index);
    if (stamp == head + 1) {
      uint64_t next = index + 1 < c->cap ? head + 1 : lap + one_lap;
      if (c->head.compare_exchange_weak(head, next, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
        elem_move(c->et, out, slot + c->elem_off);
        elem_destroy(c->et, slot + c->elem_off);
        store_stamp(slot, index, head + one_lap);
        return RingResult::kOk;
      }
      b.spin();
    } else if (stamp == head) {
      // Nothing published here: empty, unless a sender has claimed it.
      uint64_t tail = c->tail.load(std::memory_order_seq_cst);
      if ((tail & ~mark) == head) return (tail & mark) ? RingResult::kClosed : RingResult::kWouldBlock;
      b.snooze();
      head = c->head.load(std::memory_order_relaxed);
    } else {
      b.snooze();
      head = c->head.load(std::memory_order_relaxed);
    }
  }
}

// Values in the ring (claimed positions included), as crossbeam's len().
inline size_t ring_len(const ChanCore* c) {
  const uint64_t mark = c->mark_bit;
  for (;;) {
    uint64_t tail = c->tail.load(std::memory_order_seq_cst);
    uint64_t head = c->head.load(std::memory_order_seq_cst);
    if (c->tail.load(std::memory_order_seq_cst) != tail) continue;
    uint64_t hix = head & (mark - 1);
    uint64_t tix = tail & (mark - 1);
    if (hix < tix) return tix - hix;
    if (hix > tix) return c->cap - hix + tix;
    return (tail & ~mark) == head ? 0 : c->cap;
  }
}


// Buffered channel, lock held: stores the waiting flags from the queues.
inline void publish_waiting(ChanCore* c) {
  uint32_t r = c->recvq.empty() ? 0 : 1;
  uint32_t s = c->sendq.empty() ? 0 : 1;
  if (c->recv_waiting.load(std::memory_order_relaxed) != r) {
    c->recv_waiting.store(r, r ? std::memory_order_seq_cst : std::memory_order_relaxed);
  }
  if (c->send_waiting.load(std::memory_order_relaxed) != s) {
    c->send_waiting.store(s, s ? std::memory_order_seq_cst : std::memory_order_relaxed);
  }
}

// Buffered channel, lock held: serves queued waiters from and into the
// ring (see the top of this file), then publishes the flags.
void settle(ChanCore* c, WakeList* wl);

// After a lock-free send / receive: wakes whoever waits for it, if anyone.
void notify_receivers(ChanCore* c);
void notify_senders(ChanCore* c);

}  // namespace gort::internal

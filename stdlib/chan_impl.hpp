// stdlib/chan_impl.hpp — the channel's innards, shared by chan.cpp and
// select.cpp (Go's hchan and sudog).
//
// Invariants (Go's chan.go), under ChanCore::lock:
//   - at least one of sendq and recvq is empty, except for an unbuffered
//     channel with a single goroutine blocked in select on both sending and
//     receiving on it;
//   - buffered: count > 0 implies recvq is empty; count < cap implies sendq
//     is empty;
//   - once closed, sendq and recvq are empty and stay so.
// A Waiter lives on the blocked goroutine's (or thread's) stack. The waker
// takes it off the queue under the lock, fills in the result, releases the
// lock and only then wakes the owner; the owner does not return before it
// is woken, so the record stays valid for the waker.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gmp/g.hpp"
#include "gmp/note.hpp"
#include "gort/detail/chan_core.hpp"

#include <cstring>

namespace gort::internal {

struct Waiter {
  G* g = nullptr;          // the parked goroutine, or null for a plain thread
  Note* note = nullptr;    // a plain thread sleeps here
  Waiter* next = nullptr;
  Waiter* prev = nullptr;
  void* elem = nullptr;    // value to send / storage to receive into
  ChanCore* c = nullptr;
  // Shared by all the Waiters of one select: the first waker to flip it
  // from 0 to 1 wins; the others skip this Waiter.
  std::atomic<uint32_t>* select_done = nullptr;
  // Where the waker records which Waiter of a select won.
  Waiter** won = nullptr;
  int case_index = 0;
  bool success = false;    // woken by a transfer (true) or by close (false)
  bool queued = false;
};

struct WaitQ {
  Waiter* first = nullptr;
  Waiter* last = nullptr;

  bool empty() const { return first == nullptr; }
  void push(Waiter* w) {
    w->next = nullptr;
    w->prev = last;
    if (last) last->next = w; else first = w;
    last = w;
    w->queued = true;
  }
  void remove(Waiter* w) {
    if (w->prev) w->prev->next = w->next; else first = w->next;
    if (w->next) w->next->prev = w->prev; else last = w->prev;
    w->next = w->prev = nullptr;
    w->queued = false;
  }
  // Takes the first Waiter that can still be woken (select Waiters whose
  // select already completed are dropped).
  Waiter* dequeue() {
    while (Waiter* w = first) {
      remove(w);
      if (w->select_done != nullptr) {
        uint32_t expected = 0;
        if (!w->select_done->compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
          continue;
        }
      }
      return w;
    }
    return nullptr;
  }
};

struct ChanCore {
  std::atomic<int64_t> refs{1};
  std::atomic<uint32_t> lock{0};
  bool closed = false;
  size_t cap = 0;
  std::atomic<size_t> count{0};
  size_t sendx = 0;
  size_t recvx = 0;
  size_t slot_size = 0;
  const ElemType* et = nullptr;
  WaitQ recvq;
  WaitQ sendq;
  char* buf = nullptr;

  char* slot(size_t i) { return buf + i * slot_size; }
};

// Wakes the owner of a dequeued Waiter (goroutine or plain thread).
void wake(Waiter* w);
// Receives from sender s (already dequeued) into out. Lock held.
void recv_from_sender(ChanCore* c, Waiter* s, void* out);
// Moves from a buffered slot into out. Lock held, count > 0.
void recv_from_buffer(ChanCore* c, void* out);
// Moves elem into a buffered slot. Lock held, count < cap.
void send_to_buffer(ChanCore* c, void* elem);

// Blocks the caller until woken: parks a goroutine (unlock runs after the
// switch) or sleeps a plain thread on w->note (unlock runs first).
void block_waiter(Waiter* w, bool (*unlock)(G*, void*), void* arg, WaitReason reason);

// Moves an element (dst is uninitialised). Trivial types are copied here,
// with a fixed-size copy for the common sizes, instead of through the
// type's function pointer.
inline void elem_move(const ElemType* et, void* dst, void* src) {
  if (et->trivial) {
    switch (et->size) {
      case 0: return;
      case 1: std::memcpy(dst, src, 1); return;
      case 2: std::memcpy(dst, src, 2); return;
      case 4: std::memcpy(dst, src, 4); return;
      case 8: std::memcpy(dst, src, 8); return;
      case 16: std::memcpy(dst, src, 16); return;
      default: std::memcpy(dst, src, et->size); return;
    }
  }
  et->move_to(dst, src);
}

inline void elem_destroy(const ElemType* et, void* p) {
  if (!et->trivial) et->destroy(p);
}

}  // namespace gort::internal

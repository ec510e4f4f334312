// stdlib/sync/chan.cpp — Go's channels (runtime/chan.go), type-erased.
//
// Unbuffered channels follow chan.go under the channel lock. Buffered ones
// go through the lock-free ring and take the lock only to park, to wake a
// parked partner, or to close; the protocol is at the top of
// stdlib/sync/chan_ring.hpp.
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "gmp/bubble.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/race/sanitizer.hpp"
#include "gmp/sched.hpp"
#include "gmp/stack.hpp"
#include "gmp/tls.hpp"
#include "gmp/trace.hpp"
#include "stdlib/sync/chan_core.hpp"
#include "stdlib/sync/chan_ring.hpp"

namespace gort::internal {
namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Go's maxAlloc: no single allocation can be larger than the user address
// space (47 bits on x86-64 Linux with 4-level page tables).
constexpr size_t kMaxAlloc = sizeof(void*) == 8 ? size_t{1} << 47 : size_t{1} << 31;

// The core's lines are laid out in chan_core.hpp; the ring starts on the
// line after them.
size_t core_align(const ElemType* et) {
  return et->align > kCacheLine ? et->align : kCacheLine;
}

// A channel whose ring is larger than this is mapped on its own (mmap):
// fresh anonymous pages read as zero and cost nothing until a value first
// reaches them (chan_ring.hpp), whatever malloc would do (calloc clears
// what it takes from its heap, and all of it under MALLOC_PERTURB_).
// Smaller ones come from operator new and are zeroed here, which is cheap
// at this size and keeps making a small channel a malloc, not a system
// call. (glibc's malloc maps blocks this large on its own as well.)
constexpr size_t kMappedRing = 256 * 1024;

}  // namespace

ChanCore* chan_make(const ElemType* et, size_t cap) {
  size_t align = core_align(et);
  size_t header = round_up(sizeof(ChanCore), align);
  // A slot: the stamp, then the element at its alignment.
  size_t slot_align = et->align > sizeof(uint64_t) ? et->align : sizeof(uint64_t);
  size_t elem_off = round_up(sizeof(uint64_t), et->align);
  size_t esize = et->size ? et->size : 1;
  size_t slot = 0;
  if (cap > 0) {
    // Go bounds the element bytes by maxAlloc; the ring also spends a stamp
    // and padding per slot, so the bound is on the bytes really allocated.
    // Each step is checked before it could wrap around; a slot must also
    // fit ChanCore::slot_size (32 bits).
    if (esize > kMaxAlloc) throw panic_error("makechan: size out of range");
    slot = round_up(elem_off + esize, slot_align);
    if (slot > UINT32_MAX || cap > (kMaxAlloc - header) / slot) {
      throw panic_error("makechan: size out of range");
    }
  }
  // Under the bound but more than the system will give (overcommit policy,
  // RLIMIT_AS): the caller's capacity is still what is wrong, and a panic
  // is what the caller can recover from.
  size_t ring = slot * cap;
  void* mem;
  size_t mapped = 0;
  if (ring <= kMappedRing || align > page_size()) {
    try {
      mem = ::operator new(header + ring, std::align_val_t(align));
    } catch (const std::bad_alloc&) {
      throw panic_error("makechan: size out of range");
    }
    std::memset(static_cast<char*>(mem) + header, 0, ring);
  } else {
    mapped = round_up(header + ring, page_size());
    mem = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) throw panic_error("makechan: size out of range");
    // Values in the ring may own heap memory: LeakSanitizer must scan it
    // as it scans the heap (a mapping is not).
    lsan_register_root(mem, mapped);
  }
  auto* c = new (mem) ChanCore;
  c->cap = cap;
  c->et = et;
  c->buf = static_cast<char*>(mem) + header;
  c->mapped_bytes = mapped;
  c->bubble_id = current_bubble_id();
  if (cap > 0) {
    c->slot_size = static_cast<uint32_t>(slot);
    c->elem_off = static_cast<uint32_t>(elem_off);
    c->mark_bit = std::bit_ceil(uint64_t{cap} + 1);
    // The zeroed ring is ready as it is (chan_ring.hpp: stamps).
  }
  return c;
}

void check_chan_bubble(const ChanCore* c, const char* op) {
  if (current_bubble_id() != c->bubble_id) throw panic_error(std::string(op) + " synctest channel from outside bubble");
}

void chan_retain(ChanCore* c) noexcept { c->refs.fetch_add(1, std::memory_order_relaxed); }

void chan_release(ChanCore* c) noexcept {
  // Whoever drops the last handle destroys the elements still buffered:
  // for the race detector, everything each holder did happens before that
  // (as the acq_rel count orders it for the hardware).
  race_release(&c->refs);
  if (c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  race_acquire(&c->refs);
  if (c->cap > 0) {
    // Nobody else holds the channel, so nothing is in flight.
    size_t n = ring_len(c);
    uint64_t x = c->head.load(std::memory_order_relaxed) & (c->mark_bit - 1);
    for (size_t i = 0; i < n; i++, x = x + 1 == c->cap ? 0 : x + 1) elem_destroy(c->et, c->slot(x) + c->elem_off);
  }
  size_t align = core_align(c->et);
  size_t mapped = c->mapped_bytes;
  c->~ChanCore();
  if (mapped != 0) {
    lsan_unregister_root(c, mapped);
    ::munmap(c, mapped);
  } else {
    ::operator delete(static_cast<void*>(c), std::align_val_t(align));
  }
}

__attribute__((cold, noinline)) void panic_moved_from(const char* op) {
  throw panic_error(std::string(op) + " moved-from gort::Chan");
}

void recv_from_sender(ChanCore* c, Sudog* s, void* out) {
  elem_move(c->et, out, s->elem);
  s->success = true;
}

namespace {

// A Sudog the ring could not serve after all (a lock-free operation got
// there first). A plain one keeps its place; a select's has been won, so
// the select is woken to poll again. (kClosed cannot happen: close empties
// the queues and nobody queues after it; if it did, look again.)
void unserved(WaitQ* q, Sudog* w, RingResult res, WakeList* wl) {
  if (w->select_done == nullptr && res == RingResult::kWouldBlock) {
    q->push_front(w);
  } else {
    w->success = false;
    wl->push(w);
  }
}

// The two sides of a buffered channel. What both do alike (serving queued
// waiters, waking them, the slow path) is written once, as templates
// instantiated per side: no run-time choice of side.
enum class Side { kSend, kRecv };

template <Side s>
WaitQ& queue(ChanCore* c) {
  return s == Side::kSend ? c->sendq : c->recvq;
}

template <Side s>
std::atomic<uint32_t>& waiting(ChanCore* c) {
  return s == Side::kSend ? c->send_waiting : c->recv_waiting;
}

template <Side s>
RingResult ring_op(ChanCore* c, void* elem) {
  return s == Side::kSend ? ring_send(c, elem) : ring_recv(c, elem);
}

// Lock held: serves side s's queued waiters through the ring until it
// would block. Returns whether anyone was served.
template <Side s>
bool serve(ChanCore* c, WakeList* wl) {
  bool moved = false;
  while (Sudog* w = queue<s>(c).dequeue()) {
    if (RingResult res = ring_op<s>(c, w->elem); res != RingResult::kOk) {
      unserved(&queue<s>(c), w, res, wl);
      break;
    }
    w->success = true;
    wl->push(w);
    moved = true;
  }
  return moved;
}

// After a lock-free operation on the other side: wakes side s's parked
// waiters it lets through, if its flag says there are any.
template <Side s>
void notify(ChanCore* c) {
  if (waiting<s>(c).load(std::memory_order_seq_cst) == 0) return;
  WakeList wl;
  c->lock.lock();
  settle(c, &wl);
  c->lock.unlock();
  wl.wake_all();
}

}  // namespace

void settle(ChanCore* c, WakeList* wl) {
  for (bool moved = true; moved;) {
    moved = serve<Side::kRecv>(c, wl);
    if (serve<Side::kSend>(c, wl)) moved = true;
  }
  publish_waiting(c);
}

void notify_receivers(ChanCore* c) { notify<Side::kRecv>(c); }

void notify_senders(ChanCore* c) { notify<Side::kSend>(c); }

namespace {

// Queues the caller on q (c locked), releases the lock and blocks until a
// partner or close wakes it. Returns whether a value was transferred.
bool wait_on(ChanCore* c, WaitQ* q, void* elem, WaitReason reason) ABSL_UNLOCK_FUNCTION(c->lock) {
  Note note;
  Sudog w{.g = getg(), .note = &note, .elem = elem, .c = c};
  if (!may_wait(w)) [[unlikely]] {
    c->lock.unlock();
    thread_wait_outside_run(reason);
  }
  q->push(&w);
  sudog_block(&w, &park_unlock<decltype(c->lock)>, &c->lock, reason);
  released_by_park(c->lock);
  return w.success;
}

// A buffered send or receive that found the ring full or empty: queue up,
// announce it, and look once more before parking (chan_ring.hpp, PARKING).
// Returns true once the value has gone through the ring (or a waker moved
// it), false if the channel is closed (for a receive: and drained).
template <Side s>
bool buffered_slow(ChanCore* c, void* elem) {
  const WaitReason kReason = chan_wait_reason(c, s == Side::kSend);
  for (;;) {
    Note note;
    Sudog w{.g = getg(), .note = &note, .elem = elem, .c = c};
    if (!may_wait(w)) [[unlikely]] thread_wait_outside_run(kReason);
    c->lock.lock();
    queue<s>(c).push(&w);
    waiting<s>(c).store(1, std::memory_order_seq_cst);
    RingResult r = ring_op<s>(c, elem);
    if (r != RingResult::kWouldBlock) {
      lifetime_probe();
      queue<s>(c).remove(&w);
      WakeList wl;
      if (r == RingResult::kOk) settle(c, &wl); else publish_waiting(c);
      c->lock.unlock();
      wl.wake_all();
      return r == RingResult::kOk;
    }
    sudog_block(&w, &park_unlock<decltype(c->lock)>, &c->lock, kReason);
    released_by_park(c->lock);
    if (w.success) return true;
    // Closed (or a select-style retry): try the ring again; a receive
    // drains what is left, in flight included.
    r = ring_op<s>(c, elem);
    if (r == RingResult::kOk) {
      lifetime_probe();
      if constexpr (s == Side::kSend) notify_receivers(c); else notify_senders(c);
      return true;
    }
    if (r == RingResult::kClosed) return false;
  }
}

}  // namespace

void chan_send(ChanCore* c, void* elem) {
  GORT_TRACE_BLOCKING_CALL();
  preempt_check_may_park("chan send");
  if (!is_chan(c)) [[unlikely]] {
    if (c != nullptr) panic_moved_from("send on");
    block_forever(WaitReason::kChanSendNilChan, "a goroutine blocked forever was woken");
  }
  if (c->bubble_id != 0) [[unlikely]] check_chan_bubble(c, "send on");
  RaceChanOp race(c, true);
  if (c->cap > 0) {
    RingResult r = ring_send(c, elem);
    if (r == RingResult::kOk) {
      lifetime_probe();
      notify_receivers(c);
      return;
    }
    if (r == RingResult::kClosed) throw panic_error("send on closed channel");
    if (!buffered_slow<Side::kSend>(c, elem)) throw panic_error("send on closed channel");
    return;
  }
  c->lock.lock();
  if (c->closed) {
    c->lock.unlock();
    throw panic_error("send on closed channel");
  }
  if (Sudog* r = c->recvq.dequeue()) {
    // Straight into the receiver's slot; it runs next on this P.
    elem_move(c->et, r->elem, elem);
    r->success = true;
    c->lock.unlock();
    sudog_ready(r);
    return;
  }
  if (!wait_on(c, &c->sendq, elem, chan_wait_reason(c, true))) throw panic_error("send on closed channel");
}

bool chan_recv(ChanCore* c, void* out) {
  GORT_TRACE_BLOCKING_CALL();
  preempt_check_may_park("chan receive");
  if (!is_chan(c)) [[unlikely]] {
    if (c != nullptr) panic_moved_from("receive from");
    block_forever(WaitReason::kChanRecvNilChan, "a goroutine blocked forever was woken");
  }
  if (c->bubble_id != 0) [[unlikely]] check_chan_bubble(c, "receive on");
  RaceChanOp race(c, false);
  if (c->cap > 0) {
    RingResult r = ring_recv(c, out);
    if (r == RingResult::kOk) {
      lifetime_probe();
      notify_senders(c);
      return true;
    }
    if (r == RingResult::kClosed) return false;
    return buffered_slow<Side::kRecv>(c, out);
  }
  c->lock.lock();
  if (Sudog* s = c->sendq.dequeue()) {
    recv_from_sender(c, s, out);
    c->lock.unlock();
    sudog_ready(s);
    return true;
  }
  if (c->closed) {
    c->lock.unlock();
    return false;
  }
  return wait_on(c, &c->recvq, out, chan_wait_reason(c, false));
}

void chan_close(ChanCore* c) {
  preempt_check();
  if (!is_chan(c)) [[unlikely]] {
    if (c != nullptr) panic_moved_from("close of");
    throw panic_error("close of nil channel");
  }
  if (c->bubble_id != 0) [[unlikely]] check_chan_bubble(c, "close of");
  race_release(race_sent(c));  // before every receive that sees the close
  RaceIgnore ignore;
  c->lock.lock();
  if (c->closed) {
    c->lock.unlock();
    throw panic_error("close of closed channel");
  }
  c->closed = true;
  // Buffered: from here on every send's CAS on tail fails (chan_ring.hpp).
  if (c->cap > 0) {
    c->tail.fetch_or(c->mark_bit, std::memory_order_seq_cst);
    lifetime_probe();  // a receiver may see the close without the lock
  }
  // Collect everyone first, wake them after unlocking. On a buffered
  // channel success == false sends them back to the ring, which drains and
  // then reports closed.
  WakeList wl;
  c->recvq.drain(&wl);
  c->sendq.drain(&wl);
  if (c->cap > 0) publish_waiting(c);
  c->lock.unlock();
  wl.wake_all();
}

size_t chan_len(const ChanCore* c) {
  if (!is_chan(c)) [[unlikely]] {
    if (c != nullptr) panic_moved_from("len of");
    return 0;
  }
  return c->cap == 0 || c->timer ? 0 : ring_len(c);
}

size_t chan_cap(const ChanCore* c) {
  if (!is_chan(c)) [[unlikely]] {
    if (c != nullptr) panic_moved_from("cap of");
    return 0;
  }
  return c->timer ? 0 : c->cap;
}

}  // namespace gort::internal

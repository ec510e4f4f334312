// stdlib/chan.cpp — Go's channels (runtime/chan.go), type-erased.
#include <new>

#include "gmp/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "stdlib/chan_impl.hpp"

namespace gort::internal {
namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// The core starts a cache line and the buffer starts the next one(s): the
// lock, indices and queues travel between cores as one line, and a slot
// being written never shares a line with them.
constexpr size_t kCacheLine = 64;

size_t core_align(const ElemType* et) {
  return et->align > kCacheLine ? et->align : kCacheLine;
}

bool never_unlock(G*, void*) { return true; }

[[noreturn]] void block_forever(WaitReason reason) {
  if (getg() == nullptr) {
    // A plain thread blocking forever: sleep for good.
    sched.external_ops.fetch_add(1, std::memory_order_acq_rel);
    Note n;
    n.sleep();
  }
  park(&never_unlock, nullptr, reason);
  fatal("a goroutine blocked forever was woken");
}

}  // namespace

void wake(Waiter* w) {
  if (w->won != nullptr) *w->won = w;
  if (w->g != nullptr) {
    G* g = w->g;
    g->param = w;
    ready(g);
  } else {
    w->note->wakeup();
  }
}

void block_waiter(Waiter* w, bool (*unlock)(G*, void*), void* arg, WaitReason reason) {
  if (w->g != nullptr) {
    park(unlock, arg, reason);
    return;
  }
  // A plain thread: it may wake goroutines later, so while it waits the
  // deadlock detector must not conclude that nothing can happen.
  sched.external_ops.fetch_add(1, std::memory_order_acq_rel);
  unlock(nullptr, arg);
  w->note->sleep();
  sched.external_ops.fetch_sub(1, std::memory_order_acq_rel);
}

ChanCore* chan_make(const ElemType* et, size_t cap) {
  if (cap > (size_t{1} << 40) / (et->size ? et->size : 1)) throw panic_error("makechan: size out of range");
  size_t align = core_align(et);
  size_t header = round_up(sizeof(ChanCore), align);
  size_t slot = round_up(et->size ? et->size : 1, et->align);
  void* mem = ::operator new(header + slot * cap, std::align_val_t(align));
  auto* c = new (mem) ChanCore;
  c->cap = cap;
  c->slot_size = slot;
  c->et = et;
  c->buf = static_cast<char*>(mem) + header;
  return c;
}

void chan_retain(ChanCore* c) { c->refs.fetch_add(1, std::memory_order_relaxed); }

void chan_release(ChanCore* c) {
  if (c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  size_t n = c->count.load(std::memory_order_relaxed);
  for (size_t i = 0, x = c->recvx; i < n; i++, x = (x + 1) % c->cap) elem_destroy(c->et, c->slot(x));
  size_t align = core_align(c->et);
  c->~ChanCore();
  ::operator delete(static_cast<void*>(c), std::align_val_t(align));
}

void recv_from_buffer(ChanCore* c, void* out) {
  char* s = c->slot(c->recvx);
  elem_move(c->et, out, s);
  elem_destroy(c->et, s);
  if (++c->recvx == c->cap) c->recvx = 0;
  c->count.store(c->count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

void send_to_buffer(ChanCore* c, void* elem) {
  elem_move(c->et, c->slot(c->sendx), elem);
  if (++c->sendx == c->cap) c->sendx = 0;
  c->count.store(c->count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void recv_from_sender(ChanCore* c, Waiter* s, void* out) {
  if (c->cap == 0) {
    elem_move(c->et, out, s->elem);
  } else {
    // The buffer is full: take its head, and put the sender's value in the
    // slot that frees (the tail, since the buffer is full).
    char* slot = c->slot(c->recvx);
    elem_move(c->et, out, slot);
    elem_destroy(c->et, slot);
    elem_move(c->et, slot, s->elem);
    if (++c->recvx == c->cap) c->recvx = 0;
    c->sendx = c->recvx;
  }
  s->success = true;
}

namespace {

// Queues the caller on q (c locked), releases the lock and blocks until a
// partner or close wakes it. Returns whether a value was transferred.
bool wait_on(ChanCore* c, WaitQ* q, void* elem, WaitReason reason) {
  Note note;
  Waiter w;
  w.g = getg();
  w.note = &note;
  w.elem = elem;
  w.c = c;
  q->push(&w);
  block_waiter(&w, &park_unlock_word, &c->lock, reason);
  return w.success;
}

}  // namespace

void chan_send(ChanCore* c, void* elem) {
  preempt_check();
  if (c == nullptr) block_forever(WaitReason::kChanSendNilChan);
  lock_word(&c->lock);
  if (c->closed) {
    unlock_word(&c->lock);
    throw panic_error("send on closed channel");
  }
  if (Waiter* r = c->recvq.dequeue()) {
    // Straight into the receiver's slot; it runs next on this P.
    elem_move(c->et, r->elem, elem);
    r->success = true;
    unlock_word(&c->lock);
    wake(r);
    return;
  }
  if (c->count.load(std::memory_order_relaxed) < c->cap) {
    send_to_buffer(c, elem);
    unlock_word(&c->lock);
    return;
  }
  if (!wait_on(c, &c->sendq, elem, WaitReason::kChanSend)) throw panic_error("send on closed channel");
}

bool chan_recv(ChanCore* c, void* out) {
  preempt_check();
  if (c == nullptr) block_forever(WaitReason::kChanRecvNilChan);
  lock_word(&c->lock);
  if (Waiter* s = c->sendq.dequeue()) {
    recv_from_sender(c, s, out);
    unlock_word(&c->lock);
    wake(s);
    return true;
  }
  if (c->count.load(std::memory_order_relaxed) > 0) {
    recv_from_buffer(c, out);
    unlock_word(&c->lock);
    return true;
  }
  if (c->closed) {
    unlock_word(&c->lock);
    return false;
  }
  return wait_on(c, &c->recvq, out, WaitReason::kChanRecv);
}

void chan_close(ChanCore* c) {
  if (c == nullptr) throw panic_error("close of nil channel");
  lock_word(&c->lock);
  if (c->closed) {
    unlock_word(&c->lock);
    throw panic_error("close of closed channel");
  }
  c->closed = true;
  // Collect everyone first, wake them after unlocking.
  Waiter* wake_list = nullptr;
  while (Waiter* w = c->recvq.dequeue()) {
    w->success = false;
    w->next = wake_list;
    wake_list = w;
  }
  while (Waiter* w = c->sendq.dequeue()) {
    w->success = false;
    w->next = wake_list;
    wake_list = w;
  }
  unlock_word(&c->lock);
  while (Waiter* w = wake_list) {
    wake_list = w->next;
    wake(w);
  }
}

size_t chan_len(const ChanCore* c) {
  return c == nullptr ? 0 : c->count.load(std::memory_order_relaxed);
}

size_t chan_cap(const ChanCore* c) { return c == nullptr ? 0 : c->cap; }

}  // namespace gort::internal

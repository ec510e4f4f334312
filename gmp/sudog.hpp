// gmp/sudog.hpp — Go's sudog and waitq: the one record anything blocked
// waits in, and the one way it blocks and is woken.
//
// Channels, select, the runtime semaphore under Mutex/RWMutex/WaitGroup
// (Sema), Cond's notify list and gort::Semaphore all queue a Sudog and
// block in sudog_block; their wakers take it off the queue under the
// object's lock, fill in the result, release the lock and only then call
// sudog_ready. The owner does not return before it is woken, so the record
// (on its stack) stays valid for the waker until sudog_ready.
//
// A goroutine parks. A plain thread (no goroutine) sleeps on its Sudog's
// Note, and is counted in Runtime::external_ops meanwhile: it may send, close
// or release later, so while it waits the deadlock detector must not
// conclude that nothing can happen (gmp/diag/fatal.cpp, check_dead_locked).
//
// Costs: sudog_block and sudog_ready are a park and a ready for a
// goroutine; a futex wait and wake for a thread. No allocation.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gmp/os/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/g.hpp"
#include "gmp/os/note.hpp"
#include "gmp/tls.hpp"
#include "gort/detail/race.hpp"
#include "gort/detail/waitq.hpp"

namespace gort::internal {

struct ChanCore;

struct Sudog {
  G* g = nullptr;        // the blocked goroutine, or null for a plain thread
  Note* note = nullptr;  // where a plain thread sleeps
  Sudog* next = nullptr;
  Sudog* prev = nullptr;
  // Where walk_back (WaitQ::drain, WakeList::push_detached) prefetches: the
  // Sudog this thread queued kHintDistance pushes before this one (M::pushed),
  // on a long queue as a rule the one that many places further on in the walk.
  // Copied, never dereferenced: it may have left its queue and its stack since
  // (a prefetch of memory that is gone is harmless).
  Sudog* hint = nullptr;
  // Channels: the value to send, or where to receive into. gort::Semaphore:
  // the channel a context-aware acquire is told through.
  void* elem = nullptr;
  ChanCore* c = nullptr;  // select: the case's channel
  // Shared by all the Sudogs of one select: the first waker to flip it from
  // 0 to 1 wins; the others skip this Sudog (WaitQ::dequeue).
  std::atomic<uint32_t>* select_done = nullptr;
  // Where the waker records which Sudog of a select won.
  Sudog** won = nullptr;
  int64_t n = 0;        // gort::Semaphore: the units asked for
  uint32_t ticket = 0;  // NotifyList: the ticket waited for
  int case_index = 0;   // select: the case this Sudog stands for
  // What the waker says happened. Channels: woken by a transfer (true) or
  // by close (false; on a buffered channel "look again", chan_ring.hpp).
  // Sema: the count was handed over. gort::Semaphore: the units were granted.
  bool success = false;
  bool queued = false;
};

// Whether the caller may wait: a goroutine always may; a plain thread only
// while a run is active, since outside one no goroutine exists that could
// ever wake it (docs/standard-cpp.md). Every caller of sudog_block asks
// first, before it queues its Sudog, releasing its lock and calling
// thread_wait_outside_run when the answer is no.
bool thread_may_wait();
inline bool may_wait(const Sudog& s) { return s.g != nullptr || thread_may_wait(); }
// Throws panic_error: "<Go's wait reason>: the runtime is not running (call
// it inside gort::run)", the text gort::go gives.
[[noreturn, gnu::cold]] void thread_wait_outside_run(WaitReason reason);

// Blocks the owner of s (s->g, or the calling plain thread, which must have
// set s->note) until sudog_ready(s). `unlock(g, arg)` releases the lock the
// caller queued s under: for a goroutine once its context is saved (park's
// unlock function, which returns true), for a thread before it sleeps.
void sudog_block(Sudog* s, bool (*unlock)(G*, void*), void* arg, WaitReason reason);

// Blocks the caller for good, counted as any other waiter (a nil channel, a
// select with no cases, a request nothing can grant): no Sudog is queued,
// so nothing wakes it. If something does, dies with `woken`.
[[noreturn]] void block_forever(WaitReason reason, const char* woken);

// Wakes the owner of s: records s in *s->won and in the goroutine's param
// (select), then readies the goroutine or wakes the thread. s may be gone
// once this returns.
void sudog_ready(Sudog* s);

// Calls take(s) for each Sudog of a queue from `last` back to the front,
// each one's prev read before take may unlink it. Each Sudog lies on its
// own goroutine's stack page, so a plain walk is a chain of cache and TLB
// misses, one per Sudog, each known only once the one before it has
// arrived (closing a channel with 100,000 receivers spent a quarter of its
// wake-up here); each names one some 16 places further on (Sudog::hint),
// fetched while the walk gets there.
template <typename Take>
inline void walk_back(Sudog* last, Take take) {
  for (Sudog* s = last; s != nullptr;) {
    if (Sudog* h = s->hint) __builtin_prefetch(h, 1);
    Sudog* prev = s->prev;
    take(s);
    s = prev;
  }
}

// Sudogs to wake once the locks are released. Kept in an array (eight
// inline, then on the heap), not linked through the Sudogs: each Sudog
// lies on its goroutine's stack page, so a linked walk over many of them
// (close of a channel with a million receivers, notify_all) is a chain of
// TLB misses, while an array lets the walk prefetch the ones ahead. Woken
// last-pushed first.
struct WakeList {
  WakeList() = default;
  WakeList(const WakeList&) = delete;
  WakeList& operator=(const WakeList&) = delete;
  ~WakeList() {
    if (v_ != inline_) std::free(v_);
  }
  void push(Sudog* s) {
    if (n_ == cap_) [[unlikely]] grow();
    v_[n_++] = s;
  }
  // The array part, in push order.
  size_t size() const { return n_; }
  Sudog* operator[](size_t i) const { return v_[i]; }
  // Pushes a queue detached whole (WaitQ::take_all) from its last Sudog
  // back, so that it is woken in queue order. The Sudogs are left as they
  // were.
  void push_detached(Sudog* last) {
    walk_back(last, [this](Sudog* s) { push(s); });
  }
  void wake_all() {
    // Two stages: the Sudog 16 ahead (its page's TLB entry and its line),
    // then the G of the one 8 ahead, read from its Sudog fetched by then.
    constexpr size_t kAhead = 8;
    while (n_ > 0) {
      size_t i = --n_;
      if (i >= 2 * kAhead) __builtin_prefetch(v_[i - 2 * kAhead], 1);
      if (i >= kAhead) {
        if (G* g = v_[i - kAhead]->g) __builtin_prefetch(g, 1);
      }
      sudog_ready(v_[i]);
      // Waking a million goroutines takes a while: the waker yields when
      // sysmon asks, as at any gort call (no lock is held here), so its P
      // runs what it has readied meanwhile. Not in the race build, whose
      // callers look away from TSan (RaceIgnore) around this loop.
      if constexpr (!kRaceEnabled) {
        if ((i & (kYieldEvery - 1)) == 0 && i != 0) preempt_check();
      }
    }
  }

 private:
  void grow() {
    size_t cap = cap_ * 4;
    auto* v = static_cast<Sudog**>(std::malloc(cap * sizeof(Sudog*)));
    if (v == nullptr) fatal("out of memory waking goroutines");
    std::memcpy(v, v_, n_ * sizeof(Sudog*));
    if (v_ != inline_) std::free(v_);
    v_ = v;
    cap_ = cap;
  }

  static constexpr size_t kInline = 8;
  static constexpr size_t kYieldEvery = 1024;
  Sudog* inline_[kInline];
  Sudog** v_ = inline_;
  size_t n_ = 0;
  size_t cap_ = kInline;
};

// ---- WaitQ (gort/detail/waitq.hpp): a FIFO of Sudogs ----

inline void WaitQ::push(Sudog* s) noexcept {
  if (M* m = getm()) {
    Sudog*& slot = m->pushed[m->npushed++ % kHintDistance];
    s->hint = slot;
    slot = s;
  } else {
    s->hint = nullptr;
  }
  s->next = nullptr;
  s->prev = last;
  if (last) last->next = s; else first = s;
  last = s;
  s->queued = true;
}

// At the front: a Sudog that was dequeued but could not be served gets its
// place back; Sema's LIFO waiters.
inline void WaitQ::push_front(Sudog* s) noexcept {
  s->hint = nullptr;  // out of push order: no prefetch for it
  s->prev = nullptr;
  s->next = first;
  if (first) first->prev = s; else last = s;
  first = s;
  s->queued = true;
}

inline void WaitQ::remove(Sudog* s) noexcept {
  if (s->prev) s->prev->next = s->next; else first = s->next;
  if (s->next) s->next->prev = s->prev; else last = s->prev;
  s->next = s->prev = nullptr;
  s->queued = false;
}

// Whether a waker taking s off its queue may wake it: always, unless s
// belongs to a select, which only the first of its cases' wakers wins.
inline bool sudog_claim(Sudog* s) noexcept {
  if (s->select_done == nullptr) return true;
  uint32_t expected = 0;
  return s->select_done->compare_exchange_strong(expected, 1, std::memory_order_acq_rel);
}

// Takes the first Sudog that can still be woken (select Sudogs whose select
// already completed are dropped).
inline Sudog* WaitQ::dequeue() noexcept {
  while (Sudog* s = first) {
    remove(s);
    if (sudog_claim(s)) return s;
  }
  return nullptr;
}

// Walks back to front (walk_back); the WakeList, woken last-pushed first,
// then wakes in queue order.
inline void WaitQ::drain(WakeList* wl) noexcept {
  Sudog* l = last;
  first = last = nullptr;
  walk_back(l, [wl](Sudog* s) {
    s->next = s->prev = nullptr;
    s->queued = false;
    if (sudog_claim(s)) {
      s->success = false;
      wl->push(s);
    }
  });
}

// Detaches the whole queue and returns its last Sudog (for
// WakeList::push_detached); the Sudogs stay linked, their `queued` flags
// as they were.
inline Sudog* WaitQ::take_all() noexcept {
  Sudog* s = last;
  first = last = nullptr;
  return s;
}

}  // namespace gort::internal

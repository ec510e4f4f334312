// gmp/gdeque.hpp — the scheduler's global G lists (run queue, free Gs) as
// arrays of pointers.
//
// Go links its global run queue and its free-G list through the Gs
// (gQueue, gList), which are dense heap objects there: a few share a page.
// A gort G lives at the top of its own stack, one G per 256 KiB of address
// space, so every G a linked walk visits is a different page: a TLB miss,
// often a cache miss on a page-table page too, and all of it under
// Sched::lock. At a million goroutines the batch takes of the global run
// queue and the free-list refills were a quarter of skynet's time
// (perf: globrunqget_locked, gfget_global_locked), with the other Ms
// waiting on the lock meanwhile. GDeque keeps the pointers in chunks of
// kChunkCap, so moving a batch reads and writes only the chunks; the Gs are
// touched later by whoever runs or reuses them, outside the lock.
//
// A deque: the run queue is a FIFO (push_back, pop_front); the free list
// reuses at the back, the G that died last and whose page is warmest (as
// Go's gfget), and the scavenger releases the oldest from the front.
//
// Costs: a chunk (4 KiB) is allocated once per kChunkCap pushes past the
// one spare chunk kept, and freed when it empties (again keeping one), so a
// queue that goes up and down by less than a chunk never allocates. Not
// thread-safe: the owner's lock guards it (Sched::lock for both lists).
#pragma once

#include "gmp/room.hpp"

#include <cstdint>

#include "gmp/g.hpp"

namespace gort::internal {

class GDeque {
 public:
  GDeque() = default;
  ~GDeque() { clear(); }
  GDeque(const GDeque&) = delete;
  GDeque& operator=(const GDeque&) = delete;

  bool empty() const { return size_ == 0; }
  int32_t size() const { return size_; }
  // The G pop_front would return, or null.
  G* front() const { return size_ == 0 ? nullptr : head_->g[head_->begin]; }

  void push_back(G* g) {
    if (tail_ == nullptr || tail_->end == kChunkCap) append_chunk();
    tail_->g[tail_->end++] = g;
    size_++;
  }
  // Appends q's Gs in order and empties q (it walks q: its Gs were just
  // touched by whoever built it).
  void push_back_all(GQueue* q) {
    while (G* g = q->pop()) push_back(g);
  }
  G* pop_front() {
    if (size_ == 0) return nullptr;
    G* g = head_->g[head_->begin++];
    size_--;
    if (head_->begin == head_->end) drop_head();
    return g;
  }
  G* pop_back() {
    if (size_ == 0) return nullptr;
    G* g = tail_->g[--tail_->end];
    size_--;
    if (tail_->begin == tail_->end) drop_tail();
    return g;
  }
  // Frees every chunk (the Gs are the caller's).
  void clear();

 private:
  static constexpr int32_t kChunkCap = 509;
  struct Chunk {
    Chunk* prev;
    Chunk* next;
    int32_t begin;  // [begin, end) of g holds Gs
    int32_t end;
    G* g[kChunkCap];
  };
  static_assert(sizeof(Chunk) == 4096);

  void append_chunk();
  void drop_head();
  void drop_tail();
  Chunk* new_chunk();
  void free_chunk(Chunk* c);

  Chunk* head_ = nullptr;
  Chunk* tail_ = nullptr;
  Chunk* spare_ = nullptr;
  int32_t size_ = 0;
};

}  // namespace gort::internal

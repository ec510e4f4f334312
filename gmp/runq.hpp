// gmp/runq.hpp — a P's local run queue.
//
// A fixed ring of kRunqSize G pointers with one producer (the owning P) and
// any number of consumers (the owner and thieves), plus the `runnext` slot
// for the G readied most recently by the running G: a ping-pong pair keeps
// handing the P to each other through runnext and never migrates.
//
// Protocol (the one Go's proc.go uses for runqput/runqget/runqgrab):
//   - only the owner writes `tail_`, with release order after storing the
//     slot, so a consumer that reads tail with acquire sees the slot;
//   - every consumer takes Gs by CAS on `head_`; a thief copies the slots it
//     wants *before* its CAS, so a slot it read and then lost the race for is
//     simply discarded;
//   - the owner never overwrites a slot in [head, tail): it checks
//     tail - head < kRunqSize against a fresh acquire load of head.
// When the ring is full the owner moves half of it, plus the new G, to the
// global queue in one batch (put_slow), so a spawning loop costs one global
// lock per kRunqSize/2 spawns.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>

#include "gmp/g.hpp"
#include "gort/detail/race.hpp"

namespace gort::internal {

#ifndef GORT_RUNQ_SIZE
inline constexpr uint32_t kRunqSize = 256;
#else
inline constexpr uint32_t kRunqSize = GORT_RUNQ_SIZE;
#endif
static_assert((kRunqSize & (kRunqSize - 1)) == 0, "kRunqSize must be a power of two");

// Where put() places a G: at the tail of the ring, or in runnext (run it
// next, as Go's runqput(pp, gp, next=true)).
enum class RunqAt : bool { kTail = false, kNext = true };

class Runq {
 public:
  // Owner only. Puts g at the tail, or in runnext for RunqAt::kNext (the G
  // that was in runnext is then kicked to the tail). Returns false and
  // fills *overflow with half of the queue plus the kicked G when the ring
  // is full; the caller then moves *overflow to the global queue.
  bool put(G* g, RunqAt at, GQueue* overflow, bool exclusive = false);

  // Owner only. runnext first, then the head of the ring. `exclusive`:
  // the caller knows no thief can exist (the runtime has a single P), so
  // plain stores replace the CASes.
  // *from_next (if given) tells whether the G came from runnext.
  G* get(bool exclusive = false, bool* from_next = nullptr);

  // Any thread. Moves about half of this queue to `dst` (owned by the
  // caller) and returns one G to run, or null. Takes runnext too when
  // `steal_next` and the ring is empty; if `victim_running`, it first
  // sleeps a few microseconds, since the victim is probably about to run
  // that G itself (a hand-off partner it just readied).
  G* steal_into(Runq* dst, bool steal_next, bool victim_running = false);

  // Any thread; a snapshot.
  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire) &&
           runnext_.load(std::memory_order_acquire) == nullptr;
  }
  // The ring alone, without runnext (what Go's schedtrace calls the queue's
  // length). A consistent snapshot: head is read again after tail, and the
  // pair is used only if head did not move in between (a reader descheduled
  // between two plain loads would count every put and get made meanwhile).
  uint32_t ring_size() const {
    for (;;) {
      uint32_t h = head_.load(std::memory_order_acquire);
      uint32_t t = tail_.load(std::memory_order_acquire);
      if (head_.load(std::memory_order_acquire) == h) return t - h;
    }
  }
  uint32_t size() const { return ring_size() + (runnext_.load(std::memory_order_relaxed) ? 1 : 0); }

  // Owner only, with the world stopped or at shutdown: empties everything.
  void drain(GQueue* out);

 private:
  // Starts fetching what the next Gs to run will touch: each G is on its
  // own stack page, so switching to it is a TLB miss and then a cache miss
  // per line of its frames as it returns through them (a million
  // goroutines readied at once run one after the other from here). Two
  // stages: the G two slots after h (its page's TLB entry and its line),
  // and the top of the saved frames of the G one after h, found through
  // its ctx, which the previous call fetched. The slots may be stale or
  // empty: a prefetch never faults, and a stale G's ctx is still mapped
  // memory (stacks are unmapped only when the run ends); in the race build,
  // where that read would be a report, only the first stage.
  void prefetch_after(uint32_t h, uint32_t t) const {
    __builtin_prefetch(buf_[(h + 2) % kRunqSize].load(std::memory_order_relaxed));
    if constexpr (!kRaceEnabled) {
      if (h + 1 == t) return;
      const G* g = buf_[(h + 1) % kRunqSize].load(std::memory_order_relaxed);
      if (g == nullptr) return;
      const char* sp = static_cast<const char*>(__atomic_load_n(&g->ctx, __ATOMIC_RELAXED));
      if (sp == nullptr) return;
      for (int i = 0; i < kPrefetchFrameLines; i++) __builtin_prefetch(sp + 64 * i);
    }
  }
  static constexpr int kPrefetchFrameLines = 16;

  alignas(64) std::atomic<uint32_t> head_{0};
  alignas(64) std::atomic<uint32_t> tail_{0};
  std::atomic<G*> runnext_{nullptr};
  std::atomic<G*> buf_[kRunqSize] = {};
};

}  // namespace gort::internal

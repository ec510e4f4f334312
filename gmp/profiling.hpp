// gmp/profiling.hpp — where the profilers (stdlib/pprof/, Go's runtime/pprof)
// reach into the core, and the label set a goroutine carries
// (docs/tracing-and-profiling.md).
//
// The core knows nothing of profiles: stdlib/pprof/ sets a switch and an
// entry point here, and the core calls the entry point when the switch is
// on. What each costs while its profile is off:
//
//   | hook              | read by                                  | cost while off                  |
//   |-------------------|------------------------------------------|---------------------------------|
//   | block_rate/_event | park (gmp/park.cpp)                      | a relaxed load, a branch        |
//   | mutex_rate/_event | Mutex::lock_slow, RWMutex's waits        | a relaxed load, a branch, on    |
//   |                   | (stdlib/sync/mutex.cpp), pthread_mutex_  | the contended path only         |
//   |                   | lock (preempt/oslock.cpp)                |                                 |
//   | m_start           | minit (gmp/idle.cpp), once per M thread  | a load, a branch                |
//   | G::labels         | newproc_alloc, goroutine_main's exit     | a load, a branch (null: no      |
//   |                   |                                          | labels were ever set)           |
//
// Labels (Go's pprof.Do): a goroutine's label set is immutable and
// reference-counted. G::labels holds one reference; `go` gives the child
// another (newproc_alloc), and the goroutine's exit drops its own. Only
// the goroutine itself replaces its set (stdlib/pprof/labels.cpp); other
// threads read the pointer (a goroutine profile) and the set's last
// release hands it to stdlib/pprof/, which keeps it alive while a profile
// may still hold the pointer.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>

#include "gmp/g.hpp"

namespace gort::internal {

struct M;

// The head of a label set; stdlib/pprof/labels.cpp owns the rest of it.
struct GLabels {
  std::atomic<int64_t> refs{1};
  // Called at the last unref, on whatever thread made it.
  void (*release)(GLabels* self) = nullptr;
};

inline void glabels_ref(GLabels* l) { l->refs.fetch_add(1, std::memory_order_relaxed); }
inline void glabels_unref(GLabels* l) {
  if (l->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) l->release(l);
}

// The switches and entry points (0 / null: the profile is off). The entry
// point is stored before the switch is turned on, so a reader that sees the
// switch on finds it.
struct alignas(64) Profiling {
  // The block profile's rate (Go's SetBlockProfileRate, in nanoseconds).
  std::atomic<int64_t> block_rate{0};
  // On the goroutine, after a park that began at nanotime t0 for r.
  std::atomic<void (*)(int64_t t0, WaitReason r)> block_event{nullptr};
  // The mutex profile's fraction (Go's SetMutexProfileFraction).
  std::atomic<int32_t> mutex_rate{0};
  // On the thread that waited delay_ns for a contended lock it now holds.
  std::atomic<void (*)(int64_t delay_ns)> mutex_event{nullptr};
  // The CPU profile: on each M's thread once it is set up (minit).
  std::atomic<void (*)(M* m)> m_start{nullptr};
};
extern Profiling profiling;  // gmp/profiling.cpp

// The waits a block profile counts, as Go's (blockevent's callers):
// channels, select and sync's types; not sleeps, timers, I/O, a select
// or a nil channel that waits for ever, nor the runtime's own waits.
constexpr bool wait_reason_blocks(WaitReason r) {
  switch (r) {
    case WaitReason::kChanSend:
    case WaitReason::kChanRecv:
    case WaitReason::kSelect:
    case WaitReason::kSyncMutex:
    case WaitReason::kSyncRWMutex:
    case WaitReason::kSyncWaitGroup:
    case WaitReason::kSyncCond:
    case WaitReason::kSemacquire:
    case WaitReason::kSynctestChanRecv:
    case WaitReason::kSynctestChanSend:
    case WaitReason::kSynctestSelect:
    case WaitReason::kSynctestWaitGroup:
    case WaitReason::kSynctestMutex:
    case WaitReason::kSynctestRWMutex:
    case WaitReason::kSynctestSemacquire:
      return true;
    default:
      return false;
  }
}

// newproc_alloc: g (not yet published) starts with its creator's labels.
inline void labels_inherit(G* g, const G* parent) {
  GLabels* l = parent != nullptr ? parent->labels : nullptr;
  if (l != nullptr) [[unlikely]] glabels_ref(l);
  __atomic_store_n(&g->labels, l, __ATOMIC_RELAXED);
}

// The goroutine's exit (or an aborted spawn) drops its reference. The
// pointer goes first (release): a profile that reads it afterwards finds
// null, one that read it before keeps the set alive (labels.cpp).
inline void labels_drop(G* g) {
  GLabels* l = g->labels;
  __atomic_store_n(&g->labels, nullptr, __ATOMIC_RELEASE);
  glabels_unref(l);
}

}  // namespace gort::internal

// stdlib/pprof/cpu_sampler.hpp — the CPU profile's sampling half, as Go
// 1.18+ samples on Linux: a timer per M on the M's own CPU-time clock
// (timer_create(CLOCK_THREAD_CPUTIME_ID of that thread, SIGEV_THREAD_ID,
// SIGPROF)), so each thread is sampled for the CPU time it uses, however
// many run at once (setitimer's one process-wide timer undercounts them).
//
// Who makes the timers: cpu_sampling_start for every M that has a thread,
// and each M that starts later on its own thread (gmp/profiling.hpp's
// m_start hook, called by minit). Threads that are not Ms (sysmon, the
// stack pool's helper, the program's own threads) get none.
//
// The SIGPROF handler (cpu_sampler.cpp) unwinds the interrupted stack
// (unwind_here.hpp) into the M's ring with the running goroutine's label
// set: no allocation, no lock. One reader drains the rings.
#pragma once

#include "stdlib/pprof/room.hpp"

#include <time.h>

#include <atomic>
#include <cstdint>

#include "gmp/profiling.hpp"

namespace gort::internal {

inline constexpr int kCpuMaxFrames = 64;

struct CpuSample {
  uint32_t n = 0;       // frames in pc, leaf first (unwind_here.hpp's addresses)
  uint32_t weight = 0;  // 1 + the timer's overruns (signals it could not deliver)
  GLabels* labels = nullptr;  // the goroutine's set, or null (g0, no labels)
  uintptr_t pc[kCpuMaxFrames];
};

// One M's samples, a single-producer single-consumer ring: the producer is
// the handler on that M's thread (SIGPROF is blocked while it runs, so it
// never nests), the consumer the profile's reader. At 100 Hz the ring
// holds 1.3 s of one thread's samples; the reader drains it every 50 ms.
struct CpuRing {
  static constexpr uint32_t kSlots = 128;
  uint32_t gen = 0;  // the sampling session it belongs to
  M* m = nullptr;    // whose (with tid: an M is known once)
  int tid = 0;
  timer_t timer{};
  alignas(64) std::atomic<uint32_t> head{0};  // the handler's
  alignas(64) std::atomic<uint32_t> tail{0};  // the reader's
  std::atomic<uint64_t> lost{0};              // samples dropped: the ring was full
  CpuSample slots[kSlots];

  CpuSample* reserve() {
    uint32_t h = head.load(std::memory_order_relaxed);
    if (h - tail.load(std::memory_order_acquire) >= kSlots) return nullptr;
    return &slots[h % kSlots];
  }
  void commit() { head.store(head.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  template <class F>
  void drain(F&& f) {
    uint32_t t = tail.load(std::memory_order_relaxed);
    const uint32_t h = head.load(std::memory_order_acquire);
    for (; t != h; t++) f(slots[t % kSlots]);
    tail.store(t, std::memory_order_release);
  }
};

// Starts sampling every M at hz (session `gen`, non-zero): installs the
// SIGPROF handler the first time, arms a timer per M. Label sets the
// samples point at must be kept alive by the caller (a LabelsHold) until
// the last drain.
void cpu_sampling_start(uint32_t gen, int hz);
// Deletes the timers; once it returns no handler writes a ring.
void cpu_sampling_stop();
// The reader: f(sample) for each sample taken since the last drain, on
// every ring. *lost accumulates the samples dropped meanwhile. One reader
// at a time; valid from start until cpu_sampling_free.
template <class F>
void cpu_sampling_drain(F&& f, uint64_t* lost);
// Frees the rings, after stop and the last drain.
void cpu_sampling_free();

// The rings, for cpu_sampling_drain.
inline constexpr uint32_t kCpuMaxRings = 1 << 14;
extern std::atomic<CpuRing*> g_cpu_rings[kCpuMaxRings];
extern std::atomic<uint32_t> g_cpu_nrings;

template <class F>
void cpu_sampling_drain(F&& f, uint64_t* lost) {
  const uint32_t n = g_cpu_nrings.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; i++) {
    CpuRing* r = g_cpu_rings[i].load(std::memory_order_acquire);
    if (r == nullptr) continue;
    r->drain(f);
    *lost += r->lost.exchange(0, std::memory_order_relaxed);
  }
}

}  // namespace gort::internal

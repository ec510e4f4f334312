// gmp/race/race.cpp — see race.hpp.
#include "gmp/race/race.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>

#include "gmp/os/fatal.hpp"
#include "gmp/race/sanitizer.hpp"

namespace gort::internal {

#ifdef GORT_TSAN_ON

namespace {

std::atomic<int> g_live{0};          // live goroutines' fibers
std::atomic<int64_t> g_created{0};  // fibers created for goroutines

// Finished fibers, oldest first. TSan drops a report whose earlier access
// belongs to a destroyed fiber, so a finished goroutine's fiber is kept
// while kKept others finish after it (the quarantine); then it is spare,
// given to the next new goroutine. Creating a fiber costs TSan ~200 KiB of
// fresh memory to clear, ~1 ms on a host with slow page faults, so up to
// kSpare fibers past the quarantine wait for reuse before one is
// destroyed: a program whose live count swings by a few goroutines (a
// spawner and a worker, say) would otherwise create and destroy a fiber on
// nearly every spawn. A reused fiber keeps its thread id in reports, and
// races between two goroutines that ran on it, kKept goroutines apart, go
// unseen.
constexpr int kKept = 256;
constexpr int kSpare = 256;
constexpr int kRing = kKept + kSpare;
// A spin lock: the runtime's own lock (gmp/lock.hpp) counts itself on the
// M, which this room below the core cannot name; the ring is held for a
// few instructions.
std::atomic<bool> g_kept_lock{false};
void kept_lock() {
  while (g_kept_lock.exchange(true, std::memory_order_acquire)) sched_yield();
}
void kept_unlock() { g_kept_lock.store(false, std::memory_order_release); }
void* g_kept[kRing];
int g_kept_head = 0;  // under g_kept_lock
int g_kept_n = 0;     // under g_kept_lock

void* pop_oldest_locked() {
  void* f = g_kept[g_kept_head];
  g_kept_head = (g_kept_head + 1) % kRing;
  g_kept_n--;
  return f;
}

// TSan's public API has no call that resets its record of a range
// (AnnotateNewMemory does nothing), but its mmap interceptor resets what it
// maps. Ignoring accesses makes it reset the range (fresh shadow pages)
// rather than record a write to all of it. The slab's own flags come back
// (no reservation, no huge pages), so that the kernel merges the new
// mapping with its neighbours instead of splitting the slab's mapping once
// per goroutine.
void map_afresh(char* lo, size_t len) {
  void* r;
  {
    RaceIgnore ignore;
    r = mmap(lo, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  }
  if (r == MAP_FAILED) fatal("race: cannot map a goroutine stack afresh");
  madvise(lo, len, MADV_NOHUGEPAGE);
}

// The lowest resident page of [lo, hi) (page-aligned), or hi if none; lo if
// the kernel cannot tell.
char* lowest_resident(char* lo, char* hi) {
  constexpr size_t kChunk = 256;  // pages per mincore call
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  unsigned char vec[kChunk];
  for (char* p = lo; p < hi;) {
    size_t n = std::min(kChunk, static_cast<size_t>(hi - p) / page);
    // The raw call: nothing of TSan's sees the vector written.
    if (syscall(SYS_mincore, p, n * page, vec) != 0) return lo;
    for (size_t i = 0; i < n; i++) {
      if ((vec[i] & 1) != 0) return p + i * page;
    }
    p += n * page;
  }
  return hi;
}

}  // namespace

// Only what the previous goroutines could have touched needs resetting: a
// page they wrote or read is resident, unless the pool gave it back since,
// and the pool gives pages back through map_afresh in this build
// (tsan_forget_stack), which resets the shadow too. So the slot is mapped
// afresh from its lowest resident page up: a page or two for most
// goroutines, where the whole slot cost a ~1 MiB shadow reset and ~1 ms on
// a host with slow page faults. The G is carried across in words (plain
// loads and stores of uninstrumented code, which TSan does not see; a loop
// the compiler must not turn into a memcpy call, which TSan intercepts).
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void tsan_fresh_stack(char* lo, char* top,
                                                                                   size_t keep) {
  constexpr size_t kMaxWords = kRaceKeepMax / sizeof(uint64_t);
  if (keep > kRaceKeepMax || keep % sizeof(uint64_t) != 0) fatal("race: tsan_fresh_stack: bad keep");
  const size_t words_n = keep / sizeof(uint64_t);
  uint64_t saved[kMaxWords];
  auto* words = reinterpret_cast<volatile uint64_t*>(top - keep);
  for (size_t i = 0; i < words_n; i++) saved[i] = words[i];
  char* from = lowest_resident(lo, top);
  map_afresh(from, static_cast<size_t>(top - from));
  for (size_t i = 0; i < words_n; i++) words[i] = saved[i];
}

void tsan_forget_stack(char* lo, size_t len) { map_afresh(lo, len); }

int64_t tsan_fibers_created() { return g_created.load(std::memory_order_relaxed); }

void tsan_start_fiber(void** fiber, int64_t id, const void* start_sync) {
  if (*fiber != nullptr) return;
  int live = g_live.fetch_add(1, std::memory_order_relaxed) + 1;
  if (live > kRaceLimitGoroutines) [[unlikely]] fatal_user(kRaceLimitText);
  void* reuse = nullptr;
  kept_lock();
  // A spare fiber first; a quarantined one only where another fiber would
  // pass the limit. Only a creation adds to live + kept, and only while
  // that sum is within kRaceLimitGoroutines, so goroutine fibers never
  // take more than that of TSan's room, however many are kept.
  if (g_kept_n > kKept || (g_kept_n > 0 && live + g_kept_n > kRaceLimitGoroutines)) reuse = pop_oldest_locked();
  kept_unlock();
  if (reuse == nullptr) g_created.fetch_add(1, std::memory_order_relaxed);
  *fiber = reuse != nullptr ? reuse : tsan_create_fiber();
  // Reports name the goroutine beside TSan's thread number ("Thread T5
  // 'goroutine 7' ... created by thread T3 at"), as Go's say "Goroutine 7".
  char name[32];
  std::snprintf(name, sizeof name, "goroutine %lld", static_cast<long long>(id));
  __tsan_set_fiber_name(*fiber, name);
  // The goroutine starts after everything its spawner did (goroutine_main
  // acquires): a new fiber would inherit it, a reused one must be told.
  race_release(start_sync);
}

void tsan_release_fiber(void** fiber) {
  void* f = *fiber;
  if (f == nullptr) return;
  *fiber = nullptr;
  void* evict = nullptr;
  kept_lock();
  if (g_kept_n == kRing) evict = pop_oldest_locked();
  g_kept[(g_kept_head + g_kept_n) % kRing] = f;
  g_kept_n++;
  kept_unlock();
  g_live.fetch_sub(1, std::memory_order_relaxed);
  tsan_destroy_fiber(evict);
}

void tsan_abandon_fiber(void** fiber) {
  if (*fiber == nullptr) return;
  *fiber = nullptr;
  g_live.fetch_sub(1, std::memory_order_relaxed);
}

#else

void tsan_fresh_stack(char*, char*, size_t) {}
void tsan_forget_stack(char*, size_t) {}
int64_t tsan_fibers_created() { return 0; }
void tsan_start_fiber(void**, int64_t, const void*) {}
void tsan_release_fiber(void**) {}
void tsan_abandon_fiber(void**) {}

#endif

}  // namespace gort::internal

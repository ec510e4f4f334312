// gmp/race.cpp — see race.hpp.
#include "gmp/race.hpp"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdio>

#include "gmp/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/sanitizer.hpp"
#include "gmp/stack.hpp"

namespace gort::internal {

#ifdef GORT_TSAN_ON

namespace {

std::atomic<int> g_live{0};  // live goroutines' fibers

// Finished fibers, oldest first. TSan drops a report whose earlier access
// belongs to a destroyed fiber, so a finished goroutine's fiber is kept
// while kKept others finish after it; then it is given to a new goroutine
// (creating a fiber costs TSan ~200 KiB of fresh memory to clear, ~10 ms
// on a machine with slow page faults). A reused fiber keeps its thread id
// in reports, and races between two goroutines that ran on it, kKept
// goroutines apart, go unseen.
constexpr int kKept = 256;
std::atomic<uint32_t> g_kept_lock{0};
void* g_kept[kKept];
int g_kept_head = 0;  // under g_kept_lock
int g_kept_n = 0;     // under g_kept_lock

void* pop_oldest_locked() {
  void* f = g_kept[g_kept_head];
  g_kept_head = (g_kept_head + 1) % kKept;
  g_kept_n--;
  return f;
}

}  // namespace

// TSan's public API has no call that resets its record of a range
// (AnnotateNewMemory does nothing), but its mmap interceptor resets what it
// maps: so the slot above the guard is mapped afresh, the G carried across
// in words (plain loads and stores of uninstrumented code, which TSan does
// not see; a loop the compiler must not turn into a memcpy call, which TSan
// intercepts).
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void tsan_fresh_stack(G* g) {
  constexpr size_t kWords = kGSize / sizeof(uint64_t);
  static_assert(kGSize % sizeof(uint64_t) == 0);
  uint64_t saved[kWords];
  auto* words = reinterpret_cast<volatile uint64_t*>(g);
  for (size_t i = 0; i < kWords; i++) saved[i] = words[i];
  char* lo = g->stack_lo + kGuardSize;
  char* top = reinterpret_cast<char*>(g) + kGSize;
  // Ignoring accesses makes the interceptor reset the range (fresh shadow
  // pages) rather than record a write to all of it (1 MiB of shadow).
  void* r;
  {
    RaceIgnore ignore;
    r = mmap(lo, static_cast<size_t>(top - lo), PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  }
  if (r == MAP_FAILED) fatal("race: cannot map a goroutine stack afresh");
  for (size_t i = 0; i < kWords; i++) words[i] = saved[i];
}

void tsan_start_fiber(G* g) {
  if (g->tsan_fiber != nullptr) return;
  int live = g_live.fetch_add(1, std::memory_order_relaxed) + 1;
  if (live > kRaceLimitGoroutines) [[unlikely]] fatal_user(kRaceLimitText);
  void* reuse = nullptr;
  lock_word(&g_kept_lock);
  if (g_kept_n == kKept || (g_kept_n > 0 && live + g_kept_n > kRaceLimitGoroutines)) reuse = pop_oldest_locked();
  unlock_word(&g_kept_lock);
  g->tsan_fiber = reuse != nullptr ? reuse : tsan_create_fiber();
  // Reports name the goroutine beside TSan's thread number ("Thread T5
  // 'goroutine 7' ... created by thread T3 at"), as Go's say "Goroutine 7".
  char name[32];
  std::snprintf(name, sizeof name, "goroutine %lld", static_cast<long long>(g->id));
  __tsan_set_fiber_name(g->tsan_fiber, name);
  // The goroutine starts after everything its spawner did (goroutine_main
  // acquires): a new fiber would inherit it, a reused one must be told.
  race_release(g);
}

void tsan_release_fiber(G* g) {
  void* f = g->tsan_fiber;
  if (f == nullptr) return;
  g->tsan_fiber = nullptr;
  void* evict = nullptr;
  lock_word(&g_kept_lock);
  if (g_kept_n == kKept) evict = pop_oldest_locked();
  g_kept[(g_kept_head + g_kept_n) % kKept] = f;
  g_kept_n++;
  unlock_word(&g_kept_lock);
  g_live.fetch_sub(1, std::memory_order_relaxed);
  tsan_destroy_fiber(evict);
}

#else

void tsan_fresh_stack(G*) {}
void tsan_start_fiber(G*) {}
void tsan_release_fiber(G*) {}

#endif

}  // namespace gort::internal

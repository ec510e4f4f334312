// gmp/stack.hpp — goroutine stacks: slabs of address space with guards.
//
// A stack per mmap with an mprotect'ed guard costs two kernel VMAs, and
// vm.max_map_count (65,530 by default) would cap a program at ~32,000
// goroutines. So stacks are carved out of large slabs (one mmap each) and the
// guard region under each stack is installed with madvise(MADV_GUARD_INSTALL)
// (Linux 6.13+), which does not split the mapping. On older kernels the
// guards fall back to mprotect, and then each stack costs two VMAs again
// (the docs say what that limits).
//
// Slab layout, low to high addresses:
//   [guard | stack 0][guard | stack 1] ... [guard | stack n-1]
// A stack grows down from its top towards its guard; pages are committed
// only when touched (MAP_NORESERVE). The scheduler places each goroutine's
// G in the top kGSize bytes of its stack (g.hpp): the pool itself knows
// nothing of that and hands out and takes back whole slots.
//
// Guards: a slot's guard is installed when the slot is first used (take()),
// and the slot's top page is committed and written right after it; guards
// survive MADV_DONTNEED, so a recycled slot needs nothing. Why not all of a
// slab's guards when it is mapped: under a shadow-paging hypervisor (KVM's
// shadow MMU, as PVM guests run on) the host keeps its own copy of the
// guest's page tables, and when the guest writes the table that maps a
// 1 GiB region three times with no page fault through that region in
// between, the host decides it is no longer a page table and drops its
// translations for the whole GiB. MADV_GUARD_INSTALL on untouched memory is
// such a burst (a new page-table page per 2 MiB, no user access):
// installing a 64 MiB slab's guards at once made every earlier stack in the
// same GiB cost a host fault of ~12 µs on its next access, invisible to the
// guest (1.2 s to wake 100,000 parked goroutines, instead of 7 ms). A user
// write through each new table before the next one is made is the fault
// the heuristic waits for. So fresh slots are prepared in groups that lie
// under one page-table page (2 MiB; stack_group_len): the group's guards in
// one process_madvise, its top pages committed in one (MADV_POPULATE_WRITE:
// the kernel fills them in a loop instead of taking a fault per page),
// then a write to each top. A group adds at most one table before its
// writes; groups of 16 slots, two or three tables, set off the heuristic
// (docs/stacks.md has the measurements). A slot across a table boundary
// goes alone (madvise, populate, write).
//
// Preparing ahead: a new goroutine on a fresh slot pays for the slot's
// guard and the first touch of its top page (~2.5 µs, most of a cold `go`,
// where a fault costs what it does on bare metal; 10–20 µs on a
// shadow-paging host). A helper thread (not an M; all signals blocked)
// does that work on another CPU: it prepares fresh slots, grouped as above, and adds
// them to the warm stacks, which alloc() and refill() hand out first. It
// starts with the run when there are two Ps or more (so a program's first
// goroutines find kPrepareStock stacks ready), or, in a run that had one
// P and gained more, once kPrepareStart fresh slots have gone out. Handing
// out an unprepared slot wakes it; it stops at kPrepareStock prepared
// stacks waiting, which are what stays behind when a burst ends (one page
// each). While it runs, a P's refill takes only what it has ready, or a
// few fresh slots when nothing is, so that the spawner comes back soon for
// what the helper prepared meanwhile. Measured in docs/stacks.md.
//
// Recycling: a stack normally stays with its G on the scheduler's free G
// lists (g.hpp). The pool sees stacks only when a G is born on a fresh one
// (per-P caches refill from it in batches) and when a dead G is released
// together with its stack. The pool keeps at most kWarmLimit freed stacks
// warm; stacks freed beyond that are returned to the kernel with
// MADV_DONTNEED, so a burst of a million goroutines does not pin its memory
// forever: neighbouring slots in one range, a batch of ranges in one
// process_madvise (one TLB shootdown). Address space is released only at
// shutdown.
//
// Size classes: a pool's slots are all of one size. The runtime has a
// pool per stack size class (gort::StackSize): runtime.stacks for the
// default (Config::stack_size), runtime.sized_stacks for 64 KiB and 8 MiB
// stacks (stackclass.cpp), each with its own warm limit
// (kStackClassTable below). Only the default's pool runs the helper.
//
// Thread-safety: StackPool's methods take its lock; it is not on the hot
// path (only batch refills and releases reach it). find() is the exception:
// the fault handler (fault.cpp) asks it which stack an address lies in,
// so the slabs' address ranges are also kept in a list that is read
// without the lock. Its nodes are freed only with the pool (at exit for
// the scheduler's), and reused for later slabs, so a reader never touches
// freed memory.
#pragma once

#include "gmp/room.hpp"

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gmp/lock.hpp"
#include "gmp/os/note.hpp"
#include "gort/runtime.hpp"

namespace gort::internal {

inline constexpr size_t kGuardSize = 16 * 1024;

// Where an address lies in the pool (StackPool::find, find_stack).
struct StackSlot {
  char* lo = nullptr;   // the usable stack: [lo, lo + size)
  size_t size = 0;      // the pool's stack_size()
  bool guard = false;   // in the guard right below lo
};

class StackPool {
 public:
  static constexpr size_t kWarmLimit = 1024;
  // free() releases pages in batches of at most this many stacks.
  static constexpr size_t kFreeBatchMax = 256;

  StackPool() = default;
  // Frees the range list's nodes (not the slabs: destroy() does that).
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  // stack_size is rounded up to whole pages and to at least 16 KiB.
  // warm_limit: how many freed stacks keep their pages (kWarmLimit; a
  // pool of large stacks keeps fewer: kStackClassTable below).
  void init(size_t stack_size, size_t warm_limit = kWarmLimit);
  // Releases every slab. All stacks must be unused, or abandoned: with
  // `keep_mapped` the slabs stay mapped (and registered as LeakSanitizer
  // roots) for the rest of the process, so that what abandoned goroutines'
  // frames own is still reachable, as an abandoned goroutine's memory is in
  // Go. Only sanitizer builds ask for that.
  void destroy(bool keep_mapped = false);

  size_t stack_size() const { return size_; }
  // Which mechanism protects the guards: "madvise" or "mprotect".
  const char* guard_kind() const;

  // Fills out[0..n) with free stacks, free of ASan poison. An entry is a
  // stack's low end, or, for a slot never used before, that low end
  // tagged kUnprepared: its guard is not installed yet, and take() or
  // take_last() does it when the stack is about to be used. So a P's cache
  // refill (32 at a time) costs guards and first touches only for the
  // stacks the P uses and at most kPrepareBatch - 1 it will use next, not
  // 32 up front (the first `go` of a fresh process paid ~100 µs).
  void alloc(char** out, size_t n);
  // alloc() for a P's cache: fills out[0..k) and returns k, 1 ≤ k ≤ max.
  // All max while the helper is not running; else only what it has
  // prepared, or kPrepareBatch fresh slots if nothing is ready yet (a
  // burst's next refill then takes what it prepared meanwhile).
  size_t refill(char** out, size_t max);
  // The low end of a stack from alloc(), ready to run on: an unprepared
  // slot gets its guard, its top page committed and written ("Guards"
  // above). Lock-free.
  char* take(char* entry) {
    if (!unprepared(entry)) [[likely]] return entry;
    return prepare(entry);
  }
  // take() of entries[n - 1], the next a P's cache hands out; if that slot
  // is unprepared, the unprepared ones below it (handed out next) are
  // prepared with it, up to kPrepareBatch, and rewritten in place.
  char* take_last(char** entries, size_t n);
  // Takes entries of alloc() back, used or not; the caller has cleared any
  // ASan poison on the used ones.
  void free(char* const* entries, size_t n);

  // Stacks prepared ahead ("Preparing ahead" above). run() starts the
  // helper thread when it has a second P; the scheduler starts it once
  // kPrepareStart unprepared slots have gone out, if a second P came later
  // (preparer_wanted). false if it could not be started (the pool works as
  // before). Starting it wakes it to fill its stock. destroy() stops it.
  // `threads` counts the runtime's own threads (the deadlock check tells
  // them from the program's): raised before the helper exists, lowered
  // once it is joined.
  static constexpr size_t kPrepareStart = 256;
  static constexpr size_t kPrepareStock = 64;
  static constexpr size_t kPrepareBatch = 8;
  bool preparer_wanted() const {
    return prep_state_.load(std::memory_order_relaxed) == kPrepIdle &&
           handed_unprepared_.load(std::memory_order_relaxed) >= kPrepareStart;
  }
  bool start_preparer(std::atomic<int32_t>* threads);
  // Stacks the helper has prepared since init().
  size_t prepared_ahead() const { return prepared_ahead_.load(std::memory_order_acquire); }

  // Number of slabs (for tests and the demo).
  size_t slabs() const;

  // Whether addr lies in memory the pool reserved, and where. Lock-free and
  // async-signal-safe.
  bool find(const void* addr, StackSlot* out) const;
  // Whether the pool has a slab mapped (lock-free).
  bool mapped() const { return ranges_.load(std::memory_order_acquire) != nullptr; }

 private:
  struct SlabRange {
    std::atomic<uintptr_t> base{0};
    std::atomic<uintptr_t> bytes{0};
    std::atomic<uintptr_t> slot{0};  // guard + stack
    std::atomic<SlabRange*> next{nullptr};
  };

  // The tag of an entry whose slot has no guard yet (stacks are page
  // aligned).
  static constexpr uintptr_t kUnprepared = 1;
  static bool unprepared(const char* entry) { return (reinterpret_cast<uintptr_t>(entry) & kUnprepared) != 0; }
  static char* with_tag(char* lo) { return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(lo) | kUnprepared); }
  static char* without_tag(char* entry) {
    return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(entry) & ~kUnprepared);
  }

  void grow_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes n entries for alloc() and refill(); returns how many are unprepared.
  size_t fill_locked(char** out, size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts unprepared entries handed out and wakes the helper for them.
  void handed_out(size_t unprepared);
  static void* preparer_main(void* pool);
  void prepare_some();
  void wake_preparer();
  void stop_preparer();
  char* prepare(char* entry);
  // Guards and first touches for fresh slots (their low ends), in groups
  // under one page-table page each.
  void prepare_lows(char* const* lows, size_t n);
  void prepare_group(char* const* lows, size_t n);
  // free() of at most kFreeBatchMax entries.
  void free_batch(char* const* entries, size_t n);

  mutable RuntimeMutex<LockRank::kStackPool> mu_;
  size_t size_ = 0;
  size_t slot_ = 0;
  size_t slots_per_slab_ = 0;
  size_t warm_limit_ = kWarmLimit;
  // The process's own pidfd, for process_madvise (init() to destroy());
  // -1 if it could not be opened.
  int pidfd_ = -1;
  std::vector<std::pair<char*, size_t>> slabs_ ABSL_GUARDED_BY(mu_);
  std::vector<char*> warm_ ABSL_GUARDED_BY(mu_);
  std::vector<char*> cold_ ABSL_GUARDED_BY(mu_);   // guarded, pages released
  std::vector<char*> fresh_ ABSL_GUARDED_BY(mu_);  // never handed out: no guard yet
  // The helper: kPrepIdle (not started), kPrepStarting (a scheduler won the
  // right to start it), kPrepRunning, kPrepFailed (pthread_create failed;
  // never retried in this run).
  enum : uint32_t { kPrepIdle, kPrepStarting, kPrepRunning, kPrepFailed };
  std::atomic<uint32_t> prep_state_{kPrepIdle};
  pthread_t prep_thread_{};
  std::atomic<int32_t>* prep_threads_ = nullptr;
  // Whether the helper should prepare, and whether it sleeps on prep_note_
  // (Go's notesleep): kWork is set by whoever wants stacks (alloc(), and
  // destroy() to stop it), who wakes the helper if it found kAsleep; the
  // helper sets kIdle at kPrepareStock, and kAsleep (from kIdle, a CAS)
  // having cleared the note, just before it sleeps. The CAS and the
  // waker's exchange are both on prep_want_, so one of them sees the
  // other: a wake-up is never lost, and there is one per sleep.
  enum class PrepWant : uint32_t { kIdle, kWork, kAsleep };
  std::atomic<PrepWant> prep_want_{PrepWant::kIdle};
  std::atomic<bool> prep_stop_{false};
  Note prep_note_;
  std::atomic<size_t> handed_unprepared_{0};
  std::atomic<size_t> prepared_ahead_{0};
  // Fresh slots take_last() prepared: how many it prepares at once.
  std::atomic<size_t> fresh_taken_{0};
  // The slabs' ranges, newest first; published with release.
  std::atomic<SlabRange*> ranges_{nullptr};
  // Nodes of slabs released by destroy(), for later slabs (under mu_).
  SlabRange* spare_ranges_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// The system's page size (read once).
size_t page_size();

// Stack size classes (gort::StackSize, whose values index them; docs/stacks.md,
// "Stack size classes"): 0 is the default (Config::stack_size, the pool
// runtime.stacks), the others have pools of their own (stackclass.cpp).
// Each class keeps its dead Gs apart, so that a G is only ever reborn on a
// stack of its class.
inline constexpr int kStackClasses = 3;
struct StackClass {
  size_t size;        // bytes; 0 for the default: Config::stack_size
  int32_t local_max;  // dead Gs a P keeps (the older half spills to the global list)
  int32_t batch;      // dead Gs a P takes from the global list at once
  int32_t warm;       // dead Gs the scavenger leaves on the global list, and
                      // freed stacks the pool keeps with their pages
  int32_t cache;      // fresh stacks a P takes from the pool at once
};
// Small stacks are recycled as the default's are (they are for programs
// with many goroutines). A large stack may hold megabytes of touched
// pages: a P keeps two dead ones, and four stay warm beyond the scavenger
// and in the pool (32 MiB at most each, as glibc keeps ~40 MiB of dead
// threads' stacks).
inline constexpr StackClass kStackClassTable[kStackClasses] = {
    {0, 64, 32, 1024, 32},
    {kSmallStackSize, 64, 32, 1024, 32},
    {kLargeStackSize, 2, 1, 4, 1},
};
static_assert(static_cast<int>(StackSize::kDefault) == 0 && static_cast<int>(StackSize::kSmall) == 1 &&
                  static_cast<int>(StackSize::kLarge) == kStackClasses - 1,
              "kStackClassTable is indexed by StackSize");
// The size of a P's cache of fresh stacks for each class but the default
// (P::SizedCache; the default's is P::kStackCacheMax).
inline constexpr int kSizedStackCacheMax = 32;

// True while the madvise guard mechanism works on this kernel.
bool stack_guard_madvise_supported();

// How many of lows[0..n) (fresh slots' low ends, n ≥ 1) form the first
// group prepared together: those whose guard and top page lie under the
// same page-table page (table_span bytes of address space) as the first
// one's guard; at least one.
size_t stack_group_len(char* const* lows, size_t n, size_t stack_size, size_t table_span);
// Whether fresh slots were last prepared in batches (process_madvise took
// the guards and the populate); false before any was prepared.
bool stack_batch_prepare_works();
#ifdef GORT_TESTING
// false prepares one slot at a time from here on, as on a kernel that
// refuses the batch; true lets the next preparation try again.
void stack_batch_prepare_for_test(bool enabled);
#endif

}  // namespace gort::internal

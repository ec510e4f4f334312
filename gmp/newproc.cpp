// gmp/newproc.cpp — creating goroutines, their ids, the G state table, and
// the life cycle of a G with its stack.
//
// A G is born on a stack (gnew), runs, dies, waits on a free list with its
// stack (gfput), and is reborn from there (gfget). Free lists:
//
//   | list          | bound                                  | lock        |
//   |---------------|----------------------------------------|-------------|
//   | P::gfree      | kGFreeLocalMax, LIFO (older half spills)| none (P's)  |
//   | Sched::gfree  | none; scavenged towards kWarmLimit     | Sched::lock |
//
// Those are the default stack size class's (Sched::gfree[0]). Each other
// class (GoOptions::stack: gnew_sized, gfget_sized, gfput_sized) has lists
// of its own, P::sized[c - 1].gfree and Sched::gfree[c], bounded by its row
// of kStackClassTable (stack.hpp) instead, and its own pool: a G is only
// ever reborn on a stack of its own class. The default's path pays one
// predictable branch for them, in gfput.
//
// The scavenger (gfree_scavenge, called by sysmon every round) releases the
// dead Gs beyond the class's warm limit (StackPool::kWarmLimit for the
// default) that sat unused on the global list for
// a whole period (it never held fewer), and all of the excess once every P
// is idle: such a G leaves allg, is destroyed, and its stack goes back to the
// pool. Releasing at exit instead would put a madvise on the exit path of
// every goroutine of a spawn loop whose backlog goes up and down, and a page
// fault on the spawn path (Go, likewise, frees the stacks of dead Gs only at
// GC, never at exit).
//
// A released G's memory goes back to the pool (and perhaps to the kernel), so
// nothing may hold a G pointer past its death: run queues and wait
// structures drop a G before it runs to its end, sched.allg loses it at
// release under Sched::lock (goroutine dumps walk allg under that lock), and
// Ms drop it in after_switch(kExit). The one racy reader is sysmon's
// preempt_one, which may set `preempt` on a G that has just exited; the
// memory stays mapped (slabs are unmapped only at shutdown), so the worst it
// can do is re-commit one released page, and gnew reconstructs the G anyway.
#include <sched.h>

#include <algorithm>
#include <iterator>
#include <new>
#include <string>

#include "gmp/bubble.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/proc.hpp"
#include "gmp/profiling.hpp"
#include "gmp/race/race.hpp"
#include "gmp/race/sanitizer.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {
namespace {

constexpr int64_t kGoidBatch = 16;
constexpr int kGFreeLocalMax = kStackClassTable[0].local_max;
constexpr int kGFreeBatch = kStackClassTable[0].batch;
static_assert(kGFreeLocalMax == 64 && kGFreeBatch == 32);
static_assert(kStackClassTable[0].warm == static_cast<int32_t>(StackPool::kWarmLimit));
static_assert(kStackClassTable[0].cache == P::kStackCacheMax);
// The other classes' bounds fit the default's arrays below.
constexpr bool sized_bounds_fit() {
  for (int c = 1; c < kStackClasses; c++) {
    const StackClass& k = kStackClassTable[c];
    if (k.local_max < 1 || k.local_max > kGFreeLocalMax || k.batch < 1 || k.batch > kGFreeBatch ||
        k.cache < 1 || k.cache > kSizedStackCacheMax || k.warm < 0 || k.size == 0) {
      return false;
    }
  }
  return true;
}
static_assert(sized_bounds_fit());
// How long a dead G may sit unused on the global free list (beyond the warm
// limit) before the scavenger releases it, and how many it releases per
// call while Ps are busy. A second, not less: a program whose goroutines
// come in waves (skynet's rounds of a million take about one) would
// otherwise give back the pages of one wave's dead only to fault them in
// again for the next; with 100 ms, skynet's warm rounds took 810–990 ms
// instead of 460–500 (docs/million-goroutines.md). sysmon calls it every
// round (about every 10 ms while Ps are busy), so the pace is some 25,000
// stacks a second, a few percent of a CPU.
// With 4,096 a call, sysmon took a quarter of the CPU time of a million
// goroutines' wake-up on 2 cores (the pages of stacks that died 100 ms
// earlier), and the wake-up was ~10 % slower; Go frees dead goroutines'
// stacks only at GC and returns pages at 1 % of a CPU. Once every P is
// idle, all of the excess goes at once. The unlinking happens under
// Sched::lock, a stack pool batch at a time.
constexpr int64_t kScavengePeriodNs = 1000 * 1000 * 1000;
constexpr int32_t kScavengeBatch = 256;
constexpr int32_t kScavengeLockBatch = static_cast<int32_t>(StackPool::kFreeBatchMax);

// Legal transitions; see the table at the top of g.hpp.
bool legal(GStatus from, GStatus to) {
  switch (from) {
    case GStatus::kIdle:
    case GStatus::kDead:
      return to == GStatus::kRunnable;
    case GStatus::kRunnable:
      return to == GStatus::kRunning;
    case GStatus::kRunning:
      return to == GStatus::kRunnable || to == GStatus::kWaiting || to == GStatus::kDead;
    case GStatus::kWaiting:
      return to == GStatus::kRunnable;
  }
  return false;
}

// Constructs a G of stack class cls in the top kGSize bytes of the fresh
// stack [lo, lo + size), and adds it to allg; the usable stack ends right
// below it.
G* born_on(char* lo, size_t size, int cls) {
  char* top = lo + size;
  G* g = new (top - kGSize) G;
  g->stack_lo = lo;
  g->stack_hi = top - kGSize;
  g->stack_class = static_cast<uint8_t>(cls);
  MutexLock lock(sched.lock);
  g->allg_prev = sched.allg_tail;
  if (sched.allg_tail != nullptr) sched.allg_tail->allg_next = g; else sched.allg = g;
  sched.allg_tail = g;
  sched.nallg++;
  return g;
}

// A new G on a fresh stack: from p's cache (refilled from the pool a batch at
// a time), or straight from the pool on a plain thread. The G is constructed
// in the top kGSize bytes of the slot; the usable stack ends right below it.
G* gnew(P* p) {
  char* lo;
  if (p != nullptr) {
    if (p->nstacks == 0) {
      p->nstacks = static_cast<int>(runtime.stacks.refill(p->stacks, P::kStackCacheMax));
      // A run that started with one P and has a second now: a burst is
      // under way, prepare fresh stacks on the other CPU (stack.hpp,
      // "Preparing ahead"; a run with two Ps started the helper already).
      if (runtime.stacks.preparer_wanted() && sched.procs() > 1) {
        runtime.stacks.start_preparer(&runtime.nsystem_threads);
      }
    }
    lo = runtime.stacks.take_last(p->stacks, static_cast<size_t>(p->nstacks--));
  } else {
    runtime.stacks.alloc(&lo, 1);
    lo = runtime.stacks.take(lo);
  }
  return born_on(lo, runtime.stacks.stack_size(), 0);
}

// gnew for another stack size class: its own pool, and its own cache on
// the P (kStackClassTable[cls].cache at a time). No helper thread prepares
// these pools ahead; take_last prepares a few fresh slots at once.
G* gnew_sized(P* p, int cls) {
  StackPool& pool = runtime.sized_stacks[cls - 1];
  char* lo;
  if (p != nullptr) {
    P::SizedCache& c = p->sized[cls - 1];
    if (c.nstacks == 0) {
      c.nstacks = static_cast<int>(pool.refill(c.stacks, static_cast<size_t>(kStackClassTable[cls].cache)));
    }
    lo = pool.take_last(c.stacks, static_cast<size_t>(c.nstacks--));
  } else {
    pool.alloc(&lo, 1);
    lo = pool.take(lo);
  }
  return born_on(lo, pool.stack_size(), cls);
}

// Sched::lock held.
void allg_remove_locked(G* g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  if (g->allg_prev != nullptr) g->allg_prev->allg_next = g->allg_next; else sched.allg = g->allg_next;
  if (g->allg_next != nullptr) g->allg_next->allg_prev = g->allg_prev; else sched.allg_tail = g->allg_prev;
  sched.nallg--;
}


// Destroys Gs already unlinked from allg and gives their stacks back to
// their pool (which returns the pages of those beyond its own warm limit).
void gfree_release(GQueue* q, StackPool& pool) {
  constexpr size_t kBatch = StackPool::kFreeBatchMax;
  char* lows[kBatch];
  size_t n = 0;
  while (G* g = q->pop()) {
    tsan_release_fiber(&g->tsan_fiber);
    // The pool hands out stacks free of ASan poison (gnew relies on it).
    asan_unpoison(g->stack_lo, static_cast<size_t>(g->stack_hi - g->stack_lo));
    lows[n++] = g->stack_lo;
    g->~G();
    if (n == kBatch) {
      pool.free(lows, n);
      n = 0;
    }
  }
  if (n > 0) pool.free(lows, n);
}

// Sched::lock held. Of stack class cls, the G that died last (LIFO, as
// Go's gfget: its page is the warmest), or for the scavenger the oldest.
enum class GfreeEnd : bool { kNewest, kOldest };
G* gfget_global_locked(int cls, GfreeEnd end = GfreeEnd::kNewest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  G* g = end == GfreeEnd::kNewest ? sched.gfree[cls].pop_back() : sched.gfree[cls].pop_front();
  if (g == nullptr) return nullptr;
  int32_t n = sched.ngfree[cls].load(std::memory_order_relaxed) - 1;
  sched.ngfree[cls].store(n, std::memory_order_relaxed);
  if (n < sched.ngfree_low[cls]) sched.ngfree_low[cls] = n;
  return g;
}

G* gfget(P* p) {
  if (p != nullptr) {
    if (p->gfree.empty() && sched.ngfree[0].load(std::memory_order_relaxed) > 0) {
      // Only the pointers move under the lock; the Gs (a page each) are
      // linked into the local list after it (gdeque.hpp).
      G* batch[kGFreeBatch];
      int n = 0;
      {
        MutexLock lock(sched.lock);
        while (n < kGFreeBatch) {
          G* g = gfget_global_locked(0);
          if (g == nullptr) break;
          batch[n++] = g;
        }
      }
      for (int i = 0; i < n; i++) p->gfree.push_back(batch[i]);  // newest first
    }
    G* g = p->gfree.pop();
    p->gfreecnt.store(p->gfree.size, std::memory_order_relaxed);
    return g;
  }
  MutexLock lock(sched.lock);
  return gfget_global_locked(0);
}

// gfget for another stack size class: its lists only.
G* gfget_sized(P* p, int cls) {
  if (p == nullptr) {
    MutexLock lock(sched.lock);
    return gfget_global_locked(cls);
  }
  GQueue& local = p->sized[cls - 1].gfree;
  if (local.empty() && sched.ngfree[cls].load(std::memory_order_relaxed) > 0) {
    G* batch[kGFreeBatch];
    int n = 0;
    {
      MutexLock lock(sched.lock);
      while (n < kStackClassTable[cls].batch) {
        G* g = gfget_global_locked(cls);
        if (g == nullptr) break;
        batch[n++] = g;
      }
    }
    for (int i = 0; i < n; i++) local.push_back(batch[i]);  // newest first
  }
  return local.pop();
}

// gfput for another stack size class's G (m already cleared): onto the P's
// list of its class, the older half spilling to the class's global list.
void gfput_sized(P* p, G* g) {
  const int cls = g->stack_class;
  GQueue& local = p->sized[cls - 1].gfree;
  local.push_front(g);
  const int32_t max = kStackClassTable[cls].local_max;
  if (local.size <= max) return;
  GQueue older = local.take_after(max / 2);
  G* batch[kGFreeLocalMax];
  int n = 0;
  while (G* old = older.pop()) batch[n++] = old;
  MutexLock lock(sched.lock);
  for (int i = n; i-- > 0;) gfput_global_locked(batch[i]);
}

int64_t next_goid(P* p) {
  if (p == nullptr) return sched.goidgen.fetch_add(1, std::memory_order_relaxed) + 1;
  if (p->goid_next == p->goid_end) {
    int64_t end = sched.goidgen.fetch_add(kGoidBatch, std::memory_order_relaxed) + kGoidBatch;
    p->goid_next = end - kGoidBatch + 1;
    p->goid_end = end + 1;
  }
  return p->goid_next++;
}

}  // namespace

void gfput_global_locked(G* g) {
  // Onto its own class's list: gfget of one class never sees another's.
  const int cls = g->stack_class;
  sched.gfree[cls].push_back(g);
  sched.ngfree[cls].store(sched.ngfree[cls].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}


void gfput(P* p, G* g) {
  relaxed_store<M*>(g->m, nullptr);
  // Another stack size class's G goes to its own lists; the default's
  // path below is the one it always was.
  if (g->stack_class != 0) [[unlikely]] {
    gfput_sized(p, g);
    return;
  }
  // LIFO, as Go's gfput: the G that died last is reborn first, while its
  // page (G and top frames) is still in the cache.
  p->gfree.push_front(g);
  if (p->gfree.size <= kGFreeLocalMax) {
    p->gfreecnt.store(p->gfree.size, std::memory_order_relaxed);
    return;
  }
  // The older half goes to the global list (or is released), oldest first
  // so that the newest stays at the list's reuse end. The walk happens
  // before the lock is taken: the lock covers only the pointers.
  GQueue older = p->gfree.take_after(kGFreeLocalMax / 2);
  p->gfreecnt.store(p->gfree.size, std::memory_order_relaxed);
  G* batch[kGFreeLocalMax];
  int n = 0;
  while (G* old = older.pop()) batch[n++] = old;
  MutexLock lock(sched.lock);
  for (int i = n; i-- > 0;) gfput_global_locked(batch[i]);
}

namespace {

// gfree_scavenge for the global free list of stack class cls.
int scavenge_class(int cls, int64_t now, bool idle) {
  const int32_t kWarm = kStackClassTable[cls].warm;
  constexpr auto kRelaxed = std::memory_order_relaxed;
  // Hints, so that a sysmon round with nothing to do takes no lock: nothing
  // beyond the warm limit, or no debt and the period not over yet.
  if (sched.ngfree[cls].load(kRelaxed) <= kWarm) return 0;
  if (!idle && sched.gfree_debt[cls].load(kRelaxed) == 0 &&
      now - sched.gfree_scavenged[cls].load(kRelaxed) < kScavengePeriodNs) {
    return 0;
  }
  int released = 0;
  for (;;) {
    GQueue release;
    {
      MutexLock lock(sched.lock);
      int32_t nfree = sched.ngfree[cls].load(kRelaxed);
      int32_t debt = sched.gfree_debt[cls].load(kRelaxed);
      if (idle || now - sched.gfree_scavenged[cls].load(kRelaxed) >= kScavengePeriodNs) {
        // Gs that stayed on the list the whole period (it never held fewer
        // than ngfree_low) were not needed: those beyond the warm limit go.
        int32_t unused = idle ? nfree : sched.ngfree_low[cls];
        debt = unused > kWarm ? unused - kWarm : 0;
        sched.ngfree_low[cls] = nfree;
        sched.gfree_scavenged[cls].store(now, kRelaxed);
      }
      int32_t n = std::min({debt, nfree - kWarm, kScavengeLockBatch});
      if (n <= 0) {
        sched.gfree_debt[cls].store(0, kRelaxed);
        break;
      }
      sched.gfree_debt[cls].store(debt - n, kRelaxed);
      for (int32_t i = 0; i < n; i++) {
        G* g = gfget_global_locked(cls, GfreeEnd::kOldest);
        allg_remove_locked(g);
        release.push_back(g);
      }
      released += n;
    }
    gfree_release(&release, stack_pool(cls));
    // Outside idleness, at most kScavengeBatch per call: sysmon comes
    // back next round.
    if (!idle && released >= kScavengeBatch) break;
  }
  return released;
}

}  // namespace

int gfree_scavenge(int64_t now, Scavenge what) {
  // Each stack size class's list on its own: its own warm limit and period.
  int released = 0;
  for (int cls = 0; cls < kStackClasses; cls++) {
    released += scavenge_class(cls, now, what == Scavenge::kAllExcess);
  }
  return released;
}

void bad_status(G* g, GStatus from, GStatus to) {
  GStatus cur = g->status.load(std::memory_order_relaxed);
  write_stderr("runtime: set_status ");
  write_stderr(gstatus_string(from));
  write_stderr(" -> ");
  write_stderr(gstatus_string(to));
  write_stderr(" but status is ");
  write_stderr(gstatus_string(cur));
  write_stderr(", goroutine ");
  write_stderr_int(g->id);
  write_stderr("\n");
  fatal(legal(from, to) ? "set_status: goroutine in unexpected state"
                        : "set_status: illegal transition");
}

const char* gstatus_string(GStatus s) {
  switch (s) {
    case GStatus::kIdle: return "idle";
    case GStatus::kRunnable: return "runnable";
    case GStatus::kRunning: return "running";
    case GStatus::kWaiting: return "waiting";
    case GStatus::kDead: return "dead";
  }
  return "?";
}

// Indexed by WaitReason. A table rather than a switch so that the gdb
// extension (gmp/diag/gdb/libgort-gdb.py) reads the same strings from a core
// file, where it cannot call a function.
extern const char* const kWaitReasonStrings[] = {
    "",                         // kNone
    "chan send",                // kChanSend
    "chan receive",             // kChanRecv
    "select",                   // kSelect
    "select (no cases)",        // kSelectNoCases
    "chan send (nil chan)",     // kChanSendNilChan
    "chan receive (nil chan)",  // kChanRecvNilChan
    "sync.Mutex.Lock",          // kSyncMutex
    "sync.RWMutex.Lock",        // kSyncRWMutex
    "sync.WaitGroup.Wait",      // kSyncWaitGroup
    "sync.Cond.Wait",           // kSyncCond
    "semacquire",               // kSemacquire
    "sleep",                    // kSleep
    "IO wait",                  // kIOWait
    "timer",                    // kTimer
    "preempted",                // kPreempted
    "test",                     // kTest
    "synctest.Run",                    // kSynctestRun
    "synctest.Wait",                   // kSynctestWait
    "chan receive (durable)",          // kSynctestChanRecv
    "chan send (durable)",             // kSynctestChanSend
    "select (durable)",                // kSynctestSelect
    "sync.WaitGroup.Wait (durable)",   // kSynctestWaitGroup
    "sync.Mutex.Lock (durable)",       // kSynctestMutex
    "sync.RWMutex.Lock (durable)",     // kSynctestRWMutex
    "semacquire (durable)",            // kSynctestSemacquire
};
static_assert(std::size(kWaitReasonStrings) == static_cast<size_t>(WaitReason::kNumWaitReasons),
              "one string per WaitReason");

const char* wait_reason_string(WaitReason r) {
  auto i = static_cast<size_t>(r);
  return i < std::size(kWaitReasonStrings) ? kWaitReasonStrings[i] : "?";
}

namespace {

// main has returned and the runtime is stopping. In Go the process would be
// gone and this spawn with it, so it is dropped without a word: the closure
// is never copied, and the calling goroutine goes back to the scheduler,
// which is shutting down, so it stops here as Go's would have stopped
// anywhere (it is abandoned with the others; docs/runtime.md, "Shutdown").
// Where it may not switch (an OS lock held, inside blocking() or NoPreempt)
// go() just returns, and the goroutine stops at its next chance.
void spawn_dropped(M* m) {
  G* self = m != nullptr ? m->curg : nullptr;
  if (self == nullptr || self->nopreempt != 0 || m->in_blocking.load(std::memory_order_relaxed) ||
      m->locks.load(std::memory_order_relaxed) != 0 || m->oslocks.load(std::memory_order_relaxed) != 0) {
    return;
  }
  gosched();
}

[[noreturn, gnu::cold, gnu::noinline]] void bad_stack_size(int value) {
  throw panic_error("gort::go: GoOptions::stack is " + std::to_string(value) + ", not a gort::StackSize");
}

// newproc_alloc's body for stack size class cls, inlined into both entry
// points: the plain go's passes the constant 0, so that its path is the one
// it always was. gopc: the entry point's return address (in the caller of
// gort::go, which is always inlined).
__attribute__((always_inline)) inline G* newproc_alloc_in(int cls, ClosureFn invoke, ClosureFn destroy,
                                                          void** storage, uintptr_t gopc) {
  M* m = getm();
  // A goroutine, or an M's scheduler context (a timer starting a
  // goroutine) that holds a P: use that P's caches and queue. Inside
  // blocking() the P may be someone else's by now: act as a plain thread.
  // The same for an M whose P sysmon took while the kernel blocked it
  // (ensurep), when no other P is free.
  bool gated = m != nullptr && !m->in_blocking.load(std::memory_order_relaxed);
  P* p = nullptr;
  if (gated) {
    acquirem(m);
    p = ensurep(m);
  }
  if (p == nullptr) {
    // A plain thread: announce the call first, so that shutdown (which
    // waits for external_go to drain) cannot free the runtime under it.
    runtime.external_go.fetch_add(1, std::memory_order_seq_cst);
  }
  // A plain thread reads nothing of sched before go_open says a run's state
  // is built and not yet being torn down (it may be rebuilt meanwhile).
  bool open = p != nullptr ? !sched.stopping.load(std::memory_order_acquire)
                           : runtime.go_open.load(std::memory_order_seq_cst);
  if (!open) {
    if (p == nullptr) runtime.external_go.fetch_sub(1, std::memory_order_acq_rel);
    if (gated) releasem(m);
    if (!runtime.running.load(std::memory_order_acquire)) {
      throw panic_error("gort::go: the runtime is not running (call it inside gort::run)");
    }
    spawn_dropped(m);
    return nullptr;
  }
  G* g = cls == 0 ? gfget(p) : gfget_sized(p, cls);
  if (g != nullptr) {
    // Frames of the G's previous life may have left ASan's poison behind
    // (it never unwound them). A fresh stack from the pool has none, and
    // the G itself lies above stack_hi and is never poisoned.
    asan_unpoison(g->stack_lo, static_cast<size_t>(g->stack_hi - g->stack_lo));
  } else {
    g = cls == 0 ? gnew(p) : gnew_sized(p, cls);
  }
  g->invoke = invoke;
  g->destroy = destroy;
  g->started = false;
  g->spawned_external = p == nullptr;
  g->param = nullptr;
  relaxed_store(g->id, next_goid(p));
  g->gopc = gopc;
  G* parent = m != nullptr ? m->curg : nullptr;
  g->parent_goid = parent != nullptr ? parent->id : 0;
  // Go's pprof labels pass to the goroutines a goroutine starts.
  labels_inherit(g, parent);
  g->bubble = nullptr;
  if (parent != nullptr && parent->bubble != nullptr) [[unlikely]] bubble_adopt(g, parent);
  capture_fp_control(g);
  // The first frame is laid out now, as Go's newproc does: the G already
  // has its stack, and this touches the page the G is on anyway.
  make_context(g);
  *storage = g->closure;
  if (gated) releasem(m);
  return g;
}

}  // namespace

G* newproc_alloc(ClosureFn invoke, ClosureFn destroy, void** storage) {
  return newproc_alloc_in(0, invoke, destroy, storage, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

G* newproc_alloc(StackSize stack, ClosureFn invoke, ClosureFn destroy, void** storage) {
  const int cls = static_cast<int>(stack);
  // Before anything else, as go's other panics: nothing is copied.
  if (cls >= kStackClasses) [[unlikely]] bad_stack_size(cls);
  return newproc_alloc_in(cls, invoke, destroy, storage, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

void newproc_abort(G* g) {
  g->invoke = g->destroy = nullptr;
  if (g->labels != nullptr) [[unlikely]] labels_drop(g);
  if (g->bubble != nullptr) [[unlikely]] bubble_abandon(g);
  M* m = getm();
  bool external = g->spawned_external;
  if (m != nullptr && !m->in_blocking.load(std::memory_order_relaxed)) {
    acquirem(m);
    P* p = ensurep(m);
    if (p != nullptr) gfput(p, g);
    releasem(m);
    if (p != nullptr) {
      if (external) runtime.external_go.fetch_sub(1, std::memory_order_acq_rel);
      return;
    }
  }
  {
    MutexLock lock(sched.lock);
    gfput_global_locked(g);
  }
  if (external) runtime.external_go.fetch_sub(1, std::memory_order_acq_rel);
}

void newproc_start(G* g) {
  // Everything the spawner did, the closure's construction included, happens
  // before the goroutine starts (Go's memory model).
  tsan_start_fiber(&g->tsan_fiber, g->id, g);
  GStatus from = g->status.load(std::memory_order_relaxed);
  set_status(g, from, GStatus::kRunnable);
  M* m = getm();
  bool external = g->spawned_external;
  g->spawned_external = false;
  P* p = nullptr;
  bool gated = m != nullptr && !m->in_blocking.load(std::memory_order_relaxed);
  if (gated) {
    acquirem(m);
    p = ensurep(m);
  }
  if (p != nullptr) {
    if (external) runtime.external_go.fetch_sub(1, std::memory_order_acq_rel);
    p->created.store(p->created.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    bool full = !runqput(p, g, RunqAt::kNext);
    releasem(m);
    if (full) {
      wakep();
      // Back-pressure: this goroutine spawns faster than its goroutines
      // run. Every unstarted goroutine holds a stack page (its G lives
      // there), so it yields as if preempted here: to the tail of the
      // global queue, behind the backlog it made, which this P and the
      // others drain first. Otherwise a spawn loop piles up tens of
      // thousands of pages between two time slices (more when another P's
      // thread is descheduled by the OS).
      G* self = m->curg;
      if (self != nullptr && self->nopreempt == 0 && m->locks.load(std::memory_order_relaxed) == 0 &&
          m->oslocks.load(std::memory_order_relaxed) == 0) {
        preempt_park(self);
      }
      return;
    }
    wakep();
    // A spawn is a gort call like any other: a goroutine that only spawns
    // yields here when asked to (without asynchronous preemption, in the
    // race build, it could otherwise hold its P for ever).
    preempt_check();
    return;
  }
  if (gated) releasem(m);
  // A plain thread (external_go was raised by newproc_alloc; an M that has
  // lost its P since is counted the same way): hand it to the global queue
  // and make sure an M sees it. external_ops keeps the deadlock detector
  // quiet meanwhile.
  if (!external) runtime.external_go.fetch_add(1, std::memory_order_acq_rel);
  runtime.external_ops.fetch_add(1, std::memory_order_acq_rel);
  sched.external_created.fetch_add(1, std::memory_order_relaxed);
  {
    MutexLock lock(sched.lock);
    globrunqput_locked(g);
  }
  wakep();
  runtime.external_ops.fetch_sub(1, std::memory_order_acq_rel);
  runtime.external_go.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace gort::internal

namespace gort {

void yield() {
  internal::gosched();
}

int procs() {
  return internal::runtime.running.load(std::memory_order_acquire) ? internal::sched.procs() : 0;
}

int64_t num_goroutine() {
  using namespace internal;
  if (!runtime.running.load(std::memory_order_acquire)) return 0;
  int64_t n = sched.external_created.load(std::memory_order_relaxed) -
              sched.detached_exited.load(std::memory_order_relaxed) +
              sched.retired_created.load(std::memory_order_relaxed) -
              sched.retired_exited.load(std::memory_order_relaxed);
  for (P* p : sched.allp) {
    n += p->created.load(std::memory_order_relaxed) - p->exited.load(std::memory_order_relaxed);
  }
  return n;
}

int64_t goroutine_id() {
  internal::G* g = internal::getg();
  return g ? g->id : 0;
}

RuntimeStats runtime_stats() {
  using namespace internal;
  RuntimeStats st;
  if (!runtime.running.load(std::memory_order_acquire)) return st;
  st.procs = sched.procs();
  st.goroutines = num_goroutine();
  {
    MutexLock lock(sched.lock);
    st.threads = sched.mcount;
    st.idle_threads = sched.nmidle;
    st.goroutines_allocated = sched.nallg;
  }
  st.stack_slabs = runtime.stacks.slabs();
  for (const StackPool& pool : runtime.sized_stacks) st.stack_slabs += pool.slabs();
  st.stack_size = runtime.stacks.stack_size();
  st.stack_guard = runtime.stacks.guard_kind();
  st.stacks_prepared_ahead = runtime.stacks.prepared_ahead();
  st.readied_after_write = sched.readied_after_write.load(std::memory_order_relaxed);
  st.syscall_threads = sched.nblocking.load(std::memory_order_relaxed);
  st.stall_reports = sched.stall_reports.load(std::memory_order_relaxed);
  return st;
}

int runtime_threads() {
  using namespace internal;
  if (!runtime.running.load(std::memory_order_acquire)) return 0;
  int32_t ms;
  {
    MutexLock lock(sched.lock);
    ms = sched.mcount;
  }
  // m0 is the thread that called run: the program's, not the runtime's.
  return ms - 1 + runtime.nsystem_threads.load(std::memory_order_relaxed);
}

bool in_goroutine() { return internal::getg() != nullptr; }

}  // namespace gort

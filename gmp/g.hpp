// gmp/g.hpp — the goroutine descriptor (G) and its state machine.
//
// Where a G lives: at the top of its own stack (an M's g0 excepted, which is
// a member of its M). A stack slot from the StackPool is laid out
//
//   [guard | usable stack [stack_lo, stack_hi) ... | G]
//
// so a parked goroutine's descriptor shares the one page its frames touched
// instead of costing a heap block of its own. A G and its stack are born
// together (newproc_alloc), recycled together through the per-P and global
// free lists (gfput/gfget, as Go recycles a dead g with its stack), and
// released together when the scavenger finds more than its class's warm
// limit of them unused on the global free list: the G is taken out of
// sched.allg, destroyed, and its stack goes back to the pool, which may
// return its pages to the kernel. Each stack size class (gort::StackSize;
// kStackClassTable in stack.hpp) has its own pool and free lists: a G is
// only ever reborn on a stack of its own size. Nothing may keep a pointer to a dead G past its release
// (see newproc.cpp for who holds G pointers).
//
// States, defined by who owns the G (as Go's runtime2.go does):
//
//   kIdle      just allocated, not yet published; owned by the allocator.
//   kRunnable  on a run queue (local, runnext or global) or being moved
//              between queues; not running. Its stack, if any, is not in use.
//   kRunning   executing on an M that holds a P; owned by that M.
//   kWaiting   parked: recorded in exactly one wait structure (a channel or
//              semaphore queue, a timer, a poll descriptor) whose owner will
//              ready it. Not on a run queue. Its context is saved.
//   kDead      exited and on a free list (per-P or global), still on its
//              stack, ready to be reused or released with it.
//
// Legal transitions (set_status checks every one of them; any other is a
// runtime bug and a fatal error):
//
//   kIdle     -> kRunnable   newproc_start
//   kDead     -> kRunnable   newproc_start on a recycled G
//   kRunnable -> kRunning    execute
//   kRunning  -> kRunnable   yield, preemption
//   kRunning  -> kWaiting    park
//   kWaiting  -> kRunnable   ready
//   kRunning  -> kDead       goexit
//
// A parking G becomes kWaiting before its context is saved; nobody can ready
// it until the park's unlock function has run on the next context (after the
// switch), because the waker finds the G only through the structure that the
// unlock function releases. That is what makes park race-free against an
// early wake-up.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gmp/os/relaxed.hpp"
#include "gmp/trace.hpp"
#include "gort/runtime.hpp"

namespace gort::internal {

struct Bubble;
struct GLabels;
struct M;
struct P;

enum class GStatus : uint32_t { kIdle, kRunnable, kRunning, kWaiting, kDead };

// Why a G is parked; shown in goroutine dumps and fatal errors.
enum class WaitReason : uint8_t {
  kNone,
  kChanSend,
  kChanRecv,
  kSelect,
  kSelectNoCases,
  kChanSendNilChan,
  kChanRecvNilChan,
  kSyncMutex,
  kSyncRWMutex,
  kSyncWaitGroup,
  kSyncCond,
  kSemacquire,
  kSleep,
  kIOWait,
  kTimer,
  kPreempted,
  kTest,
  // A synctest bubble's durable waits (gmp/bubble.hpp): Go's texts, and
  // gort's for its Mutex, RWMutex and Semaphore, which Go does not count.
  kSynctestRun,
  kSynctestWait,
  kSynctestChanRecv,
  kSynctestChanSend,
  kSynctestSelect,
  kSynctestWaitGroup,
  kSynctestMutex,
  kSynctestRWMutex,
  kSynctestSemacquire,
  kNumWaitReasons  // not a reason: the count (add new ones above it)
};

// Whether a goroutine of a synctest bubble parked for `r` is durably
// blocked (Go's waitReason.isIdleInSynctest): only another goroutine of its
// bubble, or the bubble's fake clock, can wake it. Channel and select waits
// are durable only on the bubble's own channels (the callers pass the
// kSynctest* reasons for those); I/O, kernel waits and objects made
// outside the bubble are not.
constexpr bool wait_reason_durable(WaitReason r) {
  switch (r) {
    case WaitReason::kChanSendNilChan:
    case WaitReason::kChanRecvNilChan:
    case WaitReason::kSelectNoCases:
    case WaitReason::kSleep:
    case WaitReason::kSyncCond:
    case WaitReason::kSynctestRun:
    case WaitReason::kSynctestWait:
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

const char* wait_reason_string(WaitReason r);
// Go's text of each WaitReason, indexed by it (newproc.cpp).
extern const char* const kWaitReasonStrings[];
const char* gstatus_string(GStatus s);

struct alignas(64) G {
  // Saved fcontext while switched out (Boost.Context's fcontext_t); null
  // from the moment the G lands until the switch that takes it off its M
  // has landed elsewhere (switch.cpp, arrived), so that a traceback never
  // walks a stale one. Atomic accesses: tracebacks read it from other
  // threads.
  void* ctx = nullptr;
  // Bumped each time the G lands (arrived): a traceback that walked its
  // saved context knows whether the G ran meanwhile, even if it is back
  // where it was with a context at the same address.
  std::atomic<uint32_t> resumes{0};
  // Usable stack [stack_lo, stack_hi): the guard region lies below stack_lo
  // and this G right at stack_hi. Fixed for the G's life; null for g0.
  char* stack_lo = nullptr;
  char* stack_hi = nullptr;
  std::atomic<GStatus> status{GStatus::kIdle};
  // Stored with relaxed_store (gmp/os/relaxed.hpp): schedtrace reads it, and
  // id and m, from sysmon.
  WaitReason waitreason = WaitReason::kNone;
  bool is_g0 = false;
  bool started = false;
  // Its last run ended in a time-slice preemption: a CPU-bound G, whose next
  // run gets its slice timer armed at once (SchedHooks::slice_started).
  bool ran_out = false;
  // newproc_alloc found no P (a plain thread, or an M whose P sysmon took)
  // and raised Runtime::external_go, which newproc_start/abort lower.
  bool spawned_external = false;
  // The size class of its stack (gort::StackSize's value; kStackClasses in
  // stack.hpp): which pool the stack came from and which free lists the G
  // goes to when it dies. Fixed for the G's life, as its stack is.
  uint8_t stack_class = 0;
  // Set by sysmon when this G has run past its time slice; checked at
  // cooperative preemption points.
  std::atomic<bool> preempt{false};
  // NoPreempt depth: no asynchronous preemption while > 0.
  int32_t nopreempt = 0;
  // gort::RawLibc depth: libc's blocking calls are libc's own while > 0
  // (netpoll/hook/).
  int32_t rawlibc = 0;
  // Asynchronous preemptions taken (for tests and dumps).
  uint32_t async_preempts = 0;
  int64_t id = 0;  // relaxed_store
  // Who made it, for tracebacks' "created by F in goroutine K": the return
  // address of its newproc_alloc call (in the caller of gort::go, which is
  // always inlined) and the creating goroutine's id (0: a plain thread or
  // the runtime). Two stores at spawn; everything else is worked out only
  // when a traceback prints them.
  uintptr_t gopc = 0;
  int64_t parent_goid = 0;
  // When it parked (Sched::coarse_now, a clock sysmon keeps): a dump shows
  // the wait in minutes once it reaches one, as Go does.
  int64_t waitsince = 0;
  // Links of sched.allg (under Sched::lock). Intrusive, so that a G costs
  // no memory outside the stack page it lives on, and leaves allg in O(1).
  G* allg_prev = nullptr;
  G* allg_next = nullptr;
  M* m = nullptr;           // the M running this G; null otherwise (relaxed_store)
  // The M this G must run on (Go's g.lockedm): set while the G waits to
  // resume from an asynchronous preemption (lockedm.cpp). Written by that
  // M while the G is off every queue; read by whoever takes the G from a
  // queue (relaxed_store: schedtrace reads it from sysmon).
  M* lockedm = nullptr;
  // The preemption signal's handler reserved a locked M for this
  // preemption (lockedm.cpp); the trampoline's yield consumes it.
  bool preempt_locks_m = false;
  // Goroutine-local storage (GoroutineLocal), destroyed at exit.
  void* locals = nullptr;
  // The synctest bubble it belongs to (gmp/bubble.hpp), inherited from its
  // creator at spawn, or null. Fixed for the G's life but for the bubble's
  // root, which joins and leaves while it runs synctest::test.
  Bubble* bubble = nullptr;
  // Its creation order in its bubble (1 for main): unlike `id`, the same in
  // every run of a seeded bubble, so schedules are told apart by it.
  uint32_t bubble_ordinal = 0;
  G* schedlink = nullptr;   // run queue / free list link
  // Value handed over by whoever readies the G (e.g. which select case won).
  void* param = nullptr;

  // Thread state that belongs to the goroutine, saved at every switch.
  int saved_errno = 0;
  void* eh_caught = nullptr;
  unsigned int eh_uncaught = 0;
  void* asan_fake_stack = nullptr;
  void* tsan_fiber = nullptr;
  // Floating-point control state (MXCSR, x87 control word) the goroutine
  // starts with: its creator's at `go` time, as a new thread inherits its
  // creator's floating-point environment.
  uint32_t fp_mxcsr = 0x1F80;
  uint16_t fp_x87cw = 0x037F;

  ClosureFn invoke = nullptr;
  ClosureFn destroy = nullptr;
  // Its pprof labels (gmp/profiling.hpp): an immutable set it holds a
  // reference to, inherited from its creator, or null. Written only by the
  // goroutine itself (and at spawn and exit); profiles read it from other
  // threads (__atomic loads).
  GLabels* labels = nullptr;
  alignas(16) unsigned char closure[kInlineClosureSize];
  // Where the program called the gort function that may block it (a
  // channel operation, select, a sync type's wait, sleep): noted by those
  // entry points only while tracing (GORT_TRACE_BLOCKING_CALL), and
  // written as the blocking frame of the trace's next block event, which
  // clears it (gmp/trace.cpp). In the G's tail padding.
  uintptr_t block_pc = 0;
};

// Bytes at the top of a stack slot that hold its G (a multiple of 64, so
// stack_hi keeps the G's alignment and the 16-byte frame alignment).
inline constexpr size_t kGSize = sizeof(G);
static_assert(kGSize % 64 == 0, "the G must keep stack_hi 64-byte aligned");
// Five cache lines: `labels` took 8 of the 16 bytes of padding that
// closure's alignment left. A new field past the last 8 costs a sixth
// line on every goroutine's stack page.
static_assert(kGSize == 320, "the G grew past five cache lines");

[[noreturn]] void bad_status(G* g, GStatus from, GStatus to);

// Changes the status of g from `from` to `to`, checking that g is in
// `from`. Every transition is made by the one party that owns the G at that
// moment (see the table), so a checked load and a store suffice; a CAS would
// cost two locked instructions per switch for nothing. Callers pass only
// transitions from the table (bad_status also rejects illegal ones when a
// status is wrong, to name the bug).
// A bubble's member changed status (gmp/bubble.cpp; Go's changegstatus).
void bubble_status(G* g, GStatus from, GStatus to);

inline void set_status(G* g, GStatus from, GStatus to) {
  if (g->status.load(std::memory_order_relaxed) != from) [[unlikely]] bad_status(g, from, to);
  g->status.store(to, std::memory_order_release);
  if (tracing()) [[unlikely]] trace_status(g, static_cast<uint32_t>(from), static_cast<uint32_t>(to));
  if (g->bubble != nullptr) [[unlikely]] bubble_status(g, from, to);
}

// A singly linked FIFO of Gs through schedlink (not thread-safe).
struct GQueue {
  G* head = nullptr;
  G* tail = nullptr;
  int32_t size = 0;

  bool empty() const { return head == nullptr; }
  void push_back(G* g) {
    g->schedlink = nullptr;
    if (tail) tail->schedlink = g; else head = g;
    tail = g;
    size++;
  }
  void push_front(G* g) {
    g->schedlink = head;
    head = g;
    if (!tail) tail = g;
    size++;
  }
  void push_back_all(GQueue* q) {
    if (q->empty()) return;
    if (tail) tail->schedlink = q->head; else head = q->head;
    tail = q->tail;
    size += q->size;
    *q = GQueue{};
  }
  // Keeps the first n Gs and returns the rest as a queue of their own.
  GQueue take_after(int32_t n) {
    GQueue rest;
    if (n >= size) return rest;
    if (n == 0) {
      rest = *this;
      *this = GQueue{};
      return rest;
    }
    G* cut = head;
    for (int32_t i = 1; i < n; i++) cut = cut->schedlink;
    rest.head = cut->schedlink;
    rest.tail = tail;
    rest.size = size - n;
    cut->schedlink = nullptr;
    tail = cut;
    size = n;
    return rest;
  }
  G* pop() {
    G* g = head;
    if (g) {
      head = g->schedlink;
      if (!head) tail = nullptr;
      g->schedlink = nullptr;
      size--;
    }
    return g;
  }
};

}  // namespace gort::internal

// gmp/newproc.cpp — creating goroutines, their ids, and the G state table.
#include <sched.h>

#include "gmp/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {
namespace {

constexpr int64_t kGoidBatch = 16;

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

G* gfget(P* p) {
  if (p != nullptr) {
    if (p->gfree.empty() && sched.ngfree > 0) {
      std::lock_guard<std::mutex> lock(sched.lock);
      while (p->gfree.size < 32 && sched.ngfree > 0) {
        p->gfree.push_back(sched.gfree.pop());
        sched.ngfree--;
      }
    }
    return p->gfree.pop();
  }
  std::lock_guard<std::mutex> lock(sched.lock);
  G* g = sched.gfree.pop();
  if (g != nullptr) sched.ngfree--;
  return g;
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

const char* wait_reason_string(WaitReason r) {
  switch (r) {
    case WaitReason::kNone: return "";
    case WaitReason::kChanSend: return "chan send";
    case WaitReason::kChanRecv: return "chan receive";
    case WaitReason::kSelect: return "select";
    case WaitReason::kSelectNoCases: return "select (no cases)";
    case WaitReason::kChanSendNilChan: return "chan send (nil chan)";
    case WaitReason::kChanRecvNilChan: return "chan receive (nil chan)";
    case WaitReason::kSyncMutex: return "sync.Mutex.Lock";
    case WaitReason::kSyncRWMutex: return "sync.RWMutex.Lock";
    case WaitReason::kSyncWaitGroup: return "sync.WaitGroup.Wait";
    case WaitReason::kSyncCond: return "sync.Cond.Wait";
    case WaitReason::kSemacquire: return "semacquire";
    case WaitReason::kSleep: return "sleep";
    case WaitReason::kIOWait: return "IO wait";
    case WaitReason::kTimer: return "timer";
    case WaitReason::kPreempted: return "preempted";
    case WaitReason::kTest: return "test";
  }
  return "?";
}

G* newproc_alloc(ClosureFn invoke, ClosureFn destroy, void** storage) {
  M* m = getm();
  // A goroutine, or an M's scheduler context (a timer starting a
  // goroutine) that holds a P: use that P's caches and queue. Inside
  // blocking() the P may be someone else's by now: act as a plain thread.
  P* p = m != nullptr && !m->in_blocking.load(std::memory_order_relaxed) ? m->p : nullptr;
  if (p == nullptr) {
    // A plain thread: announce the call first, so that shutdown (which
    // waits for external_go to drain) cannot free the runtime under it.
    sched.external_go.fetch_add(1, std::memory_order_acq_rel);
  }
  if (!sched.running.load(std::memory_order_acquire) ||
      sched.stopping.load(std::memory_order_acquire)) {
    if (p == nullptr) sched.external_go.fetch_sub(1, std::memory_order_acq_rel);
    throw panic_error("gort::go: the runtime is not running (call it inside gort::run)");
  }
  G* g = gfget(p);
  if (g == nullptr) {
    g = new G;
    g->status.store(GStatus::kIdle, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(sched.lock);
    sched.allg.push_back(g);
  }
  g->invoke = invoke;
  g->destroy = destroy;
  g->started = false;
  g->param = nullptr;
  g->id = next_goid(p);
  capture_fp_control(g);
  *storage = g->closure;
  return g;
}

void newproc_abort(G* g) {
  g->invoke = g->destroy = nullptr;
  M* m = getm();
  P* p = m != nullptr && !m->in_blocking.load(std::memory_order_relaxed) ? m->p : nullptr;
  if (p != nullptr) {
    p->gfree.push_back(g);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(sched.lock);
    sched.gfree.push_back(g);
    sched.ngfree++;
  }
  sched.external_go.fetch_sub(1, std::memory_order_acq_rel);
}

void newproc_start(G* g) {
  GStatus from = g->status.load(std::memory_order_relaxed);
  set_status(g, from, GStatus::kRunnable);
  M* m = getm();
  if (m != nullptr && m->p != nullptr && !m->in_blocking.load(std::memory_order_relaxed)) {
    P* p = m->p;
    p->created.store(p->created.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    GQueue overflow;
    if (!p->runq.put(g, true, &overflow)) {
      std::lock_guard<std::mutex> lock(sched.lock);
      int32_t n = overflow.size;
      sched.runq.push_back_all(&overflow);
      sched.runqsize.fetch_add(n, std::memory_order_release);
    }
    wakep();
    return;
  }
  // A plain thread (external_go was raised by newproc_alloc): hand it to
  // the global queue and make sure an M sees it. external_ops keeps the
  // deadlock detector quiet meanwhile.
  sched.external_ops.fetch_add(1, std::memory_order_acq_rel);
  sched.external_created.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(sched.lock);
    globrunqput_locked(g);
  }
  wakep();
  sched.external_ops.fetch_sub(1, std::memory_order_acq_rel);
  sched.external_go.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace gort::internal

namespace gort {

void yield() {
  internal::gosched();
}

int procs() {
  return internal::sched.running.load(std::memory_order_acquire) ? internal::sched.nprocs : 0;
}

int64_t num_goroutine() {
  using namespace internal;
  if (!sched.running.load(std::memory_order_acquire)) return 0;
  int64_t n = sched.external_created.load(std::memory_order_relaxed);
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
  if (!sched.running.load(std::memory_order_acquire)) return st;
  st.procs = sched.nprocs;
  st.goroutines = num_goroutine();
  {
    std::lock_guard<std::mutex> lock(sched.lock);
    st.threads = sched.mcount;
    st.idle_threads = sched.nmidle;
    st.goroutines_allocated = static_cast<int64_t>(sched.allg.size());
  }
  st.stack_slabs = sched.stacks.slabs();
  st.stack_size = sched.stacks.stack_size();
  st.stack_guard = sched.stacks.guard_kind();
  return st;
}

bool in_goroutine() { return internal::getg() != nullptr; }

}  // namespace gort

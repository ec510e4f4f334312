// gmp/trace.cpp — emitting trace events into per-M buffers (gmp/trace.hpp has
// the invariants; gmp/trace_consume.cpp the side that retires and collects
// buffers).
#include "gmp/trace.hpp"

#include <unwind.h>

#include <cstring>

#include "gmp/os/clock.hpp"
#include "gmp/p.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gmp/trace_buf.hpp"
#include "gmp/trace_consume.hpp"

namespace gort::internal {

extern "C" {
__thread uint8_t gort_trace_source __attribute__((tls_model("initial-exec"))) = 0xff;
}

namespace {

inline uint64_t ticks() { return __builtin_ia32_rdtsc(); }

// Strings are cut to this many bytes: an event's size is known before it
// is written, and a log line is not a file.
constexpr size_t kMaxString = 1024;
// Frames kept of a blocking goroutine's stack.
constexpr int kBlockStackDepth = 16;

// An event under construction on the calling thread's buffer: the
// constructor finds room for `need` bytes (retiring the buffer when it is
// full or of an older generation), the destructor publishes it.
class EventWriter {
 public:
  EventWriter(TraceEv kind, size_t need) {
    M* m = getm();
    need += 1 + 2 * kMaxVarint;
    if (m != nullptr) {
      slot_ = &m->trace.buf;
      m_id_ = m->id;
    } else {
      slot_ = trace_nom_lock();
      m_id_ = -1;
    }
    b_ = slot_->load(std::memory_order_relaxed);
    uint64_t gen = trace_gen();
    if (b_ == nullptr || b_->gen != gen || b_->pos.load(std::memory_order_relaxed) + need > sizeof b_->data)
        [[unlikely]] {
      b_ = trace_refill(slot_, m_id_, gen);
    }
    if (b_ == nullptr) return;  // the trace's memory cap: dropped (counted)
    start_ = b_->data + b_->pos.load(std::memory_order_relaxed);
    p_ = start_;
    *p_++ = static_cast<uint8_t>(kind);
    uint64_t now = ticks();
    // rdtsc is not ordered: a later event never gets an earlier stamp.
    if (now < b_->last_ticks) now = b_->last_ticks;
    p_ = put_uvarint(p_, now - b_->last_ticks);
    b_->last_ticks = now;
  }
  ~EventWriter() {
    if (b_ != nullptr) b_->pos.store(static_cast<uint32_t>(p_ - b_->data), std::memory_order_release);
    if (m_id_ < 0) trace_nom_unlock();
  }
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  bool ok() const { return b_ != nullptr; }
  void u(uint64_t v) { p_ = put_uvarint(p_, v); }
  void i(int64_t v) { u(static_cast<uint64_t>(v)); }
  void str(std::string_view s) {
    if (s.size() > kMaxString) s = s.substr(0, kMaxString);
    u(s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }

 private:
  std::atomic<TraceBuf*>* slot_ = nullptr;
  int64_t m_id_ = 0;
  TraceBuf* b_ = nullptr;
  uint8_t* start_ = nullptr;
  uint8_t* p_ = nullptr;
};

int32_t current_p() {
  M* m = getm();
  return m != nullptr && m->p != nullptr ? m->p->id : -1;
}

struct StackCapture {
  uintptr_t pcs[kBlockStackDepth];
  int n = 0;
  int skip = 0;
};

_Unwind_Reason_Code capture_frame(_Unwind_Context* ctx, void* arg) {
  auto* s = static_cast<StackCapture*>(arg);
  uintptr_t pc = _Unwind_GetIP(ctx);
  if (pc == 0) return _URC_END_OF_STACK;
  if (s->skip > 0) {
    s->skip--;
    return _URC_NO_REASON;
  }
  s->pcs[s->n++] = pc;
  return s->n == kBlockStackDepth ? _URC_END_OF_STACK : _URC_NO_REASON;
}

void emit_block(G* g) {
  StackCapture st;
  if (trace_block_stacks()) {
    st.skip = 2;  // this function and trace_status: park's frame is the first kept
    _Unwind_Backtrace(&capture_frame, &st);
  } else if (g->block_pc != 0) {
    // The program's call into gort that blocked: the blocking frame, for
    // the price of a store (an unwind costs microseconds).
    st.pcs[st.n++] = g->block_pc;
  }
  g->block_pc = 0;
  EventWriter w(TraceEv::kGoBlock, 3 * kMaxVarint + st.n * kMaxVarint);
  if (!w.ok()) return;
  w.i(g->id);
  w.u(static_cast<uint8_t>(relaxed_load(g->waitreason)));
  w.u(static_cast<uint64_t>(st.n));
  for (int i = 0; i < st.n; i++) w.u(st.pcs[i]);
}

TraceSource unblock_source(int64_t* waker) {
  *waker = 0;
  if (gort_trace_source != 0xff) return static_cast<TraceSource>(gort_trace_source);
  M* m = getm();
  if (m == nullptr) return TraceSource::kThread;
  if (m->curg != nullptr) {
    *waker = m->curg->id;
    return TraceSource::kGoroutine;
  }
  return TraceSource::kThread;  // g0: the scheduler itself
}

}  // namespace

TraceSourceScope::TraceSourceScope(TraceSource s) : prev_(gort_trace_source) {
  gort_trace_source = static_cast<uint8_t>(s);
}

TraceSourceScope::~TraceSourceScope() { gort_trace_source = prev_; }

void trace_note_blocking_call(uintptr_t pc) {
  if (G* g = getg()) g->block_pc = pc;
}

void trace_m_start(M* m) {
  EventWriter w(TraceEv::kMStart, kMaxVarint);
  if (w.ok()) w.i(m->os_tid.load(std::memory_order_relaxed));
}

void trace_proc(M*, int32_t p, bool start) {
  EventWriter w(start ? TraceEv::kProcStart : TraceEv::kProcStop, kMaxVarint);
  if (w.ok()) w.i(p);
}

void trace_status(G* g, uint32_t from_raw, uint32_t to_raw) {
  if (g->is_g0) return;
  auto from = static_cast<GStatus>(from_raw);
  auto to = static_cast<GStatus>(to_raw);
  switch (to) {
    case GStatus::kRunnable:
      if (from == GStatus::kIdle || from == GStatus::kDead) {
        EventWriter w(TraceEv::kGoCreate, 3 * kMaxVarint);
        if (!w.ok()) return;
        w.i(g->id);
        w.i(g->parent_goid);
        w.u(g->gopc);
      } else if (from == GStatus::kWaiting) {
        int64_t waker;
        TraceSource s = unblock_source(&waker);
        EventWriter w(TraceEv::kGoUnblock, 3 * kMaxVarint);
        if (!w.ok()) return;
        w.i(g->id);
        w.u(static_cast<uint8_t>(s));
        w.i(waker);
      } else {
        EventWriter w(g->ran_out ? TraceEv::kGoPreempt : TraceEv::kGoSched, kMaxVarint);
        if (w.ok()) w.i(g->id);
      }
      return;
    case GStatus::kRunning: {
      EventWriter w(TraceEv::kGoStart, 2 * kMaxVarint);
      if (!w.ok()) return;
      w.i(g->id);
      w.i(current_p());
      return;
    }
    case GStatus::kWaiting:
      emit_block(g);
      return;
    case GStatus::kDead: {
      EventWriter w(TraceEv::kGoEnd, kMaxVarint);
      if (w.ok()) w.i(g->id);
      return;
    }
    default:
      return;
  }
}

void trace_syscall(G* g, bool begin, bool lost_p) {
  EventWriter w(begin ? TraceEv::kGoSyscallBegin : TraceEv::kGoSyscallEnd, 2 * kMaxVarint);
  if (!w.ok()) return;
  w.i(g->id);
  if (!begin) w.u(lost_p ? 1 : 0);
}

void trace_user_task(uint64_t id, uint64_t parent, std::string_view name, bool begin) {
  EventWriter w(begin ? TraceEv::kUserTaskBegin : TraceEv::kUserTaskEnd, 3 * kMaxVarint + kMaxString);
  if (!w.ok()) return;
  w.u(id);
  if (!begin) return;
  w.u(parent);
  w.str(name);
}

void trace_user_region(uint64_t task, std::string_view name, bool begin) {
  G* g = getg();
  EventWriter w(begin ? TraceEv::kUserRegionBegin : TraceEv::kUserRegionEnd, 3 * kMaxVarint + kMaxString);
  if (!w.ok()) return;
  w.i(g != nullptr ? g->id : 0);
  w.u(task);
  w.str(name);
}

void trace_user_log(uint64_t task, std::string_view category, std::string_view message) {
  G* g = getg();
  EventWriter w(TraceEv::kUserLog, 4 * kMaxVarint + 2 * kMaxString);
  if (!w.ok()) return;
  w.i(g != nullptr ? g->id : 0);
  w.u(task);
  w.str(category);
  w.str(message);
}

void trace_snapshot_goroutines() {
  MutexLock lock(sched.lock);
  for (G* g = sched.allg; g != nullptr; g = g->allg_next) {
    auto st = g->status.load(std::memory_order_acquire);
    if (st == GStatus::kDead || st == GStatus::kIdle) continue;
    EventWriter w(TraceEv::kGoStatus, 5 * kMaxVarint);
    if (!w.ok()) return;
    w.i(relaxed_load(g->id));
    w.u(static_cast<uint32_t>(st));
    w.u(g->gopc);
    w.i(g->parent_goid);
    w.u(static_cast<uint8_t>(relaxed_load(g->waitreason)));
  }
}

}  // namespace gort::internal

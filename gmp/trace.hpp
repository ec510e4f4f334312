// gmp/trace.hpp — the execution tracer's write side (Go's runtime/trace):
// the scheduler core emits events, each M into a buffer of its own, and
// stdlib/trace/ decodes and encodes them outside it (docs/tracing-and-profiling.md).
//
// Cost. While no trace or flight recorder runs, each emission site is one
// relaxed load of trace_enabled and a branch predicted not taken. While one
// runs, an event is a timestamp (rdtsc) and a few varints appended to the
// M's own buffer: no lock, no atomic read-modify-write, no system call. A
// buffer that fills (64 KiB) is handed to the consumer under tracer.lock,
// the one lock of the tracer, taken once per buffer.
//
// Buffers and who may touch them (the tracer's invariants):
//
//   - An M's current buffer (M::trace.buf) is written by that M only. It
//     appends an event's bytes past `pos`, then publishes the new `pos` with
//     a release store: a reader on another thread may copy [0, pos) at any
//     time (a flight recorder's snapshot, a trace's stop) without stopping
//     the M.
//   - A buffer's bytes before `pos` never change while its `version` is the
//     same. The writer bumps `version` (release) before it reuses a buffer,
//     so a reader that copied a prefix checks version before and after (a
//     seqlock whose writer only appends).
//   - Events carry the generation (tracer.gen) they belong to in their
//     buffer's header: starting or stopping a trace bumps the generation,
//     and a buffer of an older one is retired by its M at its next event,
//     never appended to. So a stopped trace's events cannot reach the next.
//   - Buffers are never freed while a run is under way: full ones go to the
//     trace (kept until stop), to the flight recorder's ring (kept until
//     evicted), or back to the free list; all return to the free list.
//   - Threads without an M (a plain thread readying a goroutine, sysmon)
//     share one buffer under a spin lock (tracer.nom).
//
// Events are never emitted inside a signal handler (nothing here is
// async-signal-safe but trace_dump_raw, which only reads).
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gort::internal {

struct G;
struct M;
struct TraceBuf;

// What the event stream records (the raw format: gmp/trace_buf.hpp). Each
// event is its kind, the ticks since the previous event of its buffer, and
// its arguments, all varints but the kind.
enum class TraceEv : uint8_t {
  kNone = 0,
  kMStart,          // os_tid
  kProcStart,       // p
  kProcStop,        // p
  kGoCreate,        // goid, parent goid, gopc
  kGoStart,         // goid, p
  kGoSched,         // goid (yielded: runnable)
  kGoPreempt,       // goid (time slice over: runnable)
  kGoBlock,         // goid, WaitReason, n, n pcs (the blocking stack)
  kGoUnblock,       // goid, TraceSource, waker goid (0: none)
  kGoEnd,           // goid
  kGoSyscallBegin,  // goid
  kGoSyscallEnd,    // goid, lost its P (0/1)
  kGoStatus,        // goid, GStatus, gopc, parent goid, WaitReason (a trace's start)
  kUserTaskBegin,   // task, parent task, name
  kUserTaskEnd,     // task
  kUserRegionBegin, // goid, task, name
  kUserRegionEnd,   // goid, task, name
  kUserLog,         // goid, task, category, message
  kGoLost,          // events were dropped here (the trace's memory cap): count
  kNumEvents
};

// Who readied a goroutine, as a GoUnblock event says.
enum class TraceSource : uint8_t { kGoroutine, kNetpoll, kTimer, kThread };

// The tracer's switch: bit 0 a trace (trace::start), bit 1 the flight
// recorder. Read by every emission site.
inline std::atomic<uint32_t> trace_enabled{0};
inline constexpr uint32_t kTraceOn = 1, kFlightOn = 2;

inline bool tracing() { return trace_enabled.load(std::memory_order_relaxed) != 0; }

// An M's side of the tracer (M::trace).
struct MTrace {
  // The buffer being written; the M stores it, readers load it (acquire).
  std::atomic<TraceBuf*> buf{nullptr};
};

// ---- emission (trace.cpp); call only when tracing() ----
void trace_m_start(M* m);
void trace_proc(M* m, int32_t p, bool start);
void trace_status(G* g, uint32_t from, uint32_t to);
void trace_syscall(G* g, bool begin, bool lost_p);
void trace_user_task(uint64_t id, uint64_t parent, std::string_view name, bool begin);
void trace_user_region(uint64_t task, std::string_view name, bool begin);
void trace_user_log(uint64_t task, std::string_view category, std::string_view message);
// The caller of a gort entry point that may block (see G::block_pc).
void trace_note_blocking_call(uintptr_t pc);
#define GORT_TRACE_BLOCKING_CALL()                                     \
  do {                                                                 \
    if (::gort::internal::tracing()) [[unlikely]] {                    \
      ::gort::internal::trace_note_blocking_call(                      \
          reinterpret_cast<uintptr_t>(__builtin_return_address(0)));   \
    }                                                                  \
  } while (0)

// Every goroutine's state, written at a trace's start so that the ones
// created before it have a track and a creation site.
void trace_snapshot_goroutines();

// Readies of goroutines made inside the scope are attributed to `s` (the
// poller's, the timers'): a thread-local the decoder shows as the waker.
class TraceSourceScope {
 public:
  explicit TraceSourceScope(TraceSource s);
  ~TraceSourceScope();
  TraceSourceScope(const TraceSourceScope&) = delete;
  TraceSourceScope& operator=(const TraceSourceScope&) = delete;

 private:
  uint8_t prev_;
};

}  // namespace gort::internal

// preempt/stall.cpp — the stall report (docs/debugging.md, "Stall reports").
//
// sysmon knows when a goroutine holds its P far beyond its slice: the P's
// schedtick has not moved although sysmon kept asking for a preemption (a
// loop in a NoPreempt scope, under an OS lock, in a library where
// preemption is unsafe, with preemption off), and when an M the kernel
// blocked outside gort::blocking lost its P (retake.cpp) and stays blocked.
// Past a threshold (GORT_DEBUG=stallreport=MS, default 1000, 0 turns it
// off) it prints, once per stall, which goroutine, for how long, and where:
// the goroutine's frames, which its M records in its signal handler (the
// same request as for a goroutine dump, unwind.hpp). Go's runtime has no
// such report; Seastar's reactor stall detector is the model.
//
// Printing takes sysmon's time (the first report loads the debug info): a
// stalled program is already off its schedule, and it happens once per stall.
// A program that stalls many goroutines at once (each blocked in a call
// the runtime cannot see) gets kFullPerWindow full reports per window of
// ten thresholds (10 s by default), and one summary line for the rest of
// the window's stalls.

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "gmp/clock_rand.hpp"
#include "gmp/os/debugvars.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/trace_consume.hpp"
#include "gmp/diag/symbolize.hpp"
#include "gmp/diag/traceback.hpp"
#include "preempt/preempt.hpp"

namespace gort::internal {
namespace {

constexpr int64_t kDefaultStallMs = 1000;
constexpr int kFullPerWindow = 3;
constexpr int64_t kWindowThresholds = 10;
// Goroutine ids a summary names, at most.
constexpr size_t kSummaryIds = 8;

int64_t g_threshold_ns = kDefaultStallMs * 1000 * 1000;

// The rate limit's window (sysmon's own state): when it began, the full
// reports printed in it, and the stalls folded into its summary.
struct Window {
  int64_t start = 0;
  int full = 0;
  int64_t folded = 0;
  int64_t ids[kSummaryIds] = {};
  size_t nids = 0;
};
Window g_window;

// Ms whose P was taken while the kernel blocked them (sysmon's own).
struct Blocked {
  M* m;
  G* g;
  int64_t since;
  bool reported;
};
std::vector<Blocked>* g_blocked = nullptr;

std::vector<char>& copy_buffer() {
  static std::vector<char>* buf = new std::vector<char>;
  size_t cap = stack_copy_cap();
  if (buf->size() < cap) buf->resize(cap);
  return *buf;
}

// "1.234s" or "850ms".
void put_duration(TraceWriter& w, int64_t ns) {
  int64_t ms = ns / 1000000;
  if (ms < 1000) {
    w.put_int(ms);
    w.put("ms");
    return;
  }
  w.put_int(ms / 1000);
  w.put(".");
  int64_t frac = ms % 1000;
  if (frac < 100) w.put("0");
  if (frac < 10) w.put("0");
  w.put_int(frac);
  w.put("s");
}

// Prints the summary of the stalls folded into the window, if any, once the
// window is over.
void flush_summary(int64_t now) {
  const int64_t window = kWindowThresholds * g_threshold_ns;
  if (now - g_window.start < window) return;
  if (g_window.folded > 0 && !process_dying()) {
    TraceWriter w(2);
    w.put("gort: stall: ");
    w.put_int(g_window.folded);
    w.put(" more stall");
    w.put(g_window.folded == 1 ? "" : "s");
    w.put(" in the last ");
    put_duration(w, window);
    w.put(" not shown in full (goroutines");
    for (size_t i = 0; i < g_window.nids; i++) {
      w.put(" ");
      w.put_int(g_window.ids[i]);
    }
    if (g_window.folded > static_cast<int64_t>(g_window.nids)) w.put(" ...");
    w.put("); GORT_DEBUG=stallreport=MS sets the threshold\n\n");
  }
  g_window = Window{};
  g_window.start = now;
}

// Whether this stall gets a full report (else it is folded into the
// window's summary).
bool admit(G* g, int64_t now) {
  flush_summary(now);
  sched.stall_reports.fetch_add(1, std::memory_order_relaxed);
  if (g_window.full < kFullPerWindow) {
    g_window.full++;
    return true;
  }
  if (g_window.nids < kSummaryIds) g_window.ids[g_window.nids++] = g->id;
  g_window.folded++;
  return false;
}

// False if a traceback is being printed (gort::stack): sysmon must not
// wait for it; the report comes at a later round. Never once the process
// is dying: the fatal report says where every goroutine is.
bool report(M* m, G* g, int64_t ns, const char* what, const char* why) {
  if (process_dying()) return false;
  std::unique_lock<std::mutex> lock(symbolizer_mutex(), std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (!admit(g, nanotime())) return true;
  GoroutineFrames f;
  std::vector<char>& buf = copy_buffer();
  RunningRegs rr;
  if (ask_running_m(m, g, buf.data(), buf.size(), 100 * 1000 * 1000, &rr)) {
    unwind(rr.regs, rr.view, rr.first_pc(), &f.pcs);
    f.kind = GoroutineFrames::kWalked;
  }
  // Composed first, written in one go unless the process has begun to die
  // meanwhile (asking the M above may take a while): a stall report must
  // not land in the middle of a fatal error's.
  std::string text;
  {
    TraceWriter w(&text);
    w.put("gort: stall: goroutine ");
    w.put_int(g->id);
    w.put(what);
    put_duration(w, ns);
    w.put(" on M ");
    w.put_int(m->id);
    w.put(" (");
    w.put(why);
    w.put(")\n\n");
    print_goroutine(w, g, nullptr, f, traceback_settings().level >= 2 ? 2 : 1);
    // What led to it, if the flight recorder runs (at most one a minute).
    if (const char* path = tracer_dump_fatal(true)) {
      w.put("flight recorder: the last events before this were written to ");
      w.put(path);
      w.put("\n");
    }
    w.put("\n");
  }
  if (process_dying()) return false;
  TraceWriter out(2);
  out.put(text);
  return true;
}

const char* why_running(M* m, G* g) {
  if (g->nopreempt > 0) return "preemption keeps failing: it is inside a gort::NoPreempt scope";
  if (m->oslocks.load(std::memory_order_relaxed) > 0) {
    return "preemption keeps failing: its thread holds an OS lock or runs a one-time initialisation";
  }
  if (!sched.cfg.preempt || !async_preempt_supported()) {
    return "asynchronous preemption is off, and it makes no gort call";
  }
  int tid = m->os_tid.load(std::memory_order_acquire);
  if (tid != 0 && thread_sleeps(tid)) return "its thread is blocked in the kernel";
  // The signal's handler also declines a stack pointer too near the
  // bottom of the stack for the state it saves (signal.cpp): on a small
  // stack that is a good part of it (docs/stacks.md, "Stack size classes").
  if (g->stack_class == static_cast<uint8_t>(StackSize::kSmall)) {
    return "preemption keeps failing: it runs where asynchronous preemption is unsafe (gort's own code, a library, "
           "the kernel, or too near the bottom of its small stack) and makes no gort call that yields";
  }
  return "preemption keeps failing: it runs where asynchronous preemption is unsafe (gort's own code, a library, "
         "the kernel) and makes no gort call that yields";
}

}  // namespace

void stall_init() {
  int64_t ms = debug.stallreport;
  g_threshold_ns = ms > 0 ? ms * 1000 * 1000 : 0;
  if (g_blocked == nullptr) g_blocked = new std::vector<Blocked>;
  g_blocked->clear();
  g_window = Window{};
  g_window.start = nanotime();
}

void stall_check_running(P* p, StallWatch* w, int64_t now) {
  if (g_threshold_ns == 0) return;
  M* m = relaxed_load(p->m);
  G* g = m != nullptr ? relaxed_load(m->curg) : nullptr;
  uint32_t tick = p->schedtick_seen.load(std::memory_order_relaxed);
  if (g == nullptr || g->is_g0 || m->in_blocking.load(std::memory_order_relaxed)) {
    w->since = 0;
    return;
  }
  if (w->since == 0 || w->tick != tick || w->g != g) {
    *w = StallWatch{tick, now, g, false};
    return;
  }
  if (w->reported || now - w->since < g_threshold_ns) return;
  w->reported = report(m, g, now - w->since, " has run for ", why_running(m, g));
}

void stall_watch_blocked(M* m, G* g, int64_t since) {
  if (g_threshold_ns == 0 || g == nullptr) return;
  g_blocked->push_back(Blocked{m, g, since, false});
}

bool stall_check_blocked(int64_t now) {
  if (g_threshold_ns != 0) flush_summary(now);
  bool pending = false;
  for (size_t i = 0; i < g_blocked->size();) {
    Blocked& b = (*g_blocked)[i];
    // Back in the runtime (ensurep_slow cleared the retake), or onto
    // another goroutine: the stall is over.
    if (b.m->retake.load(std::memory_order_acquire) != RetakeState::kDone || relaxed_load(b.m->curg) != b.g) {
      (*g_blocked)[i] = g_blocked->back();
      g_blocked->pop_back();
      continue;
    }
    if (!b.reported && now - b.since >= g_threshold_ns) {
      b.reported = report(b.m, b.g, now - b.since, " has been blocked in the kernel outside gort::blocking for ",
                          "its P went to another M; wrap the call in gort::blocking");
    }
    pending |= !b.reported;
    i++;
  }
  return pending;
}

}  // namespace gort::internal

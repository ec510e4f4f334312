// stdlib/pprof/goroutine_profile.cpp — the goroutine profile's stacks (Go's
// pprof.Lookup("goroutine")): every live goroutine's, with its labels.
//
// The walk is gort::stack(true)'s (gmp/diag/traceback.hpp): under
// Sched::lock, a parked or runnable goroutine from its saved context, a
// running one from its M's answer to a signal; nothing is stopped, so the
// stacks are each true at its own moment, not all at one (Go stops the
// world for a consistent picture). The caller's own stack is unwound in
// place. A goroutine that has not run yet shows its callable's invoker
// (the function it will start in); one whose stack cannot be had (running
// inside gort::blocking, or an M that does not answer) shows
// gort._Unavailable.
#include <mutex>
#include <vector>

#include "gmp/diag/symbolize.hpp"
#include "gmp/diag/traceback.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/tls.hpp"
#include "stdlib/pprof/goroutine_profile.hpp"
#include "stdlib/pprof/labels.hpp"
#include "stdlib/pprof/unwind_here.hpp"

namespace gort::internal {
namespace {

constexpr int kMaxFrames = 100;  // PcList keeps 50 + 50

struct Walk {
  G* self;
  std::vector<StackRecord>* out;
};

// On the M's own stack, holding what print_all needs: the symbolizer's
// lock (the unwinder's libdw), then Sched::lock.
void walk_all(void* arg) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto* w = static_cast<Walk*>(arg);
  std::lock_guard<std::mutex> symbols(symbolizer_mutex());
  std::vector<char> buf(stack_copy_cap());
  MutexLock lock(sched.lock);
  int64_t limit = sched.nallg + 1024;
  for (G* g = sched.allg; g != nullptr && limit-- > 0; g = g->allg_next) {
    const GStatus s = g->status.load(std::memory_order_acquire);
    if (g == w->self || g->is_g0 || s == GStatus::kDead || s == GStatus::kIdle) continue;
    GoroutineFrames f;
    goroutine_frames(g, /*may_ask=*/true, buf.data(), buf.size(), &f);
    StackRecord r;
    r.values = {1};
    r.labels = labels_of(labels_load(g));
    switch (f.kind) {
      case GoroutineFrames::kWalked:
        for (int64_t i = 0; i < f.pcs.kept(); i++) {
          const PcEntry e = f.pcs.at(i);
          r.addrs.push_back(e.exact ? e.pc : e.pc - 1);
        }
        break;
      case GoroutineFrames::kNotStarted:
        r.addrs.push_back(reinterpret_cast<uintptr_t>(g->invoke));
        break;
      case GoroutineFrames::kUnavailable:
        r.pseudo = "gort._Unavailable";
        break;
    }
    w->out->push_back(std::move(r));
  }
}

}  // namespace

std::vector<StackRecord> goroutine_records() {
  std::vector<StackRecord> out;
  if (!runtime.running.load(std::memory_order_acquire)) return out;
  // Other goroutines' label pointers are read during the walk.
  LabelsHold hold;
  G* self = getg();
  if (self != nullptr) {
    uintptr_t pcs[kMaxFrames];
    const int n = unwind_here(pcs, kMaxFrames);
    out.push_back(StackRecord{{pcs, pcs + n}, {1}, labels_of(self->labels), nullptr});
  }
  Walk w{self, &out};
  systemstack(&walk_all, &w);
  return out;
}

}  // namespace gort::internal

// gmp/diag/schedtrace.cpp — see schedtrace.hpp. Go 1.19's runtime.schedtrace
// (proc.go) is the reference for every field and its spelling.
//
// What each value is here:
//   gomaxprocs       Ps in use (Config::procs, set_procs)
//   idleprocs        Ps on the idle list
//   threads          Ms plus sysmon (Go's sysmon runs on an M of its own)
//   spinningthreads  Ms looking for work to steal
//   idlethreads      Ms asleep on the idle list
//   runqueue         Gs on the global run queue
//   [a b ...]        Gs in each P's local ring (runnext not counted, as Go)
// and in the detailed lines, Go's numbering of states (G: 0 idle,
// 1 runnable, 2 running, 3 running inside gort::blocking (Go's syscall),
// 4 waiting, 6 dead; P: 0 idle, 1 running, 2 held by an M inside blocking()
// (Go's syscall), 3 stopped for set_procs (Go's gcstop), 4 dead). gcwaiting
// and stopwait are set_procs's stop of the world, as in Go; lockedg,
// lockedm and nmidlelocked show asynchronously preempted goroutines waiting
// for their own M (lockedm.cpp). Go's fields that gort has no use for print
// the value they always have here (mallocing, throwing, preemptoff, dying).
//
// Nothing is stopped: counters are relaxed loads, the lists of Ms and Gs and
// the idle list of Ms are walked under Sched::lock (as Go walks them under
// sched.lock), and the fields their owners change without that lock are
// read with relaxed_load (gmp/os/relaxed.hpp). An M's P and current G are
// found from the P's and the G's side (P::m, G::m), which are the fields
// kept that way.
#include "gmp/diag/schedtrace.hpp"

#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmp/diag/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/timer.hpp"

namespace gort::internal {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

int go_gstatus(GStatus s, const M* m) {
  switch (s) {
    case GStatus::kIdle: return 0;
    case GStatus::kRunnable: return 1;
    case GStatus::kRunning:
      return m != nullptr && m->in_blocking.load(kRelaxed) ? 3 : 2;
    case GStatus::kWaiting: return 4;
    case GStatus::kDead: return 6;
  }
  return -1;
}

int go_pstatus(PStatus s) {
  switch (s) {
    case PStatus::kIdle: return 0;
    case PStatus::kRunning: return 1;
    case PStatus::kBlocking: return 2;
    case PStatus::kStopped: return 3;
    case PStatus::kDead: return 4;
  }
  return -1;
}

const char* go_bool(bool b) { return b ? "true" : "false"; }

int64_t lockedg_id(const M* m) {
  const G* g = relaxed_load(m->lockedg);
  return g != nullptr ? relaxed_load(g->id) : -1;
}

int64_t lockedm_id(const G* g) {
  const M* m = relaxed_load(g->lockedm);
  return m != nullptr ? m->id : -1;
}

struct MRow {
  M* m;
  int32_t p = -1;
  int64_t curg = -1;
  bool blocked = false;
};

// Sched::lock held.
void format_ms_and_gs(std::string* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  std::vector<MRow> ms;
  ms.reserve(sched.allm.size());
  for (M* m : sched.allm) ms.push_back(MRow{m});
  auto row = [&ms](const M* m) -> MRow* {
    for (MRow& r : ms) {
      if (r.m == m) return &r;
    }
    return nullptr;
  };
  for (P* p : sched.allp) {
    if (MRow* r = row(relaxed_load(p->m))) r->p = p->id;
  }
  for (M* m = sched.midle; m != nullptr; m = m->link) {
    if (MRow* r = row(m)) r->blocked = true;
  }
  for (G* g = sched.allg; g != nullptr; g = g->allg_next) {
    if (g->status.load(kRelaxed) != GStatus::kRunning) continue;
    if (MRow* r = row(relaxed_load(g->m))) r->curg = relaxed_load(g->id);
  }
  for (const MRow& r : ms) {
    absl::StrAppend(out, "  M", r.m->id, ": p=", r.p, " curg=", r.curg,
                    " mallocing=0 throwing=0 preemptoff= locks=", r.m->locks.load(kRelaxed),
                    " dying=0 spinning=", go_bool(relaxed_load(r.m->spinning)),
                    " blocked=", go_bool(r.blocked), " lockedg=", lockedg_id(r.m), "\n");
  }
  for (G* g = sched.allg; g != nullptr; g = g->allg_next) {
    // Status first: a G that is not running has no M to show, whatever its
    // stale link says.
    GStatus st = g->status.load(std::memory_order_acquire);
    M* m = relaxed_load(g->m);
    if (st != GStatus::kRunning) m = nullptr;
    absl::StrAppend(out, "  G", relaxed_load(g->id), ": status=", go_gstatus(st, m), "(",
                    wait_reason_string(relaxed_load(g->waitreason)), ") m=", m ? m->id : -1,
                    " lockedm=", lockedm_id(g), "\n");
  }
}

}  // namespace

void schedtrace_format(int64_t start, int64_t now, bool detailed, std::string* out) {
  // Timer locks first, outside Sched::lock (a timer's function may take
  // Sched::lock under nothing but its own caller's locks; never nest them).
  // Every P ever made: set_procs may change how many are in use meanwhile.
  std::vector<int32_t> timerslen;
  if (detailed) {
    for (int32_t i = 0; i < sched.allp.allocated(); i++) timerslen.push_back(timers_len(sched.allp[i]));
  }
  // Under Sched::lock the number of Ps in use holds still (procresize
  // takes it).
  MutexLock lock(sched.lock);
  const size_t nprocs = static_cast<size_t>(sched.procs());
  absl::StrAppend(out, "SCHED ", (now - start) / 1000000, "ms: gomaxprocs=", nprocs,
                  " idleprocs=", sched.npidle.load(kRelaxed),
                  " threads=", sched.mcount + runtime.nsystem_threads.load(kRelaxed),
                  " spinningthreads=", sched.nmspinning.load(kRelaxed),
                  " idlethreads=", sched.nmidle, " syscallthreads=", sched.nblocking.load(kRelaxed),
                  " runqueue=", sched.runqsize.load(kRelaxed));
  if (detailed) {
    absl::StrAppend(out, " gcwaiting=", sched.gcwaiting.load(kRelaxed) ? 1 : 0,
                    " nmidlelocked=", sched.nmidlelocked, " stopwait=", sched.stopwait,
                    " sysmonwait=", sched.sysmon_wait.load(kRelaxed) ? 1 : 0, "\n");
  }
  for (size_t i = 0; i < nprocs; i++) {
    P* p = sched.allp[i];
    if (detailed) {
      M* m = relaxed_load(p->m);
      absl::StrAppend(out, "  P", i, ": status=", go_pstatus(p->status.load(kRelaxed)),
                      " schedtick=", p->schedtick_seen.load(kRelaxed),
                      " syscalltick=", p->syscalltick.load(kRelaxed), " m=", m ? m->id : -1,
                      " runqsize=", p->runq.ring_size(), " gfreecnt=", p->gfreecnt.load(kRelaxed),
                      " timerslen=", i < timerslen.size() ? timerslen[i] : 0, "\n");
    } else {
      absl::StrAppend(out, i == 0 ? " [" : " ", p->runq.ring_size(),
                      i + 1 == nprocs ? "]\n" : "");
    }
  }
  if (detailed) format_ms_and_gs(out);
}

void schedtrace(int64_t start, int64_t now, bool detailed) {
  std::string out;
  schedtrace_format(start, now, detailed, &out);
  write_stderr(out.c_str());
}

}  // namespace gort::internal

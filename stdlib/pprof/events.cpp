// stdlib/pprof/events.cpp — see events.hpp; Go's SetBlockProfileRate and
// SetMutexProfileFraction.
//
// Sampling and scaling, as Go's runtime/mprof.go:
//
//   block, rate r (ns): a wait of d >= r is recorded always, a shorter one
//     with probability d / r (blocksampled), and then counts as r / d
//     events of r ns in all (saveblockevent): the expected sums are the
//     true ones.
//   mutex, fraction f: one contention in f is recorded (mutexevent), as f
//     events of f times its delay.
//
// Recording runs under the lock whose contention it records (a pthread
// mutex, Sched::lock itself), so the table's lock is a runtime word lock
// of the highest rank (kProfile): no pthread mutex, no park. A thread
// already recording drops a nested event (libgcc's unwinder may lock a
// mutex of its own).
#include "stdlib/pprof/events.hpp"

#include <cmath>
#include <map>
#include <utility>

#include "gmp/clock_rand.hpp"
#include "gmp/lock.hpp"
#include "gmp/profiling.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gort/pprof.hpp"
#include "stdlib/pprof/labels.hpp"
#include "stdlib/pprof/unwind_here.hpp"

namespace gort::internal {
namespace {

constexpr int kMaxFrames = 64;

struct Counts {
  double count = 0;
  double delay_ns = 0;
};

struct EventTable {
  WordLock<LockRank::kProfile> lock;
  // Each label set named here holds a reference of the table's.
  std::map<std::pair<std::vector<uintptr_t>, GLabels*>, Counts> buckets ABSL_GUARDED_BY(lock);
};

// Never destroyed: a thread may record while the process exits.
EventTable* const g_block = new EventTable;
EventTable* const g_mutex = new EventTable;

__thread bool t_recording __attribute__((tls_model("initial-exec"))) = false;

void record(EventTable& t, double count, double delay_ns) {
  // A runtime critical section: a goroutine is not preempted, so it
  // leaves t_recording on the thread it set it on.
  M* m = getm();
  if (m != nullptr) acquirem(m);
  if (t_recording) {
    if (m != nullptr) releasem(m);
    return;
  }
  t_recording = true;
  uintptr_t pcs[kMaxFrames];
  const int n = unwind_here(pcs, kMaxFrames);
  G* g = getg();
  // The waiter's own set: it holds it, so it stays while this runs.
  GLabels* labels = g != nullptr ? g->labels : nullptr;
  auto key = std::make_pair(std::vector<uintptr_t>(pcs, pcs + n), labels);
  {
    MutexLock lock(t.lock);
    auto [it, fresh] = t.buckets.try_emplace(std::move(key));
    if (fresh && labels != nullptr) glabels_ref(labels);
    it->second.count += count;
    it->second.delay_ns += delay_ns;
  }
  t_recording = false;
  if (m != nullptr) releasem(m);
}

uint64_t rand64() { return uint64_t{fastrand()} << 32 | fastrand(); }

// gmp/profiling.hpp's block_event: on the goroutine, back from a park.
void on_block(int64_t t0, WaitReason) {
  const int64_t rate = profiling.block_rate.load(std::memory_order_relaxed);
  if (rate <= 0) return;
  int64_t d = nanotime() - t0;
  if (d <= 0) d = 1;
  if (rate > d && static_cast<int64_t>(rand64() % static_cast<uint64_t>(rate)) > d) return;
  if (d < rate) {
    record(*g_block, static_cast<double>(rate) / static_cast<double>(d), static_cast<double>(rate));
  } else {
    record(*g_block, 1, static_cast<double>(d));
  }
}

// gmp/profiling.hpp's mutex_event: on the thread that waited, now holding
// the lock.
void on_mutex(int64_t delay_ns) {
  const int32_t rate = profiling.mutex_rate.load(std::memory_order_relaxed);
  if (rate <= 0) return;
  if (rate > 1 && fastrand() % static_cast<uint32_t>(rate) != 0) return;
  record(*g_mutex, rate, static_cast<double>(rate) * static_cast<double>(delay_ns));
}

std::vector<StackRecord> records(EventTable& t) {
  std::vector<std::pair<std::pair<std::vector<uintptr_t>, GLabels*>, Counts>> copy;
  {
    MutexLock lock(t.lock);
    copy.assign(t.buckets.begin(), t.buckets.end());
  }
  std::vector<StackRecord> out;
  out.reserve(copy.size());
  for (auto& [key, c] : copy) {
    StackRecord r;
    r.addrs = std::move(key.first);
    r.values = {std::llround(c.count), std::llround(c.delay_ns)};
    r.labels = labels_of(key.second);  // the table's reference keeps it
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::vector<StackRecord> block_records() { return records(*g_block); }
std::vector<StackRecord> mutex_records() { return records(*g_mutex); }

}  // namespace gort::internal

namespace gort::pprof {

void set_block_profile_rate(int64_t rate_ns) {
  using internal::profiling;
  // The entry point before the switch: a park that sees the rate finds it.
  profiling.block_event.store(&internal::on_block, std::memory_order_release);
  profiling.block_rate.store(rate_ns > 0 ? rate_ns : 0, std::memory_order_release);
}

int set_mutex_profile_fraction(int rate) {
  using internal::profiling;
  if (rate < 0) return profiling.mutex_rate.load(std::memory_order_relaxed);
  profiling.mutex_event.store(&internal::on_mutex, std::memory_order_release);
  return profiling.mutex_rate.exchange(rate, std::memory_order_acq_rel);
}

}  // namespace gort::pprof

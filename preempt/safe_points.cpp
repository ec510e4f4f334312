// preempt/safe_points.cpp — which code may be interrupted by a preemption.
//
// By default: the executable segments of the main program. Not shared
// libraries: libc and libstdc++ hold locks and per-thread state (malloc's
// arenas and tcache, stdio locks) that a goroutine moving to another
// thread mid-call would corrupt or deadlock on; nor gort itself. Users can
// add ranges (a plugin they built, see gort/preempt.hpp). The table is
// append-only and read lock-free by the signal handler.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <mutex>

#include "preempt/preempt.hpp"

namespace gort::internal {
namespace {

constexpr int kMaxRanges = 256;
struct Range {
  uintptr_t lo;
  uintptr_t hi;
};
Range g_ranges[kMaxRanges];
std::atomic<int> g_nranges{0};
std::mutex g_mu;
std::once_flag g_once;
bool g_gort_in_main = false;

struct FindMain {
  uintptr_t self;  // an address inside gort
  bool gort_in_main;
};

int add_main_segments(dl_phdr_info* info, size_t, void* arg) {
  auto* f = static_cast<FindMain*>(arg);
  bool is_main = info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
  if (!is_main) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    uintptr_t hi = lo + ph.p_memsz;
    if (f->self >= lo && f->self < hi) f->gort_in_main = true;
    add_preemptible_range(lo, hi);
  }
  return 1;  // the main program comes first; stop
}

}  // namespace

bool add_preemptible_range(uintptr_t lo, uintptr_t hi) {
  std::lock_guard<std::mutex> lock(g_mu);
  int n = g_nranges.load(std::memory_order_relaxed);
  if (n == kMaxRanges || lo >= hi) return false;
  g_ranges[n] = Range{lo, hi};
  g_nranges.store(n + 1, std::memory_order_release);
  return true;
}

void preempt_ranges_init() {
  std::call_once(g_once, [] {
    FindMain f{reinterpret_cast<uintptr_t>(&preempt_ranges_init), false};
    dl_iterate_phdr(&add_main_segments, &f);
    g_gort_in_main = f.gort_in_main;
    if (g_gort_in_main) {
      // gort was linked statically: its code is in these ranges and must
      // never be interrupted. Without a way to tell it apart, async
      // preemption stays off (the cooperative checks remain).
      std::lock_guard<std::mutex> lock(g_mu);
      g_nranges.store(0, std::memory_order_release);
    }
  });
}

bool gort_linked_into_main() {
  preempt_ranges_init();
  return g_gort_in_main;
}

bool pc_preemptible(uintptr_t pc) {
  int n = g_nranges.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++) {
    if (pc >= g_ranges[i].lo && pc < g_ranges[i].hi) return true;
  }
  return false;
}

}  // namespace gort::internal

// netpoll/hook/clock_caller.cpp — which clock reads a faking bubble leaves
// real: abseil's (clock.hpp says why), told by the caller's address.
//
// Found once, by a constructor, before any goroutine exists (a copy of
// abseil dlopen'ed later is not recognised); then read without locks by
// the interposers, on the fake path only:
//
//   - abseil's code. With abseil as shared libraries (Debian's
//     libabsl_*.so, and the default of its CMake build with
//     BUILD_SHARED_LIBS), every executable segment of every loaded object
//     named libabsl_*: the clock is read by libabsl_time (absl::Now), by
//     libabsl_base (CycleClock::Now, which feeds absl::Now's sample where
//     that is on) and by libabsl_synchronization (the deadlines of timed
//     Mutex and CondVar waits). With abseil linked into the executable or
//     libgort, only absl::GetCurrentTimeNanos's own extent, and only if its
//     symbol is exported (dladdr1 knows no other): that holds the read
//     where abseil reads the clock on every call (its default since 2022),
//     not the cycle-clock sample's slow path nor the timed waits. If
//     neither is found, nothing is faked at the C level: one abseil read
//     made fake would spoil absl::Now() for the whole process, and a
//     warning says so once.
//   - interposers ahead of libgort: the objects whose definitions of the
//     clock functions the dynamic linker finds first (ASan's and TSan's
//     interceptors, which call on to libgort's). When one of them is the
//     direct caller, the frames are unwound past it to its own caller
//     (libgcc's _Unwind_Backtrace, lock-free through glibc's
//     _dl_find_object, as preempt/safe_points.cpp's signal handler does).
//     If that fails, the read is not faked.
//   - libstdc++'s std::chrono clocks (system_clock::now, steady_clock::now),
//     which abseil calls for its clock reads (absl::Now reads
//     system_clock): when one of them is the direct caller, the walk goes
//     on past it in the same way, so the caller that decides is the one
//     that called the chrono clock.
#include <dlfcn.h>
#include <link.h>
#include <unwind.h>

#include <atomic>
#include <cstring>

#include "absl/time/clock.h"
#include "gmp/os/sys.hpp"
#include "netpoll/hook/clock.hpp"

namespace gort::internal {
namespace {

struct Range {
  uintptr_t lo;
  uintptr_t hi;
};

// A table filled by the constructor, read lock-free after.
template <int N>
struct Ranges {
  Range r[N] = {};
  std::atomic<int> n{0};

  void add(uintptr_t lo, uintptr_t hi) {
    int k = n.load(std::memory_order_relaxed);
    if (k == N || lo >= hi) return;
    r[k] = Range{lo, hi};
    n.store(k + 1, std::memory_order_release);
  }
  bool contains(uintptr_t pc) const {
    int k = n.load(std::memory_order_acquire);
    for (int i = 0; i < k; i++) {
      if (pc >= r[i].lo && pc < r[i].hi) return true;
    }
    return false;
  }
};

// Debian's abseil is some eighty libraries; a program loads a few dozen.
// constinit: filled by a constructor function, which may run before this
// file's dynamic initialisers would (and they would then empty them).
constinit Ranges<128> g_absl;
constinit Ranges<8> g_ahead;
constinit Ranges<4> g_chrono;

enum AbslState : int { kNotLooked, kKnown, kMissing };
constinit std::atomic<int> g_absl_state{kNotLooked};
constinit std::atomic<bool> g_warned{false};

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

template <int N>
void add_exec_segments(const dl_phdr_info* info, Ranges<N>* to) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    to->add(lo, lo + ph.p_memsz);
  }
}

bool object_has(const dl_phdr_info* info, uintptr_t addr) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (addr >= lo && addr < lo + ph.p_memsz) return true;
  }
  return false;
}

int add_absl_object(dl_phdr_info* info, size_t, void*) {
  if (info->dlpi_name != nullptr && std::strncmp(base_name(info->dlpi_name), "libabsl_", 8) == 0) {
    add_exec_segments(info, &g_absl);
  }
  return 0;
}

int add_object_at(dl_phdr_info* info, size_t, void* arg) {
  auto addr = *static_cast<uintptr_t*>(arg);
  if (!object_has(info, addr)) return 0;
  add_exec_segments(info, &g_ahead);
  return 1;
}

void find_absl() {
  // Shared abseil: every loaded libabsl_* object. Looked for by name, not
  // through &absl::GetCurrentTimeNanos, which in a non-PIE executable
  // calling it is the executable's canonical PLT entry.
  dl_iterate_phdr(&add_absl_object, nullptr);
  if (g_absl.n.load(std::memory_order_relaxed) > 0) return;
  auto anchor = reinterpret_cast<void*>(&absl::GetCurrentTimeNanos);
  Dl_info info;
  void* sym = nullptr;  // RTLD_DL_SYMENT: the symbol's ElfW(Sym)
  if (dladdr1(anchor, &info, &sym, RTLD_DL_SYMENT) == 0 || info.dli_fname == nullptr) return;
  if (sym != nullptr && info.dli_saddr == anchor && static_cast<const ElfW(Sym)*>(sym)->st_size != 0) {
    auto lo = reinterpret_cast<uintptr_t>(anchor);
    g_absl.add(lo, lo + static_cast<const ElfW(Sym)*>(sym)->st_size);
  }
}

// libstdc++'s chrono clocks, each as its symbol's extent. Looked up in
// libstdc++ itself: in a non-PIE executable that calls them, RTLD_DEFAULT
// finds the executable's canonical PLT entry instead.
void find_chrono() {
  void* lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return;  // linked statically: its clocks are the program's code
  static constexpr const char* kNames[] = {"_ZNSt6chrono3_V212system_clock3nowEv",
                                           "_ZNSt6chrono3_V212steady_clock3nowEv"};
  for (const char* name : kNames) {
    void* f = dlsym(lib, name);
    if (f == nullptr) continue;
    Dl_info info;
    void* sym = nullptr;
    if (dladdr1(f, &info, &sym, RTLD_DL_SYMENT) == 0 || sym == nullptr || info.dli_saddr != f) continue;
    auto lo = reinterpret_cast<uintptr_t>(f);
    g_chrono.add(lo, lo + static_cast<const ElfW(Sym)*>(sym)->st_size);
  }
  dlclose(lib);
}

void find_ahead() {
  static constexpr const char* kNames[] = {"clock_gettime", "gettimeofday", "time"};
  void* own[kClockHooks];
  clock_hook_entries(own);
  for (int i = 0; i < kClockHooks; i++) {
    auto first = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, kNames[i]));
    if (first == 0 || first == reinterpret_cast<uintptr_t>(own[i]) || g_ahead.contains(first)) continue;
    dl_iterate_phdr(&add_object_at, &first);
  }
}

__attribute__((constructor)) void find_callers() {
  find_ahead();
  find_chrono();
  find_absl();
  g_absl_state.store(g_absl.n.load(std::memory_order_relaxed) > 0 ? kKnown : kMissing, std::memory_order_release);
}

// The unwind of caller_past_interceptors: the first frame after those of
// an interposer ahead.
struct CallerWalk {
  bool in_ahead = false;
  int frames = 0;
  uintptr_t caller = 0;
};
constexpr int kMaxWalkFrames = 16;

_Unwind_Reason_Code caller_walk_step(_Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<CallerWalk*>(arg);
  if (++w->frames > kMaxWalkFrames) return _URC_END_OF_STACK;
  uintptr_t ip = _Unwind_GetIP(ctx);
  if (ip == 0) return _URC_END_OF_STACK;
  if (g_ahead.contains(ip - 1) || g_chrono.contains(ip - 1)) {
    w->in_ahead = true;
    return _URC_NO_REASON;
  }
  if (!w->in_ahead) return _URC_NO_REASON;  // still in libgort's frames
  w->caller = ip;
  return _URC_END_OF_STACK;
}

[[gnu::noinline]] uintptr_t caller_past_interceptors() {
  CallerWalk w;
  _Unwind_Backtrace(&caller_walk_step, &w);
  return w.caller;
}

void warn_once() {
  if (g_warned.exchange(true, std::memory_order_relaxed)) return;
  static constexpr char kMsg[] =
      "gort: warning: synctest cannot tell abseil's clock reads from the program's (abseil is linked "
      "statically without exported symbols?): clock_gettime, gettimeofday, time and std::chrono's clocks "
      "stay real in bubbles; gort::now() is the fake clock\n";
  (void)!sys::write(2, kMsg, sizeof kMsg - 1);
}

}  // namespace

bool clock_fake_for_caller(uintptr_t ret) {
  int state = g_absl_state.load(std::memory_order_acquire);
  if (state != kKnown) [[unlikely]] {
    if (state == kMissing) warn_once();
    return false;
  }
  // The return address, less one: a call may be its function's last
  // instruction.
  if (g_ahead.contains(ret - 1) || g_chrono.contains(ret - 1)) {
    ret = caller_past_interceptors();
    if (ret == 0) return false;
  }
  return !g_absl.contains(ret - 1);
}

bool clock_hook_absl_range_known() { return g_absl_state.load(std::memory_order_acquire) == kKnown; }

}  // namespace gort::internal

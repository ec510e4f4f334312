// preempt/safe_points.cpp — which code may be interrupted by a preemption.
//
// By default: the executable segments of the main program, less the code
// of the static archives linked into it. Not shared libraries: libc and
// libstdc++ hold locks and per-thread state (malloc's arenas and tcache,
// stdio locks) that a goroutine moving to another thread mid-call would
// corrupt or deadlock on, and a static archive may hold the same code
// (libstdc++.a, or a library of yours that takes locks). Users can add
// ranges (a plugin they built, see gort/preempt.hpp). The table is
// append-only and read lock-free by the signal handler.
//
// gort's own code is never a safe point, whatever is registered (own
// ranges): libgort.so's segments; or, in an executable linked with
// libgort.a, the gort_text section preempt/gort_text.ld puts it in (the
// script gathers other archives' code in gort_archives_text, so that it is
// left out too). An executable linked with libgort.a without the script
// has no such section: gort's code cannot be told from the program's, no
// range is preemptible, and async preemption stays off (own_code_known).
//
// The exception is reading the clock (add_clock_ranges): the vDSO and the
// few library functions between a program and it hold no lock and no
// per-thread state, and a loop that polls the clock spends nearly all its
// time there. They are safe points only for the code that called them:
// libraries read the clock while holding locks (ASan's allocator under its
// size-class lock, abseil's clock under its spin lock, gort's own timers),
// and a goroutine preempted there would leave the lock held while every
// thread that wants it waits. So for a PC in a clock function the handler
// unwinds to the caller (clock_caller_preemptible). gort's own clock
// interposers (netpoll/hook/clock.cpp), through which a program's reads
// pass, are unwound through too, though a PC in them is not a safe point.
//
// Beyond the PC, what the interrupted goroutine is in the middle of
// (frames_preemptible): a user signal handler, which belongs to the thread
// and not to the goroutine; and, only when the goroutine cannot keep its
// thread until it resumes (past kMaxPreemptLockedMs, gmp/lockedm.cpp), work
// on a thread_local object through its address.
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <sys/auxv.h>
#include <unwind.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "gmp/g.hpp"
#include "gmp/lock.hpp"
#include "netpoll/hook/clock.hpp"
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
RuntimeMutex<LockRank::kSafePoints> g_mu;
std::once_flag g_once;
bool g_own_known = false;

// Calls add(lo, hi) for each executable loaded segment of the object.
template <class F>
void for_each_exec_segment(const dl_phdr_info* info, F add) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    add(lo, lo + ph.p_memsz);
  }
}

// The clock functions, written once by preempt_ranges_init before any
// handler reads them.
constexpr int kMaxClockRanges = 32;
Range g_clock[kMaxClockRanges];
std::atomic<int> g_nclock{0};

void add_clock_range(uintptr_t lo, uintptr_t hi) {
  int n = g_nclock.load(std::memory_order_relaxed);
  if (n == kMaxClockRanges || lo >= hi) return;
  g_clock[n] = Range{lo, hi};
  g_nclock.store(n + 1, std::memory_order_release);
}

bool in_clock_range(uintptr_t pc) {
  int n = g_nclock.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++) {
    if (pc >= g_clock[i].lo && pc < g_clock[i].hi) return true;
  }
  return false;
}

// gort's own code, written once by preempt_ranges_init before any handler
// reads it.
constexpr int kMaxOwnRanges = 4;
Range g_own[kMaxOwnRanges];
std::atomic<int> g_nown{0};

void add_own_range(uintptr_t lo, uintptr_t hi) {
  int n = g_nown.load(std::memory_order_relaxed);
  if (n == kMaxOwnRanges || lo >= hi) return;
  g_own[n] = Range{lo, hi};
  g_nown.store(n + 1, std::memory_order_release);
}

bool in_own_range(uintptr_t pc) {
  int n = g_nown.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++) {
    if (pc >= g_own[i].lo && pc < g_own[i].hi) return true;
  }
  return false;
}

// The main program's executable segments (usually one).
constexpr int kMaxMainSegments = 8;
struct FindMain {
  uintptr_t self;  // an address inside gort
  bool gort_in_main = false;
  Range segments[kMaxMainSegments];
  int nsegments = 0;
};

int find_main_segments(dl_phdr_info* info, size_t, void* arg) {
  auto* f = static_cast<FindMain*>(arg);
  bool is_main = info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
  if (!is_main) return 0;
  f->gort_in_main = object_contains(info, f->self, true);
  for_each_exec_segment(info, [f](uintptr_t lo, uintptr_t hi) {
    if (f->nsegments < kMaxMainSegments) f->segments[f->nsegments++] = Range{lo, hi};
  });
  return 1;  // the main program comes first; stop
}

// The executable segments of the shared object that holds gort.
int find_own_object(dl_phdr_info* info, size_t, void* arg) {
  if (!object_contains(info, *static_cast<uintptr_t*>(arg), true)) return 0;
  for_each_exec_segment(info, &add_own_range);
  return 1;
}

// Adds r less the holes (sorted by lo, disjoint) to the preemptible ranges.
void add_range_except(Range r, const Range* holes, int nholes) {
  for (int i = 0; i < nholes && r.lo < r.hi; i++) {
    const Range& h = holes[i];
    if (h.lo >= h.hi || h.hi <= r.lo || h.lo >= r.hi) continue;
    if (h.lo > r.lo) add_preemptible_range(r.lo, h.lo);
    r.lo = h.hi;
  }
  if (r.lo < r.hi) add_preemptible_range(r.lo, r.hi);
}

// An executable linked with libgort.a: the main program less the two
// sections of preempt/gort_text.ld. False if gort's code is not inside
// gort_text: the link went without the script.
bool add_static_link_ranges(const FindMain& f) {
  StaticLinkText t = static_link_text();
  if (f.self < t.gort_lo || f.self >= t.gort_hi) return false;
  add_own_range(t.gort_lo, t.gort_hi);
  Range holes[2] = {{t.gort_lo, t.gort_hi}, {t.archives_lo, t.archives_hi}};
  if (holes[1].lo < holes[0].lo) std::swap(holes[0], holes[1]);
  for (int i = 0; i < f.nsegments; i++) add_range_except(f.segments[i], holes, 2);
  return true;
}

// The vDSO's executable segments. Its clock functions read a seqlocked page
// the kernel shares with every thread and the TSC, which the kernel only
// lets the vDSO use when it is synchronised across CPUs: resuming on
// another thread mid-read makes the seqlock retry, nothing worse.
int add_vdso_segments(dl_phdr_info* info, size_t, void* arg) {
  auto ehdr = *static_cast<uintptr_t*>(arg);
  auto phdr = reinterpret_cast<uintptr_t>(info->dlpi_phdr);
  if (phdr - ehdr >= 4096) return 0;  // its program headers follow its ELF header
  for_each_exec_segment(info, &add_clock_range);
  return 1;
}

// [lo, hi) of the function at f, from its symbol's size; false if unknown
// (no dynamic symbol starts at f: dladdr names the nearest one below).
bool function_range(void* f, uintptr_t* lo, uintptr_t* hi, const char** object) {
  Dl_info info;
  void* sym = nullptr;  // RTLD_DL_SYMENT: the symbol's ElfW(Sym)
  if (f == nullptr || dladdr1(f, &info, &sym, RTLD_DL_SYMENT) == 0 || sym == nullptr || info.dli_saddr != f ||
      static_cast<const ElfW(Sym)*>(sym)->st_size == 0) {
    return false;
  }
  *lo = reinterpret_cast<uintptr_t>(f);
  *hi = *lo + static_cast<const ElfW(Sym)*>(sym)->st_size;
  *object = info.dli_fname != nullptr ? info.dli_fname : "";
  return true;
}

// The library functions a program calls to read the clock, each only as
// far as its own symbol reaches: libc's wrappers (which call the vDSO and
// touch no thread state but errno, which stays right: the goroutine resumes
// on its thread) and libstdc++'s chrono clocks.
void add_clock_ranges() {
  uintptr_t ehdr = getauxval(AT_SYSINFO_EHDR);
  if (ehdr != 0) dl_iterate_phdr(&add_vdso_segments, &ehdr);
  struct Function {
    const char* library;
    const char* name;
  };
  static constexpr Function kFunctions[] = {
      {"libc.so.6", "clock_gettime"},
      {"libc.so.6", "gettimeofday"},
      {"libc.so.6", "time"},
      {"libstdc++.so.6", "_ZNSt6chrono3_V212steady_clock3nowEv"},  // steady_clock::now()
      {"libstdc++.so.6", "_ZNSt6chrono3_V212system_clock3nowEv"},  // system_clock::now()
  };
  uintptr_t lo, hi;
  const char* object;
  for (const Function& fn : kFunctions) {
    // Looked up in the library itself, not by the default search, which
    // finds an interposer of the same name first (below).
    void* lib = dlopen(fn.library, RTLD_LAZY | RTLD_NOLOAD);
    if (lib == nullptr) continue;  // not loaded (linked statically: its code is the executable's)
    if (function_range(dlsym(lib, fn.name), &lo, &hi, &object)) add_clock_range(lo, hi);
    dlclose(lib);
    // ASan's interceptor of the clock calls (GCC links libasan as a shared
    // library) holds nothing across the real call: it checks that the
    // result's memory is addressable afterwards, from shadow memory shared
    // by every thread. Other interposers are unknown code: not safe points,
    // and so the calls through them are not either.
    if (function_range(dlsym(RTLD_DEFAULT, fn.name), &lo, &hi, &object) &&
        std::strstr(object, "/libasan.so") != nullptr) {
      add_clock_range(lo, hi);
    }
  }
  // gort's own interposers of the clock functions (netpoll/hook/clock.hpp),
  // which a program's reads pass through on their way to libc. They are
  // gort's code, so a PC inside them is no safe point (pc_kind asks
  // in_own_range first); the walk passes through their frames to the
  // caller.
  void* own[kClockHooks];
  clock_hook_entries(own);
  for (void* f : own) {
    if (function_range(f, &lo, &hi, &object)) add_clock_range(lo, hi);
  }
}

// The walk of clock_caller_preemptible: past the handler's own frames and
// the signal frame to the interrupted one, then out of the clock functions.
struct ClockWalk {
  uintptr_t interrupted_pc;
  bool at_interrupted = false;
  int frames = 0;
  bool preemptible = false;
};
constexpr int kMaxClockWalkFrames = 32;

_Unwind_Reason_Code clock_walk_step(_Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<ClockWalk*>(arg);
  if (++w->frames > kMaxClockWalkFrames) return _URC_END_OF_STACK;
  int exact = 0;  // set for the frame a signal interrupted: its PC is not a return address
  uintptr_t ip = _Unwind_GetIPInfo(ctx, &exact);
  if (!w->at_interrupted) {
    if (exact != 0 && ip == w->interrupted_pc) w->at_interrupted = true;
    return _URC_NO_REASON;
  }
  if (ip == 0) return _URC_END_OF_STACK;
  uintptr_t call = ip - 1;  // inside the call instruction: a call may end its function
  if (in_clock_range(call)) return _URC_NO_REASON;
  w->preemptible = pc_kind(call) == PcKind::kYes;
  return _URC_END_OF_STACK;
}

// The main program's static TLS block, as offsets from the thread pointer
// (the same for every thread), [g_tls_lo, g_tls_hi); empty if it has none.
intptr_t g_tls_lo = 0;
intptr_t g_tls_hi = 0;
// glibc's signal-return trampoline (__restore_rt): the return address of
// every signal handler frame.
uintptr_t g_restore_rt = 0;

uintptr_t thread_pointer() {
  uintptr_t tp;
#if defined(__x86_64__)
  asm volatile("movq %%fs:0, %0" : "=r"(tp));
#else
  tp = reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
#endif
  return tp;
}

int find_main_tls(dl_phdr_info* info, size_t, void*) {
  bool is_main = info->dlpi_name == nullptr || info->dlpi_name[0] == '\0';
  if (!is_main) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_TLS || info->dlpi_tls_data == nullptr) continue;
    intptr_t lo = reinterpret_cast<intptr_t>(info->dlpi_tls_data) - static_cast<intptr_t>(thread_pointer());
    g_tls_lo = lo;
    g_tls_hi = lo + static_cast<intptr_t>(ph.p_memsz);
  }
  return 1;
}

}  // namespace

void frames_init(int preempt_sig) {
  dl_iterate_phdr(&find_main_tls, nullptr);
  // glibc hands the kernel its own sa_restorer for every handler; read it
  // back from the one just installed.
  struct sigaction cur = {};
  if (sigaction(preempt_sig, nullptr, &cur) == 0) {
    g_restore_rt = reinterpret_cast<uintptr_t>(cur.sa_restorer);
  }
}

// It reads the goroutine's whole live stack, red zone and dead frames
// included, which ASan would report as out-of-bounds stack reads.
__attribute__((no_sanitize("address"))) bool frames_preemptible(const G* g, const ucontext_t* uc, TlsCheck tls) {
#if !defined(__x86_64__)
  (void)g;
  (void)uc;
  (void)tls;
  return false;  // no trampoline elsewhere: never asked
#else
  uintptr_t tp = thread_pointer();
  // An empty range when the goroutine keeps its thread (lockedm.cpp).
  uintptr_t tls_lo = tp + static_cast<uintptr_t>(g_tls_lo);
  uintptr_t tls_hi = tls == TlsCheck::kYes ? tp + static_cast<uintptr_t>(g_tls_hi) : tls_lo;
  auto in_tls = [&](uintptr_t v) { return v - tls_lo < tls_hi - tls_lo; };
  // A register pointing into the thread's TLS: the code works on a
  // thread_local object through its address (a constructor's `this`, a
  // hoisted &tls_var) and would use the old thread's after migrating.
  static constexpr int kRegs[] = {REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI, REG_RBP, REG_R8,
                                  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};
  for (int r : kRegs) {
    if (in_tls(static_cast<uintptr_t>(uc->uc_mcontext.gregs[r]))) return false;
  }
  uintptr_t sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
  // The same for the goroutine's live frames (a spilled `this`; a leaf
  // function's red zone included), and a signal frame below us: a user
  // handler that runs on this stack with SA_NODEFER and so left the mask
  // alone. A stale word in a live frame can only make this decline (the
  // retry comes a little later), never accept.
  auto lo = reinterpret_cast<const uintptr_t*>((sp - 128) & ~uintptr_t{7});
  auto hi = reinterpret_cast<const uintptr_t*>(g->stack_hi);
  for (const uintptr_t* w = lo; w < hi; w++) {
    uintptr_t v = *w;
    if (in_tls(v) || (v == g_restore_rt && v != 0)) return false;
  }
  return true;
#endif
}

bool add_preemptible_range(uintptr_t lo, uintptr_t hi) {
  MutexLock lock(g_mu);
  int n = g_nranges.load(std::memory_order_relaxed);
  if (n == kMaxRanges || lo >= hi) return false;
  g_ranges[n] = Range{lo, hi};
  g_nranges.store(n + 1, std::memory_order_release);
  return true;
}

bool object_contains(const dl_phdr_info* info, uintptr_t addr, bool exec) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (exec && (ph.p_flags & PF_X) == 0)) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (addr >= lo && addr < lo + ph.p_memsz) return true;
  }
  return false;
}

void add_object_segments(const dl_phdr_info* info) {
  for_each_exec_segment(info, [](uintptr_t lo, uintptr_t hi) { add_preemptible_range(lo, hi); });
}

void preempt_ranges_init() {
  std::call_once(g_once, [] {
    FindMain f{reinterpret_cast<uintptr_t>(&preempt_ranges_init)};
    dl_iterate_phdr(&find_main_segments, &f);
    if (f.gort_in_main) {
      g_own_known = add_static_link_ranges(f);
    } else {
      dl_iterate_phdr(&find_own_object, &f.self);
      for (int i = 0; i < f.nsegments; i++) add_preemptible_range(f.segments[i].lo, f.segments[i].hi);
      g_own_known = true;
    }
    if (g_own_known) add_clock_ranges();
  });
}

bool own_code_known() {
  preempt_ranges_init();
  return g_own_known;
}

PcKind pc_kind(uintptr_t pc) {
  if (in_own_range(pc)) return PcKind::kNo;
  int n = g_nranges.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++) {
    if (pc >= g_ranges[i].lo && pc < g_ranges[i].hi) return PcKind::kYes;
  }
  return in_clock_range(pc) ? PcKind::kClock : PcKind::kNo;
}

bool clock_caller_preemptible(uintptr_t interrupted_pc) {
  ClockWalk w{interrupted_pc};
  _Unwind_Backtrace(&clock_walk_step, &w);
  return w.preemptible;
}

}  // namespace gort::internal

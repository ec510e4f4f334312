// gort/runtime.hpp — starting the runtime and spawning goroutines.
//
// gort multiplexes goroutines (stackful green threads, "G") onto OS threads
// ("M") that hold processors ("P"), exactly as Go's runtime does. This header
// is the entry point: `run` starts the runtime and runs `main` as the first
// goroutine; `go` starts more.
//
// Example:
//
//   #include <gort/gort.hpp>
//
//   int main() {
//     return gort::run([] {
//       gort::WaitGroup wg;
//       for (int i = 0; i < 10; i++) {
//         wg.add(1);
//         gort::go([&wg, i] { std::printf("hello from %d\n", i); wg.done(); });
//       }
//       wg.wait();
//     });
//   }
//
// Costs: `go` allocates nothing in the steady state (goroutine descriptors and
// stacks are recycled per P) as long as the callable and its arguments fit in
// `kInlineClosureSize` bytes; larger ones take one heap allocation. A
// goroutine's stack is address space (`Config::stack_size`, default 256 KiB)
// of which only the touched pages cost memory.
//
// Stack sizes: Go's stacks grow, gort's cannot (a C++ frame holds pointers
// into its stack), so a goroutine's stack is reserved whole when it is
// spawned. `go(GoOptions{.stack = StackSize::kSmall}, f, args...)` gives
// one goroutine a 64 KiB stack (for programs that run a million small
// goroutines: less page-table memory each), `StackSize::kLarge` an 8 MiB
// one (what a thread gets: deep recursion, big locals); the plain
// `go(f, args...)` gives `Config::stack_size`. A small stack gives things
// up: asynchronous preemption needs 17–19 KiB free below the goroutine's
// stack pointer (27 KiB on CPUs with AMX), so a call-free loop more than
// about 45 KiB below the top of a small stack is preempted only at its
// next gort call; and libraries written for threads' stacks
// (getaddrinfo, iostreams, TLS) may overflow it, which is fatal, as any
// overflow is. docs/stacks.md, "Stack size classes", has the sizes, what
// each costs per goroutine in page tables, and why.
//
// Thread-safety: every function here may be called from any goroutine. `go`
// may also be called from a plain OS thread while `run` is active.
//
// Goroutines move between OS threads at any blocking operation and at a
// preemption: `thread_local` variables belong to the thread, not to the
// goroutine. A goroutine that parks must not hold an OS lock (`std::mutex`)
// across the park.

#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/time/time.h"
#include "gort/chrono.hpp"
#include "gort/detail/api.hpp"

namespace gort {

// Go's unrecovered-panic value. The runtime throws it for misuse that Go
// panics on (`send on closed channel`, ...); `what()` is Go's message. An
// exception of any type that escapes a goroutine ends the process as Go's
// unrecovered panic does (`panic: <what()>`, exit status 2).
class GORT_API panic_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

struct Config {
  // Number of Ps (GOMAXPROCS). 0: the environment variable GORT_MAXPROCS if
  // set, else the default: the CPUs the process may run on, lowered to its
  // cgroup's CPU limit (quota / period, rounded up, at least 2), which the
  // runtime then follows as CPUs or the limit change (Go 1.25's
  // container-aware GOMAXPROCS; docs/runtime.md, "How many Ps").
  int procs = 0;
  // Address space reserved for each goroutine stack. Pages are committed only
  // when touched. Rounded up to a whole number of pages; at least 16 KiB.
  // The goroutine's descriptor (about 256 bytes) lives at its top.
  size_t stack_size = 256 * 1024;
  // A goroutine that runs longer than this without blocking is preempted
  // (Go's forcePreemptNS). An absl::Duration or a std::chrono duration
  // (gort/chrono.hpp): `cfg.time_slice = 5ms;`.
  Duration time_slice = absl::Milliseconds(10);
  // Asynchronous preemption by the monitor thread (sysmon).
  bool preempt = true;
  // The most OS threads that run goroutines (Ms) the run may have (Go's
  // debug.SetMaxThreads). 0: the environment variable GORT_MAXTHREADS if
  // set, else 10,000, Go's default. A run that needs more (goroutines
  // blocked in system calls keep their threads) ends with
  // `fatal error: thread exhaustion`.
  int max_threads = 0;
  // libc's blocking calls made on goroutines (socket and pipe I/O, poll,
  // select, epoll_wait, sleeps, connect and accept) park the goroutine
  // instead of blocking its thread, and the other blocking calls hand the
  // P to another thread (docs/blocking-libraries.md). false, or
  // GORT_DEBUG=hooklibc=0, leaves every such call to libc as it is.
  bool hook_libc = true;
  // Every gort call that may park (a channel operation, a blocking select,
  // a contended Mutex, WaitGroup::wait, Cond::wait, sleep, a Conn's read or
  // write) checks the OS-lock rule (no std::mutex, pthread or FILE lock
  // held; docs/standard-cpp.md) whether or not it parks this time, so that
  // a latent mistake is a fatal error on the first run instead of when
  // timing changes. Also GORT_DEBUG=parkcheck=1. For tests: a check per
  // call.
  bool park_check = false;
};

// Bytes of callable plus arguments that `go` stores inside the goroutine
// descriptor without a heap allocation.
inline constexpr size_t kInlineClosureSize = 64;

// The stack a goroutine gets (GoOptions::stack): its whole size is reserved
// at `go` and never changes (address space; pages are committed as
// touched). Overflowing it is Go's `fatal error: stack overflow`, whatever
// the size. Each size has its own slabs and its own dead goroutines kept
// for reuse: a goroutine is only ever reborn on a stack of its own size.
enum class StackSize : uint8_t {
  // Config::stack_size (256 KiB unless the run chose another).
  kDefault,
  // kSmallStackSize (64 KiB), whatever Config::stack_size is: for a
  // million small goroutines. A call-free loop in its bottom 17–19 KiB
  // is not preempted asynchronously (see the top of this header).
  kSmall,
  // kLargeStackSize (8 MiB, a default thread's): deep recursion, big
  // locals, code written for threads.
  kLarge,
};
inline constexpr size_t kSmallStackSize = 64 * 1024;
inline constexpr size_t kLargeStackSize = 8 * 1024 * 1024;

// How `go(GoOptions, f, args...)` starts its goroutine.
struct GoOptions {
  StackSize stack = StackSize::kDefault;
};

namespace internal {

struct G;
using ClosureFn = void (*)(void* storage);

// Allocates a goroutine descriptor whose closure storage (kInlineClosureSize
// bytes, 16-aligned) is returned in *storage. `invoke` runs and then destroys
// the closure; `destroy` only destroys it (used when a goroutine that never
// started is abandoned at shutdown). Returns null when main has returned
// and the runtime is stopping: the spawn is dropped. Panics when the
// runtime is not running.
GORT_API G* newproc_alloc(ClosureFn invoke, ClosureFn destroy, void** storage);
// newproc_alloc for a goroutine whose stack is of size `stack` (go with
// GoOptions). Panics, before anything else, when `stack` is not one of
// StackSize's values.
GORT_API G* newproc_alloc(StackSize stack, ClosureFn invoke, ClosureFn destroy, void** storage);
// Makes a goroutine from newproc_alloc runnable.
GORT_API void newproc_start(G* g);
// Gives back a G from newproc_alloc whose closure was never constructed.
GORT_API void newproc_abort(G* g);

// gort::run's entry (stdlib/run_main.cpp): wires the poller and sysmon into the
// scheduler, then runs it.
GORT_API int run_main(void (*body)(void* arg, int* result), void* arg, const Config& cfg);

// gort::blocking's halves (Go's entersyscall / exitsyscall).
GORT_API void entersyscall();
GORT_API void exitsyscall();

// Goroutine-local storage, behind GoroutineLocal<T> (<gort/preempt.hpp>;
// gmp/gls.cpp): a key per GoroutineLocal, and per goroutine (or plain
// thread) a value for each key, destroyed with `destroy` when it exits.
GORT_API uint64_t gls_new_key();
GORT_API void* gls_get(uint64_t key);
GORT_API void gls_set(uint64_t key, void* value, void (*destroy)(void*));

template <class Tuple>
void invoke_inline(void* storage) {
  Tuple* t = std::launder(reinterpret_cast<Tuple*>(storage));
  struct Destroy {
    Tuple* t;
    ~Destroy() { t->~Tuple(); }
  } d{t};
  std::apply([](auto& f, auto&... a) { std::invoke(std::move(f), std::move(a)...); }, *t);
}

template <class Tuple>
void destroy_inline(void* storage) {
  std::launder(reinterpret_cast<Tuple*>(storage))->~Tuple();
}

template <class Tuple>
void invoke_heap(void* storage) {
  Tuple* t = *static_cast<Tuple**>(storage);
  struct Destroy {
    Tuple* t;
    ~Destroy() { delete t; }
  } d{t};
  std::apply([](auto& f, auto&... a) { std::invoke(std::move(f), std::move(a)...); }, *t);
}

template <class Tuple>
void destroy_heap(void* storage) {
  delete *static_cast<Tuple**>(storage);
}

// The body of both `go`s: kSized asks for `stack` (go with GoOptions); the
// plain go's call stays the one it always was. Always inlined into the
// caller of `go`, for its "created by" record (see `go`).
template <bool kSized, class F, class... Args>
__attribute__((always_inline)) inline void go_with(StackSize stack, F&& f, Args&&... args) {
  using Tuple = std::tuple<std::decay_t<F>, std::decay_t<Args>...>;
  constexpr bool kInline = sizeof(Tuple) <= kInlineClosureSize && alignof(Tuple) <= 16;
  constexpr ClosureFn invoke = kInline ? &invoke_inline<Tuple> : &invoke_heap<Tuple>;
  constexpr ClosureFn destroy = kInline ? &destroy_inline<Tuple> : &destroy_heap<Tuple>;
  void* storage;
  // Allocate first: if the runtime is not running this panics, and if it is
  // stopping it drops the spawn, before f and args are copied anywhere.
  G* g;
  if constexpr (kSized) {
    g = newproc_alloc(stack, invoke, destroy, &storage);
  } else {
    (void)stack;
    g = newproc_alloc(invoke, destroy, &storage);
  }
  if (g == nullptr) return;
  try {
    if constexpr (kInline) {
      ::new (storage) Tuple(std::forward<F>(f), std::forward<Args>(args)...);
    } else {
      *static_cast<Tuple**>(storage) = new Tuple(std::forward<F>(f), std::forward<Args>(args)...);
    }
  } catch (...) {
    newproc_abort(g);
    throw;
  }
  newproc_start(g);
}

// gort::run's main: callable with no arguments, returning void or int.
template <class F>
concept RunMain = std::is_invocable_v<F&> &&
                  (std::is_void_v<std::invoke_result_t<F&>> || std::is_convertible_v<std::invoke_result_t<F&>, int>);

}  // namespace internal

// Starts the runtime, runs `main` (returning void or int) as goroutine 1 and
// returns its result (0 for void). When `main` returns, goroutines still
// running or parked are abandoned, as in Go, and the runtime's threads are
// stopped and joined before `run` returns. `run` may be called again after it
// returns; it may not be nested or called concurrently.
//
// Constrained (internal::RunMain), so a main that takes arguments or returns
// something else is reported at the call.
template <class F>
  requires internal::RunMain<F>
int run(F main, Config cfg = {}) {
  using R = std::invoke_result_t<F&>;
  auto body = [](void* arg, int* result) {
    F& f = *static_cast<F*>(arg);
    if constexpr (std::is_void_v<R>) {
      f();
      *result = 0;
    } else {
      *result = static_cast<int>(f());
    }
  };
  return internal::run_main(body, &main, cfg);
}

// Starts a goroutine running `f(args...)`. `f` and `args` are decay-copied (or
// moved) as by std::thread. Never parks the caller; but a goroutine that
// spawns faster than its goroutines run yields here now and then (when its
// P's run queue overflows), as at a preemption point, so that unstarted
// goroutines, each holding a stack page, do not pile up.
//
// Once main has returned (the runtime is stopping; in Go the process is
// gone) a call is dropped quietly: f and args are not copied and nothing
// runs, and a calling goroutine stops there (it is abandoned, as every
// goroutine still around is). Called when no `run` is active (a plain
// thread after `run` returned), it panics `gort::go: the runtime is not
// running`.
//
// Always inlined, so that the new goroutine's record of where it was
// started ("created by F" in tracebacks, docs/debugging.md) points into the
// caller, not into this template.
//
// Constrained: f must be callable with the decayed args (as by
// std::thread), or the call does not compile, reported at the call.
template <class F, class... Args>
  requires std::is_invocable_v<std::decay_t<F>, std::decay_t<Args>...>
__attribute__((always_inline)) inline void go(F&& f, Args&&... args) {
  internal::go_with<false>(StackSize::kDefault, std::forward<F>(f), std::forward<Args>(args)...);
}

// `go(f, args...)` with options: the goroutine's stack size, e.g.
//
//   gort::go({.stack = gort::StackSize::kSmall}, serve, conn);
//
// StackSize::kDefault is the plain `go`. Everything else is as for the
// plain `go`; in particular it panics `gort::go: the runtime is not
// running` outside a run, and a value of `stack` that is not one of
// StackSize's panics too, before f and args are copied.
template <class F, class... Args>
  requires std::is_invocable_v<std::decay_t<F>, std::decay_t<Args>...>
__attribute__((always_inline)) inline void go(GoOptions opts, F&& f, Args&&... args) {
  internal::go_with<true>(opts.stack, std::forward<F>(f), std::forward<Args>(args)...);
}

// Runs f() — a call that may block in the kernel (file I/O, a foreign
// blocking library, getaddrinfo) — on this thread, while letting other
// goroutines run: the thread's P stays attached but the monitor thread
// (sysmon) hands it to another thread if f() takes longer than a sysmon
// tick (about 20 µs), as Go does around system calls. A short call costs a
// few atomic operations. On return the goroutine reacquires a P (its own if
// still free), or queues itself and its thread goes idle until one is
// available. Returns f()'s result; exceptions propagate.
//
// Do not call gort functions that park (channel operations, locks, sleep)
// inside f: f runs "outside" the scheduler. Called outside a goroutine,
// it simply calls f().
template <class F>
decltype(auto) blocking(F&& f) {
  internal::entersyscall();
  struct Exit {
    ~Exit() { internal::exitsyscall(); }
  } exit;
  return std::forward<F>(f)();
}

// Inside its scope, the calling goroutine's calls to libc's blocking
// functions are libc's own: a read that would block blocks the thread
// (and sysmon hands its P to another thread after a while), a sleep sleeps
// the thread, as on a plain thread (docs/blocking-libraries.md). For code
// that must not leave its thread in the middle of a call, or to measure
// libc itself. Nests; a descriptor the runtime made non-blocking
// underneath still behaves as the blocking one the program asked for.
//
//   { gort::RawLibc raw; n = ::read(fd, buf, sizeof buf); }
//
// Outside a goroutine it does nothing.
class GORT_API RawLibc {
 public:
  RawLibc() noexcept;
  ~RawLibc();
  RawLibc(const RawLibc&) = delete;
  RawLibc& operator=(const RawLibc&) = delete;

 private:
  internal::G* g_;
};

// Go's runtime.Gosched: lets other goroutines run; the caller stays runnable
// and resumes later. Called outside a goroutine it yields the OS thread.
GORT_API void yield();

// The number of Ps (GOMAXPROCS) of the running runtime; 0 when not running.
GORT_API int procs();

// Go's runtime.GOMAXPROCS(n): sets the number of Ps to n (at most 1024, as
// Go clamps it) while goroutines run, and returns the previous number;
// n < 1 changes nothing (it only asks). It stops the world: every running
// goroutine is preempted and waits (for about a millisecond on an idle
// machine; as long as a goroutine the signal cannot interrupt keeps
// running), the Ps are added or removed (a removed P's goroutines, timers
// and caches go to the others), and everything restarts. Callable from a
// goroutine (which may yield to another set_procs call in progress) or from
// a plain thread (a goroutine does it while the thread waits). Throws
// panic_error when the runtime is not running.
// Setting a number (n >= 1) stops the runtime from following the default
// (as Config::procs and GORT_MAXPROCS do).
GORT_API int set_procs(int n);

// Go's runtime.SetDefaultGOMAXPROCS: sets the number of Ps to the default
// now (see Config::procs), and follows the default from then on, whatever
// Config::procs, GORT_MAXPROCS or set_procs chose. Returns the previous
// number. Callable as set_procs is; throws panic_error when the runtime
// is not running.
GORT_API int set_default_procs();

// The number of goroutines that exist now (runnable, running or parked).
GORT_API int64_t num_goroutine();

// The current goroutine's id (the main goroutine is 1); 0 outside a goroutine.
GORT_API int64_t goroutine_id();

// A snapshot of the scheduler, for demos, tests and monitoring.
struct RuntimeStats {
  int procs = 0;             // Ps (GOMAXPROCS)
  int threads = 0;           // Ms (OS threads) created by this run so far
  int idle_threads = 0;      // Ms sleeping for lack of work
  int64_t goroutines = 0;    // num_goroutine()
  // Goroutine descriptors (each with its stack, of any StackSize) that
  // exist: the live goroutines plus dead ones cached for reuse (beyond the
  // per-P caches, at most ~1,024 of the default and the small size and 4
  // of the large one; the rest are released with their stacks).
  int64_t goroutines_allocated = 0;
  size_t stack_slabs = 0;    // stack slabs mapped, of every StackSize (each one mmap)
  size_t stack_size = 0;     // bytes reserved per StackSize::kDefault stack (its G at the top included)
  const char* stack_guard = "";  // "madvise" (MADV_GUARD_INSTALL) or "mprotect"
  // Fresh stacks prepared ahead of need by the runtime's helper thread
  // during bursts of new goroutines, in this run (docs/stacks.md).
  size_t stacks_prepared_ahead = 0;
  // Goroutines run on the writer's P after writes to TCP connections whose
  // other end is in this process, in this run (docs/net-internals.md, "Connections
  // within one process").
  int64_t readied_after_write = 0;
  // OS threads inside a system call now (gort::blocking, and the libc
  // calls the runtime hands to the system-call protocol: file I/O, name
  // lookups, waiting for a child; docs/blocking-libraries.md).
  int syscall_threads = 0;
  // Stall reports sysmon printed in this run (docs/debugging.md, "Stall
  // reports"), including those folded into a summary line.
  int64_t stall_reports = 0;
};
GORT_API RuntimeStats runtime_stats();

// The OS threads the running runtime has started and not yet joined: its
// Ms other than the thread that called run, sysmon, and the stack pool's
// helper; 0 when no run is active. With /proc/self/task's count it tells
// the program's own threads from the runtime's (gort/testing.hpp's leak
// check). A thread being started or joined may be counted while it is not
// listed there yet, or no more while it still is. Never parks.
GORT_API int runtime_threads();

// True when the caller is a goroutine (as opposed to a plain OS thread or the
// runtime's own threads).
GORT_API bool in_goroutine();

// Go's runtime.Stack: the calling goroutine's traceback in Go's format
// (`goroutine N [running]:`, then one function and `file:line` per frame,
// then `created by F in goroutine K`), and with `all` every other
// goroutine's after it, each after a blank line. The runtime's own frames
// are left out unless GORT_TRACEBACK=system. Frames need debug information
// (build with -g; docs/debugging.md). Never parks; costs a walk of each
// stack printed (and, the first time, loading the debug information).
// With `all`, goroutines running on other threads are interrupted for their
// registers, but the others keep running: a goroutine that moves while it
// is read is read again (Go stops the world instead). From a plain thread,
// `stack(false)` is empty. Outside gort::run, both are empty.
GORT_API std::string stack(bool all = false);

}  // namespace gort

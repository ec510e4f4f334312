// gort/preempt.hpp — controlling preemption, and goroutine-local storage.
//
// A goroutine that runs longer than Config::time_slice (10 ms) without
// blocking is preempted: the monitor thread (sysmon) interrupts it with a
// signal (SIGURG, or GORT_PREEMPT_SIGNAL) and, if the interrupted
// instruction is at an asynchronously safe point, makes it yield — even in a
// loop with no function calls. Otherwise it yields at its next gort call
// (channel operation, lock, yield, sleep, net call, go), and sysmon retries
// the signal shortly.
//
// Safe points are instructions in code registered as preemptible: by
// default the main executable's own code. Code in shared libraries (libc,
// libstdc++, gort itself, and any .so of yours) is never interrupted, since
// it may hold locks or per-thread state: a loop that spends its time inside
// such a library yields only at its next gort call. Register your own
// libraries' code to have it preempted like the executable's:
//
//   gort::register_preemptible_object(reinterpret_cast<const void*>(&plugin_entry));
//
// gort's own code is never preempted, registered or not. An executable
// linked with libgort.a as `pkg-config --static --libs gort` says keeps
// gort's code in a section of its own and the code of other static
// archives in another, which is treated as a shared library's (not
// preempted unless registered); linked without that linker script, it has
// no asynchronous preemption (docs/preemption.md, "Programs linked with
// libgort.a").
//
// Because a goroutine may resume on another OS thread after any preemption,
// `thread_local` variables are per *thread*, not per goroutine: a goroutine
// that caches a thread_local's address (the compiler may do it for you)
// may write to another thread's variable after a preemption. Use
// GoroutineLocal<T> for per-goroutine state. The runtime saves and restores
// errno per goroutine at every switch, but the compiler may keep errno's
// *address* (__errno_location() is declared const) across a call that
// parks: read errno right after the call that set it, before any gort call.
// Never hold a std::mutex (an OS lock) across a park, or in code that may be
// preempted on a single P: the next goroutine on that P would block its
// thread on it.
//
// Example:
//
//   gort::GoroutineLocal<RequestInfo> info;   // one per goroutine
//   gort::go([&] { info->id = 42; handle(); }); // handle() reads info->id
//
//   {
//     gort::NoPreempt np;   // this goroutine is not asynchronously preempted
//     tight_timing_loop();  // in this scope (it may still block)
//   }
//
// Under ThreadSanitizer asynchronous preemption is compiled out (TSan
// defers signals and drops the edited context); cooperative preemption
// still works.
#pragma once

#include <cstdint>
#include <utility>

#include "gort/detail/api.hpp"
#include "gort/runtime.hpp"

namespace gort {

namespace internal {
GORT_API void nopreempt_add(int delta);
}  // namespace internal

// Disables asynchronous preemption of the current goroutine for its scope
// (nests). Cooperative yields at gort calls still happen.
class NoPreempt {
 public:
  NoPreempt() { internal::nopreempt_add(1); }
  ~NoPreempt() { internal::nopreempt_add(-1); }
  NoPreempt(const NoPreempt&) = delete;
  NoPreempt& operator=(const NoPreempt&) = delete;
};

// Adds [begin, end) to the code that may be preempted asynchronously.
// Returns false if the table (256 ranges) is full or the range is empty.
GORT_API bool register_preemptible_code(const void* begin, const void* end);
// Registers every executable segment of the loaded object (executable or
// shared library) that contains `addr`, less gort's own code. Returns false
// if addr is in none.
GORT_API bool register_preemptible_object(const void* addr);
// Whether asynchronous preemption works in this process: x86-64, not TSan,
// and gort's own code found (the shared library, or a static link with
// gort's linker script). When false, only cooperative preemption at gort
// calls happens.
GORT_API bool async_preemption_available();

// Per-goroutine storage: each goroutine sees its own T, value-initialised
// on first access and destroyed when the goroutine exits. On a plain OS
// thread it falls back to per-thread storage. Access costs a short lookup.
template <class T>
class GoroutineLocal {
 public:
  GoroutineLocal() : key_(internal::gls_new_key()) {}
  GoroutineLocal(const GoroutineLocal&) = delete;
  GoroutineLocal& operator=(const GoroutineLocal&) = delete;

  T& get() {
    void* p = internal::gls_get(key_);
    if (p == nullptr) {
      p = new T();
      internal::gls_set(key_, p, [](void* q) { delete static_cast<T*>(q); });
    }
    return *static_cast<T*>(p);
  }
  void set(T v) { get() = std::move(v); }
  T& operator*() { return get(); }
  T* operator->() { return &get(); }

 private:
  uint64_t key_;
};

}  // namespace gort

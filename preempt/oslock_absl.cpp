// preempt/oslock_absl.cpp — absl::Mutex counted as an OS lock (see
// oslock.cpp for why and how counting works).
//
// absl::Mutex keeps its waiters and, in debug builds, the locks each thread
// holds in per-*thread* state: a holder preempted inside its critical
// section, and another goroutine on the same thread taking the same mutex,
// corrupt that state or make absl abort with "potential deadlock". So its
// lock and unlock entry points are interposed like pthread's: libgort
// defines them, forwards to absl's own definition (found with
// dlsym(RTLD_NEXT) by its mangled name) and keeps M::oslocks. The
// conditional forms (LockWhen, Await, CondVar::Wait) release and retake the
// mutex inside absl: they pass through unchanged.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include <absl/base/options.h>
#include <absl/synchronization/mutex.h>

#include "preempt/preempt.hpp"
#include "gmp/os/sys.hpp"
#include "gort/detail/api.hpp"

namespace gort::internal {
namespace {

#define GORT_STR2(x) #x
#define GORT_STR(x) GORT_STR2(x)

using MemberFn = void (*)(absl::Mutex*);
using MemberTryFn = bool (*)(absl::Mutex*);

// absl's own definition of Mutex::<method> (mangled `_ZN4absl[ns]5Mutex<n><method>Ev`).
void* absl_next(const char* method) {
  char name[128];
#if ABSL_OPTION_USE_INLINE_NAMESPACE
  const char* ns = GORT_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  std::snprintf(name, sizeof name, "_ZN4absl%zu%s5Mutex%zu%sEv", std::strlen(ns), ns, std::strlen(method), method);
#else
  std::snprintf(name, sizeof name, "_ZN4absl5Mutex%zu%sEv", std::strlen(method), method);
#endif
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    static const char kMsg[] = "fatal error: gort: cannot find absl::Mutex's own lock functions\n";
    (void)!gort::internal::sys::write(2, kMsg, sizeof kMsg - 1);
    _exit(2);
  }
  return f;
}

template <typename Fn>
Fn next(std::atomic<Fn>* slot, const char* method) {
  Fn f = slot->load(std::memory_order_acquire);
  if (f == nullptr) [[unlikely]] {
    f = reinterpret_cast<Fn>(absl_next(method));
    slot->store(f, std::memory_order_release);
  }
  return f;
}

std::atomic<MemberFn> g_lock{nullptr}, g_unlock{nullptr}, g_rlock{nullptr}, g_runlock{nullptr};
std::atomic<MemberTryFn> g_trylock{nullptr}, g_rtrylock{nullptr};

}  // namespace
}  // namespace gort::internal

namespace absl {
ABSL_NAMESPACE_BEGIN

using gort::internal::next;
using gort::internal::oslock_add;

GORT_INTERPOSE void Mutex::Lock() {
  oslock_add(1);
  next(&gort::internal::g_lock, "Lock")(this);
}

GORT_INTERPOSE void Mutex::Unlock() {
  next(&gort::internal::g_unlock, "Unlock")(this);
  oslock_add(-1);
}

GORT_INTERPOSE bool Mutex::TryLock() {
  oslock_add(1);
  bool ok = next(&gort::internal::g_trylock, "TryLock")(this);
  if (!ok) oslock_add(-1);
  return ok;
}

GORT_INTERPOSE void Mutex::ReaderLock() {
  oslock_add(1);
  next(&gort::internal::g_rlock, "ReaderLock")(this);
}

GORT_INTERPOSE void Mutex::ReaderUnlock() {
  next(&gort::internal::g_runlock, "ReaderUnlock")(this);
  oslock_add(-1);
}

GORT_INTERPOSE bool Mutex::ReaderTryLock() {
  oslock_add(1);
  bool ok = next(&gort::internal::g_rtrylock, "ReaderTryLock")(this);
  if (!ok) oslock_add(-1);
  return ok;
}

ABSL_NAMESPACE_END
}  // namespace absl

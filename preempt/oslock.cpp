// preempt/oslock.cpp — counting the OS-level locks a thread holds (the part
// of Go's m.locks that C++ code takes without telling the runtime).
//
// Why: a goroutine preempted inside a std::mutex critical section leaves the
// mutex locked on its M; the next goroutine on that M that wants the mutex
// blocks the whole thread in the kernel, and the holder may never run again.
// The same holds for function-local statics (__cxa_guard), call_once, a
// FILE's lock, and libstdc++'s internal locks reached from inlined code
// (atomic<shared_ptr>'s pool mutex). Go never preempts an M with m.locks > 0;
// gort does the same with M::oslocks, counted here.
//
// How: libgort defines the pthread and C++ ABI entry points below, and the
// dynamic linker binds every call from the program and from the libraries
// loaded with it (libstdc++ included) to these definitions first, because
// libgort comes before libc in the global lookup order. Each one forwards
// to the next definition (dlsym(RTLD_NEXT), so sanitizers and other
// interposers keep working) and keeps the count of the calling thread's M;
// threads that are not Ms pay one TLS load. glibc's own internal locks
// (malloc, stdio inside libc) do not come through here, and need not: code
// in libc is never a preemption point.
//
// Counting: +1 once a lock or an initialisation is held (a successful
// lock/trylock, __cxa_guard_acquire returning 1, pthread_once on a once
// not yet done and flockfile for their whole duration), -1 when it is
// released. The
// increment and decrement run inside libgort, whose code is never
// interrupted by a preemption, so a lock is never held with a count of 0
// at a preemption point. pthread_cond_wait releases and retakes its mutex
// inside libc: the count stays. Each lock is taken and released by one
// thread (POSIX requires it for everything counted here), and while the
// count is non-zero the goroutine can neither be preempted nor park (a
// fatal error), so it cannot migrate and unbalance two Ms' counts.
//
// Cost: one TLS load, two plain stores and an indirect call per operation
// (os_mutex in bench/gmp_bench.cpp measures it against the unwrapped call).
//
// The timed forms also translate their absolute deadline on a goroutine of
// a synctest bubble that fakes the standard clocks: the caller computed it
// from the fake clock, the kernel compares it with the real one
// (netpoll/hook/fake_clock.hpp).
//
// The mutex profile (gmp/profiling.hpp; Go's SetMutexProfileFraction):
// while it is on, pthread_mutex_lock tries first, and a lock the try could
// not take is timed and reported with the waiter's stack. Off, it costs
// one load and a branch per lock.
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "gort/detail/race.hpp"
#include "gmp/os/clock.hpp"
#include "gmp/os/interpose.hpp"
#include "gmp/profiling.hpp"
#include "netpoll/hook/fake_clock.hpp"
#include "preempt/preempt.hpp"


using MutexFn = int (*)(pthread_mutex_t*);
using MutexTimedFn = int (*)(pthread_mutex_t*, const struct timespec*);
using MutexClockFn = int (*)(pthread_mutex_t*, clockid_t, const struct timespec*);
using RwFn = int (*)(pthread_rwlock_t*);
using RwTimedFn = int (*)(pthread_rwlock_t*, const struct timespec*);
using RwClockFn = int (*)(pthread_rwlock_t*, clockid_t, const struct timespec*);
using SpinFn = int (*)(pthread_spinlock_t*);
using OnceFn = int (*)(pthread_once_t*, void (*)());
using GuardAcquireFn = int (*)(int64_t*);
using GuardFn = void (*)(int64_t*);
using FileFn = void (*)(FILE*);
using FileTryFn = int (*)(FILE*);

// The next definitions, filled by resolve_all (or on first use).
namespace {
#define GORT_SLOT(Fn, name) GORT_NEXT_SLOT(Fn, name)
GORT_SLOT(MutexFn, pthread_mutex_lock)
GORT_SLOT(MutexFn, pthread_mutex_trylock)
GORT_SLOT(MutexTimedFn, pthread_mutex_timedlock)
GORT_SLOT(MutexClockFn, pthread_mutex_clocklock)
GORT_SLOT(MutexFn, pthread_mutex_unlock)
GORT_SLOT(RwFn, pthread_rwlock_rdlock)
GORT_SLOT(RwFn, pthread_rwlock_tryrdlock)
GORT_SLOT(RwTimedFn, pthread_rwlock_timedrdlock)
GORT_SLOT(RwClockFn, pthread_rwlock_clockrdlock)
GORT_SLOT(RwFn, pthread_rwlock_wrlock)
GORT_SLOT(RwFn, pthread_rwlock_trywrlock)
GORT_SLOT(RwTimedFn, pthread_rwlock_timedwrlock)
GORT_SLOT(RwClockFn, pthread_rwlock_clockwrlock)
GORT_SLOT(RwFn, pthread_rwlock_unlock)
GORT_SLOT(SpinFn, pthread_spin_lock)
GORT_SLOT(SpinFn, pthread_spin_trylock)
GORT_SLOT(SpinFn, pthread_spin_unlock)
GORT_SLOT(OnceFn, pthread_once)
GORT_SLOT(GuardAcquireFn, __cxa_guard_acquire)
GORT_SLOT(GuardFn, __cxa_guard_release)
GORT_SLOT(GuardFn, __cxa_guard_abort)
GORT_SLOT(FileFn, flockfile)
GORT_SLOT(FileTryFn, ftrylockfile)
GORT_SLOT(FileFn, funlockfile)
#undef GORT_SLOT

// Before main, while one thread runs: no lock call pays for a lookup later.
__attribute__((constructor(101))) void resolve_all() {
  (void)GORT_NEXT(pthread_mutex_lock);
  (void)GORT_NEXT(pthread_mutex_trylock);
  (void)GORT_NEXT(pthread_mutex_timedlock);
  (void)GORT_NEXT(pthread_mutex_clocklock);
  (void)GORT_NEXT(pthread_mutex_unlock);
  (void)GORT_NEXT(pthread_rwlock_rdlock);
  (void)GORT_NEXT(pthread_rwlock_tryrdlock);
  (void)GORT_NEXT(pthread_rwlock_timedrdlock);
  (void)GORT_NEXT(pthread_rwlock_clockrdlock);
  (void)GORT_NEXT(pthread_rwlock_wrlock);
  (void)GORT_NEXT(pthread_rwlock_trywrlock);
  (void)GORT_NEXT(pthread_rwlock_timedwrlock);
  (void)GORT_NEXT(pthread_rwlock_clockwrlock);
  (void)GORT_NEXT(pthread_rwlock_unlock);
  (void)GORT_NEXT(pthread_spin_lock);
  (void)GORT_NEXT(pthread_spin_trylock);
  (void)GORT_NEXT(pthread_spin_unlock);
  (void)GORT_NEXT(pthread_once);
  (void)GORT_NEXT(__cxa_guard_acquire);
  (void)GORT_NEXT(__cxa_guard_release);
  (void)GORT_NEXT(__cxa_guard_abort);
  (void)GORT_NEXT(flockfile);
  (void)GORT_NEXT(ftrylockfile);
  (void)GORT_NEXT(funlockfile);
}

}  // namespace


using gort::internal::oslock_add;
using gort::internal::real_deadline;

extern "C" {
// The C++ ABI's guard functions (libstdc++ defines them).
int __cxa_guard_acquire(int64_t* guard);
void __cxa_guard_release(int64_t* guard) noexcept;
void __cxa_guard_abort(int64_t* guard) noexcept;
}

namespace {

// Result of a lock attempt: keep the count only if it succeeded.
inline int counted(int r) {
  if (r != 0) oslock_add(-1);
  return r;
}

// pthread_mutex_lock while the mutex profile is on: a contended lock is
// timed (a recursive mutex this thread holds is not contended: the try
// takes it; an error-checking one it holds fails either way).
[[gnu::noinline, gnu::cold]] int lock_profiled(pthread_mutex_t* m) {
  int r = GORT_NEXT(pthread_mutex_trylock)(m);
  if (r != EBUSY) return r;
  const int64_t t0 = gort::internal::nanotime();
  r = GORT_NEXT(pthread_mutex_lock)(m);
  if (r == 0) {
    if (auto* event = gort::internal::profiling.mutex_event.load(std::memory_order_acquire)) {
      event(gort::internal::nanotime() - t0);
    }
  }
  return r;
}

}  // namespace

extern "C" {

// ---- mutexes (std::mutex, recursive_mutex, timed_mutex, ...) ----

GORT_INTERPOSE int pthread_mutex_lock(pthread_mutex_t* m) noexcept {
  oslock_add(1);
  if (gort::internal::profiling.mutex_rate.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    return counted(lock_profiled(m));
  }
  return counted(GORT_NEXT(pthread_mutex_lock)(m));
}

GORT_INTERPOSE int pthread_mutex_trylock(pthread_mutex_t* m) noexcept {
  oslock_add(1);
  return counted(GORT_NEXT(pthread_mutex_trylock)(m));
}

GORT_INTERPOSE int pthread_mutex_timedlock(pthread_mutex_t* m, const struct timespec* t) noexcept {
  timespec buf;
  t = real_deadline(CLOCK_REALTIME, t, &buf);
  oslock_add(1);
  return counted(GORT_NEXT(pthread_mutex_timedlock)(m, t));
}

GORT_INTERPOSE int pthread_mutex_clocklock(pthread_mutex_t* m, clockid_t c, const struct timespec* t) noexcept {
  timespec buf;
  t = real_deadline(c, t, &buf);
  oslock_add(1);
  return counted(GORT_NEXT(pthread_mutex_clocklock)(m, c, t));
}

GORT_INTERPOSE int pthread_mutex_unlock(pthread_mutex_t* m) noexcept {
  int r = GORT_NEXT(pthread_mutex_unlock)(m);
  if (r == 0) oslock_add(-1);
  return r;
}

// ---- rwlocks (std::shared_mutex, shared_timed_mutex) ----

GORT_INTERPOSE int pthread_rwlock_rdlock(pthread_rwlock_t* l) noexcept {
  oslock_add(1);
  return counted(GORT_NEXT(pthread_rwlock_rdlock)(l));
}

GORT_INTERPOSE int pthread_rwlock_tryrdlock(pthread_rwlock_t* l) noexcept {
  oslock_add(1);
  return counted(GORT_NEXT(pthread_rwlock_tryrdlock)(l));
}

GORT_INTERPOSE int pthread_rwlock_timedrdlock(pthread_rwlock_t* l, const struct timespec* t) noexcept {
  timespec buf;
  t = real_deadline(CLOCK_REALTIME, t, &buf);
  oslock_add(1);
  return counted(GORT_NEXT(pthread_rwlock_timedrdlock)(l, t));
}

GORT_INTERPOSE int pthread_rwlock_clockrdlock(pthread_rwlock_t* l, clockid_t c, const struct timespec* t) noexcept {
  timespec buf;
  t = real_deadline(c, t, &buf);
  oslock_add(1);
  return counted(GORT_NEXT(pthread_rwlock_clockrdlock)(l, c, t));
}

GORT_INTERPOSE int pthread_rwlock_wrlock(pthread_rwlock_t* l) noexcept {
  oslock_add(1);
  return counted(GORT_NEXT(pthread_rwlock_wrlock)(l));
}

GORT_INTERPOSE int pthread_rwlock_trywrlock(pthread_rwlock_t* l) noexcept {
  oslock_add(1);
  return counted(GORT_NEXT(pthread_rwlock_trywrlock)(l));
}

GORT_INTERPOSE int pthread_rwlock_timedwrlock(pthread_rwlock_t* l, const struct timespec* t) noexcept {
  timespec buf;
  t = real_deadline(CLOCK_REALTIME, t, &buf);
  oslock_add(1);
  return counted(GORT_NEXT(pthread_rwlock_timedwrlock)(l, t));
}

GORT_INTERPOSE int pthread_rwlock_clockwrlock(pthread_rwlock_t* l, clockid_t c, const struct timespec* t) noexcept {
  timespec buf;
  t = real_deadline(c, t, &buf);
  oslock_add(1);
  return counted(GORT_NEXT(pthread_rwlock_clockwrlock)(l, c, t));
}

GORT_INTERPOSE int pthread_rwlock_unlock(pthread_rwlock_t* l) noexcept {
  int r = GORT_NEXT(pthread_rwlock_unlock)(l);
  if (r == 0) oslock_add(-1);
  return r;
}

// ---- spinlocks ----

GORT_INTERPOSE int pthread_spin_lock(pthread_spinlock_t* l) noexcept {
  oslock_add(1);
  return counted(GORT_NEXT(pthread_spin_lock)(l));
}

GORT_INTERPOSE int pthread_spin_trylock(pthread_spinlock_t* l) noexcept {
  oslock_add(1);
  return counted(GORT_NEXT(pthread_spin_trylock)(l));
}

GORT_INTERPOSE int pthread_spin_unlock(pthread_spinlock_t* l) noexcept {
  int r = GORT_NEXT(pthread_spin_unlock)(l);
  if (r == 0) oslock_add(-1);
  return r;
}

// ---- one-time initialisation (std::call_once, function-local statics) ----

GORT_INTERPOSE int pthread_once(pthread_once_t* once, void (*init)()) {
#if defined(__GLIBC__)
  // A done once holds nothing: answer it as glibc's own fast path does
  // (nptl/pthread_once.c: an acquire load, done when bit 2 is set), without
  // counting or the indirect call. OpenSSL 3 asks on every error-queue
  // access, several times per TLS record. Race builds always forward: the
  // detector's interceptor must see the acquire.
  if (!gort::internal::kRaceEnabled && (__atomic_load_n(once, __ATOMIC_ACQUIRE) & 2) != 0) return 0;
#endif
  oslock_add(1);
  int r = GORT_NEXT(pthread_once)(once, init);
  oslock_add(-1);
  return r;
}

GORT_INTERPOSE int __cxa_guard_acquire(int64_t* guard) {
  int r = GORT_NEXT(__cxa_guard_acquire)(guard);
  // 1: this thread runs the initialisation, until release or abort.
  if (r != 0) oslock_add(1);
  return r;
}

GORT_INTERPOSE void __cxa_guard_release(int64_t* guard) noexcept {
  GORT_NEXT(__cxa_guard_release)(guard);
  oslock_add(-1);
}

GORT_INTERPOSE void __cxa_guard_abort(int64_t* guard) noexcept {
  GORT_NEXT(__cxa_guard_abort)(guard);
  oslock_add(-1);
}

// ---- stdio's FILE locks (flockfile ... *_unlocked ... funlockfile) ----

GORT_INTERPOSE void flockfile(FILE* f) noexcept {
  oslock_add(1);
  GORT_NEXT(flockfile)(f);
}

GORT_INTERPOSE int ftrylockfile(FILE* f) noexcept {
  oslock_add(1);
  return counted(GORT_NEXT(ftrylockfile)(f));
}

GORT_INTERPOSE void funlockfile(FILE* f) noexcept {
  GORT_NEXT(funlockfile)(f);
  oslock_add(-1);
}

}  // extern "C"

// netpoll/hook/timedwait.cpp — libc's timed waits on a condition variable
// or a semaphore, interposed only to translate their absolute deadlines on
// a goroutine of a bubble that fakes the standard clocks (fake_clock.hpp):
// pthread_cond_timedwait, pthread_cond_clockwait (std::condition_variable's
// wait_until and wait_for), sem_timedwait, sem_clockwait. Elsewhere they
// forward the deadline untouched, at the cost of one bubble_std_clock_now.
//
// They still block the thread, as libc's do: such a wait is not durably
// blocking, and the bubble's clock does not move meanwhile. The timed
// OS-lock calls translate theirs in preempt/oslock.cpp, clock_nanosleep in
// sleep.cpp.
#undef _FILE_OFFSET_BITS
#undef _FORTIFY_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "gmp/os/interpose.hpp"
#include "netpoll/hook/fake_clock.hpp"

using CondTimedFn = int (*)(pthread_cond_t*, pthread_mutex_t*, const timespec*);
using CondClockFn = int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const timespec*);
using SemTimedFn = int (*)(sem_t*, const timespec*);
using SemClockFn = int (*)(sem_t*, clockid_t, const timespec*);

namespace {
GORT_NEXT_SLOT(CondTimedFn, pthread_cond_timedwait)
GORT_NEXT_SLOT(CondClockFn, pthread_cond_clockwait)
GORT_NEXT_SLOT(SemTimedFn, sem_timedwait)
GORT_NEXT_SLOT(SemClockFn, sem_clockwait)

__attribute__((constructor(101))) void resolve_all() {
  (void)GORT_NEXT(pthread_cond_timedwait);
  (void)GORT_NEXT(pthread_cond_clockwait);
  (void)GORT_NEXT(sem_timedwait);
  (void)GORT_NEXT(sem_clockwait);
}

// The clock pthread_cond_timedwait measures c's deadline against: the one
// pthread_condattr_setclock chose. POSIX gives no way to ask a condition
// variable; glibc (since 2.25) keeps it in bit 0 of __wrefs, set at
// pthread_cond_init and never changed (its own pthread_cond_timedwait
// reads it so).
clockid_t cond_clock(const pthread_cond_t* c) {
#if defined(__GLIBC__)
  return (__atomic_load_n(&c->__data.__wrefs, __ATOMIC_RELAXED) & 1) != 0 ? CLOCK_MONOTONIC : CLOCK_REALTIME;
#else
  (void)c;
  return CLOCK_REALTIME;
#endif
}

}  // namespace

using gort::internal::real_deadline;

extern "C" {

GORT_INTERPOSE int pthread_cond_timedwait(pthread_cond_t* __restrict c, pthread_mutex_t* __restrict m,
                                          const timespec* __restrict t) {
  timespec buf;
  return GORT_NEXT(pthread_cond_timedwait)(c, m, real_deadline(cond_clock(c), t, &buf));
}

GORT_INTERPOSE int pthread_cond_clockwait(pthread_cond_t* __restrict c, pthread_mutex_t* __restrict m,
                                          clockid_t clock, const timespec* __restrict t) {
  timespec buf;
  return GORT_NEXT(pthread_cond_clockwait)(c, m, clock, real_deadline(clock, t, &buf));
}

GORT_INTERPOSE int sem_timedwait(sem_t* __restrict s, const timespec* __restrict t) {
  timespec buf;
  return GORT_NEXT(sem_timedwait)(s, real_deadline(CLOCK_REALTIME, t, &buf));
}

GORT_INTERPOSE int sem_clockwait(sem_t* __restrict s, clockid_t clock, const timespec* __restrict t) {
  timespec buf;
  return GORT_NEXT(sem_clockwait)(s, clock, real_deadline(clock, t, &buf));
}

}  // extern "C"

// gmp/race/sanitizer.hpp — what the sanitizers must be told about stack switches.
#pragma once

#include "gmp/race/room.hpp"

#include <cstddef>

#include <gort/detail/race.hpp>

#if defined(__SANITIZE_ADDRESS__)
#define GORT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GORT_ASAN 1
#endif
#endif

// GORT_RACE: the race detector (a -Db_sanitize=thread build; docs/race.md).
// The library is then compiled without TSan's instrumentation, as Go's
// runtime is, and says what it synchronises through <gort/detail/race.hpp>.
// GORT_RACE_RUNTIME: the library instrumented too (-Drace_runtime=true), to
// find the runtime's own races.
#if defined(GORT_RACE) || defined(GORT_RACE_RUNTIME) || defined(__SANITIZE_THREAD__)
#define GORT_TSAN_ON 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GORT_TSAN_ON 1
#endif
#endif

#ifdef GORT_TSAN_ON
#include <sanitizer/tsan_interface.h>
extern "C" void AnnotateBenignRaceSized(const char* file, int line, const volatile void* mem, size_t size,
                                        const char* description);
#endif

#ifdef GORT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

namespace gort::internal {

#ifdef GORT_ASAN
inline constexpr bool kAsanEnabled = true;
#else
inline constexpr bool kAsanEnabled = false;
#endif

#ifdef GORT_TSAN_ON
inline constexpr bool kTsanEnabled = true;
#else
inline constexpr bool kTsanEnabled = false;
#endif

inline void asan_unpoison(void* p, size_t n) {
#ifdef GORT_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p;
  (void)n;
#endif
}

inline void lsan_register_root(void* p, size_t n) {
#ifdef GORT_ASAN
  __lsan_register_root_region(p, n);
#else
  (void)p;
  (void)n;
#endif
}

inline void lsan_unregister_root(void* p, size_t n) {
#ifdef GORT_ASAN
  __lsan_unregister_root_region(p, n);
#else
  (void)p;
  (void)n;
#endif
}

// ThreadSanitizer must know which fiber runs (each G has one; g0 uses the
// thread's own).
inline void* tsan_current_fiber() {
#ifdef GORT_TSAN_ON
  return __tsan_get_current_fiber();
#else
  return nullptr;
#endif
}
inline void* tsan_create_fiber() {
#ifdef GORT_TSAN_ON
  return __tsan_create_fiber(0);
#else
  return nullptr;
#endif
}
inline void tsan_destroy_fiber(void* f) {
#ifdef GORT_TSAN_ON
  if (f != nullptr) __tsan_destroy_fiber(f);
#else
  (void)f;
#endif
}

// A fiber that starts with nobody's history: a new fiber otherwise inherits
// the clock of the fiber that creates it (how a goroutine inherits its
// spawner's), which for a runtime fiber would be whichever goroutine
// happened to be running.
inline void* tsan_create_orphan_fiber() {
#ifdef GORT_TSAN_ON
  RaceIgnoreSync no_history;
  return __tsan_create_fiber(0);
#else
  return nullptr;
#endif
}

// A thread's errno is every goroutine's that runs there, one at a time: the
// switch saves and restores it per goroutine (gmp/switch.cpp), so what TSan
// sees as two fibers writing one word is no race.
inline void tsan_errno_is_per_goroutine(const int* errno_ptr) {
#ifdef GORT_TSAN_ON
  AnnotateBenignRaceSized(__FILE__, __LINE__, errno_ptr, sizeof(int), "errno, saved and restored per goroutine");
#else
  (void)errno_ptr;
#endif
}

// A goroutine switch is no synchronisation of the user's: in race mode the
// two fibers' clocks stay apart, so two goroutines that take turns on one M
// are not one thread's program order. (With the runtime instrumented it
// must be: the runtime's own state goes from one goroutine to the next.)
inline void tsan_switch_to(void* f) {
#if defined(GORT_RACE)
  __tsan_switch_to_fiber(f, __tsan_switch_to_fiber_no_sync);
#elif defined(GORT_TSAN_ON)
  __tsan_switch_to_fiber(f, 0);
#else
  (void)f;
#endif
}

}  // namespace gort::internal

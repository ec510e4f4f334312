// gort/detail/race.hpp — what gort tells the race detector (Go's
// runtime/race.go): the happens-before edges of Go's memory model.
//
// Not part of the public API: included by gort's headers and sources. In a
// program built with -fsanitize=thread (and in gort's race build, where the
// library defines GORT_RACE) these call ThreadSanitizer; otherwise they are
// empty inline functions and cost nothing.
//
// The library itself is not instrumented in race mode (docs/race.md): its
// run queues, locks and atomics would order every goroutine after every
// other. So each primitive says, with these calls, exactly what Go's memory
// model promises: race_release(x) publishes everything the calling
// goroutine did so far; a later race_acquire(x) makes it happen before
// whatever the acquiring goroutine does next. Both act on the goroutine
// that calls them (its TSan fiber).
//
// Thread-safe. Costs, in race mode: a TSan call each (vector-clock work);
// otherwise nothing.
#pragma once

#include <cstddef>

#if defined(GORT_RACE) || defined(__SANITIZE_THREAD__)
#define GORT_RACE_ANNOTATE 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GORT_RACE_ANNOTATE 1
#endif
#endif

#ifdef GORT_RACE_ANNOTATE
extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
void __tsan_read_range(void* addr, unsigned long size);
void __tsan_write_range(void* addr, unsigned long size);
void __tsan_ignore_thread_begin();
void __tsan_ignore_thread_end();
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
}
#endif

#if defined(__SANITIZE_THREAD__) && !defined(GORT_RACE)
// The program's default TSan options (docs/race.md, "Build and run"): the
// interceptors (malloc, memcpy, ...) record nothing for calls made from
// modules built without TSan. gort's library is one: like Go's runtime it
// is not instrumented, and it states the edges of Go's memory model
// itself. Without this, a container the library grew on one goroutine and
// moved on another, or OpenSSL's per-thread error queue used by two
// goroutines in turn, would be reported as a race of the program's.
// Weak: a program that defines its own should include the option (and
// TSAN_OPTIONS still applies on top).
extern "C" __attribute__((weak)) const char* __tsan_default_options() {
  return "ignore_noninstrumented_modules=1";
}
#endif

namespace gort::internal {

// True in a build whose code the race detector sees (this translation unit
// or the library).
#ifdef GORT_RACE_ANNOTATE
inline constexpr bool kRaceEnabled = true;
#else
inline constexpr bool kRaceEnabled = false;
#endif

// ThreadSanitizer's runtime (GCC 12's) has room for 8,128 threads and
// fibers together, and dies past it ("Thread limit (8128 threads)
// exceeded"). Go 1.19 stops at 8,128 live goroutines, its threads taking
// none of that room; gort's threads (Ms, sysmon, the program's own) and
// each M's timer fiber take some, so gort stops at 8,000 live goroutine
// fibers (finished ones kept for reports are reused first at the limit),
// with Go's text and its own number.
inline constexpr int kRaceLimitGoroutines = 8000;
inline constexpr const char* kRaceLimitText =
    "race: limit on 8000 simultaneously alive goroutines is exceeded, dying";

inline void race_acquire(const void* addr) {
#ifdef GORT_RACE_ANNOTATE
  __tsan_acquire(const_cast<void*>(addr));
#else
  (void)addr;
#endif
}

// Merges: every goroutine that released addr happens before a later
// acquirer (Go's racereleasemerge; TSan's release always merges).
inline void race_release(const void* addr) {
#ifdef GORT_RACE_ANNOTATE
  __tsan_release(const_cast<void*>(addr));
#else
  (void)addr;
#endif
}

// The calling goroutine read (race_read_range) or wrote (race_write_range)
// [addr, addr + size): what the runtime did on its behalf with a system
// call or uninstrumented code, such as the bytes of a Conn::write and a
// Conn::read (Go's raceReadRange/raceWriteRange in package syscall).
inline void race_read_range(const void* addr, std::size_t size) {
#ifdef GORT_RACE_ANNOTATE
  if (size != 0) __tsan_read_range(const_cast<void*>(addr), size);
#else
  (void)addr;
  (void)size;
#endif
}

inline void race_write_range(void* addr, std::size_t size) {
#ifdef GORT_RACE_ANNOTATE
  if (size != 0) __tsan_write_range(addr, size);
#else
  (void)addr;
  (void)size;
#endif
}

// While one is alive, the calling goroutine's memory accesses are not
// recorded: the runtime moves a value on another goroutine's behalf (a
// channel element), which is ordered by the channel's edges, not by who
// happened to copy the bytes.
class RaceIgnore {
 public:
  RaceIgnore() {
#ifdef GORT_RACE_ANNOTATE
    __tsan_ignore_thread_begin();
#endif
  }
  ~RaceIgnore() {
#ifdef GORT_RACE_ANNOTATE
    __tsan_ignore_thread_end();
#endif
  }
  RaceIgnore(const RaceIgnore&) = delete;
  RaceIgnore& operator=(const RaceIgnore&) = delete;
};

// While one is alive, the calling goroutine's synchronisation is not
// recorded either: the runtime's own use of what TSan intercepts (the
// poller's epoll calls and eventfd, which TSan takes for a release and an
// acquire on the descriptor) must not order the goroutine that happens to
// be current after the one that last touched the poller.
class RaceIgnoreSync {
 public:
  RaceIgnoreSync() {
#ifdef GORT_RACE_ANNOTATE
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
#endif
  }
  ~RaceIgnoreSync() {
#ifdef GORT_RACE_ANNOTATE
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
#endif
  }
  RaceIgnoreSync(const RaceIgnoreSync&) = delete;
  RaceIgnoreSync& operator=(const RaceIgnoreSync&) = delete;
};

}  // namespace gort::internal

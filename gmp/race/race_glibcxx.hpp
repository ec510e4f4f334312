// gmp/race/race_glibcxx.hpp — force-included into every source of the library
// in the race detector's build (meson.build; docs/race.md, "How it works").
//
// The library is not instrumented, so ThreadSanitizer does not see its
// atomic operations; but it shares reference-counted objects with the
// program, which is: the std::shared_ptr inside Timer, Ticker and Context
// handles. When the library drops the last reference, the delete (TSan
// intercepts it) would race with the program's earlier decrement, which
// TSan did see. libstdc++ leaves a hook for race detectors around each
// reference count: a "happens before" before every decrement, a "happens
// after" once the count reached zero. Here they are TSan's release and
// acquire on the counter's address, the same address the program's
// instrumented atomics synchronise on.
#pragma once

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

#define _GLIBCXX_SYNCHRONIZATION_HAPPENS_BEFORE(A) __tsan_release((void*)(A))
#define _GLIBCXX_SYNCHRONIZATION_HAPPENS_AFTER(A) __tsan_acquire((void*)(A))

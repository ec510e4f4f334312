// gmp/os/interpose.hpp — calling the next definition of a libc function that
// libgort interposes (the OS-lock counters, preempt/oslock.cpp; the
// blocking-call hooks, netpoll/hook/).
//
// libgort defines the function; the dynamic linker binds the program's
// calls, and those of the shared libraries loaded with it, to that
// definition first (libgort comes before libc in the lookup order; with a
// static libgort, the executable exports it). The definition forwards to
// the next one, found once with dlsym(RTLD_NEXT): libc's, or a sanitizer's
// or another interposer's in between, which keep working.
//
//   GORT_NEXT_SLOT(ReadFn, read)      // a slot: std::atomic<ReadFn> next_read
//   GORT_NEXT(read)(fd, buf, n)       // the next definition's call
//
// Each definition is marked GORT_INTERPOSE (gort/detail/api.hpp): the
// library is built with hidden visibility, and an entry point the dynamic
// linker cannot see interposes nothing. gmp/os/interpose.list names them
// all; tests/abi checks that libgort exports exactly those.
//
// Cost: one load of the slot and an indirect call; the lookup happens once
// (every slot is resolved before main by the files that define them).
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>

#include "gmp/os/sys.hpp"
#include "gort/detail/api.hpp"

namespace gort::internal {

[[noreturn]] inline void interpose_die(const char* msg) {
  (void)!sys::write(2, msg, __builtin_strlen(msg));
  _exit(2);
}

// The next definition of `name`, looked up on first use. A call made by
// dlsym itself while it looks one up (only an interposed malloc would)
// cannot be served.
template <typename Fn>
[[gnu::noinline]] Fn next_fn_slow(std::atomic<Fn>* slot, const char* name) {
  Fn f = slot->load(std::memory_order_acquire);
  if (f != nullptr) return f;
  thread_local bool resolving = false;
  if (resolving) interpose_die("fatal error: gort: an interposed function was called while looking up the next definition\n");
  resolving = true;
  f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
  resolving = false;
  if (f == nullptr) interpose_die("fatal error: gort: cannot find the next definition of an interposed function\n");
  slot->store(f, std::memory_order_release);
  return f;
}

// Inlined into every entry point: one load, not a call.
template <typename Fn>
[[gnu::always_inline]] inline Fn next_fn(std::atomic<Fn>* slot, const char* name) {
  Fn f = slot->load(std::memory_order_acquire);
  if (f != nullptr) [[likely]] return f;
  return next_fn_slow(slot, name);
}

}  // namespace gort::internal

#define GORT_NEXT_SLOT(Fn, name) std::atomic<Fn> next_##name{nullptr};
// The next definition of `name` (its type is its slot's).
#define GORT_NEXT(name) (::gort::internal::next_fn(&next_##name, #name))

// gmp/os/relaxed.hpp — plain fields that another thread reads without a lock.
//
// sysmon's schedtrace (gmp/diag/schedtrace.cpp) reads other Ms', Ps' and Gs'
// state while their owners change it, as Go's schedtrace does: a snapshot,
// not a consistent one. Those fields stay plain (their owners' other reads
// are ordinary loads the compiler may keep in registers), but every store
// to them, and the foreign reads, go through std::atomic_ref with relaxed
// order: no torn values, no data race for ThreadSanitizer, and on x86-64
// the stores are the same plain `mov` as a plain field's store.
#pragma once

#include <atomic>

namespace gort::internal {

template <class T>
inline void relaxed_store(T& field, T v) {
  std::atomic_ref<T>(field).store(v, std::memory_order_relaxed);
}

template <class T>
inline T relaxed_load(const T& field) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(std::memory_order_relaxed);
}

}  // namespace gort::internal

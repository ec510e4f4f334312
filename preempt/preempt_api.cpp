// preempt/preempt_api.cpp — NoPreempt and code registration (the public
// API of <gort/preempt.hpp>; GoroutineLocal's storage is gmp/gls.cpp).
#include <dlfcn.h>
#include <link.h>

#include "gmp/g.hpp"
#include "gmp/tls.hpp"
#include "gort/preempt.hpp"
#include "preempt/preempt.hpp"

namespace gort {
namespace internal {

void nopreempt_add(int delta) {
  G* g = getg();
  if (g != nullptr) g->nopreempt += delta;
}

namespace {

struct FindObject {
  uintptr_t addr;
  bool found;
};

int register_object_segments(dl_phdr_info* info, size_t, void* arg) {
  auto* f = static_cast<FindObject*>(arg);
  if (!object_contains(info, f->addr, false)) return 0;
  add_object_segments(info);
  f->found = true;
  return 1;
}

}  // namespace
}  // namespace internal

bool register_preemptible_code(const void* begin, const void* end) {
  internal::preempt_ranges_init();
  return internal::add_preemptible_range(reinterpret_cast<uintptr_t>(begin),
                                         reinterpret_cast<uintptr_t>(end));
}

bool register_preemptible_object(const void* addr) {
  internal::preempt_ranges_init();
  internal::FindObject f{reinterpret_cast<uintptr_t>(addr), false};
  dl_iterate_phdr(&internal::register_object_segments, &f);
  return f.found;
}

bool async_preemption_available() {
  internal::preempt_init();
  return internal::async_preempt_supported();
}

}  // namespace gort

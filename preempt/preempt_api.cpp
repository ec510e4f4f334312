// preempt/preempt_api.cpp — NoPreempt, code registration, goroutine-local
// storage.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <vector>

#include "gmp/sched.hpp"
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

std::atomic<uint64_t> g_next_key{1};

struct LocalSlot {
  uint64_t key;
  void* value;
  void (*destroy)(void*);
};
using LocalTable = std::vector<LocalSlot>;

thread_local LocalTable t_thread_locals;
thread_local struct ThreadLocalsCleanup {
  ~ThreadLocalsCleanup() {
    for (auto& s : t_thread_locals) s.destroy(s.value);
    t_thread_locals.clear();
  }
} t_cleanup;

LocalTable* table(bool create) {
  G* g = getg();
  if (g == nullptr) {
    (void)&t_cleanup;
    return &t_thread_locals;
  }
  if (g->locals == nullptr && create) g->locals = new LocalTable;
  return static_cast<LocalTable*>(g->locals);
}

}  // namespace

uint64_t gls_new_key() { return g_next_key.fetch_add(1, std::memory_order_relaxed); }

void* gls_get(uint64_t key) {
  LocalTable* t = table(false);
  if (t == nullptr) return nullptr;
  for (auto& s : *t) {
    if (s.key == key) return s.value;
  }
  return nullptr;
}

void gls_set(uint64_t key, void* value, void (*destroy)(void*)) {
  LocalTable* t = table(true);
  for (auto& s : *t) {
    if (s.key == key) {
      s.destroy(s.value);
      s.value = value;
      s.destroy = destroy;
      return;
    }
  }
  t->push_back(LocalSlot{key, value, destroy});
}

// Called on the goroutine's own stack when it exits.
void gls_destroy(G* g) {
  auto* t = static_cast<LocalTable*>(g->locals);
  if (t == nullptr) return;
  // Destructors may touch other locals: pop one at a time.
  while (!t->empty()) {
    LocalSlot s = t->back();
    t->pop_back();
    s.destroy(s.value);
  }
  delete t;
  g->locals = nullptr;
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

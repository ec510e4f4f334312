// gmp/gls.cpp — goroutine-local storage: the runtime side of
// gort::GoroutineLocal<T> (<gort/preempt.hpp>).
//
// Each G owns a table of (key, value, destructor) slots (G::locals), made
// on first use and destroyed by goroutine_main when the G's closure
// returns, on the G's own stack. A plain thread gets a thread_local table
// instead, destroyed when the thread exits.
#include <atomic>
#include <vector>

#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gort/runtime.hpp"

namespace gort::internal {
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

}  // namespace gort::internal

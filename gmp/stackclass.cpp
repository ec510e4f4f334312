// gmp/stackclass.cpp — the pools of the stack size classes other than the
// default (gort::StackSize; kStackClassTable in stack.hpp), and what looks
// at every pool at once.
//
// Slabs are carved into slots of one size, so each class has a StackPool
// of its own (runtime.sized_stacks; the default's is runtime.stacks), set
// up and released with the run as the default's is. Their free Gs are kept
// apart in newproc.cpp. No helper thread prepares their stacks ahead: a
// second one per class would be threads for a feature most runs never
// use, and a P's cache refill prepares a few at once anyway (take_last).
//
// The fault handler and the tracebacks find a goroutine's G from an
// address in its stack (find_stack): every pool's ranges are searched,
// the default's first.
#include <algorithm>

#include "gmp/sched.hpp"

namespace gort::internal {

void stack_classes_init() {
  for (int c = 1; c < kStackClasses; c++) {
    const StackClass& k = kStackClassTable[c];
    runtime.sized_stacks[c - 1].init(k.size, static_cast<size_t>(k.warm));
  }
}

void stack_classes_destroy(bool keep_mapped) {
  for (StackPool& pool : runtime.sized_stacks) pool.destroy(keep_mapped);
}

bool find_stack(const void* addr, StackSlot* out) {
  if (runtime.stacks.find(addr, out)) return true;
  for (const StackPool& pool : runtime.sized_stacks) {
    if (pool.find(addr, out)) return true;
  }
  return false;
}

size_t stack_copy_cap() {
  size_t cap = runtime.stacks.stack_size();
  for (const StackPool& pool : runtime.sized_stacks) {
    if (pool.mapped()) cap = std::max(cap, pool.stack_size());
  }
  return std::min(cap, size_t{1} << 20);
}

}  // namespace gort::internal

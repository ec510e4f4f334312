// gmp/stack.cpp — see stack.hpp.
#include "gmp/stack.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "gmp/fatal.hpp"
#include "gmp/sanitizer.hpp"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

namespace gort::internal {
namespace {

// -1 unknown, 1 madvise guards work, 0 fall back to mprotect.
std::atomic<int> g_madvise_guards{-1};

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

void install_guard(char* lo) {
  int mode = g_madvise_guards.load(std::memory_order_relaxed);
  if (mode != 0) {
    if (madvise(lo, kGuardSize, MADV_GUARD_INSTALL) == 0) {
      g_madvise_guards.store(1, std::memory_order_relaxed);
      return;
    }
    if (errno != EINVAL && errno != ENOSYS) fatal("stack: madvise(MADV_GUARD_INSTALL) failed");
    g_madvise_guards.store(0, std::memory_order_relaxed);
  }
  if (mprotect(lo, kGuardSize, PROT_NONE) != 0) {
    fatal("stack: mprotect guard failed (vm.max_map_count reached?)");
  }
}

}  // namespace

bool stack_guard_madvise_supported() { return g_madvise_guards.load() == 1; }

void StackPool::init(size_t stack_size) {
  size_t p = page_size();
  if (stack_size < 16 * 1024) stack_size = 16 * 1024;
  size_ = (stack_size + p - 1) / p * p;
  slot_ = size_ + kGuardSize;
  // About 64 MiB of address space per slab, at least one stack.
  slots_per_slab_ = (64u << 20) / slot_;
  if (slots_per_slab_ == 0) slots_per_slab_ = 1;
}

const char* StackPool::guard_kind() const {
  return g_madvise_guards.load() == 0 ? "mprotect" : "madvise";
}

void StackPool::grow_locked() {
  size_t bytes = slot_ * slots_per_slab_;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) fatal("stack: out of address space for goroutine stacks (mmap failed)");
  char* base = static_cast<char*>(mem);
  slabs_.emplace_back(base, bytes);
  SlabRange* r = spare_ranges_;
  if (r != nullptr) {
    spare_ranges_ = r->next.load(std::memory_order_relaxed);
  } else {
    r = new SlabRange;
  }
  r->base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_relaxed);
  r->bytes.store(bytes, std::memory_order_relaxed);
  r->slot.store(slot_, std::memory_order_relaxed);
  r->next.store(ranges_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  ranges_.store(r, std::memory_order_release);
  // LeakSanitizer scans goroutine stacks as roots. Each stack is registered
  // on its own: a region spanning the slab would include the guards, and a
  // leak check reading a guard page faults.
  for (size_t i = 0; i < slots_per_slab_; i++) lsan_register_root(base + i * slot_ + kGuardSize, size_);
  // Stacks leave the pool free of ASan poison. A slab of an earlier run
  // mapped here may have left some behind (ASan clears a region this large
  // by remapping its shadow, so this is cheap).
  asan_unpoison(base, bytes);
  // Hand out low addresses first: push in reverse so pop_back yields slot 0.
  // Guards come later, one slot at a time (alloc): see "Guards" in stack.hpp.
  for (size_t i = slots_per_slab_; i-- > 0;) fresh_.push_back(base + i * slot_ + kGuardSize);
}

void StackPool::alloc(char** out, size_t n) {
  MutexLock lock(mu_);
  for (size_t i = 0; i < n; i++) {
    if (!warm_.empty()) {
      out[i] = warm_.back();
      warm_.pop_back();
      continue;
    }
    if (!cold_.empty()) {
      out[i] = cold_.back();
      cold_.pop_back();
      continue;
    }
    if (fresh_.empty()) grow_locked();
    char* lo = fresh_.back();
    fresh_.pop_back();
    // The guard, then at once a user-mode write to the stack's top page
    // (where the G goes): the pair that keeps shadow-paging hypervisors
    // from discarding their translations (stack.hpp, "Guards").
    install_guard(lo - kGuardSize);
    static_cast<volatile char*>(lo)[size_ - 1] = 0;
    out[i] = lo;
  }
}

void StackPool::free(char* const* lows, size_t n) {
  MutexLock lock(mu_);
  for (size_t i = 0; i < n; i++) {
    if (warm_.size() < kWarmLimit) {
      warm_.push_back(lows[i]);
    } else {
      // Give the pages back; the guard marker survives MADV_DONTNEED.
      madvise(lows[i], size_, MADV_DONTNEED);
      cold_.push_back(lows[i]);
    }
  }
}

StackPool::~StackPool() {
  for (SlabRange* list : {ranges_.exchange(nullptr), spare_ranges_}) {
    while (list != nullptr) {
      SlabRange* next = list->next.load(std::memory_order_relaxed);
      delete list;
      list = next;
    }
  }
  spare_ranges_ = nullptr;
}

bool StackPool::find(const void* addr, StackSlot* out) const {
  auto a = reinterpret_cast<uintptr_t>(addr);
  for (SlabRange* r = ranges_.load(std::memory_order_acquire); r != nullptr;
       r = r->next.load(std::memory_order_relaxed)) {
    uintptr_t base = r->base.load(std::memory_order_relaxed);
    uintptr_t bytes = r->bytes.load(std::memory_order_relaxed);
    uintptr_t slot = r->slot.load(std::memory_order_relaxed);
    if (a < base || a - base >= bytes || slot == 0) continue;
    uintptr_t off = (a - base) % slot;
    out->lo = reinterpret_cast<char*>(a - off + kGuardSize);
    out->guard = off < kGuardSize;
    return true;
  }
  return false;
}

size_t StackPool::slabs() const {
  MutexLock lock(mu_);
  return slabs_.size();
}

void StackPool::destroy(bool keep_mapped) {
  MutexLock lock(mu_);
  // Unpublish the ranges before unmapping; a fault handler still walking
  // them reads nodes that stay allocated.
  SlabRange* r = ranges_.exchange(nullptr, std::memory_order_acq_rel);
  while (r != nullptr) {
    SlabRange* next = r->next.load(std::memory_order_relaxed);
    r->next.store(spare_ranges_, std::memory_order_relaxed);
    spare_ranges_ = r;
    r = next;
  }
  for (auto& [base, bytes] : slabs_) {
    if (keep_mapped) continue;  // deliberately never unmapped (see header)
    for (size_t i = 0; i < bytes / slot_; i++) lsan_unregister_root(base + i * slot_ + kGuardSize, size_);
    munmap(base, bytes);
  }
  slabs_.clear();
  warm_.clear();
  cold_.clear();
  fresh_.clear();
  warm_.shrink_to_fit();
  cold_.shrink_to_fit();
  fresh_.shrink_to_fit();
}

}  // namespace gort::internal

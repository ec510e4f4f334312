// netpoll/fd_table.cpp — see fd_table.hpp.
#include "netpoll/fd_table.hpp"

#include <cstdlib>

#include "netpoll/netpoll.hpp"
#include "netpoll/poll_desc.hpp"

namespace gort::internal {

std::atomic<FdChunk*> g_fd_chunks[kFdChunks];
std::atomic<bool> g_fd_owned_any{false};
std::atomic<bool> g_libc_hooks_on{false};

std::atomic<uintptr_t>* fd_slot_make(int fd) {
  if (fd < 0) return nullptr;
  unsigned c = static_cast<unsigned>(fd) >> kFdChunkBits;
  if (c >= static_cast<unsigned>(kFdChunks)) return nullptr;
  FdChunk* chunk = g_fd_chunks[c].load(std::memory_order_acquire);
  if (chunk == nullptr) {
    // calloc: zero is kSlotEmpty, and the atomics need no constructor run.
    auto* fresh = static_cast<FdChunk*>(std::calloc(1, sizeof(FdChunk)));
    if (fresh == nullptr) return nullptr;
    if (g_fd_chunks[c].compare_exchange_strong(chunk, fresh, std::memory_order_acq_rel)) {
      chunk = fresh;
    } else {
      std::free(fresh);  // another thread made it first
    }
  }
  return &(*chunk)[fd & ((1 << kFdChunkBits) - 1)];
}

namespace {

void drop(uintptr_t v) {
  if (!slot_is_pd(v)) return;
  PollDesc* pd = slot_pd(v);
  poll_evict(pd);
  pd_unref(pd);
}

}  // namespace

bool fd_slot_store(int fd, uintptr_t v) {
  std::atomic<uintptr_t>* s = fd_slot_make(fd);
  if (s == nullptr) return false;
  drop(s->exchange(v, std::memory_order_acq_rel));
  return true;
}

void fd_slot_reset(int fd) {
  std::atomic<uintptr_t>* s = fd_slot(fd);
  if (s == nullptr || s->load(std::memory_order_relaxed) == kSlotEmpty) return;
  drop(s->exchange(kSlotEmpty, std::memory_order_acq_rel));
}

bool fd_slot_release(int fd, PollDesc* pd) {
  std::atomic<uintptr_t>* s = fd_slot(fd);
  if (s == nullptr) return false;
  uintptr_t want = reinterpret_cast<uintptr_t>(pd);
  if (!s->compare_exchange_strong(want, kSlotEmpty, std::memory_order_acq_rel)) return false;
  pd_unref(pd);
  return true;
}

void fd_table_each(void (*f)(int fd, PollDesc* pd, void* arg), void* arg) {
  for (int c = 0; c < kFdChunks; c++) {
    FdChunk* chunk = g_fd_chunks[c].load(std::memory_order_acquire);
    if (chunk == nullptr) continue;
    for (int i = 0; i < (1 << kFdChunkBits); i++) {
      uintptr_t v = (*chunk)[i].load(std::memory_order_acquire);
      if (slot_is_pd(v)) f((c << kFdChunkBits) | i, slot_pd(v), arg);
    }
  }
}

void fd_table_clear() {
  for (int c = 0; c < kFdChunks; c++) {
    FdChunk* chunk = g_fd_chunks[c].load(std::memory_order_acquire);
    if (chunk == nullptr) continue;
    for (auto& slot : *chunk) slot.store(kSlotEmpty, std::memory_order_release);
  }
  g_fd_owned_any.store(false, std::memory_order_release);
}

}  // namespace gort::internal

// gmp/runq.cpp — see runq.hpp for the protocol.
#include "gmp/runq.hpp"

#include <unistd.h>

#include "gmp/os/fatal.hpp"
#include "gmp/os/cpu.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {

bool Runq::put(G* g, RunqAt at, GQueue* overflow, bool exclusive) {
  if (at == RunqAt::kNext) {
    G* old;
    if (exclusive) {
      old = runnext_.load(std::memory_order_relaxed);
      runnext_.store(g, std::memory_order_relaxed);
    } else {
      old = runnext_.exchange(g, std::memory_order_acq_rel);
    }
    if (old == nullptr) return true;
    g = old;  // the previous runnext goes to the tail
  }
  for (;;) {
    uint32_t h = head_.load(std::memory_order_acquire);
    uint32_t t = tail_.load(std::memory_order_relaxed);
    if (t - h < kRunqSize) {
      buf_[t % kRunqSize].store(g, std::memory_order_relaxed);
      tail_.store(t + 1, std::memory_order_release);
      return true;
    }
    // Full: move half of the ring plus g out in one batch.
    uint32_t n = (t - h) / 2;
    G* batch[kRunqSize / 2];
    for (uint32_t i = 0; i < n; i++) {
      batch[i] = buf_[(h + i) % kRunqSize].load(std::memory_order_relaxed);
    }
    if (!head_.compare_exchange_strong(h, h + n, std::memory_order_acq_rel)) {
      continue;  // a thief took some; there may be room now
    }
    for (uint32_t i = 0; i < n; i++) overflow->push_back(batch[i]);
    overflow->push_back(g);
    return false;
  }
}

G* Runq::get(bool exclusive, bool* from_next) {
  if (from_next != nullptr) *from_next = false;
  G* next = runnext_.load(std::memory_order_relaxed);
  if (exclusive) {
    if (next != nullptr) {
      runnext_.store(nullptr, std::memory_order_relaxed);
      if (from_next != nullptr) *from_next = true;
      return next;
    }
    uint32_t h = head_.load(std::memory_order_relaxed);
    uint32_t t = tail_.load(std::memory_order_relaxed);
    if (t == h) return nullptr;
    G* g = buf_[h % kRunqSize].load(std::memory_order_relaxed);
    head_.store(h + 1, std::memory_order_release);
    prefetch_after(h, t);
    return g;
  }
  if (next != nullptr &&
      runnext_.compare_exchange_strong(next, nullptr, std::memory_order_acq_rel)) {
    if (from_next != nullptr) *from_next = true;
    return next;
  }
  for (;;) {
    uint32_t h = head_.load(std::memory_order_acquire);
    uint32_t t = tail_.load(std::memory_order_relaxed);
    if (t == h) return nullptr;
    G* g = buf_[h % kRunqSize].load(std::memory_order_relaxed);
    if (head_.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel)) {
      prefetch_after(h, t);
      return g;
    }
  }
}

G* Runq::steal_into(Runq* dst, bool steal_next, bool victim_running) {
  uint32_t dt = dst->tail_.load(std::memory_order_relaxed);
  uint32_t n;
  for (;;) {
    uint32_t h = head_.load(std::memory_order_acquire);
    uint32_t t = tail_.load(std::memory_order_acquire);
    n = t - h;
    n = n - n / 2;
    if (n == 0) {
      if (!steal_next) return nullptr;
      G* next = runnext_.load(std::memory_order_acquire);
      if (next == nullptr) return nullptr;
      if (victim_running) {
        // Sleep rather than spin (as Go does): a spinning thief would burn
        // the CPU the victim needs and bounce its queue's cache lines.
        timespec ts{0, 3000};
        sys::nanosleep(&ts, nullptr);
        if (runnext_.load(std::memory_order_acquire) != next) continue;
      }
      if (!runnext_.compare_exchange_strong(next, nullptr, std::memory_order_acq_rel)) continue;
      return next;
    }
    if (n > kRunqSize / 2) continue;  // torn read of head/tail; retry
    for (uint32_t i = 0; i < n; i++) {
      G* g = buf_[(h + i) % kRunqSize].load(std::memory_order_relaxed);
      dst->buf_[(dt + i) % kRunqSize].store(g, std::memory_order_relaxed);
    }
    if (head_.compare_exchange_strong(h, h + n, std::memory_order_acq_rel)) break;
  }
  // Keep the last one to run now; publish the rest in dst.
  n--;
  G* g = dst->buf_[(dt + n) % kRunqSize].load(std::memory_order_relaxed);
  if (n == 0) return g;
  uint32_t dh = dst->head_.load(std::memory_order_acquire);
  if (dt - dh + n >= kRunqSize) fatal("runqsteal: runq overflow");
  dst->tail_.store(dt + n, std::memory_order_release);
  return g;
}

void Runq::drain(GQueue* out) {
  if (G* next = runnext_.exchange(nullptr, std::memory_order_acq_rel)) out->push_back(next);
  while (G* g = get()) out->push_back(g);
}

}  // namespace gort::internal

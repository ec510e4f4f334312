// gmp/lock.cpp — see lock.hpp.
#include "gmp/lock.hpp"

#include <sched.h>
#include <unistd.h>

#include "gmp/os/cpu.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/os/futex.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {
namespace {

constexpr uint32_t kUnlocked = 0;
constexpr uint32_t kLocked = 1;
constexpr uint32_t kSleeping = 2;

// Go's lock_futex.go: with several CPUs, try kActiveSpin times, pausing
// kActiveSpinCount cpu_relax()es between tries (the holder runs on another
// CPU and may release soon); then kPassiveSpin tries with a sched_yield
// between; then sleep on the futex.
constexpr int kActiveSpin = 4;
constexpr int kActiveSpinCount = 30;
constexpr int kPassiveSpin = 1;

}  // namespace

void lock_word(std::atomic<uint32_t>* w, LockRank rank) {
  lockrank_acquire(rank, w);
  if (M* m = getm()) acquirem(m);
  uint32_t v = w->exchange(kLocked, std::memory_order_acquire);
  if (v == kUnlocked) return;
  // Contended. Remember whether there were sleepers: if so we must leave
  // the word at kSleeping when we get it, or a sleeper would never be woken.
  uint32_t wait = v;
  static const bool multicore = sysconf(_SC_NPROCESSORS_ONLN) > 1;
  for (;;) {
    if (multicore) {
      for (int i = 0; i < kActiveSpin; i++) {
        while (w->load(std::memory_order_relaxed) == kUnlocked) {
          uint32_t expected = kUnlocked;
          if (w->compare_exchange_weak(expected, wait, std::memory_order_acquire)) return;
        }
        for (int j = 0; j < kActiveSpinCount; j++) cpu_relax();
      }
    }
    for (int i = 0; i < kPassiveSpin; i++) {
      while (w->load(std::memory_order_relaxed) == kUnlocked) {
        uint32_t expected = kUnlocked;
        if (w->compare_exchange_weak(expected, wait, std::memory_order_acquire)) return;
      }
      sched_yield();
    }
    v = w->exchange(kSleeping, std::memory_order_acquire);
    if (v == kUnlocked) return;
    wait = kSleeping;
    futex_sleep(w, kSleeping);
  }
}

void unlock_word(std::atomic<uint32_t>* w, LockRank rank) {
  uint32_t v = w->exchange(kUnlocked, std::memory_order_release);
  if (v == kUnlocked) fatal("unlock of unlocked runtime lock");
  if (v == kSleeping) futex_wakeup(w, 1);
  lockrank_release(rank, w);
  if (M* m = getm()) releasem(m);
}

}  // namespace gort::internal

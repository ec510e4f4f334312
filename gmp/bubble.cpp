// gmp/bubble.cpp — a bubble's counts and clocks; see bubble.hpp (the
// driver is bubble_run.cpp, the timers bubble_timer.cpp).
#include "gmp/bubble.hpp"

#include "gmp/bubble_clock.hpp"
#include "gmp/os/clock.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "gort/detail/race.hpp"

namespace gort::internal {

namespace {

// Go's maybeWakeLocked: when every member is durably blocked and nothing
// else is under way, the goroutine to ready (the caller does, after
// unlocking mu). active counts the wake-up until the woken one runs.
G* maybe_wake_locked(Bubble* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu) {
  if (b->running > 0 || b->active > 0) return nullptr;
  b->active++;
  int64_t next = b->timer0.load(std::memory_order_acquire);
  if (next != 0 && next <= b->now.load(std::memory_order_relaxed)) return b->root;
  if (b->waiter != nullptr) return b->waiter;
  return b->root;
}

[[noreturn, gnu::cold]] void bad_count(const char* what) { fatal(what); }

}  // namespace

Bubble* current_bubble() {
  G* g = getg();
  return g != nullptr ? g->bubble : nullptr;
}

uint64_t current_bubble_id() {
  G* g = getg();
  return g != nullptr && g->bubble != nullptr ? g->bubble->id : 0;
}

int64_t clock_now() {
  G* g = getg();
  if (g != nullptr && g->bubble != nullptr) [[unlikely]] return g->bubble->now.load(std::memory_order_acquire);
  return nanotime();
}

bool bubble_std_clock_now(int64_t* unix_ns, int64_t* mono_ns) {
  G* g = getg();
  if (g == nullptr) [[likely]] return false;
  Bubble* b = g->bubble;
  if (b == nullptr || !b->fake_std_clocks) [[likely]] return false;
  int64_t now = b->now.load(std::memory_order_acquire);
  *unix_ns = now;
  *mono_ns = b->mono_base + (now - kBubbleEpoch);
  return true;
}

void bubble_status(G* g, GStatus from, GStatus to) {
  Bubble* b = g->bubble;
  if (to == GStatus::kRunning) {
    if (b->seeded) bubble_trace_run(b, g);
    return;  // from kRunnable: running either way
  }
  int total_delta = 0;
  bool was_running = true;
  if (from == GStatus::kIdle || from == GStatus::kDead) {
    was_running = false;
    total_delta++;
  } else if (from == GStatus::kWaiting && wait_reason_durable(g->waitreason)) {
    was_running = false;
  }
  bool is_running = true;
  if (to == GStatus::kDead) {
    is_running = false;
    total_delta--;
  } else if (to == GStatus::kWaiting && wait_reason_durable(g->waitreason)) {
    is_running = false;
  }
  if (was_running == is_running && total_delta == 0) return;
  G* wake;
  {
    MutexLock lock(b->mu);
    if (to == GStatus::kDead && g == b->main) b->done = true;
    b->total += total_delta;
    if (was_running != is_running) {
      if (is_running) {
        b->running++;
      } else {
        b->running--;
        // This park happens before a later synctest::wait returns (Go's
        // racereleasemergeg).
        if (to != GStatus::kDead) race_release(b);
      }
    }
    if (b->total < 0) bad_count("synctest: bubble total < 0");
    if (b->running < 0) bad_count("synctest: bubble running < 0");
    wake = maybe_wake_locked(b);
  }
  if (wake != nullptr) ready(wake);
  if (to == GStatus::kDead) {
    // The member's reference (newproc_alloc took it). Its exit happens
    // before the root's loop returns.
    race_release(b);
    g->bubble = nullptr;
    bubble_unref(b);
  }
}

// The bracket also holds a reference: once the park's unlock function has
// run, the parked member may be readied, exit and drop its own before
// bubble_dec_active runs.
void bubble_inc_active(Bubble* b) {
  bubble_ref(b);
  MutexLock lock(b->mu);
  b->active++;
}

void bubble_dec_active(Bubble* b) {
  G* wake;
  {
    MutexLock lock(b->mu);
    if (--b->active < 0) bad_count("synctest: bubble active < 0");
    wake = maybe_wake_locked(b);
  }
  if (wake != nullptr) ready(wake);
  bubble_unref(b);
}

void bubble_adopt(G* g, G* parent) {
  Bubble* b = parent->bubble;
  bubble_ref(b);
  g->bubble = b;
  g->bubble_ordinal = b->next_ordinal.fetch_add(1, std::memory_order_relaxed) + 1;
  // A seeded bubble's goroutines are never preempted (bubble_sched.cpp).
  if (b->seeded) g->nopreempt = 1;
  if (parent == b->root) {
    MutexLock lock(b->mu);
    if (b->main == nullptr) b->main = g;
  }
}

void bubble_abandon(G* g) {
  Bubble* b = g->bubble;
  g->bubble = nullptr;
  {
    MutexLock lock(b->mu);
    if (b->main == g) b->main = nullptr;
  }
  bubble_unref(b);
}

void bubble_ref(Bubble* b) { b->refs.fetch_add(1, std::memory_order_relaxed); }

void bubble_unref(Bubble* b) {
  if (b->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete b;
}

}  // namespace gort::internal

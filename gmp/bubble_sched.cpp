// gmp/bubble_sched.cpp — seeded schedules for a synctest bubble (see
// bubble.hpp): the same seed gives the same interleaving, run after run.
//
// Why this is enough on one P: a goroutine runs until it parks, yields or
// exits, and then the P takes runnext, else the head of its queue. So the
// order is decided where goroutines enter the queue (ready: runnext or the
// tail, a coin flip per wake-up) and where the running one gives way (a
// yield drawn at each call that may park), plus select's case order. Time
// slices and asynchronous preemption would cut in at moments that depend on
// the machine: a seeded bubble's goroutines are never preempted (their
// nopreempt count starts at 1, and preempt_check ignores sysmon's request
// for them). The fake clock moves only when all are blocked, and a
// bubble's timers fire on its root in heap order: both are deterministic.
#include "gmp/bubble.hpp"

#include "gmp/clock_rand.hpp"
#include "gmp/m.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/p.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

namespace {

uint64_t splitmix(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
  z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
  return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t next(Bubble* b) {
  uint64_t s0 = b->rng[0], s1 = b->rng[1];
  uint64_t r = s0 + s1;
  s1 ^= s0;
  b->rng[0] = rotl(s0, 24) ^ s1 ^ (s1 << 16);
  b->rng[1] = rotl(s1, 37);
  return r;
}

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

}  // namespace

void bubble_seed(Bubble* b, uint64_t seed, uint32_t yield_per_65536) {
  uint64_t x = seed;
  b->rng[0] = splitmix(&x);
  b->rng[1] = splitmix(&x);
  b->seed = seed;
  b->yield_per_65536 = yield_per_65536;
  b->schedule_hash = kFnvOffset;
  b->steps = 0;
  b->seeded = true;
}

uint32_t bubble_randn(Bubble* b, uint32_t n) {
  return static_cast<uint32_t>((next(b) >> 32) * n >> 32);
}

uint32_t sched_randn(uint32_t n) {
  if (Bubble* b = seeded_bubble(getg())) [[unlikely]] return bubble_randn(b, n);
  return fastrandn(n);
}

void bubble_trace_run(Bubble* b, G* g) {
  uint64_t h = b->schedule_hash;
  uint32_t v = g->bubble_ordinal;
  for (int i = 0; i < 4; i++) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= kFnvPrime;
  }
  b->schedule_hash = h;
  b->steps++;
}

// Rotates the P's queue (runnext included) by a drawn amount: which of the
// runnable goroutines runs when the caller next parks or yields is the
// seed's choice, not only the order they were readied in.
void shuffle_runq(Bubble* b) {
  M* m = getm();
  P* p = m != nullptr ? m->p : nullptr;
  if (p == nullptr) return;
  uint32_t n = p->runq.size();
  if (n < 2) return;
  uint32_t k = bubble_randn(b, n);
  for (uint32_t i = 0; i < k; i++) {
    G* g = p->runq.get(/*exclusive=*/true);
    if (g == nullptr) break;
    GQueue overflow;
    if (!p->runq.put(g, RunqAt::kTail, &overflow, /*exclusive=*/true)) fatal("synctest: run queue overflow");
  }
}

void bubble_maybe_yield(Bubble* b) {
  shuffle_runq(b);
  if (b->yield_per_65536 == 0) return;
  if (bubble_randn(b, 65536) < b->yield_per_65536) gosched();
}

bool bubble_ready_next(Bubble* b) { return (next(b) >> 63) != 0; }

}  // namespace gort::internal

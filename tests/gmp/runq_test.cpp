// tests/gmp/runq_test.cpp — the P-local run queue (gmp/runq.hpp) on fake Gs,
// without a running scheduler.
#include <algorithm>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::GQueue;
using internal::kRunqSize;
using internal::Runq;
using internal::RunqAt;

// Fake goroutines: only their addresses and ids matter to a Runq.
class FakeGs {
 public:
  explicit FakeGs(size_t n) : gs_(new G[n]), n_(n) {
    for (size_t i = 0; i < n; i++) gs_[i].id = static_cast<int64_t>(i);
  }
  G* operator[](size_t i) { return &gs_[i]; }
  size_t size() const { return n_; }

 private:
  std::unique_ptr<G[]> gs_;
  size_t n_;
};

std::vector<int64_t> ids(GQueue q) {
  std::vector<int64_t> out;
  while (G* g = q.pop()) out.push_back(g->id);
  return out;
}

std::vector<int64_t> drain_ids(Runq* q) {
  std::vector<int64_t> out;
  while (G* g = q->get()) out.push_back(g->id);
  return out;
}

std::vector<int64_t> iota_ids(int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; i++) v.push_back(i);
  return v;
}

TEST(Runq, EmptyQueue) {
  auto q = std::make_unique<Runq>();
  auto dst = std::make_unique<Runq>();
  EXPECT_TRUE(q->empty());
  EXPECT_EQ(q->size(), 0u);
  EXPECT_EQ(q->get(), nullptr);
  EXPECT_EQ(q->steal_into(dst.get(), true), nullptr);
  EXPECT_TRUE(dst->empty());
}

TEST(Runq, PutGetIsFifo) {
  FakeGs gs(10);
  auto q = std::make_unique<Runq>();
  GQueue overflow;
  for (size_t i = 0; i < 10; i++) ASSERT_TRUE(q->put(gs[i], RunqAt::kTail, &overflow));
  EXPECT_TRUE(overflow.empty());
  EXPECT_EQ(q->size(), 10u);
  EXPECT_FALSE(q->empty());
  EXPECT_EQ(drain_ids(q.get()), iota_ids(0, 10));
  EXPECT_TRUE(q->empty());
}

TEST(Runq, RunnextComesFirst) {
  FakeGs gs(4);
  auto q = std::make_unique<Runq>();
  GQueue overflow;
  q->put(gs[0], RunqAt::kTail, &overflow);
  q->put(gs[1], RunqAt::kTail, &overflow);
  q->put(gs[2], RunqAt::kNext, &overflow);
  EXPECT_EQ(q->size(), 3u);
  EXPECT_EQ(drain_ids(q.get()), (std::vector<int64_t>{2, 0, 1}));
}

TEST(Runq, NewRunnextKicksOldOneToTail) {
  FakeGs gs(4);
  auto q = std::make_unique<Runq>();
  GQueue overflow;
  q->put(gs[0], RunqAt::kTail, &overflow);
  q->put(gs[1], RunqAt::kNext, &overflow);
  q->put(gs[2], RunqAt::kNext, &overflow);  // 1 goes behind 0
  q->put(gs[3], RunqAt::kTail, &overflow);
  EXPECT_TRUE(overflow.empty());
  EXPECT_EQ(drain_ids(q.get()), (std::vector<int64_t>{2, 0, 1, 3}));
}

TEST(Runq, RunnextAloneIsNotEmpty) {
  FakeGs gs(1);
  auto q = std::make_unique<Runq>();
  GQueue overflow;
  q->put(gs[0], RunqAt::kNext, &overflow);
  EXPECT_FALSE(q->empty());
  EXPECT_EQ(q->size(), 1u);
  EXPECT_EQ(q->get(), gs[0]);
  EXPECT_TRUE(q->empty());
}

TEST(Runq, FullRingOverflowsHalfPlusNewIntoBatch) {
  FakeGs gs(kRunqSize + 1);
  auto q = std::make_unique<Runq>();
  GQueue overflow;
  for (size_t i = 0; i < kRunqSize; i++) ASSERT_TRUE(q->put(gs[i], RunqAt::kTail, &overflow));
  EXPECT_EQ(q->size(), kRunqSize);
  EXPECT_FALSE(q->put(gs[kRunqSize], RunqAt::kTail, &overflow));
  // The oldest half, in order, then the new G.
  std::vector<int64_t> want = iota_ids(0, kRunqSize / 2);
  want.push_back(kRunqSize);
  EXPECT_EQ(overflow.size, static_cast<int32_t>(kRunqSize / 2 + 1));
  EXPECT_EQ(ids(overflow), want);
  EXPECT_EQ(q->size(), kRunqSize / 2);
  EXPECT_EQ(drain_ids(q.get()), iota_ids(kRunqSize / 2, kRunqSize));
}

TEST(Runq, OverflowThroughRunnextKicksPreviousRunnextIntoBatch) {
  FakeGs gs(kRunqSize + 2);
  auto q = std::make_unique<Runq>();
  GQueue overflow;
  for (size_t i = 0; i < kRunqSize; i++) ASSERT_TRUE(q->put(gs[i], RunqAt::kTail, &overflow));
  ASSERT_TRUE(q->put(gs[kRunqSize], RunqAt::kNext, &overflow));  // runnext, ring untouched
  EXPECT_TRUE(overflow.empty());
  EXPECT_FALSE(q->put(gs[kRunqSize + 1], RunqAt::kNext, &overflow));
  std::vector<int64_t> want = iota_ids(0, kRunqSize / 2);
  want.push_back(kRunqSize);  // the kicked runnext
  EXPECT_EQ(ids(overflow), want);
  std::vector<int64_t> rest{static_cast<int64_t>(kRunqSize + 1)};
  for (int64_t id : iota_ids(kRunqSize / 2, kRunqSize)) rest.push_back(id);
  EXPECT_EQ(drain_ids(q.get()), rest);
}

TEST(Runq, WrapsAroundTheRing) {
  FakeGs gs(kRunqSize);
  auto q = std::make_unique<Runq>();
  GQueue overflow;
  // Keep the queue about 3/4 full while head and tail go round many times.
  size_t next_put = 0, next_get = 0;
  for (size_t i = 0; i < 3 * kRunqSize / 4; i++) {
    ASSERT_TRUE(q->put(gs[next_put++ % kRunqSize], RunqAt::kTail, &overflow));
  }
  for (int round = 0; round < 20 * static_cast<int>(kRunqSize); round++) {
    ASSERT_TRUE(q->put(gs[next_put++ % kRunqSize], RunqAt::kTail, &overflow));
    G* g = q->get();
    ASSERT_NE(g, nullptr);
    ASSERT_EQ(g, gs[next_get++ % kRunqSize]);
  }
  EXPECT_TRUE(overflow.empty());
  EXPECT_EQ(q->size(), 3 * kRunqSize / 4);
}

TEST(Runq, StealHalf) {
  FakeGs gs(10);
  auto victim = std::make_unique<Runq>();
  auto thief = std::make_unique<Runq>();
  GQueue overflow;
  for (size_t i = 0; i < 10; i++) victim->put(gs[i], RunqAt::kTail, &overflow);
  // Half (rounded up) of the oldest: 0..4. The last one is returned to run,
  // the others land in the thief's queue in order.
  G* g = victim->steal_into(thief.get(), false);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->id, 4);
  EXPECT_EQ(drain_ids(thief.get()), iota_ids(0, 4));
  EXPECT_EQ(drain_ids(victim.get()), iota_ids(5, 10));
}

TEST(Runq, StealRoundsUp) {
  FakeGs gs(3);
  auto victim = std::make_unique<Runq>();
  auto thief = std::make_unique<Runq>();
  GQueue overflow;
  victim->put(gs[0], RunqAt::kTail, &overflow);
  EXPECT_EQ(victim->steal_into(thief.get(), false), gs[0]);
  EXPECT_TRUE(thief->empty());
  EXPECT_TRUE(victim->empty());

  victim->put(gs[1], RunqAt::kTail, &overflow);
  victim->put(gs[2], RunqAt::kTail, &overflow);
  EXPECT_EQ(victim->steal_into(thief.get(), false), gs[1]);
  EXPECT_TRUE(thief->empty());
  EXPECT_EQ(drain_ids(victim.get()), (std::vector<int64_t>{2}));
}

TEST(Runq, StealFromFullRingAppendsAfterThiefsOwnGs) {
  FakeGs gs(kRunqSize + 3);
  auto victim = std::make_unique<Runq>();
  auto thief = std::make_unique<Runq>();
  GQueue overflow;
  for (size_t i = 0; i < kRunqSize; i++) victim->put(gs[i], RunqAt::kTail, &overflow);
  thief->put(gs[kRunqSize], RunqAt::kTail, &overflow);
  thief->put(gs[kRunqSize + 1], RunqAt::kTail, &overflow);
  G* g = victim->steal_into(thief.get(), false);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->id, static_cast<int64_t>(kRunqSize / 2 - 1));
  std::vector<int64_t> want{static_cast<int64_t>(kRunqSize), static_cast<int64_t>(kRunqSize + 1)};
  for (int64_t id : iota_ids(0, kRunqSize / 2 - 1)) want.push_back(id);
  EXPECT_EQ(drain_ids(thief.get()), want);
  EXPECT_EQ(victim->size(), kRunqSize / 2);
}

TEST(Runq, StealTakesRunnextOnlyWhenAskedAndRingIsEmpty) {
  FakeGs gs(2);
  auto victim = std::make_unique<Runq>();
  auto thief = std::make_unique<Runq>();
  GQueue overflow;
  victim->put(gs[0], RunqAt::kNext, &overflow);
  EXPECT_EQ(victim->steal_into(thief.get(), false), nullptr);
  EXPECT_FALSE(victim->empty());
  EXPECT_EQ(victim->steal_into(thief.get(), true), gs[0]);
  EXPECT_TRUE(victim->empty());
  EXPECT_TRUE(thief->empty());

  // With Gs in the ring, a thief takes from the ring and leaves runnext.
  victim->put(gs[0], RunqAt::kTail, &overflow);
  victim->put(gs[1], RunqAt::kNext, &overflow);
  EXPECT_EQ(victim->steal_into(thief.get(), true), gs[0]);
  EXPECT_EQ(victim->get(), gs[1]);
}

TEST(Runq, DrainTakesRunnextAndRing) {
  FakeGs gs(5);
  auto q = std::make_unique<Runq>();
  GQueue overflow, out;
  for (size_t i = 0; i < 4; i++) q->put(gs[i], RunqAt::kTail, &overflow);
  q->put(gs[4], RunqAt::kNext, &overflow);
  q->drain(&out);
  EXPECT_EQ(ids(out), (std::vector<int64_t>{4, 0, 1, 2, 3}));
  EXPECT_TRUE(q->empty());
}

// One owner pushes (with runnext sometimes) and pops, several thieves steal
// into their own queues and drain them, as Ps do. Every G must come out
// exactly once: not lost, not duplicated.
TEST(Runq, ConcurrentStealStress) {
  constexpr size_t kGs = 200000;
  constexpr int kThieves = 3;
  FakeGs gs(kGs);
  std::unique_ptr<std::atomic<uint32_t>[]> seen(new std::atomic<uint32_t>[kGs]);
  for (size_t i = 0; i < kGs; i++) seen[i].store(0, std::memory_order_relaxed);
  auto see = [&](G* g) {
    ASSERT_GE(g->id, 0);
    ASSERT_LT(g->id, static_cast<int64_t>(kGs));
    seen[static_cast<size_t>(g->id)].fetch_add(1, std::memory_order_relaxed);
  };

  auto victim = std::make_unique<Runq>();
  std::atomic<bool> done{false};
  std::atomic<uint64_t> stolen{0}, stolen_runnext_attempts{0};
  std::vector<std::thread> thieves;
  for (int t = 0; t < kThieves; t++) {
    thieves.emplace_back([&, t] {
      auto mine = std::make_unique<Runq>();
      uint32_t i = 0;
      for (;;) {
        bool finished = done.load(std::memory_order_acquire);
        bool steal_next = (++i + static_cast<uint32_t>(t)) % 4 == 0;
        if (steal_next) stolen_runnext_attempts.fetch_add(1, std::memory_order_relaxed);
        G* g = victim->steal_into(mine.get(), steal_next);
        if (g != nullptr) {
          see(g);
          stolen.fetch_add(1, std::memory_order_relaxed);
          while (G* g2 = mine->get()) {
            see(g2);
            stolen.fetch_add(1, std::memory_order_relaxed);
          }
        } else if (finished) {
          return;
        }
      }
    });
  }

  std::mt19937 rng(12345);
  GQueue overflow;
  uint64_t overflowed = 0;
  for (size_t i = 0; i < kGs; i++) {
    RunqAt at = rng() % 8 == 0 ? RunqAt::kNext : RunqAt::kTail;
    if (!victim->put(gs[i], at, &overflow)) {
      overflowed += static_cast<uint64_t>(overflow.size);
      while (G* g = overflow.pop()) see(g);
    }
    // Pop about a third as often as we push, so the queue both fills up
    // (overflow) and drains (races on the last elements).
    if (rng() % 3 == 0) {
      if (G* g = victim->get()) see(g);
    }
    if (i % 4096 == 0) {
      // Let the ring run empty now and then: thieves then race for runnext.
      while (G* g = victim->get()) see(g);
    }
  }
  done.store(true, std::memory_order_release);
  for (auto& t : thieves) t.join();
  while (G* g = victim->get()) see(g);

  size_t missing = 0, duplicated = 0;
  for (size_t i = 0; i < kGs; i++) {
    uint32_t n = seen[i].load();
    if (n == 0) missing++;
    if (n > 1) duplicated++;
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(duplicated, 0u);
  // The stress must have exercised what it claims to.
  EXPECT_GT(stolen.load(), 0u);
  RecordProperty("stolen", static_cast<int>(stolen.load()));
  RecordProperty("overflowed", static_cast<int>(overflowed));
}

}  // namespace
}  // namespace gort::test

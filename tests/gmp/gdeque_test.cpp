// tests/gmp/gdeque_test.cpp — the global G lists' deque (gmp/gdeque.hpp) on
// fake Gs, without a running scheduler.
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "gmp/gdeque.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::GDeque;
using internal::GQueue;

// More than three chunks' worth, so that every path crosses chunk edges.
constexpr int kMany = 2000;

class GDequeTest : public ::testing::Test {
 protected:
  GDequeTest() : gs_(new G[kMany]) {
    for (int i = 0; i < kMany; i++) gs_[i].id = i;
  }
  G* g(int i) { return &gs_[i]; }

  std::unique_ptr<G[]> gs_;
};

TEST_F(GDequeTest, EmptyPopsNothing) {
  GDeque d;
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.size(), 0);
  EXPECT_EQ(d.front(), nullptr);
  EXPECT_EQ(d.pop_front(), nullptr);
  EXPECT_EQ(d.pop_back(), nullptr);
}

TEST_F(GDequeTest, PopFrontIsFifoAcrossChunks) {
  GDeque d;
  for (int i = 0; i < kMany; i++) d.push_back(g(i));
  EXPECT_EQ(d.size(), kMany);
  for (int i = 0; i < kMany; i++) {
    ASSERT_EQ(d.front(), g(i));
    ASSERT_EQ(d.pop_front(), g(i));
  }
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.pop_front(), nullptr);
}

TEST_F(GDequeTest, PopBackIsLifoAcrossChunks) {
  GDeque d;
  for (int i = 0; i < kMany; i++) d.push_back(g(i));
  for (int i = kMany; i-- > 0;) ASSERT_EQ(d.pop_back(), g(i));
  EXPECT_TRUE(d.empty());
  // Reusable after running empty (its chunks went, one kept as a spare).
  d.push_back(g(7));
  EXPECT_EQ(d.front(), g(7));
  EXPECT_EQ(d.pop_back(), g(7));
}

TEST_F(GDequeTest, PushBackAllKeepsOrderAndEmptiesTheSource) {
  GDeque d;
  d.push_back(g(0));
  GQueue q;
  for (int i = 1; i < kMany; i++) q.push_back(g(i));
  d.push_back_all(&q);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size, 0);
  EXPECT_EQ(d.size(), kMany);
  for (int i = 0; i < kMany; i++) ASSERT_EQ(d.pop_front(), g(i));
}

// Random pushes and pops at both ends against std::deque: the scavenger
// takes the oldest while Ps take the newest and the run queue drains FIFO.
TEST_F(GDequeTest, MatchesStdDequeUnderRandomOperations) {
  GDeque d;
  std::deque<G*> want;
  std::mt19937 rng(42);
  int next = 0;
  for (int step = 0; step < 200000; step++) {
    int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      // Runs of pushes, so the size wanders across several chunks.
      for (int k = static_cast<int>(rng() % 300); k-- > 0;) {
        G* x = g(next++ % kMany);
        d.push_back(x);
        want.push_back(x);
      }
    } else if (op < 8) {
      for (int k = static_cast<int>(rng() % 300); k-- > 0;) {
        G* x = d.pop_front();
        ASSERT_EQ(x, want.empty() ? nullptr : want.front());
        if (!want.empty()) want.pop_front();
      }
    } else {
      for (int k = static_cast<int>(rng() % 300); k-- > 0;) {
        G* x = d.pop_back();
        ASSERT_EQ(x, want.empty() ? nullptr : want.back());
        if (!want.empty()) want.pop_back();
      }
    }
    ASSERT_EQ(d.size(), static_cast<int32_t>(want.size()));
    ASSERT_EQ(d.front(), want.empty() ? nullptr : want.front());
  }
}

TEST_F(GDequeTest, ClearDropsEverything) {
  GDeque d;
  for (int i = 0; i < kMany; i++) d.push_back(g(i));
  d.clear();
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.pop_front(), nullptr);
  d.push_back(g(3));
  EXPECT_EQ(d.pop_front(), g(3));
}

}  // namespace
}  // namespace gort::test

// tests/gmp/random_order_test.cpp — RandomOrder (Go's randomOrder), the
// order thieves visit the Ps in: every walk reaches each index once, and
// walks differ.
#include "gmp/random_order.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace gort::internal {
namespace {

std::vector<uint32_t> walk(const RandomOrder& order, uint32_t r) {
  std::vector<uint32_t> out;
  for (auto e = order.start(r); !e.done(); e.next()) out.push_back(e.position());
  return out;
}

TEST(RandomOrder, EveryWalkVisitsEachIndexOnce) {
  RandomOrder order;
  for (uint32_t count : {1u, 2u, 3u, 4u, 6u, 7u, 12u, 64u, 97u, 1000u, RandomOrder::kMaxCount}) {
    order.reset(count);
    ASSERT_EQ(order.count(), count);
    for (uint32_t r : {0u, 1u, 5u, 12345u, 0xdeadbeefu, 0xffffffffu}) {
      std::vector<uint32_t> w = walk(order, r);
      ASSERT_EQ(w.size(), count) << "count " << count << " r " << r;
      std::set<uint32_t> seen(w.begin(), w.end());
      EXPECT_EQ(seen.size(), count) << "count " << count << " r " << r;
      EXPECT_LT(*seen.rbegin(), count);
    }
  }
}

// Not always index order from a random start (what steal_work did before):
// with 8 Ps some walk takes a stride other than 1.
TEST(RandomOrder, StridesVary) {
  RandomOrder order;
  order.reset(8);
  std::set<uint32_t> strides;
  for (uint32_t r = 0; r < 64; r++) {
    std::vector<uint32_t> w = walk(order, r);
    strides.insert((w[1] + 8 - w[0]) % 8);
  }
  // The coprimes of 8: 1, 3, 5, 7.
  EXPECT_EQ(strides, (std::set<uint32_t>{1, 3, 5, 7}));
}

// reset follows set_procs: a smaller count after a larger one.
TEST(RandomOrder, ResetShrinks) {
  RandomOrder order;
  order.reset(12);
  order.reset(5);
  std::vector<uint32_t> w = walk(order, 77);
  std::set<uint32_t> seen(w.begin(), w.end());
  EXPECT_EQ(seen, (std::set<uint32_t>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace gort::internal

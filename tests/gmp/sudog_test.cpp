// tests/gmp/sudog_test.cpp — WaitQ, the FIFO of Sudogs (gmp/sudog.hpp):
// drain, the walk a close makes over every waiter from both ends at once.
// The channel tests cover it end to end (Chan.CloseWakesParkedReceivers*,
// select's); these check the walk itself on every shape of queue.
#include <atomic>
#include <deque>
#include <set>
#include <vector>

#include "gmp/sudog.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::Sudog;
using internal::WaitQ;
using internal::WakeList;

// n Sudogs queued in order; those with i % select_every == select_every - 1
// belong to a select, and of those every other one's select has already
// completed (a waker that must drop them).
struct Queued {
  std::deque<Sudog> sudogs;  // stable addresses
  std::deque<std::atomic<uint32_t>> done;
  std::set<const Sudog*> wakeable;
  WaitQ q;

  Queued(int n, int select_every) {
    for (int i = 0; i < n; i++) {
      Sudog& s = sudogs.emplace_back();
      s.success = true;  // drain must say "closed"
      bool in_select = select_every > 0 && i % select_every == select_every - 1;
      bool completed = in_select && (i / select_every) % 2 == 1;
      if (in_select) s.select_done = &done.emplace_back(completed ? 1u : 0u);
      if (!completed) wakeable.insert(&s);
      q.push(&s);
    }
  }
};

void check_drained(Queued& qd, const WakeList& wl) {
  EXPECT_TRUE(qd.q.empty());
  EXPECT_EQ(qd.q.last, nullptr);
  std::set<const Sudog*> pushed;
  for (size_t i = 0; i < wl.size(); i++) {
    EXPECT_TRUE(pushed.insert(wl[i]).second) << "pushed twice: #" << i;
    EXPECT_FALSE(wl[i]->success);
  }
  EXPECT_EQ(pushed, qd.wakeable);
  for (Sudog& s : qd.sudogs) {
    EXPECT_EQ(s.next, nullptr);
    EXPECT_EQ(s.prev, nullptr);
    EXPECT_FALSE(s.queued);
    // Every select it touched is now won: nobody else may wake those.
    if (s.select_done != nullptr) {
      EXPECT_EQ(s.select_done->load(), 1u);
    }
  }
}

TEST(WaitQDrain, EveryLengthOddAndEven) {
  for (int n = 0; n <= 20; n++) {
    SCOPED_TRACE(n);
    Queued qd(n, 0);
    WakeList wl;
    qd.q.drain(&wl);
    EXPECT_EQ(wl.size(), static_cast<size_t>(n));
    check_drained(qd, wl);
  }
}

TEST(WaitQDrain, CompletedSelectsAreDroppedAtEitherEndAndInTheMiddle) {
  for (int n : {1, 2, 3, 4, 5, 6, 7, 33, 1000, 1001}) {
    for (int every : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " every=" << every);
      Queued qd(n, every);
      WakeList wl;
      qd.q.drain(&wl);
      check_drained(qd, wl);
    }
  }
}

TEST(WaitQDrain, QueueIsReusableAfterwards) {
  Queued qd(5, 0);
  WakeList wl;
  qd.q.drain(&wl);
  Sudog a, b;
  qd.q.push(&a);
  qd.q.push(&b);
  EXPECT_EQ(qd.q.dequeue(), &a);
  EXPECT_EQ(qd.q.dequeue(), &b);
  EXPECT_EQ(qd.q.dequeue(), nullptr);
}

}  // namespace
}  // namespace gort::test

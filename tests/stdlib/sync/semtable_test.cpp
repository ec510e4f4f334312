// tests/stdlib/sync/semtable_test.cpp — the address-keyed semaphores
// (stdlib/sync/semtable.cpp) under FdMutex: a release before the acquire is
// kept in the count, waiters for different addresses that share a root are
// told apart and each address wakes its own in FIFO order, plain threads
// wait like goroutines, and no wake-up is lost when releases race with
// waiters on every P.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gort/time.hpp"
#include "stdlib/sync/semtable.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::internal::semacquire_addr;
using gort::internal::semrelease_addr;
using gort::test::Countdown;
using gort::test::Parked;
using gort::test::WaitReason;

class SemTableTest : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(SemTableTest);

// Counts 251 words apart share a root (the table has 251, keyed by the
// address in words).
struct Colliding {
  uint32_t words[2 * 251 + 1] = {};
  uint32_t* a() { return &words[0]; }
  uint32_t* b() { return &words[251]; }
  uint32_t* c() { return &words[502]; }
};

TEST_P(SemTableTest, ReleaseBeforeAcquireIsKept) {
  run_test([] {
    uint32_t count = 0;
    semrelease_addr(&count);
    semrelease_addr(&count);
    EXPECT_EQ(count, 2u);
    semacquire_addr(&count, WaitReason::kSemacquire);  // does not park
    EXPECT_EQ(count, 1u);
    semacquire_addr(&count, WaitReason::kSemacquire);
    EXPECT_EQ(count, 0u);
  });
}

// Waiters of three addresses in one root: a release of one address wakes
// that address's oldest waiter and nobody else.
TEST_P(SemTableTest, EachAddressWakesItsOwnWaitersInOrder) {
  run_test([] {
    Colliding k;
    std::vector<int> order;
    std::atomic<int> woken{0};
    Parked p[5];
    Countdown cd(5);
    uint32_t* of[5] = {k.a(), k.b(), k.a(), k.c(), k.a()};
    for (int id = 0; id < 5; id++) {
      gort::go([&, id] {
        p[id].mark();
        semacquire_addr(of[id], WaitReason::kSemacquire);
        gort::internal::race_acquire(&order);
        order.push_back(id);
        gort::internal::race_release(&order);
        woken.fetch_add(1);
        cd.done();
      });
      ASSERT_TRUE(p[id].wait(WaitReason::kSemacquire));
    }
    auto settle = [&](int n) {
      EXPECT_TRUE(gort::test::eventually([&] { return woken.load() == n; }, std::chrono::seconds(20)));
      gort::sleep(absl::Milliseconds(5));  // nobody else may follow
      EXPECT_EQ(woken.load(), n);
    };
    semrelease_addr(k.c());
    settle(1);
    semrelease_addr(k.a());
    settle(2);
    semrelease_addr(k.b());
    settle(3);
    semrelease_addr(k.a());
    settle(4);
    semrelease_addr(k.a());
    cd.wait();
    EXPECT_EQ(order, (std::vector<int>{3, 0, 1, 2, 4}));
    EXPECT_EQ(*k.a(), 0u);
    EXPECT_EQ(*k.b(), 0u);
    EXPECT_EQ(*k.c(), 0u);
  });
}

TEST_P(SemTableTest, PlainThreadWaitsAndIsWoken) {
  run_test([] {
    uint32_t count = 0;
    std::atomic<bool> got{false};
    std::thread t([&] {
      semacquire_addr(&count, WaitReason::kSemacquire);
      got.store(true);
    });
    gort::sleep(absl::Milliseconds(20));
    EXPECT_FALSE(got.load());
    semrelease_addr(&count);
    t.join();
    EXPECT_TRUE(got.load());
    EXPECT_EQ(count, 0u);
  });
}

// Eight binary semaphores in one root used as locks by goroutines on every
// P: each guards a counter, so a unit handed out twice shows as a lost
// increment, and a lost wake-up as a hang (the deadlock detector).
TEST_P(SemTableTest, CollidingLocksStress) {
  run_test([] {
    constexpr int kLocks = 8;
    constexpr int kWorkers = 16;
    const int rounds = gort::test::stress_size(4000);
    std::vector<uint32_t> words(251 * kLocks, 0);
    int64_t guarded[kLocks] = {};
    for (int l = 0; l < kLocks; l++) words[251 * l] = 1;
    Countdown cd(kWorkers);
    for (int w = 0; w < kWorkers; w++) {
      gort::go([&, w] {
        for (int r = 0; r < rounds; r++) {
          int l = (w + r) % kLocks;
          uint32_t* count = &words[251 * l];
          semacquire_addr(count, WaitReason::kSemacquire);
          gort::internal::race_acquire(count);
          guarded[l]++;
          if (r % 16 == 0) gort::yield();
          gort::internal::race_release(count);
          semrelease_addr(count);
        }
        cd.done();
      });
    }
    cd.wait();
    int64_t total = 0;
    for (int l = 0; l < kLocks; l++) {
      total += guarded[l];
      EXPECT_EQ(words[251 * l], 1u);
    }
    EXPECT_EQ(total, int64_t{kWorkers} * rounds);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/sync/once_test.cpp — gort::Once (gort/sync.hpp): exactly one call,
// callers wait for it, a throwing function counts as done.
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::Parked;
using gort::test::WaitReason;

class Once : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Once);

TEST_P(Once, ExactlyOneCallUnderContention) {
  run_test([] {
    for (int round = 0; round < 20; round++) {
      constexpr int kCallers = 64;
      gort::Once once;
      std::atomic<int> calls{0};
      std::atomic<int> returned_before_done{0};
      Countdown cd(kCallers);
      for (int i = 0; i < kCallers; i++) {
        gort::go([&] {
          once.call([&] {
            calls++;
            gort::yield();
          });
          if (!once.done()) returned_before_done++;
          cd.done();
        });
      }
      cd.wait();
      EXPECT_EQ(calls.load(), 1);
      EXPECT_EQ(returned_before_done.load(), 0);
      EXPECT_TRUE(once.done());
    }
  });
}

// Callers that arrive while the first call runs wait (parked) for it to
// finish, and then do not call their own function.
TEST_P(Once, ConcurrentCallersWaitForTheFirstToFinish) {
  run_test([] {
    constexpr int kOthers = 10;
    gort::Once once;
    auto release = gort::make_chan<int>();
    std::atomic<bool> first_finished{false};
    std::atomic<int> saw_unfinished{0};
    std::atomic<int> others_ran{0};
    Parked first;
    Countdown cd(1 + kOthers);
    gort::go([&] {
      once.call([&] {
        first.mark();
        (void)release.recv();  // parks inside the call
        first_finished = true;
      });
      cd.done();
    });
    EXPECT_TRUE(first.wait(WaitReason::kChanRecv));
    std::vector<Parked> others(kOthers);
    for (int i = 0; i < kOthers; i++) {
      gort::go([&, i] {
        others[static_cast<size_t>(i)].mark();
        once.call([&] { others_ran++; });
        if (!first_finished.load()) saw_unfinished++;
        cd.done();
      });
    }
    for (auto& p : others) EXPECT_TRUE(p.wait(WaitReason::kSyncMutex));
    EXPECT_FALSE(once.done());
    release.send(1);
    cd.wait();
    EXPECT_EQ(saw_unfinished.load(), 0) << "a caller returned before the first call finished";
    EXPECT_EQ(others_ran.load(), 0);
    EXPECT_TRUE(once.done());
  });
}

// As in Go, a function that panics (throws) counts as done; the exception
// reaches the caller whose call ran it, and later calls do nothing.
TEST_P(Once, ThrowingFunctionCountsAsDone) {
  run_test([] {
    gort::Once once;
    std::string what;
    try {
      once.call([] { throw std::runtime_error("boom"); });
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    EXPECT_EQ(what, "boom");
    EXPECT_TRUE(once.done());
    int ran = 0;
    EXPECT_NO_THROW(once.call([&] { ran++; }));
    EXPECT_EQ(ran, 0);

    // With callers waiting while the first one throws: they return quietly.
    gort::Once once2;
    auto release = gort::make_chan<int>();
    Parked first;
    std::string first_what;
    std::atomic<int> others_ran{0}, others_threw{0};
    constexpr int kOthers = 5;
    Countdown cd(1 + kOthers);
    gort::go([&] {
      try {
        once2.call([&] {
          first.mark();
          (void)release.recv();
          throw gort::panic_error("init failed");
        });
      } catch (const gort::panic_error& e) {
        first_what = e.what();
      }
      cd.done();
    });
    EXPECT_TRUE(first.wait(WaitReason::kChanRecv));
    std::vector<Parked> others(kOthers);
    for (int i = 0; i < kOthers; i++) {
      gort::go([&, i] {
        others[static_cast<size_t>(i)].mark();
        try {
          once2.call([&] { others_ran++; });
        } catch (...) {
          others_threw++;
        }
        cd.done();
      });
    }
    for (auto& p : others) EXPECT_TRUE(p.wait(WaitReason::kSyncMutex));
    release.send(1);
    cd.wait();
    EXPECT_EQ(first_what, "init failed");
    EXPECT_EQ(others_ran.load(), 0);
    EXPECT_EQ(others_threw.load(), 0);
    EXPECT_TRUE(once2.done());
  });
}

TEST_P(Once, OnlyTheFirstFunctionRuns) {
  run_test([] {
    gort::Once once;
    std::vector<int> ran;
    EXPECT_FALSE(once.done());
    once.call([&] { ran.push_back(1); });
    once.call([&] { ran.push_back(2); });
    auto f = [&] { ran.push_back(3); };
    once.call(f);
    EXPECT_EQ(ran, std::vector<int>{1});
    // A Once used from inside a goroutine per iteration: independent objects.
    std::vector<gort::Once> many(100);
    std::atomic<int> total{0};
    Countdown cd(200);
    for (int i = 0; i < 200; i++) {
      gort::go([&, i] {
        many[static_cast<size_t>(i % 100)].call([&] { total++; });
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(total.load(), 100);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

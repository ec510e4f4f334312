// tests/stdlib/sync/errgroup_test.cpp — gort::errgroup::Group (stdlib/sync/errgroup.cpp),
// Go's golang.org/x/sync/errgroup: the first error wins and cancels the
// context (with that error as the cause), wait cancels it too, a limit
// bounds the running goroutines (go waits, try_go refuses), changing the
// limit while goroutines run panics with Go's text, exceptions reach wait's
// caller, the group is reusable, and the destructor waits.
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "gort/context.hpp"
#include "gort/errgroup.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::panic_message;
using Group = gort::errgroup::Group;

const absl::Status kCanceled = absl::CancelledError("context canceled");

class ErrGroup : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ErrGroup);

// Go's TestZeroGroup: every combination of results, the first error wins.
TEST_P(ErrGroup, ZeroGroupReturnsTheFirstError) {
  run_test([] {
    absl::Status err1 = absl::InternalError("errgroup_test: 1");
    absl::Status err2 = absl::InternalError("errgroup_test: 2");
    std::vector<std::vector<absl::Status>> cases = {
        {}, {absl::OkStatus()}, {err1}, {err1, absl::OkStatus()}, {err1, absl::OkStatus(), err2}};
    for (const auto& errs : cases) {
      Group g;
      absl::Status first;
      for (size_t i = 0; i < errs.size(); i++) {
        absl::Status e = errs[i];
        // Sequenced: each returns before the next starts, so "first" is known.
        gort::test::Event returned;
        g.go([&, e]() -> absl::Status {
          returned.set();
          return e;
        });
        returned.wait();
        gort::sleep(absl::Milliseconds(1));
        if (first.ok() && !e.ok()) first = e;
      }
      EXPECT_EQ(g.wait(), first);
      EXPECT_EQ(g.context().err(), absl::OkStatus()) << "a zero group has nothing to cancel";
    }
  });
}

// Go's TestWithContext: the error cancels the context, with it as cause.
TEST_P(ErrGroup, FirstErrorCancelsTheContextWithItAsTheCause) {
  run_test([] {
    absl::Status doom = absl::UnavailableError("group_test: doomed");
    for (int n_ok : {0, 1, 3}) {
      Group g(gort::background());
      for (int i = 0; i < n_ok; i++) g.go([] { return absl::OkStatus(); });
      g.go([&] { return doom; });
      // The others see the cancellation.
      std::atomic<int> saw_cancel{0};
      for (int i = 0; i < 3; i++) {
        g.go([&]() -> absl::Status {
          g.context().done().recv();
          saw_cancel++;
          return absl::OkStatus();
        });
      }
      EXPECT_EQ(g.wait(), doom);
      EXPECT_EQ(saw_cancel.load(), 3);
      EXPECT_EQ(g.context().err(), kCanceled);
      EXPECT_EQ(gort::cause(g.context()), doom);
    }
  });
}

TEST_P(ErrGroup, WaitCancelsTheContextEvenWithoutError) {
  run_test([] {
    Group g(gort::background());
    g.go([] {});  // void: always OK
    g.go([] { return absl::OkStatus(); });
    EXPECT_EQ(g.wait(), absl::OkStatus());
    EXPECT_EQ(g.context().err(), kCanceled);
    EXPECT_EQ(gort::cause(g.context()), kCanceled);
    // A parent's cancellation reaches the group's context.
    auto [parent, cancel] = gort::with_cancel(gort::background());
    Group h(parent);
    h.go([&] { return h.context().done().recv().has_value() ? absl::InternalError("value?") : absl::OkStatus(); });
    cancel();
    EXPECT_EQ(h.wait(), absl::OkStatus());
  });
}

// Go's TestGoLimit: never more than the limit at once.
TEST_P(ErrGroup, LimitBoundsTheActiveGoroutines) {
  run_test([] {
    constexpr int kLimit = 10;
    Group g;
    g.set_limit(kLimit);
    std::atomic<int> active{0}, peak{0};
    for (int i = 0; i < 200; i++) {
      g.go([&]() -> absl::Status {
        int n = ++active;
        int p = peak.load();
        while (n > p && !peak.compare_exchange_weak(p, n)) {
        }
        if (n > kLimit) return absl::InternalError("too many active: " + std::to_string(n));
        gort::sleep(absl::Microseconds(50));
        active--;
        return absl::OkStatus();
      });
    }
    EXPECT_EQ(g.wait(), absl::OkStatus());
    EXPECT_LE(peak.load(), kLimit);
    EXPECT_GE(peak.load(), 1);
  });
}

// Go's TestTryGo.
TEST_P(ErrGroup, TryGoRefusesWhenFullAndAcceptsWhenRoomIsMade) {
  run_test([] {
    Group g;
    constexpr int kLimit = 3;
    g.set_limit(kLimit);
    auto gate = gort::make_chan<int>();
    for (int i = 0; i < kLimit; i++) {
      EXPECT_TRUE(g.try_go([&] { gate.recv(); })) << i;
    }
    bool ran = false;
    EXPECT_FALSE(g.try_go([&] { ran = true; })) << "try_go started past the limit";
    gate.close();
    EXPECT_EQ(g.wait(), absl::OkStatus());
    EXPECT_FALSE(ran);
    EXPECT_TRUE(g.try_go([] {}));
    // Without a limit it always starts.
    g.set_limit(-1);
    for (int i = 0; i < 100; i++) EXPECT_TRUE(g.try_go([] {}));
    EXPECT_EQ(g.wait(), absl::OkStatus());
  });
}

TEST_P(ErrGroup, ChangingTheLimitWhileActivePanicsWithGosText) {
  run_test([] {
    Group g;
    g.set_limit(5);
    auto gate = gort::make_chan<int>();
    g.go([&] { gate.recv(); });
    g.go([&] { gate.recv(); });
    EXPECT_EQ(panic_message([&] { g.set_limit(1); }),
              "errgroup: modify limit while 2 goroutines in the group are still active");
    gate.close();
    EXPECT_EQ(g.wait(), absl::OkStatus());
    g.set_limit(1);  // nothing active: fine
    g.set_limit(-1);
  });
}

TEST_P(ErrGroup, AnExceptionReachesWaitsCallerAfterEveryGoroutineReturned) {
  run_test([] {
    Group g(gort::background());
    std::atomic<int> finished{0};
    for (int i = 0; i < 4; i++) {
      g.go([&]() -> absl::Status {
        g.context().done().recv();
        finished++;
        return absl::OkStatus();
      });
    }
    g.go([]() -> absl::Status { throw std::runtime_error("disk on fire"); });
    try {
      (void)g.wait();
      ADD_FAILURE() << "wait did not rethrow";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "disk on fire");
    }
    EXPECT_EQ(finished.load(), 4) << "wait rethrew before every goroutine returned";
    EXPECT_EQ(gort::cause(g.context()).message(), "errgroup: a goroutine threw: disk on fire");
    // Go keeps the first failure: a later wait reports it again.
    EXPECT_THROW((void)g.wait(), std::runtime_error);
  });
}

TEST_P(ErrGroup, TheFirstErrorStaysAcrossReuse) {
  run_test([] {
    Group g;
    g.go([] { return absl::NotFoundError("a"); });
    EXPECT_EQ(g.wait(), absl::NotFoundError("a"));
    g.go([] { return absl::AbortedError("b"); });
    EXPECT_EQ(g.wait(), absl::NotFoundError("a"));
  });
}

TEST_P(ErrGroup, DestructorWaitsForRunningGoroutines) {
  run_test([] {
    std::atomic<int> finished{0};
    {
      Group g;
      for (int i = 0; i < 50; i++) {
        g.go([&g, &finished] {
          gort::sleep(absl::Milliseconds(2));
          // Uses the group while the destructor waits.
          (void)g.context();
          finished++;
        });
      }
    }
    EXPECT_EQ(finished.load(), 50);
  });
}

TEST_P(ErrGroup, ManyGoroutinesAndErrorsFromSeveralPs) {
  run_test([] {
    Group g(gort::background());
    std::atomic<int> failed{0};
    for (int i = 0; i < gort::test::stress_size(5000); i++) {
      g.go([&, i]() -> absl::Status {
        if (i % 7 == 3) {
          failed++;
          return absl::InternalError("n" + std::to_string(i));
        }
        return absl::OkStatus();
      });
    }
    absl::Status err = g.wait();
    EXPECT_FALSE(err.ok());
    EXPECT_EQ(err.message().substr(0, 1), "n");
    EXPECT_EQ(gort::cause(g.context()), err) << "the cause is the error wait returned";
    EXPECT_GT(failed.load(), 0);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

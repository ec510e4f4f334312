// tests/stdlib/sync/context_test.cpp — Go's context package (stdlib/sync/context.cpp,
// gort/context.hpp): background, with_cancel, with_deadline/with_timeout,
// Go's error texts and absl codes, cancellation flowing down and never up,
// deadlines never later than the parent's, idempotent cancel, the timer
// released by cancel, children unregistering from their parent, and many
// waiters on done().
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "absl/time/clock.h"
#include "gmp/timer.hpp"
#include "stdlib/sync/context_node.hpp"
#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/testing.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::eventually;
using gort::test::procs_name;
using gort::test::ProcsTest;
using gort::test::run_checked;
using namespace std::chrono_literals;

// done() is closed: a receive completes at once with nullopt.
bool is_done(const gort::Context& ctx) {
  bool done = false;
  gort::select(gort::on_recv(ctx.done(), [&](std::optional<std::monostate> v) { done = !v.has_value(); }),
               gort::on_default());
  return done;
}

// Waits (bounded; something that must happen) until ctx is done.
bool done_within(const gort::Context& ctx, absl::Duration limit) {
  bool done = false;
  auto bound = gort::new_timer(limit);
  gort::select(gort::on_recv(ctx.done(), [&](auto) { done = true; }), gort::on_recv(bound.chan()));
  bound.stop();
  return done;
}

const absl::Status kCanceled = absl::CancelledError("context canceled");
const absl::Status kDeadline = absl::DeadlineExceededError("context deadline exceeded");

class Context : public ProcsTest {};
INSTANTIATE_TEST_SUITE_P(Procs, Context, ::testing::Values(1, 2, 4), procs_name);

TEST(ContextBackground, NeverDone) {
  gort::run([] {
    gort::Context bg = gort::background();
    EXPECT_EQ(bg.done().is_nil(), true) << "background's done() is the nil channel";
    EXPECT_FALSE(is_done(bg));
    // A select with a default picks the default: a nil channel is never ready.
    EXPECT_EQ(gort::select(gort::on_recv(bg.done()), gort::on_default()), 1u);
    EXPECT_TRUE(bg.err().ok());
    EXPECT_FALSE(bg.deadline().has_value());
    gort::Context dflt;  // default-constructed is background
    EXPECT_EQ(dflt.done().is_nil(), true);
    EXPECT_TRUE(dflt.err().ok());
  });
}

TEST_P(Context, ErrorTextsAndCodes) {
  run_test([] {
    auto [c, cancel] = gort::with_cancel(gort::background());
    EXPECT_TRUE(c.err().ok());
    cancel();
    EXPECT_EQ(c.err(), kCanceled);
    EXPECT_EQ(c.err().code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(c.err().message(), "context canceled");

    auto [d, dcancel] = gort::with_timeout(gort::background(), absl::Milliseconds(1));
    EXPECT_TRUE(done_within(d, absl::Seconds(20)));
    EXPECT_EQ(d.err(), kDeadline);
    EXPECT_EQ(d.err().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(d.err().message(), "context deadline exceeded");
    dcancel();
    EXPECT_EQ(d.err(), kDeadline) << "cancel after the deadline changed the error";
  });
}

TEST_P(Context, CancelFlowsDownNeverUp) {
  run_test([] {
    auto [root, cancel_root] = gort::with_cancel(gort::background());
    auto [mid, cancel_mid] = gort::with_cancel(root);
    auto [leaf, cancel_leaf] = gort::with_cancel(mid);
    auto [sibling, cancel_sibling] = gort::with_cancel(root);
    auto [timed, cancel_timed] = gort::with_timeout(mid, absl::Hours(1));

    cancel_leaf();
    EXPECT_TRUE(is_done(leaf));
    EXPECT_FALSE(is_done(mid)) << "cancelling a child cancelled its parent";
    EXPECT_FALSE(is_done(root));

    cancel_mid();
    EXPECT_TRUE(is_done(mid));
    EXPECT_TRUE(is_done(timed));
    EXPECT_EQ(timed.err(), kCanceled) << "a parent's cancel gives Canceled, even to a deadline child";
    EXPECT_FALSE(is_done(root));
    EXPECT_FALSE(is_done(sibling));

    cancel_root();
    EXPECT_TRUE(is_done(sibling));
    EXPECT_EQ(sibling.err(), kCanceled);
    cancel_sibling();
    cancel_timed();
  });
}

TEST_P(Context, ChildOfADoneParentIsDoneAtOnceWithTheParentsError) {
  run_test([] {
    auto [p, cancel] = gort::with_cancel(gort::background());
    cancel();
    auto [c, cc] = gort::with_cancel(p);
    EXPECT_TRUE(is_done(c));
    EXPECT_EQ(c.err(), kCanceled);
    auto [t, tc] = gort::with_timeout(p, absl::Hours(1));
    EXPECT_TRUE(is_done(t));
    EXPECT_EQ(t.err(), kCanceled);

    auto [d, dc] = gort::with_deadline(gort::background(), absl::Now() - absl::Seconds(1));
    auto [dchild, dchild_cancel] = gort::with_cancel(d);
    EXPECT_TRUE(is_done(dchild));
    EXPECT_EQ(dchild.err(), kDeadline) << "a child inherits its parent's DeadlineExceeded";
    cc();
    tc();
    dc();
    dchild_cancel();
  });
}

TEST_P(Context, DeadlineInThePastIsDoneAtOnce) {
  run_test([] {
    auto [d, cancel] = gort::with_deadline(gort::background(), absl::Now() - absl::Milliseconds(1));
    EXPECT_TRUE(is_done(d)) << "done() must already be closed when with_deadline returns";
    EXPECT_EQ(d.err(), kDeadline);
    auto [z, zcancel] = gort::with_timeout(gort::background(), absl::ZeroDuration());
    EXPECT_TRUE(is_done(z));
    EXPECT_EQ(z.err(), kDeadline);
    cancel();
    zcancel();
  });
}

TEST_P(Context, WithTimeoutFiresAndReportsItsDeadline) {
  run_test([] {
    // From before the creation: on a loaded machine the checks between it
    // and the wait may take most of the 5 ms.
    auto t0 = std::chrono::steady_clock::now();
    absl::Time before = absl::Now();
    auto [t, cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(5));
    absl::Time after = absl::Now();
    ASSERT_TRUE(t.deadline().has_value());
    EXPECT_GE(*t.deadline(), before + absl::Milliseconds(5));
    EXPECT_LE(*t.deadline(), after + absl::Milliseconds(5));
    EXPECT_FALSE(is_done(t));
    EXPECT_TRUE(done_within(t, absl::Seconds(20)));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 4ms);  // 5 ms, less the wall and steady clocks' drift
    EXPECT_EQ(t.err(), kDeadline);
    cancel();
  });
}

TEST_P(Context, ChildDeadlineNeverLaterThanTheParents) {
  run_test([] {
    absl::Time pd = absl::Now() + absl::Hours(1);
    auto [p, pcancel] = gort::with_deadline(gort::background(), pd);
    ASSERT_EQ(p.deadline(), std::optional<absl::Time>(pd));

    auto [later, c1] = gort::with_deadline(p, pd + absl::Hours(5));
    EXPECT_EQ(later.deadline(), std::optional<absl::Time>(pd)) << "a child outlived its parent's deadline";
    auto [later2, c2] = gort::with_timeout(p, absl::Hours(100));
    EXPECT_EQ(later2.deadline(), std::optional<absl::Time>(pd));
    auto [plain, c3] = gort::with_cancel(p);
    EXPECT_EQ(plain.deadline(), std::optional<absl::Time>(pd)) << "with_cancel must report the parent's deadline";
    absl::Time sooner = pd - absl::Minutes(30);
    auto [earlier, c4] = gort::with_deadline(p, sooner);
    EXPECT_EQ(earlier.deadline(), std::optional<absl::Time>(sooner));

    // When the parent's (short) deadline passes, a child with a later one
    // reports DeadlineExceeded too.
    auto [sp, spc] = gort::with_timeout(gort::background(), absl::Milliseconds(3));
    auto [sc, scc] = gort::with_timeout(sp, absl::Hours(1));
    EXPECT_TRUE(done_within(sc, absl::Seconds(20)));
    EXPECT_EQ(sc.err(), kDeadline);
    for (auto* f : {&pcancel, &c1, &c2, &c3, &c4, &spc, &scc}) (*f)();
  });
}

TEST_P(Context, CancelIsIdempotentAndSafeFromManyGoroutines) {
  run_test([] {
    auto [c, cancel] = gort::with_cancel(gort::background());
    auto [child, child_cancel] = gort::with_cancel(c);
    Countdown cd(16);
    for (int i = 0; i < 16; i++) {
      gort::go([&, cancel = cancel, child_cancel = child_cancel] {
        for (int k = 0; k < 100; k++) {
          cancel();
          child_cancel();
        }
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(c.err(), kCanceled);
    EXPECT_EQ(child.err(), kCanceled);
    cancel();
    EXPECT_EQ(c.err(), kCanceled);
  });
  // A CancelFunc called after gort::run returned (it keeps its context)
  // cancels without the runtime.
  gort::CancelFunc keep;
  run_checked(1, [&] {
    auto [c, cancel] = gort::with_cancel(gort::background());
    keep = cancel;
  });
  keep();
}

// The deadline timer is released by cancel: no runtime timer is left
// pending (observable through the runtime's timer heaps), and the error
// stays Canceled after the deadline would have passed.
TEST_P(Context, CancelReleasesTheDeadlineTimer) {
  run_test([] {
    ASSERT_EQ(gort::internal::timers_next(), -1) << "a fresh runtime has no timers";
    auto [t, cancel] = gort::with_timeout(gort::background(), absl::Hours(1));
    EXPECT_NE(gort::internal::timers_next(), -1) << "with_timeout armed no timer";
    cancel();
    EXPECT_EQ(gort::internal::timers_next(), -1) << "cancel left the deadline timer pending";

    auto [s, scancel] = gort::with_timeout(gort::background(), absl::Milliseconds(5));
    scancel();
    gort::sleep(absl::Milliseconds(20));
    EXPECT_EQ(s.err(), kCanceled);

    // Cancelling the parent releases a child's timer too.
    auto [p, pcancel] = gort::with_cancel(gort::background());
    auto [c, ccancel] = gort::with_timeout(p, absl::Hours(1));
    EXPECT_NE(gort::internal::timers_next(), -1);
    pcancel();
    EXPECT_EQ(gort::internal::timers_next(), -1) << "a child cancelled by its parent kept its timer";
    ccancel();
  });
}

// Go's removeChild: a child cancelled on its own is dropped by its parent;
// then only its CancelFunc holds it.
TEST_P(Context, CancelledChildIsReleasedByItsParent) {
  run_test([] {
    auto [p, pcancel] = gort::with_cancel(gort::background());
    std::weak_ptr<gort::internal::ContextNode> weak;
    gort::CancelFunc cancel;
    {
      auto [c, cc] = gort::with_cancel(p);
      weak = gort::internal::ContextAccess::node(c);
      cancel = cc;
    }
    EXPECT_EQ(gort::internal::context_children(p), 1u) << "the parent keeps an uncancelled child (as Go does)";
    cancel();
    EXPECT_EQ(gort::internal::context_children(p), 0u) << "the parent still holds a cancelled child";
    EXPECT_FALSE(weak.expired()) << "a CancelFunc keeps its context (as in Go)";
    cancel = nullptr;
    EXPECT_TRUE(weak.expired());
    pcancel();
  });
}

TEST_P(Context, ManyWaitersOnDoneAllWake) {
  run_test([] {
    constexpr int kWaiters = gort::test::stress_size(1000);
    auto [c, cancel] = gort::with_cancel(gort::background());
    std::atomic<int> waiting{0}, woke{0};
    Countdown cd(kWaiters);
    for (int i = 0; i < kWaiters; i++) {
      gort::go([&, i, c = c] {
        waiting++;
        if (i % 2 == 0) {
          EXPECT_EQ(c.done().recv(), std::nullopt);
        } else {
          auto never = gort::make_chan<int>();
          gort::select(gort::on_recv(c.done()), gort::on_recv(never));
        }
        woke++;
        cd.done();
      });
    }
    EXPECT_TRUE(eventually([&] { return waiting.load() == kWaiters; }));
    gort::sleep(absl::Milliseconds(5));  // most of them are parked by now
    EXPECT_EQ(woke.load(), 0);
    cancel();
    cd.wait();
    EXPECT_EQ(woke.load(), kWaiters);
  });
}

// Children created concurrently with the parent's cancellation are all
// cancelled: either they are registered before it and cancelled with the
// parent, or they see a cancelled parent when they attach.
TEST_P(Context, ChildrenCreatedDuringCancellationAreAllCancelled) {
  run_test([] {
    for (int round = 0; round < 20; round++) {
      auto [p, pcancel] = gort::with_cancel(gort::background());
      std::vector<std::vector<gort::Context>> made(4);
      Countdown cd(4);
      std::atomic<bool> go{false};
      for (int g = 0; g < 4; g++) {
        gort::go([&, g, p = p] {
          while (!go.load()) gort::yield();
          for (int k = 0; k < 50; k++) {
            auto [c, cc] = k % 2 ? gort::with_cancel(p) : gort::with_timeout(p, absl::Hours(1));
            made[static_cast<size_t>(g)].push_back(c);
          }
          cd.done();
        });
      }
      go = true;
      pcancel();
      cd.wait();
      int not_cancelled = 0;
      for (auto& v : made) {
        for (auto& c : v) {
          if (c.err() != kCanceled || !is_done(c)) not_cancelled++;
        }
      }
      EXPECT_EQ(not_cancelled, 0) << "round " << round;
    }
    // Every child timer was released with the cancellation.
    EXPECT_EQ(gort::internal::timers_next(), -1);
  });
}

// Deadlines firing while cancel races with them: the error is one of the
// two, done is closed, nothing crashes.
TEST_P(Context, DeadlineRacingWithCancel) {
  run_test([] {
    Countdown cd(200);
    std::atomic<int> bad{0};
    for (int i = 0; i < 200; i++) {
      gort::go([&, i] {
        auto [c, cancel] = gort::with_timeout(gort::background(), absl::Microseconds(i % 50));
        if (i % 3 == 0) gort::yield();
        cancel();
        absl::Status e = c.err();
        if (!(e == kCanceled || e == kDeadline) || !is_done(c)) bad++;
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(bad.load(), 0);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

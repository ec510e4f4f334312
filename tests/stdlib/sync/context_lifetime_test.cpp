// tests/stdlib/sync/context_lifetime_test.cpp — who keeps a context alive
// (stdlib/sync/context_cancel.cpp, docs/time-and-context.md#ownership): every live
// handle, CancelFunc, timer and child keeps what it needs, as Go's garbage
// collector does, and nothing more: a cancelled subtree is released, a
// dropped uncancelled child lives until it or its parent is cancelled, and a
// tree nobody can cancel any more is released when its handles are gone.
//
// Every case runs on 1, 2 and 4 Ps; the racy ones repeat.
#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <variant>
#include <vector>

#include "absl/time/clock.h"
#include "gmp/timer.hpp"
#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/sync/context_helpers.hpp"
#include "tests/stdlib/helpers.hpp"
#include "tests/testing.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::closed_within;
using gort::test::Countdown;
using gort::test::done_within;
using gort::test::eventually;
using gort::test::is_closed;
using gort::test::is_done;
using gort::test::kCanceled;
using gort::test::kDeadline;
using gort::test::NodeWatch;
using gort::test::ProcsTest;

class ContextLifetime : public ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ContextLifetime);

// The smallest case: keep only the root's CancelFunc and the child.
TEST_P(ContextLifetime, RootCancelReachesAChildWhoseParentHandleWasDropped) {
  run_test([] {
    gort::CancelFunc cancel_root;
    gort::Context child;
    {
      auto [root, cr] = gort::with_cancel(gort::background());
      cancel_root = cr;
      auto [c, cc] = gort::with_cancel(root);
      child = c;
    }  // root's handle and the child's CancelFunc are gone
    EXPECT_TRUE(child.err().ok());
    cancel_root();
    EXPECT_EQ(child.err(), kCanceled) << "the root's cancel did not reach the child";
    EXPECT_TRUE(is_done(child));
  });
}

// Go's layering idiom: ctx, cancel = WithCancel(ctx) in a loop, keeping only
// the newest handle and every CancelFunc. Cancelling any layer cancels the
// newest one.
TEST_P(ContextLifetime, LayersKeepingOnlyTheNewestHandle) {
  run_test([] {
    std::mt19937 rng(42);
    for (int round = 0; round < 20; round++) {
      gort::Context ctx = gort::background();
      std::vector<gort::CancelFunc> cancels;
      for (int i = 0; i < 30; i++) {
        auto [c, cancel] = i % 3 == 2 ? gort::with_timeout(ctx, absl::Hours(1000)) : gort::with_cancel(ctx);
        ctx = c;
        cancels.push_back(cancel);
      }
      EXPECT_FALSE(is_done(ctx));
      cancels[rng() % cancels.size()]();
      EXPECT_TRUE(is_done(ctx)) << "round " << round;
      EXPECT_EQ(ctx.err(), kCanceled);
      for (auto& c : cancels) c();
    }
    EXPECT_EQ(gort::internal::timers_next(), -1) << "a layer's timer outlived its cancel";
  });
}

// A dropped middle context's deadline still reaches its child (the timer
// keeps the middle alive, and the child keeps its parents).
TEST_P(ContextLifetime, DroppedMiddleDeadlineReachesTheChild) {
  run_test([] {
    gort::Context child;
    gort::CancelFunc cancel_child;
    {
      auto [mid, mid_cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(2));
      auto [c, cc] = gort::with_cancel(mid);
      child = c;
      cancel_child = cc;
    }
    EXPECT_TRUE(done_within(child, absl::Seconds(20))) << "the middle's deadline never reached the child";
    EXPECT_EQ(child.err(), kDeadline);
    cancel_child();
  });
}

// A done channel held on its own still closes: when the deadline of a
// context nobody holds passes, and when the parent of a dropped child is
// cancelled.
TEST_P(ContextLifetime, ADoneChannelHeldAloneStillCloses) {
  run_test([] {
    gort::Chan<std::monostate> timed;
    {
      auto [t, cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(2));
      timed = t.done();
    }
    EXPECT_TRUE(closed_within(timed, absl::Seconds(20)));

    auto [parent, cancel_parent] = gort::with_cancel(gort::background());
    gort::Chan<std::monostate> child_done;
    {
      auto [c, cc] = gort::with_cancel(parent);
      child_done = c.done();
    }
    EXPECT_FALSE(is_closed(child_done));
    cancel_parent();
    EXPECT_TRUE(is_closed(child_done));
  });
}

// Cancelling releases the whole cancelled subtree once its handles are gone.
TEST_P(ContextLifetime, ACancelledSubtreeIsReleased) {
  run_test([] {
    NodeWatch watch;
    gort::CancelFunc cancel_root;
    {
      auto [root, cr] = gort::with_cancel(gort::background());
      cancel_root = cr;
      std::vector<gort::Context> level{root};
      for (int depth = 0; depth < 3; depth++) {
        std::vector<gort::Context> next;
        for (const auto& p : level) {
          for (int k = 0; k < 3; k++) {
            auto [c, cc] = k == 2 ? gort::with_timeout(p, absl::Hours(1)) : gort::with_cancel(p);
            watch.add(c);
            next.push_back(c);
          }
        }
        level = std::move(next);
      }
    }
    EXPECT_EQ(watch.alive(), static_cast<int>(watch.size())) << "the live root must keep its uncancelled children";
    cancel_root();
    EXPECT_EQ(watch.alive(), 0) << "a cancelled subtree is still alive";
    EXPECT_EQ(gort::internal::timers_next(), -1);
  });
}

// A dropped, uncancelled child of a live parent lives (as in Go, the
// parent's set of children holds it) until it or the parent is cancelled.
TEST_P(ContextLifetime, ADroppedChildLivesUntilItOrItsParentIsCancelled) {
  run_test([] {
    auto [parent, cancel_parent] = gort::with_cancel(gort::background());
    NodeWatch dropped;
    {
      auto [c, cc] = gort::with_cancel(parent);
      dropped.add(c);
    }
    EXPECT_EQ(dropped.alive(), 1);

    NodeWatch kept;
    gort::CancelFunc cancel_kept;
    {
      auto [c, cc] = gort::with_cancel(parent);
      kept.add(c);
      cancel_kept = cc;
    }
    cancel_kept();
    cancel_kept = nullptr;
    EXPECT_EQ(kept.alive(), 0) << "a cancelled child is still held";
    EXPECT_EQ(dropped.alive(), 1);

    cancel_parent();
    EXPECT_EQ(dropped.alive(), 0) << "the parent's cancel did not release its dropped child";
  });
}

// A tree nobody can cancel any more (every CancelFunc dropped uncalled, no
// timer) is released when its handles are gone: the links between parents
// and children are no cycle that leaks.
TEST_P(ContextLifetime, AnUncancellableTreeIsReleasedWithItsHandles) {
  run_test([] {
    NodeWatch watch;
    {
      auto [root, cr] = gort::with_cancel(gort::background());
      watch.add(root);
      auto [a, ca] = gort::with_cancel(root);
      watch.add(a);
      auto [b, cb] = gort::with_cancel(a);
      watch.add(b);
      auto [d, cd] = gort::with_cancel(root);
      watch.add(d);
    }
    EXPECT_EQ(watch.alive(), 0) << "an unreachable uncancelled tree leaked";

    // The same with the handles dropped first and the CancelFuncs last.
    std::vector<gort::CancelFunc> cancels;
    {
      auto [root, cr] = gort::with_cancel(gort::background());
      watch.add(root);
      cancels.push_back(cr);
      auto [a, ca] = gort::with_cancel(root);
      watch.add(a);
      cancels.push_back(ca);
    }
    EXPECT_EQ(watch.alive(), 2) << "each CancelFunc keeps its context";
    cancels.clear();
    EXPECT_EQ(watch.alive(), 0);
  });
}

// A deadline context keeps itself (its timer does) until the deadline or
// cancel, then is released, timer and all.
TEST_P(ContextLifetime, ATimerKeepsItsContextUntilItFiresOrIsStopped) {
  run_test([] {
    NodeWatch fired;
    {
      auto [t, cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(2));
      fired.add(t);
    }
    EXPECT_TRUE(eventually([&] { return fired.alive() == 0; })) << "a fired deadline context leaked";

    NodeWatch stopped;
    {
      auto [t, cancel] = gort::with_timeout(gort::background(), absl::Hours(1));
      stopped.add(t);
      cancel();
    }
    EXPECT_EQ(stopped.alive(), 0) << "cancel left the context alive";
    EXPECT_EQ(gort::internal::timers_next(), -1) << "cancel left the timer queued";
  });
}

// Chains far deeper than a goroutine's stack could free (or cancel) one
// frame per level: cancelled, and dropped uncancelled (detached), they are
// released all the same. In a child process: a regression is a stack
// overflow, which ends the process.
TEST_P(ContextLifetime, LongChainsAreCancelledAndReleased) {
  auto child = [this] {
    run_test([] {
      static const gort::ContextKey<int> kK{"k"};
      for (bool cancel_first : {true, false}) {
        NodeWatch watch;
        gort::CancelFunc cancel_root;
        {
          auto [root, cr] = gort::with_cancel(gort::background());
          cancel_root = cr;
          gort::Context c = root;
          std::vector<gort::CancelFunc> cancels;
          for (int i = 0; i < 20000; i++) {
            if (i % 2 == 1) {
              c = gort::with_value(c, kK, i);
            } else {
              auto [x, cx] = gort::with_cancel(c);
              c = x;
              cancels.push_back(cx);
            }
            if (i % 1000 == 0) watch.add(c);
          }
          const int* v = c.value(kK);
          EXPECT_TRUE(v != nullptr && *v == 19999);
          if (cancel_first) {
            cancel_root();
            EXPECT_EQ(c.err(), kCanceled);
          }
        }
        cancel_root = nullptr;
        EXPECT_TRUE(eventually([&] { return watch.alive() == 0; }))
            << watch.alive() << " nodes left (cancel_first=" << cancel_first << ")";
      }
    });
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

// Many goroutines build, drop and cancel children of one parent while it is
// cancelled; in the end every node is released.
TEST_P(ContextLifetime, ConcurrentChildrenAreAllReleased) {
  run_test([] {
    for (int round = 0; round < 10; round++) {
      NodeWatch watch;
      gort::CancelFunc cancel_parent;
      std::vector<NodeWatch> made(4);
      {
        auto [parent, cp] = gort::with_cancel(gort::background());
        cancel_parent = cp;
        Countdown cd(4);
        for (int g = 0; g < 4; g++) {
          gort::go([&, g, parent = parent] {
            for (int k = 0; k < 50; k++) {
              auto [c, cc] = k % 3 == 0 ? gort::with_timeout(parent, absl::Hours(1)) : gort::with_cancel(parent);
              made[static_cast<size_t>(g)].add(c);
              auto [gc, gcc] = gort::with_cancel(c);
              made[static_cast<size_t>(g)].add(gc);
              if (k % 2 == 0) cc();
              if (k == 25 && g == 0) cancel_parent();
              if (k % 5 == 0) gort::yield();
            }
            cd.done();
          });
        }
        cd.wait();
      }
      cancel_parent();
      cancel_parent = nullptr;
      int alive = 0;
      for (auto& w : made) alive += w.alive();
      EXPECT_EQ(alive, 0) << "round " << round;
    }
    EXPECT_EQ(gort::internal::timers_next(), -1);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

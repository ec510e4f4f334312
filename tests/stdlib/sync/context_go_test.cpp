// tests/stdlib/sync/context_go_test.cpp — Go's own context tests
// (src/context/x_test.go and context_test.go) ported to gort: cancellation
// and deadlines through chains (TestWithCancel, TestParentFinishesChild,
// TestChildFinishesFirst, TestCancelRemoves, TestDeadline, TestTimeout,
// TestCanceledTimeout, TestSimultaneousCancels, TestInterlockedCancels,
// TestLayersCancel, TestLayersTimeout, TestWithCancelCanceledParent,
// TestWithCancelSimultaneouslyCanceledParent) and TestAllocs turned into a
// leak check. Values, strings and causes: context_values_test.cpp; custom
// kinds and AfterFunc: context_custom_test.cpp.
//
// Go's "otherContext" (a struct embedding a Context, so that the package
// cannot see through it) is a WrappedContext with no overrides. Every case
// runs on 1, 2 and 4 Ps; the ones with races repeat.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gmp/timer.hpp"
#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "stdlib/sync/context_node.hpp"
#include "tests/stdlib/sync/context_helpers.hpp"
#include "tests/stdlib/helpers.hpp"
#include "tests/testing.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::done_within;
using gort::test::eventually;
using gort::test::is_done;
using gort::test::kCanceled;
using gort::test::kDeadline;
using gort::test::kQuiescent;
using gort::test::kShort;
using gort::test::kVeryLong;
using gort::test::other;
using gort::test::NodeWatch;
using gort::test::ProcsTest;



size_t children(const gort::Context& c) { return gort::internal::context_children(c); }

class ContextGo : public ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ContextGo);

TEST_P(ContextGo, WithCancel) {
  run_test([] {
    auto [c1, cancel] = gort::with_cancel(gort::background());
    EXPECT_EQ(c1.to_string(), "context.Background.WithCancel");
    gort::Context o = other(c1);
    auto [c2, cancel2] = gort::with_cancel(o);
    std::vector<gort::Context> contexts{c1, o, c2};
    for (size_t i = 0; i < contexts.size(); i++) {
      EXPECT_FALSE(contexts[i].done().is_nil()) << i;
      EXPECT_TRUE(contexts[i].err().ok()) << i;
      EXPECT_FALSE(is_done(contexts[i])) << i;
    }
    cancel();  // propagates synchronously
    for (size_t i = 0; i < contexts.size(); i++) {
      EXPECT_TRUE(is_done(contexts[i])) << i;
      EXPECT_EQ(contexts[i].err(), kCanceled) << i;
    }
    cancel2();
  });
}

// Context tree: parent -> cancelChild; parent -> valueChild -> timerChild;
// parent -> afterChild.
TEST_P(ContextGo, ParentFinishesChild) {
  run_test([] {
    static const gort::ContextKey<std::string> kKey{"key"};
    auto [parent, cancel] = gort::with_cancel(gort::background());
    auto [cancel_child, stop1] = gort::with_cancel(parent);
    gort::Context value_child = gort::with_value(parent, kKey, "value");
    auto [timer_child, stop2] = gort::with_timeout(value_child, kVeryLong);
    auto after_stop = gort::after_func(parent, [] {});

    for (auto* c : {&parent, &cancel_child, &value_child, &timer_child}) EXPECT_FALSE(is_done(*c));
    EXPECT_EQ(children(parent), 3u) << "bad linkage: want the cancel child, the timer child and an after_func";
    EXPECT_EQ(gort::internal::innermost_cancel_node(value_child),
              static_cast<gort::internal::CancelNode*>(gort::internal::ContextAccess::node(parent).get()));

    cancel();
    EXPECT_EQ(children(parent), 0u) << "cancel didn't clear the children";
    for (auto* c : {&parent, &cancel_child, &value_child, &timer_child}) {
      EXPECT_TRUE(is_done(*c)) << c->to_string();
      EXPECT_EQ(c->err(), kCanceled) << c->to_string();
    }
    // A value child of a cancelled parent is cancelled.
    gort::Context precancelled = gort::with_value(parent, kKey, "value");
    EXPECT_TRUE(is_done(precancelled));
    EXPECT_EQ(precancelled.err(), kCanceled);
    stop1();
    stop2();
    after_stop();
  });
}

TEST_P(ContextGo, ChildFinishesFirst) {
  run_test([] {
    auto [cancelable, stop] = gort::with_cancel(gort::background());
    for (const gort::Context& parent : {gort::background(), cancelable}) {
      bool linked = gort::internal::ContextAccess::node(parent) != nullptr;
      auto [child, cancel] = gort::with_cancel(parent);
      EXPECT_FALSE(is_done(parent));
      EXPECT_FALSE(is_done(child));
      if (linked) {
        EXPECT_EQ(children(parent), 1u);
      }
      cancel();
      if (linked) {
        EXPECT_EQ(children(parent), 0u) << "the child's cancel didn't remove it from its parent";
      }
      EXPECT_TRUE(is_done(child));
      EXPECT_EQ(child.err(), kCanceled);
      EXPECT_FALSE(is_done(parent));
      EXPECT_TRUE(parent.err().ok());
    }
    stop();
  });
}

TEST_P(ContextGo, CancelRemoves) {
  run_test([] {
    auto [ctx, c0] = gort::with_cancel(gort::background());
    EXPECT_EQ(children(ctx), 0u);
    auto [a, cancel] = gort::with_cancel(ctx);
    EXPECT_EQ(children(ctx), 1u);
    cancel();
    EXPECT_EQ(children(ctx), 0u);

    auto [b, cancel_b] = gort::with_timeout(ctx, absl::Minutes(60));
    EXPECT_EQ(children(ctx), 1u);
    cancel_b();
    EXPECT_EQ(children(ctx), 0u);

    auto stop = gort::after_func(ctx, [] {});
    EXPECT_EQ(children(ctx), 1u);
    EXPECT_TRUE(stop());
    EXPECT_EQ(children(ctx), 0u);
    c0();
  });
}

void expect_deadline(const gort::Context& c, const char* name) {
  EXPECT_TRUE(done_within(c, kQuiescent)) << name << ": not timed out";
  EXPECT_EQ(c.err(), kDeadline) << name;
}

TEST_P(ContextGo, Deadline) {
  run_test([] {
    auto [c, c1] = gort::with_deadline(gort::background(), absl::Now() + kShort);
    EXPECT_TRUE(absl::StartsWith(c.to_string(), "context.Background.WithDeadline(")) << c.to_string();
    expect_deadline(c, "WithDeadline");

    auto [d, c2] = gort::with_deadline(gort::background(), absl::Now() + kShort);
    expect_deadline(other(d), "WithDeadline+otherContext");

    auto [e, c3] = gort::with_deadline(gort::background(), absl::Now() + kShort);
    auto [f, c4] = gort::with_deadline(other(e), absl::Now() + kVeryLong);
    expect_deadline(f, "WithDeadline+otherContext+WithDeadline");

    auto [g, c5] = gort::with_deadline(gort::background(), absl::Now() - kShort);
    expect_deadline(g, "WithDeadline+inthepast");
    auto [h, c6] = gort::with_deadline(gort::background(), absl::Now());
    expect_deadline(h, "WithDeadline+now");
    for (auto* cf : {&c1, &c2, &c3, &c4, &c5, &c6}) (*cf)();
  });
}

TEST_P(ContextGo, Timeout) {
  run_test([] {
    auto [c, c1] = gort::with_timeout(gort::background(), kShort);
    EXPECT_TRUE(absl::StartsWith(c.to_string(), "context.Background.WithDeadline(")) << c.to_string();
    expect_deadline(c, "WithTimeout");
    auto [d, c2] = gort::with_timeout(gort::background(), kShort);
    expect_deadline(other(d), "WithTimeout+otherContext");
    auto [e, c3] = gort::with_timeout(gort::background(), kShort);
    auto [f, c4] = gort::with_timeout(other(e), kVeryLong);
    expect_deadline(f, "WithTimeout+otherContext+WithTimeout");
    for (auto* cf : {&c1, &c2, &c3, &c4}) (*cf)();
  });
}

TEST_P(ContextGo, CanceledTimeout) {
  run_test([] {
    auto [c, c1] = gort::with_timeout(gort::background(), absl::Seconds(1));
    auto [d, cancel] = gort::with_timeout(other(c), kVeryLong);
    cancel();  // propagates synchronously
    EXPECT_TRUE(is_done(d));
    EXPECT_EQ(d.err(), kCanceled);
    c1();
  });
}

TEST_P(ContextGo, SimultaneousCancels) {
  run_test([] {
    for (int round = 0; round < 20; round++) {
      auto [root, cancel] = gort::with_cancel(gort::background());
      std::vector<std::pair<gort::Context, gort::CancelFunc>> m{{root, cancel}};
      // A tree of contexts, 4 children each, about 100 in all.
      for (size_t q = 0; q < m.size() && m.size() < 100; q++) {
        for (int i = 0; i < 4; i++) m.push_back(gort::with_cancel(m[q].first));
      }
      std::shuffle(m.begin(), m.end(), std::mt19937(static_cast<uint32_t>(round)));
      gort::WaitGroup wg;
      wg.add(static_cast<int64_t>(m.size()));
      for (auto& [ctx, c] : m) {
        gort::go([&wg, c = c] {
          c();
          wg.done();
        });
      }
      for (auto& [ctx, c] : m) EXPECT_TRUE(done_within(ctx, kQuiescent)) << "round " << round;
      wg.wait();
    }
  });
}

TEST_P(ContextGo, InterlockedCancels) {
  run_test([] {
    for (int round = 0; round < 20; round++) {
      auto [parent, cancel_parent] = gort::with_cancel(gort::background());
      auto [child, cancel_child] = gort::with_cancel(parent);
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&, parent = parent, cancel_child = cancel_child] {
        parent.done().recv();
        cancel_child();
        wg.done();
      });
      cancel_parent();
      EXPECT_TRUE(done_within(child, kQuiescent));
      wg.wait();
    }
  });
}

// Go's testLayers: a random stack of values, cancels and timeouts, keeping
// only the newest context; every value stays visible, and cancelling any
// layer (or its timeout) finishes the newest.
void test_layers(uint32_t seed, bool timeout) {
  std::mt19937 r(seed);
  std::vector<std::unique_ptr<gort::ContextKey<size_t>>> vals;
  std::vector<gort::CancelFunc> cancels;
  int timers = 0;
  gort::Context ctx = gort::background();
  for (int i = 0; i < 30 || timers == 0 || cancels.empty() || vals.empty(); i++) {
    switch (r() % 3) {
      case 0:
        vals.push_back(std::make_unique<gort::ContextKey<size_t>>());
        ctx = gort::with_value(ctx, *vals.back(), vals.size() - 1);
        break;
      case 1: {
        auto [c, cancel] = gort::with_cancel(ctx);
        ctx = c;
        cancels.push_back(cancel);
        break;
      }
      default: {
        auto [c, cancel] = gort::with_timeout(ctx, timeout ? kShort : kVeryLong);
        ctx = c;
        cancels.push_back(cancel);
        timers++;
      }
    }
  }
  auto check_values = [&](const char* when) {
    for (size_t k = 0; k < vals.size(); k++) {
      const size_t* v = ctx.value(*vals[k]);
      EXPECT_TRUE(v != nullptr && *v == k) << "seed=" << seed << " " << when << ": value " << k;
    }
  };
  if (!timeout) {
    EXPECT_FALSE(is_done(ctx)) << "seed=" << seed;
  }
  EXPECT_TRUE(absl::StartsWith(ctx.to_string(), "context.Background.")) << ctx.to_string();
  check_values("before cancel");
  if (timeout) {
    EXPECT_TRUE(done_within(ctx, kQuiescent)) << "seed=" << seed << ": ctx should have timed out";
    check_values("after timeout");
  } else {
    cancels[r() % cancels.size()]();
    EXPECT_TRUE(is_done(ctx)) << "seed=" << seed << ": ctx should be canceled";
    check_values("after cancel");
  }
  for (auto& c : cancels) c();
}

TEST_P(ContextGo, LayersCancel) {
  run_test([] {
    uint32_t seed = std::random_device()();
    for (int round = 0; round < 20; round++) test_layers(seed + static_cast<uint32_t>(round), false);
    EXPECT_EQ(gort::internal::timers_next(), -1);
  });
}

TEST_P(ContextGo, LayersTimeout) {
  run_test([] {
    uint32_t seed = std::random_device()();
    for (int round = 0; round < 20; round++) test_layers(seed + static_cast<uint32_t>(round), true);
  });
}

TEST_P(ContextGo, WithCancelCanceledParent) {
  run_test([] {
    auto [parent, pcancel] = gort::with_cancel_cause(gort::background());
    absl::Status because = absl::AbortedError("Because!");
    pcancel(because);
    auto [c, cancel] = gort::with_cancel(parent);
    EXPECT_TRUE(is_done(c)) << "child not done immediately upon construction";
    EXPECT_EQ(c.err(), kCanceled);
    EXPECT_EQ(gort::cause(c), because);
    cancel();
  });
}

TEST_P(ContextGo, WithCancelSimultaneouslyCanceledParent) {
  run_test([] {
    for (int i = 0; i < 100; i++) {
      auto [parent, pcancel] = gort::with_cancel_cause(gort::background());
      absl::Status because = absl::AbortedError("Because!");
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&, pcancel = pcancel] {
        pcancel(because);
        wg.done();
      });
      auto [c, cancel] = gort::with_cancel(parent);
      c.done().recv();
      EXPECT_EQ(c.err(), kCanceled);
      EXPECT_EQ(gort::cause(c), because);
      wg.wait();
      cancel();
    }
  });
}

// Go's TestAllocs measures allocations; here each of its cases runs 100
// times and must leave nothing behind: no node, no timer, no goroutine.
TEST_P(ContextGo, AllocsCasesLeaveNothingBehind) {
  run_test([] {
    static const gort::ContextKey<std::nullptr_t> k1;
    gort::Context bg = gort::background();
    NodeWatch watch;
    for (int i = 0; i < 100; i++) {
      {
        gort::Context c = gort::with_value(bg, k1, nullptr);
        EXPECT_NE(c.value(k1), nullptr);
        watch.add(c);
      }
      {
        auto [c, cancel] = gort::with_timeout(bg, absl::Nanoseconds(1));
        c.done().recv();
        watch.add(c);
      }
      {
        auto [c, cancel] = gort::with_cancel(bg);
        cancel();
        c.done().recv();
        watch.add(c);
      }
      {
        auto [c, cancel] = gort::with_timeout(bg, absl::Milliseconds(5));
        cancel();
        c.done().recv();
        watch.add(c);
      }
    }
    // A fired timer's goroutine may still hold its context for a moment.
    EXPECT_TRUE(eventually([&] { return watch.alive() == 0; })) << watch.alive() << " contexts leaked";
    EXPECT_EQ(gort::internal::timers_next(), -1);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

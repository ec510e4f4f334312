// tests/stdlib/sync/context_values_test.cpp — context values, names and causes
// (stdlib/sync/context.cpp): with_value and typed keys, to_string as Go's
// String(), todo(), without_cancel (Go 1.21), and cause() with
// with_cancel_cause / with_deadline_cause (Go 1.20/1.21). Go's TestValues,
// TestBackground, TestTODO, TestCause, TestCauseRace and TestWithoutCancel
// are ported here.
#include <atomic>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/sync/context_helpers.hpp"
#include "tests/stdlib/helpers.hpp"
#include "tests/testing.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::is_done;
using gort::test::kCanceled;
using gort::test::kDeadline;
using gort::test::other;
using gort::test::ProcsTest;
using gort::test::Tracked;


// Go's key1 (no String method: shown by its type) and key2 (a Stringer).
const gort::ContextKey<const char*> k1;
const gort::ContextKey<const char*> k2{"context_test.key2(1)"};
const gort::ContextKey<const char*> k3{"context_test.key2(3)"};

class ContextValues : public ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ContextValues);

TEST(ContextNames, BackgroundAndTodo) {
  gort::Context bg = gort::background();
  EXPECT_EQ(bg.to_string(), "context.Background");
  gort::Context todo = gort::todo();
  EXPECT_EQ(todo.to_string(), "context.TODO");
  EXPECT_TRUE(todo.done().is_nil());
  EXPECT_TRUE(todo.err().ok());
  EXPECT_FALSE(todo.deadline().has_value());
  EXPECT_EQ(todo.lookup(k1), nullptr);
  // Contexts need no runtime unless they arm a timer or watch a custom kind.
  auto [c, cancel] = gort::with_cancel(gort::todo());
  EXPECT_EQ(c.to_string(), "context.TODO.WithCancel");
  EXPECT_EQ(c.done().is_nil(), false) << "a child of todo can be cancelled";
  cancel();
  EXPECT_EQ(c.err(), kCanceled);
}

TEST(ContextNames, Chains) {
  auto [c, cancel] = gort::with_cancel(gort::background());
  static const gort::ContextKey<std::string> kUser{"user"};
  gort::Context v = gort::with_value(c, kUser, "gopher");
  EXPECT_EQ(v.to_string(), "context.Background.WithCancel.WithValue(user, gopher)");
  EXPECT_EQ(gort::without_cancel(v).to_string(), "context.Background.WithCancel.WithValue(user, gopher).WithoutCancel");
  // Not a Stringer: shown by its type, as Go 1.21 does; null as <nil>.
  static const gort::ContextKey<int> kN{"n"};
  static const gort::ContextKey<std::nullptr_t> kNil{"nil"};
  static const gort::ContextKey<std::optional<int>> kOpt{"opt"};
  EXPECT_EQ(gort::with_value(gort::background(), kN, 7).to_string(), "context.Background.WithValue(n, int)");
  EXPECT_EQ(gort::with_value(gort::background(), kNil, nullptr).to_string(), "context.Background.WithValue(nil, <nil>)");
  EXPECT_EQ(gort::with_value(gort::background(), kOpt, std::nullopt).to_string(),
            "context.Background.WithValue(opt, <nil>)");
  struct Stringer {
    std::string to_string() const { return "I am a stringer"; }
  };
  static const gort::ContextKey<Stringer> kS{"s"};
  EXPECT_EQ(gort::with_value(gort::background(), kS, Stringer{}).to_string(),
            "context.Background.WithValue(s, I am a stringer)");
  // An unnamed key is shown by its type.
  static const gort::ContextKey<int> kAnon;
  EXPECT_EQ(kAnon.describe(), "gort::ContextKey<int>");
  // A custom kind is shown by its to_string(): by default its type.
  EXPECT_EQ(other(c).to_string(), "gort::test::OtherContext");
  auto [d, dcancel] = gort::with_cancel(other(c));
  EXPECT_EQ(d.to_string(), "gort::test::OtherContext.WithCancel");
  std::ostringstream os;
  os << v;
  EXPECT_EQ(os.str(), v.to_string());
  dcancel();
  cancel();
}

TEST_P(ContextValues, GoTestValues) {
  run_test([] {
    // Go's check: a key with no value, or a nil value, reads as "".
    auto get = [](const gort::Context& c, const gort::ContextKey<const char*>& k) -> std::string {
      const char* const* v = c.value(k);
      return v != nullptr && *v != nullptr ? *v : "";
    };
    auto check = [&](const gort::Context& c, const char* nm, const char* v1, const char* v2, const char* v3) {
      EXPECT_EQ(get(c, k1), v1) << nm << ".value(k1)";
      EXPECT_EQ(get(c, k2), v2) << nm << ".value(k2)";
      EXPECT_EQ(get(c, k3), v3) << nm << ".value(k3)";
    };
    std::string key1 = k1.describe();
    EXPECT_EQ(key1, "gort::ContextKey<char const*>");

    gort::Context c0 = gort::background();
    check(c0, "c0", "", "", "");
    gort::Context c1 = gort::with_value(gort::background(), k1, "c1k1");
    check(c1, "c1", "c1k1", "", "");
    EXPECT_EQ(c1.to_string(), "context.Background.WithValue(" + key1 + ", c1k1)");
    gort::Context c2 = gort::with_value(c1, k2, "c2k2");
    check(c2, "c2", "c1k1", "c2k2", "");
    EXPECT_EQ(c2.to_string(),
              "context.Background.WithValue(" + key1 + ", c1k1).WithValue(context_test.key2(1), c2k2)");
    gort::Context c3 = gort::with_value(c2, k3, "c3k3");
    check(c3, "c3", "c1k1", "c2k2", "c3k3");
    gort::Context c4 = gort::with_value(c3, k1, nullptr);
    check(c4, "c4", "", "c2k2", "c3k3");
    EXPECT_EQ(c4.to_string(), "context.Background.WithValue(" + key1 +
                                  ", c1k1).WithValue(context_test.key2(1), c2k2).WithValue(context_test.key2(3), "
                                  "c3k3).WithValue(" +
                                  key1 + ", <nil>)");

    gort::Context o0 = other(gort::background());
    check(o0, "o0", "", "", "");
    gort::Context o1 = other(gort::with_value(gort::background(), k1, "c1k1"));
    check(o1, "o1", "c1k1", "", "");
    gort::Context o2 = gort::with_value(o1, k2, "o2k2");
    check(o2, "o2", "c1k1", "o2k2", "");
    gort::Context o3 = other(c4);
    check(o3, "o3", "", "c2k2", "c3k3");
    gort::Context o4 = gort::with_value(o3, k3, nullptr);
    check(o4, "o4", "", "c2k2", "");
  });
}

// Values are seen through every kind, and the nearest wins.
TEST_P(ContextValues, ValuesThroughEveryKind) {
  run_test([] {
    static const gort::ContextKey<int> kA{"a"};
    static const gort::ContextKey<int> kB{"b"};
    gort::Context c = gort::with_value(gort::background(), kA, 1);
    auto [cc, cancel] = gort::with_cancel(c);
    auto [tc, tcancel] = gort::with_timeout(cc, absl::Hours(1));
    gort::Context w = gort::without_cancel(tc);
    gort::Context o = other(w);
    gort::Context shadow = gort::with_value(o, kA, 2);
    for (const gort::Context* x : {&cc, &tc, &w, &o}) {
      const int* a = x->value(kA);
      EXPECT_TRUE(a != nullptr && *a == 1) << x->to_string();
      EXPECT_EQ(x->value(kB), nullptr);
    }
    EXPECT_EQ(*shadow.value(kA), 2) << "the nearest value wins";
    EXPECT_EQ(*o.value(kA), 1) << "a child's value is not its parent's";
    cancel();
    EXPECT_EQ(*shadow.value(kA), 2) << "values outlive cancellation";
    tcancel();
  });
}

// A value is destroyed with the last handle on its chain, and only then;
// move-only values work.
TEST_P(ContextValues, ValueLifetime) {
  run_test([] {
    static const gort::ContextKey<Tracked> kT{"t"};
    static const gort::ContextKey<std::unique_ptr<int>> kU{"u"};
    Tracked::reset();
    gort::Context leaf;
    {
      gort::Context v = gort::with_value(gort::background(), kT, Tracked(5));
      auto [c, cancel] = gort::with_cancel(v);
      leaf = gort::with_value(c, kU, std::make_unique<int>(9));
      cancel();
    }
    EXPECT_EQ(Tracked::live.load(), 1) << "the chain below still holds the value";
    const Tracked* t = leaf.value(kT);
    const std::unique_ptr<int>* u = leaf.value(kU);
    EXPECT_TRUE(t != nullptr && t->value == 5);
    EXPECT_TRUE(u != nullptr && **u == 9);
    leaf = gort::Context();
    EXPECT_EQ(Tracked::live.load(), 0) << "the value outlived its chain";
    EXPECT_EQ(Tracked::misuses.load(), 0);
  });
}

// Go's TestWithoutCancel, and that cancellation stops there.
TEST_P(ContextValues, WithoutCancel) {
  run_test([] {
    static const gort::ContextKey<std::string> kKey{"key"};
    gort::Context ctx = gort::with_value(gort::background(), kKey, "value");
    ctx = gort::without_cancel(ctx);
    EXPECT_FALSE(ctx.deadline().has_value());
    EXPECT_TRUE(ctx.done().is_nil());
    EXPECT_TRUE(ctx.err().ok());
    const std::string* v = ctx.value(kKey);
    EXPECT_TRUE(v != nullptr && *v == "value");

    auto [parent, cancel] = gort::with_timeout(gort::background(), absl::Hours(1));
    gort::Context w = gort::without_cancel(parent);
    auto [child, child_cancel] = gort::with_cancel(w);
    EXPECT_FALSE(w.deadline().has_value()) << "without_cancel drops the deadline";
    EXPECT_FALSE(child.deadline().has_value());
    cancel();
    EXPECT_TRUE(w.err().ok());
    EXPECT_FALSE(is_done(child)) << "cancellation crossed without_cancel";
    child_cancel();
    EXPECT_EQ(child.err(), kCanceled);
  });
}

// Go's TestCause table.
TEST_P(ContextValues, GoTestCause) {
  run_test([] {
    const absl::Duration forever = absl::Seconds(1e6);
    const absl::Status parent_cause = absl::AbortedError("parentCause");
    const absl::Status child_cause = absl::AbortedError("childCause");
    const absl::Status too_slow = absl::DeadlineExceededError("tooSlow");
    const absl::Status finished_early = absl::AbortedError("finishedEarly");
    struct Case {
      const char* name;
      std::function<gort::Context()> ctx;
      absl::Status err, cause;
    };
    std::vector<Case> cases = {
        {"Background", [] { return gort::background(); }, absl::OkStatus(), absl::OkStatus()},
        {"TODO", [] { return gort::todo(); }, absl::OkStatus(), absl::OkStatus()},
        {"WithCancel",
         [] {
           auto [ctx, cancel] = gort::with_cancel(gort::background());
           cancel();
           return ctx;
         },
         kCanceled, kCanceled},
        {"WithCancelCause",
         [&] {
           auto [ctx, cancel] = gort::with_cancel_cause(gort::background());
           cancel(parent_cause);
           return ctx;
         },
         kCanceled, parent_cause},
        {"WithCancelCause nil",
         [] {
           auto [ctx, cancel] = gort::with_cancel_cause(gort::background());
           cancel(absl::OkStatus());
           return ctx;
         },
         kCanceled, kCanceled},
        {"WithCancelCause: parent cause before child",
         [&] {
           auto [p, cancel_parent] = gort::with_cancel_cause(gort::background());
           auto [ctx, cancel_child] = gort::with_cancel_cause(p);
           cancel_parent(parent_cause);
           cancel_child(child_cause);
           return ctx;
         },
         kCanceled, parent_cause},
        {"WithCancelCause: parent cause after child",
         [&] {
           auto [p, cancel_parent] = gort::with_cancel_cause(gort::background());
           auto [ctx, cancel_child] = gort::with_cancel_cause(p);
           cancel_child(child_cause);
           cancel_parent(parent_cause);
           return ctx;
         },
         kCanceled, child_cause},
        {"WithCancelCause: parent cause before nil",
         [&] {
           auto [p, cancel_parent] = gort::with_cancel_cause(gort::background());
           auto [ctx, cancel_child] = gort::with_cancel(p);
           cancel_parent(parent_cause);
           cancel_child();
           return ctx;
         },
         kCanceled, parent_cause},
        {"WithCancelCause: parent cause after nil",
         [&] {
           auto [p, cancel_parent] = gort::with_cancel_cause(gort::background());
           auto [ctx, cancel_child] = gort::with_cancel(p);
           cancel_child();
           cancel_parent(parent_cause);
           return ctx;
         },
         kCanceled, kCanceled},
        {"WithCancelCause: child cause after nil",
         [&] {
           auto [p, cancel_parent] = gort::with_cancel(gort::background());
           auto [ctx, cancel_child] = gort::with_cancel_cause(p);
           cancel_parent();
           cancel_child(child_cause);
           return ctx;
         },
         kCanceled, kCanceled},
        {"WithCancelCause: child cause before nil",
         [&] {
           auto [p, cancel_parent] = gort::with_cancel(gort::background());
           auto [ctx, cancel_child] = gort::with_cancel_cause(p);
           cancel_child(child_cause);
           cancel_parent();
           return ctx;
         },
         kCanceled, child_cause},
        {"WithTimeout",
         [] {
           auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::ZeroDuration());
           cancel();
           return ctx;
         },
         kDeadline, kDeadline},
        {"WithTimeout canceled",
         [&] {
           auto [ctx, cancel] = gort::with_timeout(gort::background(), forever);
           cancel();
           return ctx;
         },
         kCanceled, kCanceled},
        {"WithTimeoutCause",
         [&] {
           auto [ctx, cancel] = gort::with_timeout_cause(gort::background(), absl::ZeroDuration(), too_slow);
           cancel();
           return ctx;
         },
         kDeadline, too_slow},
        {"WithTimeoutCause canceled",
         [&] {
           auto [ctx, cancel] = gort::with_timeout_cause(gort::background(), forever, too_slow);
           cancel();
           return ctx;
         },
         kCanceled, kCanceled},
        {"WithTimeoutCause stacked",
         [&] {
           auto [p, cancel] = gort::with_cancel_cause(gort::background());
           auto [ctx, c2] = gort::with_timeout_cause(p, absl::ZeroDuration(), too_slow);
           cancel(finished_early);
           return ctx;
         },
         kDeadline, too_slow},
        {"WithTimeoutCause stacked canceled",
         [&] {
           auto [p, cancel] = gort::with_cancel_cause(gort::background());
           auto [ctx, c2] = gort::with_timeout_cause(p, forever, too_slow);
           cancel(finished_early);
           return ctx;
         },
         kCanceled, finished_early},
        {"WithoutCancel", [] { return gort::without_cancel(gort::background()); }, absl::OkStatus(),
         absl::OkStatus()},
        {"WithoutCancel canceled",
         [&] {
           auto [p, cancel] = gort::with_cancel_cause(gort::background());
           gort::Context ctx = gort::without_cancel(p);
           cancel(finished_early);
           return ctx;
         },
         absl::OkStatus(), absl::OkStatus()},
        {"WithoutCancel timeout",
         [&] {
           auto [p, cancel] = gort::with_timeout_cause(gort::background(), absl::ZeroDuration(), too_slow);
           gort::Context ctx = gort::without_cancel(p);
           cancel();
           return ctx;
         },
         absl::OkStatus(), absl::OkStatus()},
        // The cause of a deadline passing on its own.
        {"WithTimeoutCause fired",
         [&] {
           auto [ctx, cancel] = gort::with_timeout_cause(gort::background(), absl::Milliseconds(1), too_slow);
           gort::test::done_within(ctx, absl::Seconds(20));
           return ctx;
         },
         kDeadline, too_slow},
    };
    for (const Case& c : cases) {
      gort::Context ctx = c.ctx();
      EXPECT_EQ(ctx.err(), c.err) << c.name;
      EXPECT_EQ(gort::cause(ctx), c.cause) << c.name;
    }
  });
}

TEST_P(ContextValues, GoTestCauseRace) {
  run_test([] {
    for (int round = 0; round < 20; round++) {
      absl::Status because = absl::AbortedError("TestCauseRace");
      auto [ctx, cancel] = gort::with_cancel_cause(gort::background());
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&, cancel = cancel] {
        cancel(because);
        wg.done();
      });
      // Poll cause rather than waiting for done: its reads must be
      // synchronised on their own.
      for (;;) {
        absl::Status s = gort::cause(ctx);
        if (!s.ok()) {
          EXPECT_EQ(s, because);
          EXPECT_TRUE(is_done(ctx)) << "a cause before done is closed";
          break;
        }
        gort::yield();
      }
      wg.wait();
    }
  });
}

}  // namespace
}  // namespace gort_stdlib_test

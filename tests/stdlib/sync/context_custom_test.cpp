// tests/stdlib/sync/context_custom_test.cpp — user-defined kinds of context and
// after_func (stdlib/sync/context_cancel.cpp's propagate and after_func): Go's
// TestCustomContextGoroutines, TestCustomContextPropagation,
// TestCustomContextCause and the AfterFunc tests, ported; a custom kind with
// its own after_func (Go 1.21's afterFuncer) that needs no goroutine; and the
// lifetimes of after_func registrations and watcher goroutines.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/time/clock.h"
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

using gort::test::closed_within;
using gort::test::done_within;
using gort::test::eventually;
using gort::test::expect_goroutines_settle;
using gort::test::is_done;
using gort::test::kCanceled;
using gort::test::kQuiescent;
using gort::test::kShort;
using gort::test::kVeryLong;
using gort::test::NodeWatch;
using gort::test::ProcsTest;


// Go's myCtx: embeds a context, overrides nothing.
struct MyCtx final : gort::WrappedContext {
  using WrappedContext::WrappedContext;
};

// Go's myDoneCtx: a Done that is not its parent's (a new channel per call,
// as in Go's test).
struct MyDoneCtx final : gort::WrappedContext {
  using WrappedContext::WrappedContext;
  gort::Chan<std::monostate> done() const override { return gort::make_chan<std::monostate>(); }
};

// Go's customDoneContext: its own done channel, the rest from the parent.
struct CustomDone final : gort::WrappedContext {
  CustomDone(gort::Context parent, gort::Chan<std::monostate> d) : WrappedContext(std::move(parent)), donec(d) {}
  gort::Chan<std::monostate> done() const override { return donec; }
  gort::Chan<std::monostate> donec;
};

// Go's customCauseContext: a context from scratch, cancelled by cancel().
struct CustomCause final : gort::CustomContext {
  std::optional<absl::Time> deadline() const override { return std::nullopt; }
  gort::Chan<std::monostate> done() const override {
    std::lock_guard<std::mutex> l(mu);
    return donec;
  }
  absl::Status err() const override {
    std::lock_guard<std::mutex> l(mu);
    return error;
  }
  const void* lookup(const gort::ContextKeyBase&) const override { return nullptr; }
  void cancel() {
    gort::CancelFunc child;
    {
      std::lock_guard<std::mutex> l(mu);
      error = absl::CancelledError("context canceled");
      donec.close();
      child = cancel_child;
    }
    if (child) child();
  }

  mutable std::mutex mu;
  gort::Chan<std::monostate> donec = gort::make_chan<std::monostate>();
  absl::Status error;
  gort::CancelFunc cancel_child;
};

// A custom kind with Go 1.21's AfterFunc method: cancel() runs the
// registered functions in goroutines; stop unregisters.
struct Afterfuncer final : gort::CustomContext {
  std::optional<absl::Time> deadline() const override { return std::nullopt; }
  gort::Chan<std::monostate> done() const override { return donec; }
  absl::Status err() const override {
    std::lock_guard<std::mutex> l(mu);
    return error;
  }
  const void* lookup(const gort::ContextKeyBase&) const override { return nullptr; }
  std::function<bool()> after_func(std::function<void()> f) override {
    std::lock_guard<std::mutex> l(mu);
    auto slot = std::make_shared<std::function<void()>>(std::move(f));
    fs.push_back(slot);
    return [this, slot] {
      std::lock_guard<std::mutex> l(mu);
      for (auto it = fs.begin(); it != fs.end(); ++it) {
        if (*it == slot) {
          fs.erase(it);
          return true;
        }
      }
      return false;
    };
  }
  size_t registered() const {
    std::lock_guard<std::mutex> l(mu);
    return fs.size();
  }
  void cancel(absl::Status why) {
    std::vector<std::shared_ptr<std::function<void()>>> run;
    {
      std::lock_guard<std::mutex> l(mu);
      error = std::move(why);
      donec.close();
      run.swap(fs);
    }
    for (auto& f : run) gort::go([f] { (*f)(); });
  }

  mutable std::mutex mu;
  gort::Chan<std::monostate> donec = gort::make_chan<std::monostate>();
  absl::Status error;
  std::vector<std::shared_ptr<std::function<void()>>> fs;
};

int64_t watchers() { return gort::internal::context_watchers_started(); }

class ContextCustom : public ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ContextCustom);

// Which parents cost a watcher goroutine (Go's XTestCustomContextGoroutines).
TEST_P(ContextCustom, GoTestCustomContextGoroutines) {
  run_test([] {
    int64_t g = watchers();
    auto created = [&](const char* what) {
      EXPECT_EQ(watchers(), g + 1) << what << ": want one goroutine";
      g = watchers();
    };
    auto none = [&](const char* what) { EXPECT_EQ(watchers(), g) << what << ": want no goroutine"; };

    auto [c0, cancel0] = gort::with_cancel(gort::make_context<MyDoneCtx>(gort::background()));
    cancel0();
    created("WithCancel(myDoneCtx{Background})");
    auto [c0b, cancel0b] = gort::with_timeout(gort::make_context<MyDoneCtx>(gort::background()), kVeryLong);
    cancel0b();
    created("WithTimeout(myDoneCtx{Background})");

    auto [ctx1, cancel1] = gort::with_cancel(gort::background());
    none("ctx1");
    gort::Context ctx2 = gort::make_context<MyCtx>(ctx1);
    auto [ctx3, cancel3] = gort::with_cancel(ctx2);
    none("WithCancel(myCtx{ctx1})");
    auto [c3b, cancel3b] = gort::with_cancel(gort::make_context<MyDoneCtx>(ctx2));
    created("WithCancel(myDoneCtx{myCtx{ctx1}})");  // ctx1 does not provide its Done: it must not be used
    auto [ctx4, cancel4] = gort::with_timeout(ctx3, kVeryLong);
    none("ctx4");
    auto [ctx5, cancel5] = gort::with_cancel(ctx4);
    none("ctx5");
    cancel5();
    none("cancel5");
    auto [ctx6, cancel6] = gort::with_timeout(ctx5, kVeryLong);
    none("ctx6 under a cancelled parent");
    cancel6();
    cancel1();
    auto [ctx7, cancel7] = gort::with_cancel(ctx5);
    none("ctx7 under a cancelled parent");
    for (auto* f : {&cancel7, &cancel4, &cancel3b, &cancel3}) (*f)();
    // Every watcher has ended: run_test checks that no goroutine is left.
  });
}

TEST_P(ContextCustom, GoTestCustomContextPropagation) {
  run_test([] {
    absl::Status because = absl::AbortedError("TestCustomContextPropagation");
    auto donec = gort::make_chan<std::monostate>();
    auto [ctx1, cancel1] = gort::with_cancel_cause(gort::background());
    gort::Context ctx2 = gort::make_context<CustomDone>(ctx1, donec);
    auto [ctx3, cancel3] = gort::with_cancel(ctx2);
    cancel1(because);
    donec.close();
    EXPECT_TRUE(done_within(ctx3, kQuiescent));
    EXPECT_EQ(ctx3.err(), kCanceled);
    EXPECT_EQ(gort::cause(ctx3), because);
    cancel3();
  });
}

TEST_P(ContextCustom, GoTestCustomContextCause) {
  run_test([] {
    // Cancelling a custom context: err and cause are Canceled.
    auto ccc = std::make_shared<CustomCause>();
    gort::Context cc(ccc);
    ccc->cancel();
    EXPECT_EQ(cc.err(), kCanceled);
    EXPECT_EQ(gort::cause(cc), kCanceled);

    // A child cancelled with a cause leaves its custom parent alone.
    ccc = std::make_shared<CustomCause>();
    cc = gort::Context(ccc);
    auto [ctx, cause_func] = gort::with_cancel_cause(cc);
    absl::Status because = absl::AbortedError("TestCustomContextCause");
    cause_func(because);
    EXPECT_EQ(ctx.err(), kCanceled);
    EXPECT_EQ(gort::cause(ctx), because);
    EXPECT_TRUE(cc.err().ok());
    EXPECT_TRUE(gort::cause(cc).ok());
    // Cancelling the parent now changes neither.
    ccc->cancel();
    EXPECT_EQ(ctx.err(), kCanceled);
    EXPECT_EQ(gort::cause(ctx), because);
    EXPECT_EQ(cc.err(), kCanceled);
    EXPECT_EQ(gort::cause(cc), kCanceled);

    // A custom context that cancels its child itself.
    ccc = std::make_shared<CustomCause>();
    cc = gort::Context(ccc);
    auto [child, cancel_child] = gort::with_cancel(cc);
    ccc->cancel_child = cancel_child;
    ccc->cancel();
    EXPECT_EQ(child.err(), kCanceled);
    EXPECT_EQ(gort::cause(child), kCanceled);
    EXPECT_EQ(cc.err(), kCanceled);
    ccc->cancel_child = nullptr;
    // Its watcher ends when it sees the parent done.
  });
}

// A custom kind with an after_func method needs no goroutine, gets its
// registration back when the child is cancelled first, and cancels children
// with its err and cause.
TEST_P(ContextCustom, AfterFuncerParentsNeedNoGoroutine) {
  run_test([] {
    int64_t g = watchers();
    auto af = std::make_shared<Afterfuncer>();
    gort::Context p(af);
    auto [a, cancel_a] = gort::with_cancel(p);
    auto [b, cancel_b] = gort::with_timeout(p, kVeryLong);
    auto stop = gort::after_func(p, [] {});
    EXPECT_EQ(af->registered(), 3u);
    EXPECT_EQ(watchers(), g) << "an after_func parent cost a goroutine";
    cancel_a();
    EXPECT_EQ(af->registered(), 2u) << "the cancelled child did not unregister (Go's stopCtx)";
    EXPECT_TRUE(stop());
    EXPECT_EQ(af->registered(), 1u);
    af->cancel(absl::DeadlineExceededError("context deadline exceeded"));
    EXPECT_TRUE(done_within(b, kQuiescent));
    EXPECT_EQ(b.err(), gort::test::kDeadline) << "the child takes its parent's err";
    EXPECT_EQ(a.err(), kCanceled);
    cancel_b();
  });
}

TEST_P(ContextCustom, GoTestAfterFuncCalledAfterCancel) {
  run_test([] {
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    auto donec = gort::make_chan<std::monostate>();
    auto stop = gort::after_func(ctx, [donec] { donec.close(); });
    EXPECT_FALSE(closed_within(donec, kShort)) << "called before the context is done";
    cancel();
    EXPECT_TRUE(closed_within(donec, kQuiescent)) << "not called after the context is cancelled";
    EXPECT_FALSE(stop()) << "stop() = true after f ran";
  });
}

TEST_P(ContextCustom, GoTestAfterFuncCalledAfterTimeout) {
  run_test([] {
    auto [ctx, cancel] = gort::with_timeout(gort::background(), kShort);
    auto donec = gort::make_chan<std::monostate>();
    gort::after_func(ctx, [donec] { donec.close(); });
    EXPECT_TRUE(closed_within(donec, kQuiescent));
    cancel();
  });
}

TEST_P(ContextCustom, GoTestAfterFuncCalledImmediately) {
  run_test([] {
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    cancel();
    auto donec = gort::make_chan<std::monostate>();
    gort::after_func(ctx, [donec] { donec.close(); });
    EXPECT_TRUE(closed_within(donec, kQuiescent)) << "not called for an already-cancelled context";
  });
}

TEST_P(ContextCustom, GoTestAfterFuncNotCalledAfterStop) {
  run_test([] {
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    auto donec = gort::make_chan<std::monostate>();
    auto stop = gort::after_func(ctx, [donec] { donec.close(); });
    EXPECT_TRUE(stop());
    cancel();
    EXPECT_FALSE(closed_within(donec, kShort)) << "called after stop";
    EXPECT_FALSE(stop());
  });
}

// Cancelling does not wait for after_func's f to finish.
TEST_P(ContextCustom, GoTestAfterFuncCalledAsynchronously) {
  run_test([] {
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    auto donec = gort::make_chan<int>();
    auto stop = gort::after_func(ctx, [donec] { donec.send(1); });  // blocks until received
    cancel();
    EXPECT_EQ(donec.recv(), 1);
    stop();
  });
}

// An after_func on a background-derived context never runs, and stop says
// it kept f from running (Go: the registration is never linked).
TEST_P(ContextCustom, AfterFuncOnANeverCancelledContext) {
  run_test([] {
    static const gort::ContextKey<int> kK{"k"};
    std::atomic<int> ran{0};
    auto stop = gort::after_func(gort::with_value(gort::background(), kK, 1), [&] { ran++; });
    EXPECT_TRUE(stop());
    EXPECT_FALSE(stop());
    EXPECT_EQ(ran.load(), 0);
  });
}

// An after_func whose stop function was dropped still runs when the
// context is cancelled, even with the context's own handles gone; and stop
// and cancel racing start f at most once.
TEST_P(ContextCustom, AfterFuncRegistrationLifetime) {
  run_test([] {
    auto [root, cancel_root] = gort::with_cancel(gort::background());
    auto ran = gort::make_chan<std::monostate>();
    {
      auto [mid, cancel_mid] = gort::with_cancel(root);
      gort::after_func(mid, [ran] { ran.close(); });
    }
    cancel_root();
    EXPECT_TRUE(closed_within(ran, kQuiescent)) << "an after_func held by nothing but its context's tree did not run";

    for (int round = 0; round < 50; round++) {
      auto [ctx, cancel] = gort::with_cancel(gort::background());
      std::atomic<int> calls{0};
      gort::WaitGroup wg;
      auto stop = gort::after_func(ctx, [&] {
        calls++;
        wg.done();
      });
      wg.add(1);
      std::atomic<bool> stopped{false};
      gort::WaitGroup racers;
      racers.add(2);
      gort::go([&, stop] {
        stopped = stop();
        racers.done();
      });
      gort::go([&, cancel = cancel] {
        cancel();
        racers.done();
      });
      racers.wait();
      if (stopped) {
        wg.done();  // f will never run
      }
      wg.wait();
      EXPECT_EQ(calls.load(), stopped ? 0 : 1) << "round " << round;
    }
  });
}

// The watcher goroutine of a custom parent keeps its child until either is
// done, then both are released.
TEST_P(ContextCustom, WatcherLifetime) {
  run_test([] {
    auto donec = gort::make_chan<std::monostate>();
    NodeWatch watch;
    gort::Chan<std::monostate> child_done;
    {
      gort::Context custom = gort::make_context<CustomDone>(gort::background(), donec);
      auto [child, cancel] = gort::with_cancel(custom);
      watch.add(child);
      child_done = child.done();
    }  // the child's CancelFunc and handle are gone; the watcher holds it
    EXPECT_EQ(watch.alive(), 1);
    donec.close();
    EXPECT_TRUE(closed_within(child_done, kQuiescent)) << "the custom parent's done did not reach the child";
    EXPECT_TRUE(eventually([&] { return watch.alive() == 0; })) << "the watcher kept its child";
    expect_goroutines_settle(1);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/sync/context_stop_token_test.cpp — the bridge between
// gort::Context and std::stop_token (stdlib/include/gort/context.hpp):
// with_stop_token (a token cancels a context) and make_stop_token (a
// context requests a stop), with std::jthread on both sides.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <thread>

#include "gort/context.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::eventually;

class StopToken : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(StopToken);

TEST_P(StopToken, RequestStopCancelsTheContext) {
  run_test([] {
    std::stop_source src;
    auto [ctx, cancel] = gort::with_stop_token(gort::background(), src.get_token());
    EXPECT_TRUE(ctx.err().ok());
    auto waiter = gort::make_chan<bool>();
    gort::go([ctx = ctx, waiter] {
      EXPECT_FALSE(ctx.done().recv().has_value());  // closed, not sent on
      waiter.send(true);
    });
    src.request_stop();
    EXPECT_EQ(waiter.recv(), true);
    EXPECT_TRUE(absl::IsCancelled(ctx.err())) << ctx.err();
    cancel();
  });
}

TEST_P(StopToken, AStopRequestedBeforeIsSeenAtOnce) {
  run_test([] {
    std::stop_source src;
    src.request_stop();
    auto [ctx, cancel] = gort::with_stop_token(gort::background(), src.get_token());
    EXPECT_TRUE(absl::IsCancelled(ctx.err())) << ctx.err();
    cancel();
  });
}

TEST_P(StopToken, TheParentAndTheCancelFuncStillCancel) {
  run_test([] {
    std::stop_source src;
    auto [parent, cancel_parent] = gort::with_cancel(gort::background());
    auto [ctx, cancel] = gort::with_stop_token(parent, src.get_token());
    cancel_parent();
    EXPECT_TRUE(absl::IsCancelled(ctx.err()));
    EXPECT_FALSE(src.stop_requested());  // the bridge goes one way
    auto [ctx2, cancel2] = gort::with_stop_token(gort::background(), src.get_token());
    cancel2();
    EXPECT_TRUE(absl::IsCancelled(ctx2.err()));
    cancel();
  });
}

TEST_P(StopToken, AJthreadsDestructorStopsAGoroutine) {
  // A jthread owns work that hands a gort goroutine a Context: the
  // jthread's destructor (request_stop, then join) ends the goroutine.
  run_test([] {
    auto finished = gort::make_chan<int>(1);
    {
      auto started = gort::make_chan<bool>(1);
      std::jthread worker([&](std::stop_token st) {
        auto [ctx, cancel] = gort::with_stop_token(gort::background(), st);
        gort::go([ctx = ctx, started, finished] {
          started.send(true);
          int ticks = 0;
          while (ctx.err().ok()) {
            gort::sleep(absl::Milliseconds(1));
            ticks++;
          }
          finished.send(ticks);
        });
        EXPECT_EQ(started.recv(), true);
        while (!st.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        cancel();
      });
      gort::sleep(absl::Milliseconds(5));
      gort::blocking([&] { worker = std::jthread(); });  // request_stop + join
    }
    EXPECT_TRUE(finished.recv().has_value());
  });
}

TEST_P(StopToken, ContextCancelRequestsTheStop) {
  run_test([] {
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    std::stop_token tok = gort::make_stop_token(ctx);
    EXPECT_TRUE(tok.stop_possible());
    EXPECT_FALSE(tok.stop_requested());
    cancel();
    EXPECT_TRUE(eventually([&] { return tok.stop_requested(); }));
  });
}

TEST_P(StopToken, AnExpiredDeadlineStopsAConditionVariableWait) {
  // std::condition_variable_any waits until a stop is requested: a
  // context's deadline ends a plain thread's wait.
  run_test([] {
    auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(20));
    std::stop_token tok = gort::make_stop_token(ctx);
    bool woken_by_stop = false;
    std::thread t([&] {
      std::mutex mu;
      std::condition_variable_any cv;
      std::unique_lock<std::mutex> lock(mu);
      woken_by_stop = !cv.wait(lock, tok, [] { return false; });
    });
    gort::blocking([&] { t.join(); });
    EXPECT_TRUE(woken_by_stop);
    EXPECT_TRUE(absl::IsDeadlineExceeded(ctx.err()));
    cancel();
  });
}

TEST_P(StopToken, BackgroundGivesATokenThatCannotStop) {
  run_test([] {
    std::stop_token tok = gort::make_stop_token(gort::background());
    EXPECT_FALSE(tok.stop_possible());
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    cancel();
    std::stop_token done = gort::make_stop_token(ctx);  // already cancelled
    EXPECT_TRUE(eventually([&] { return done.stop_requested(); }));
  });
}

}  // namespace
}  // namespace gort_stdlib_test

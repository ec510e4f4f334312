// tests/stdlib/sync/chan_moved_test.cpp — a moved-from channel handle is not
// the nil channel (gort/chan.hpp, stdlib/sync/chan.cpp, select.cpp): every
// use of a moved-from Chan, SendChan or RecvChan panics `<op> moved-from
// gort::Chan` (where a nil channel would block forever), while a
// default-constructed handle keeps Go's nil-channel semantics.
#include <unistd.h>

#include <atomic>
#include <optional>
#include <ranges>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::panic_message;
using gort::test::Parked;
using gort::test::WaitReason;

class ChanMoved : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ChanMoved);

TEST_P(ChanMoved, EveryUsePanics) {
  run_test([] {
    for (size_t cap : {size_t{0}, size_t{2}}) {
      auto a = gort::make_chan<int>(cap);
      gort::Chan<int> b = std::move(a);
      EXPECT_FALSE(a.is_nil()) << "a moved-from Chan is not the nil channel";
      EXPECT_TRUE(static_cast<bool>(a));
      EXPECT_FALSE(a == gort::Chan<int>());
      EXPECT_FALSE(a == b);
      EXPECT_EQ(panic_message([&] { a.send(1); }), "send on moved-from gort::Chan");
      EXPECT_EQ(panic_message([&] { (void)a.recv(); }), "receive from moved-from gort::Chan");
      EXPECT_EQ(panic_message([&] { a.close(); }), "close of moved-from gort::Chan");
      EXPECT_EQ(panic_message([&] { (void)a.len(); }), "len of moved-from gort::Chan");
      EXPECT_EQ(panic_message([&] { (void)a.cap(); }), "cap of moved-from gort::Chan");
      EXPECT_EQ(panic_message([&] {
                  for (int v : a) ADD_FAILURE() << v;
                }),
                "receive from moved-from gort::Chan");
      EXPECT_EQ(panic_message([&] { std::ranges::for_each(a | std::views::take(2), [](int) {}); }),
                "receive from moved-from gort::Chan");
      // In a select, even with a default case: the handle is a bug, not a
      // case that is never ready.
      EXPECT_EQ(panic_message([&] { gort::select(gort::on_recv(a), gort::on_default()); }),
                "select on moved-from gort::Chan");
      EXPECT_EQ(panic_message([&] { gort::select(gort::on_send(a, 1), gort::on_default()); }),
                "select on moved-from gort::Chan");
      EXPECT_EQ(panic_message([&] { gort::select(gort::on_recv(b), gort::on_recv(a)); }),
                "select on moved-from gort::Chan");
      // The channel itself is untouched and lives on in b.
      EXPECT_EQ(b.cap(), cap);
      gort::go([b] { b.send(7); });
      EXPECT_EQ(b.recv(), std::optional<int>(7));
    }
  });
}

// A copy of a moved-from handle is moved-from; moving again keeps it so;
// assigning a channel to it makes it usable again.
TEST_P(ChanMoved, CopiesAssignmentAndReuse) {
  run_test([] {
    auto a = gort::make_chan<int>(1);
    gort::Chan<int> b;
    b = std::move(a);  // move assignment
    gort::Chan<int> copy = a;
    EXPECT_TRUE(copy == a);
    EXPECT_EQ(panic_message([&] { copy.send(1); }), "send on moved-from gort::Chan");
    gort::Chan<int> again = std::move(a);
    EXPECT_EQ(panic_message([&] { (void)again.recv(); }), "receive from moved-from gort::Chan");
    EXPECT_EQ(panic_message([&] { (void)a.len(); }), "len of moved-from gort::Chan");
    a = b;
    a.send(3);
    EXPECT_EQ(b.recv(), std::optional<int>(3));
    copy = gort::make_chan<int>(1);
    copy.send(4);
    EXPECT_EQ(copy.recv(), std::optional<int>(4));
    // Self-move leaves a handle as it was.
    auto& a_ref = a;
    a = std::move(a_ref);
    a.send(5);
    EXPECT_EQ(b.recv(), std::optional<int>(5));
    // = {} makes a nil channel, not a moved-from one.
    again = {};
    EXPECT_TRUE(again.is_nil());
    EXPECT_EQ(again.len(), 0u);
  });
}

TEST_P(ChanMoved, DirectionalHandles) {
  run_test([] {
    auto ch = gort::make_chan<int>(2);
    gort::SendChan<int> s = ch;
    gort::SendChan<int> s2 = std::move(s);
    EXPECT_FALSE(s.is_nil());
    EXPECT_EQ(panic_message([&] { s.send(1); }), "send on moved-from gort::Chan");
    EXPECT_EQ(panic_message([&] { s.close(); }), "close of moved-from gort::Chan");
    EXPECT_EQ(panic_message([&] { (void)s.len(); }), "len of moved-from gort::Chan");
    EXPECT_EQ(panic_message([&] { gort::select(gort::on_send(s, 1), gort::on_default()); }),
              "select on moved-from gort::Chan");

    gort::RecvChan<int> r = ch;
    gort::RecvChan<int> r2;
    r2 = std::move(r);
    EXPECT_EQ(panic_message([&] { (void)r.recv(); }), "receive from moved-from gort::Chan");
    EXPECT_EQ(panic_message([&] { (void)r.cap(); }), "cap of moved-from gort::Chan");
    EXPECT_EQ(panic_message([&] {
                for (int v : r) ADD_FAILURE() << v;
              }),
              "receive from moved-from gort::Chan");
    EXPECT_EQ(panic_message([&] { gort::select(gort::on_recv(r), gort::on_default()); }),
              "select on moved-from gort::Chan");

    // Converting from a Chan by move leaves the Chan moved-from.
    auto c2 = gort::make_chan<int>(1);
    gort::RecvChan<int> r3 = std::move(c2);
    EXPECT_EQ(panic_message([&] { c2.send(1); }), "send on moved-from gort::Chan");

    // The ones moved to work.
    s2.send(8);
    EXPECT_EQ(r2.recv(), std::optional<int>(8));
  });
}

// A default-constructed handle is still Go's nil channel: never ready in a
// select (a default case runs), len and cap 0, close panics as Go's does.
TEST_P(ChanMoved, DefaultConstructedIsStillNil) {
  run_test([] {
    gort::Chan<int> nil;
    gort::SendChan<int> nil_send;
    gort::RecvChan<int> nil_recv;
    EXPECT_TRUE(nil.is_nil() && nil_send.is_nil() && nil_recv.is_nil());
    for (int i = 0; i < 20; i++) {
      bool defaulted = false;
      size_t idx = gort::select(gort::on_recv(nil), gort::on_send(nil, i), gort::on_send(nil_send, i),
                                gort::on_recv(nil_recv), gort::on_default([&] { defaulted = true; }));
      EXPECT_EQ(idx, 4u);
      EXPECT_TRUE(defaulted);
    }
    EXPECT_EQ(nil.len(), 0u);
    EXPECT_EQ(nil_recv.cap(), 0u);
    EXPECT_EQ(panic_message([&] { nil.close(); }), "close of nil channel");
  });
}

// Ranging over the nil channel blocks forever, as Go's `for range nilch`.
TEST_P(ChanMoved, RangeOverNilChannelBlocksForever) {
  run_test(
      [] {
        Parked waiter;
        std::atomic<int> returned{0};
        gort::go([&waiter, &returned] {
          gort::Chan<int> nil;
          waiter.mark();
          for (int v : nil) ADD_FAILURE() << v;
          returned.store(1);
        });
        EXPECT_TRUE(waiter.wait(WaitReason::kChanRecvNilChan));
        EXPECT_EQ(returned.load(), 0);
        // main returns; the runtime abandons the blocked goroutine.
      },
      /*all_exit=*/false);
}

}  // namespace
}  // namespace gort_stdlib_test

// ---- in a child process: a moved-from send dies, it does not hang ----

namespace gort_stdlib_test {
namespace {

using gort::test::procs_cfg;

// A goroutine sends on a moved-from Chan while main waits on a long sleep.
// Were the handle a nil channel, the send would block forever and nothing
// would notice (main's timer keeps the deadlock detector quiet): the alarm
// would kill the child (SIGALRM), failing the test. It must die at once
// with Go's unrecovered-panic report naming the moved-from handle.
TEST(ChanMovedDeathTest, SendOnMovedFromChanPanicsInsteadOfHanging) {
  EXPECT_EXIT(
      {
        ::alarm(30);
        gort::run(
            [] {
              auto kept = gort::make_chan<int>();
              gort::Chan<int> moved = kept;
              gort::Chan<int> taken = std::move(moved);
              gort::go([moved] {
                gort::test::announce_goroutine();
                moved.send(1);
              });
              gort::sleep(absl::Seconds(120));
            },
            procs_cfg(2));
      },
      ::testing::ExitedWithCode(2), gort::test::goroutine_report("panic: send on moved-from gort::Chan\n\n"));
}

TEST(ChanMovedDeathTest, RangeOverMovedFromChanPanicsInMain) {
  EXPECT_EXIT(
      {
        ::alarm(30);
        gort::run(
            [] {
              auto ch = gort::make_chan<int>(1);
              auto other = std::move(ch);
              for (int v : ch) (void)v;
            },
            procs_cfg(1));
      },
      ::testing::ExitedWithCode(2), "panic: receive from moved-from gort::Chan\n\ngoroutine 1 \\[running\\]:");
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/sync/chan_dir_test.cpp — directional channel handles
// (gort/chan.hpp SendChan, RecvChan; Go's chan<- T and <-chan T): what each
// may do (checked at compile time), conversions from Chan, comparisons, the
// nil handle, range-for, select, and producers and consumers written
// against them.
#include <concepts>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::panic_message;
using gort::test::Parked;
using gort::test::WaitReason;

// ---- what compiles (Go's compiler errors, as requires-expressions) ----

template <class C>
concept CanSend = requires(const C& c, typename C::value_type v) { c.send(std::move(v)); };
template <class C>
concept CanRecv = requires(const C& c) {
  { c.recv() } -> std::same_as<std::optional<typename C::value_type>>;
};
template <class C>
concept CanClose = requires(const C& c) { c.close(); };
template <class C>
concept CanRange = requires(const C& c) {
  c.begin();
  c.end();
};
template <class C>
concept CanSelectRecv = requires(const C& c) { gort::on_recv(c); };
template <class C>
concept CanSelectSend = requires(const C& c) { gort::on_send(c, 1); };
template <class A, class B>
concept Comparable = requires(const A& a, const B& b) {
  { a == b } -> std::same_as<bool>;
  { b == a } -> std::same_as<bool>;
  { a != b } -> std::same_as<bool>;
};

using Send = gort::SendChan<int>;
using Recv = gort::RecvChan<int>;
using Both = gort::Chan<int>;

static_assert(CanSend<Both> && CanRecv<Both> && CanClose<Both> && CanRange<Both>);
// chan<- int: send, close, len, cap; no receive, no range.
static_assert(CanSend<Send> && CanClose<Send>);
static_assert(!CanRecv<Send> && !CanRange<Send>);
static_assert(CanSelectSend<Send> && !CanSelectRecv<Send>);
// <-chan int: receive, range, len, cap; no send, no close (Go: "invalid
// operation: cannot close receive-only channel").
static_assert(CanRecv<Recv> && CanRange<Recv>);
static_assert(!CanSend<Recv> && !CanClose<Recv>);
static_assert(CanSelectRecv<Recv> && !CanSelectSend<Recv>);
// chan T converts to either direction, implicitly; nothing converts back or
// across.
static_assert(std::is_convertible_v<Both, Send> && std::is_convertible_v<Both, Recv>);
static_assert(!std::is_constructible_v<Both, Send> && !std::is_constructible_v<Both, Recv>);
static_assert(!std::is_constructible_v<Send, Recv> && !std::is_constructible_v<Recv, Send>);
static_assert(!std::is_convertible_v<gort::Chan<long>, Send>);
// Comparable where Go allows it (one operand assignable to the other's type).
static_assert(Comparable<Send, Send> && Comparable<Recv, Recv>);
static_assert(Comparable<Send, Both> && Comparable<Recv, Both>);
static_assert(!Comparable<Send, Recv>);
// Handles: copyable, default-constructible (nil), nil-testable.
static_assert(std::is_nothrow_default_constructible_v<Send> && std::is_copy_constructible_v<Send>);
static_assert(std::is_nothrow_default_constructible_v<Recv> && std::is_copy_constructible_v<Recv>);
static_assert(!std::is_convertible_v<Send, bool> && std::is_constructible_v<bool, Send>);

// ---- at run time ----

class ChanDir : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ChanDir);

TEST_P(ChanDir, ConversionsComparisonsAndNil) {
  run_test([] {
    auto a = gort::make_chan<int>(2);
    auto b = gort::make_chan<int>(2);
    Send sa = a;
    Recv ra = a;
    EXPECT_TRUE(sa == a && a == sa && ra == a && a == ra);
    EXPECT_TRUE(sa == Send(a) && ra == Recv(a));
    EXPECT_TRUE(sa != b && ra != b && sa != Send(b) && ra != Recv(b));
    EXPECT_FALSE(sa.is_nil() || ra.is_nil());
    EXPECT_TRUE(static_cast<bool>(sa) && static_cast<bool>(ra));
    EXPECT_EQ(sa.cap(), 2u);
    EXPECT_EQ(ra.cap(), 2u);
    // Through the handles to the same channel.
    sa.send(7);
    EXPECT_EQ(a.len(), 1u);
    EXPECT_EQ(ra.len(), 1u);
    EXPECT_EQ(sa.len(), 1u);
    EXPECT_EQ(ra.recv(), 7);
    // Nil: default-constructed, from a nil Chan, or reset with {}.
    Send ns;
    Recv nr = gort::Chan<int>();
    EXPECT_TRUE(ns.is_nil() && nr.is_nil() && !ns && !nr);
    EXPECT_TRUE(ns == Send() && nr == Recv() && ns == gort::Chan<int>());
    EXPECT_EQ(ns.len(), 0u);
    EXPECT_EQ(nr.cap(), 0u);
    sa = {};
    EXPECT_TRUE(sa.is_nil());
    EXPECT_TRUE(sa != a);
    sa = b;  // reassigned from a Chan
    EXPECT_TRUE(sa == b);
    // A handle keeps the channel alive like a Chan does.
    Recv kept;
    {
      auto c = gort::make_chan<int>(1);
      c.send(3);
      kept = c;
    }
    EXPECT_EQ(kept.recv(), 3);
  });
}

TEST_P(ChanDir, PanicsAsGo) {
  run_test([] {
    Send nil_send;
    EXPECT_EQ(panic_message([&] { nil_send.close(); }), "close of nil channel");
    auto c = gort::make_chan<int>(1);
    Send s = c;
    s.close();
    EXPECT_EQ(panic_message([&] { s.send(1); }), "send on closed channel");
    EXPECT_EQ(panic_message([&] { s.close(); }), "close of closed channel");
    Recv r = c;
    EXPECT_EQ(r.recv(), std::nullopt);
  });
}

// A pipeline written against the directions Go programs give their
// stages: each stage sends on a SendChan and closes it, the next ranges
// over a RecvChan.
void produce(Send out, int n) {
  for (int i = 1; i <= n; i++) out.send(i);
  out.close();
}
void square(Recv in, Send out) {
  for (int v : in) out.send(v * v);
  out.close();
}

TEST_P(ChanDir, PipelineOfDirectionalStages) {
  run_test([] {
    constexpr int kN = 2000;
    for (size_t cap : {size_t{0}, size_t{1}, size_t{64}}) {
      auto numbers = gort::make_chan<int>(cap);
      auto squares = gort::make_chan<int>(cap);
      gort::go(produce, numbers, kN);
      gort::go(square, numbers, squares);
      int64_t sum = 0;
      int count = 0;
      Recv in = squares;
      for (int v : in) {
        sum += v;
        count++;
      }
      EXPECT_EQ(count, kN) << "cap " << cap;
      EXPECT_EQ(sum, int64_t{kN} * (kN + 1) * (2 * kN + 1) / 6) << "cap " << cap;
    }
  });
}

// select over directional handles: ready cases, a parked select woken
// through them, and nil handles that are never chosen.
TEST_P(ChanDir, SelectOnDirectionalHandles) {
  run_test([] {
    auto c = gort::make_chan<int>(1);
    Send s = c;
    Recv r = c;
    // Room in the buffer: only the send is ready.
    size_t i = gort::select(gort::on_recv(r, [](std::optional<int>) { ADD_FAILURE(); }),
                            gort::on_send(s, 5), gort::on_default([] { ADD_FAILURE(); }));
    EXPECT_EQ(i, 1u);
    // Full: only the receive is ready.
    std::optional<int> got;
    i = gort::select(gort::on_recv(r, [&](std::optional<int> v) { got = v; }), gort::on_send(s, 6),
                     gort::on_default());
    EXPECT_EQ(i, 0u);
    EXPECT_EQ(got, 5);
    // Nil handles are never ready.
    i = gort::select(gort::on_recv(Recv()), gort::on_send(Send(), 1), gort::on_default());
    EXPECT_EQ(i, 2u);

    // A parked select on an unbuffered channel's receive side, woken by a
    // sender through a SendChan of the same channel.
    auto u = gort::make_chan<int>();
    Parked parked;
    Countdown done(1);
    std::optional<int> woke;
    gort::go([&, ru = Recv(u)] {
      parked.mark();
      gort::select(gort::on_recv(ru, [&](std::optional<int> v) { woke = v; }),
                   gort::on_recv(Recv(), [] { ADD_FAILURE() << "nil case chosen"; }));
      done.done();
    });
    EXPECT_TRUE(parked.wait(WaitReason::kSelect));
    Send su = u;
    su.send(42);
    done.wait();
    EXPECT_EQ(woke, 42);

    // And the other way round: a parked send case taken by a receiver.
    Countdown sent(1);
    gort::go([&, su] {
      gort::select(gort::on_send(su, 9, [&] { sent.done(); }));
    });
    EXPECT_EQ(Recv(u).recv(), 9);
    sent.wait();
  });
}

// Many producers hold SendChans of one channel, consumers RecvChans; every
// value arrives once.
TEST_P(ChanDir, ManyProducersAndConsumersThroughHandles) {
  run_test([] {
    constexpr int kProducers = 4, kConsumers = 3, kEach = 3000;
    auto c = gort::make_chan<int>(8);
    auto results = gort::make_chan<int64_t>(kConsumers);
    Countdown producers(kProducers);
    for (int p = 0; p < kProducers; p++) {
      gort::go([&producers, p](Send out) {
        for (int i = 0; i < kEach; i++) out.send(p * kEach + i);
        producers.done();
      }, c);
    }
    for (int k = 0; k < kConsumers; k++) {
      gort::go([](Recv in, gort::SendChan<int64_t> out) {
        int64_t sum = 0;
        for (int v : in) sum += v;
        out.send(sum);
      }, c, results);
    }
    producers.wait();
    Send(c).close();
    int64_t total = 0;
    for (int k = 0; k < kConsumers; k++) total += *results.recv();
    int64_t n = int64_t{kProducers} * kEach;
    EXPECT_EQ(total, n * (n - 1) / 2);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/sync/chan_range_test.cpp — channels as std::ranges input
// ranges (gort/chan.hpp, Chan<T>::iterator): the concepts they model
// (checked at compile time), the lazy receive (an iterator never receives
// ahead of what is consumed, so views::take loses nothing), views,
// algorithms, range-for over move-only payloads, the end of a range at close,
// and many consumers using views at once.
#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::panic_message;
using gort::test::Parked;
using gort::test::WaitReason;

// ---- what the types model (compile time) ----

using IntChan = gort::Chan<int>;
using IntIt = IntChan::iterator;
using PtrChan = gort::Chan<std::unique_ptr<int>>;
using PtrIt = PtrChan::iterator;

static_assert(std::ranges::input_range<IntChan>);
static_assert(std::ranges::input_range<const IntChan>);
static_assert(std::ranges::input_range<gort::RecvChan<int>>);
static_assert(std::ranges::input_range<const gort::RecvChan<int>>);
static_assert(!std::ranges::input_range<gort::SendChan<int>>, "a send-only channel cannot be ranged over");
static_assert(std::input_iterator<IntIt>);
static_assert(std::sentinel_for<std::default_sentinel_t, IntIt>);
static_assert(std::same_as<std::ranges::sentinel_t<IntChan>, std::default_sentinel_t>);
static_assert(std::same_as<gort::RecvChan<int>::iterator, IntIt>);
// Single pass, and the iterator is move-only: a copy would be a second
// reader at the same position.
static_assert(!std::ranges::forward_range<IntChan>);
static_assert(!std::copy_constructible<IntIt> && std::movable<IntIt>);
static_assert(std::indirectly_readable<const IntIt>, "operator* is const");
static_assert(std::same_as<std::iter_value_t<IntIt>, int>);
// *it: T& for a copyable T, T&& for a move-only one.
static_assert(std::same_as<std::ranges::range_reference_t<IntChan>, int&>);
static_assert(std::same_as<std::ranges::range_rvalue_reference_t<IntChan>, int&&>);
static_assert(std::ranges::input_range<PtrChan>);
static_assert(std::input_iterator<PtrIt>);
static_assert(std::sentinel_for<std::default_sentinel_t, PtrIt>);
static_assert(std::same_as<std::ranges::range_reference_t<PtrChan>, std::unique_ptr<int>&&>);
static_assert(std::same_as<std::ranges::range_value_t<PtrChan>, std::unique_ptr<int>>);
// Views accept channels, lvalue (ref_view) and rvalue (owning_view).
static_assert(std::ranges::viewable_range<IntChan&> && std::ranges::viewable_range<IntChan>);
using Taken = decltype(std::declval<IntChan&>() | std::views::take(3));
static_assert(std::ranges::input_range<Taken> && std::ranges::view<Taken>);
using Squared = decltype(std::declval<const IntChan&>() | std::views::transform([](int v) { return v * v; }));
static_assert(std::ranges::input_range<Squared>);
static_assert(std::same_as<std::ranges::range_value_t<Squared>, int>);
using PtrTaken = decltype(std::declval<PtrChan&>() | std::views::take(2));
static_assert(std::ranges::input_range<PtrTaken>);

class ChanRange : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ChanRange);

// A buffered channel holding 1..n, then closed.
IntChan closed_with(int n) {
  auto ch = gort::make_chan<int>(static_cast<size_t>(n));
  for (int i = 1; i <= n; i++) ch.send(i);
  ch.close();
  return ch;
}

// ---- the lazy receive ----

// views::take(3) receives exactly three values: the next recv() gets the
// fourth (the eager iterator of old received it on the third ++ and lost
// it). Buffered, and unbuffered with a live sender.
TEST_P(ChanRange, TakeThreeThenRecvGetsTheFourth) {
  run_test([] {
    auto buffered = gort::make_chan<int>(10);
    for (int i = 1; i <= 6; i++) buffered.send(i);
    std::vector<int> got;
    for (int v : buffered | std::views::take(3)) got.push_back(v);
    EXPECT_EQ(got, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(buffered.len(), 3u) << "take(3) received more than three";
    EXPECT_EQ(buffered.recv(), std::optional<int>(4));
    // Again from where it stands.
    got.clear();
    for (int v : buffered | std::views::take(1)) got.push_back(v);
    EXPECT_EQ(got, (std::vector<int>{5}));
    EXPECT_EQ(buffered.recv(), std::optional<int>(6));

    auto unbuffered = gort::make_chan<int>();
    Countdown cd(1);
    gort::go([unbuffered, &cd] {
      for (int i = 1; i <= 5; i++) unbuffered.send(i);
      unbuffered.close();
      cd.done();
    });
    got.clear();
    std::ranges::for_each(unbuffered | std::views::take(3), [&](int v) { got.push_back(v); });
    EXPECT_EQ(got, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(unbuffered.recv(), std::optional<int>(4));
    EXPECT_EQ(unbuffered.recv(), std::optional<int>(5));
    EXPECT_EQ(unbuffered.recv(), std::nullopt);
    cd.wait();
  });
}

// The rule itself, step by step: begin() receives nothing; the first
// comparison with the end (or dereference) receives one value; dereferencing
// again does not receive; ++ does not receive; the next look does.
TEST_P(ChanRange, ReceivesAtFirstLookNotAtIncrement) {
  run_test([] {
    auto ch = gort::make_chan<int>(4);
    for (int i = 1; i <= 4; i++) ch.send(i);
    IntIt it = ch.begin();
    EXPECT_EQ(ch.len(), 4u) << "begin() received";
    EXPECT_FALSE(it == std::default_sentinel);
    EXPECT_EQ(ch.len(), 3u);
    EXPECT_EQ(*it, 1);
    EXPECT_EQ(*it, 1) << "a second dereference received again";
    EXPECT_EQ(ch.len(), 3u);
    ++it;
    EXPECT_EQ(ch.len(), 3u) << "++ received ahead";
    EXPECT_EQ(*it, 2) << "a dereference after ++ receives the next value";
    EXPECT_EQ(ch.len(), 2u);
    it++;
    EXPECT_TRUE(it != std::default_sentinel);
    EXPECT_EQ(ch.len(), 1u);
    EXPECT_EQ(*it.operator->(), 3);
    // Skipping a value nobody looked at consumes it.
    ++it;
    ++it;
    EXPECT_EQ(ch.len(), 0u);
    ch.send(5);
    EXPECT_EQ(*it, 5);
    ch.close();
    ++it;
    EXPECT_TRUE(it == std::default_sentinel);
    EXPECT_EQ(panic_message([&] { (void)*it; }), "gort::Chan iterator: dereference at the end (channel closed)");
    // A moved-from iterator is an end; the one it moved to carries on.
    auto ch2 = closed_with(2);
    IntIt a = ch2.begin();
    EXPECT_EQ(*a, 1);
    IntIt b = std::move(a);
    EXPECT_TRUE(a == std::default_sentinel);
    EXPECT_EQ(*b, 1);
    ++b;
    EXPECT_EQ(*b, 2);
  });
}

// The iterator holds the channel: it outlives the handle it came from.
TEST_P(ChanRange, IteratorKeepsTheChannel) {
  run_test([] {
    std::optional<IntIt> it;
    {
      auto ch = closed_with(3);
      it.emplace(ch.begin());
    }
    int sum = 0;
    for (; *it != std::default_sentinel; ++*it) sum += **it;
    EXPECT_EQ(sum, 6);
  });
}

// A ticker's channel is never closed: range-for ends by break, a view by
// take (the form docs and samples use, `for (absl::Time t : tick.chan())`).
TEST_P(ChanRange, TickerChannel) {
  run_test([] {
    gort::Ticker tick = gort::new_ticker(absl::Milliseconds(1));
    int n = 0;
    absl::Time last = absl::InfinitePast();
    for (absl::Time t : tick.chan()) {
      EXPECT_GE(t, last);
      last = t;
      if (++n == 3) break;
    }
    for (absl::Time t : tick.chan() | std::views::take(2)) {
      EXPECT_GE(t, last);
      n++;
    }
    EXPECT_EQ(n, 5);
    tick.stop();
  });
}

// ---- views and algorithms ----

TEST_P(ChanRange, Transform) {
  run_test([] {
    auto ch = closed_with(5);
    std::vector<int> squares;
    for (int sq : ch | std::views::transform([](int v) { return v * v; })) squares.push_back(sq);
    EXPECT_EQ(squares, (std::vector<int>{1, 4, 9, 16, 25}));
    EXPECT_EQ(ch.recv(), std::nullopt);
    // Over a producer that is still sending, through a RecvChan.
    auto live = gort::make_chan<int>();
    gort::go([live] {
      for (int i = 1; i <= 100; i++) live.send(i);
      live.close();
    });
    gort::RecvChan<int> in = live;
    int64_t sum = 0;
    for (int64_t d : in | std::views::transform([](int v) { return int64_t{v} * 2; })) sum += d;
    EXPECT_EQ(sum, 10100);
  });
}

TEST_P(ChanRange, ForEachAndOtherAlgorithms) {
  run_test([] {
    auto ch = closed_with(10);
    int sum = 0;
    auto r = std::ranges::for_each(ch, [&](int v) { sum += v; });
    EXPECT_EQ(sum, 55);
    EXPECT_TRUE(r.in == std::default_sentinel);

    // find stops at the first match and receives nothing after it.
    auto ch2 = closed_with(10);
    auto at = std::ranges::find(ch2, 4);
    EXPECT_TRUE(at != std::default_sentinel);
    EXPECT_EQ(*at, 4);
    EXPECT_EQ(ch2.recv(), std::optional<int>(5));

    // A filter's predicate takes the value by copy: the view still yields it.
    auto ch3 = closed_with(10);
    std::vector<int> even;
    for (int v : ch3 | std::views::filter([](int v) { return v % 2 == 0; })) even.push_back(v);
    EXPECT_EQ(even, (std::vector<int>{2, 4, 6, 8, 10}));

    // Into a container.
    auto ch4 = closed_with(4);
    std::vector<int> all;
    std::ranges::copy(ch4, std::back_inserter(all));
    EXPECT_EQ(all, (std::vector<int>{1, 2, 3, 4}));

    // An rvalue channel goes into an owning_view.
    int n = 0;
    for (int v : closed_with(3) | std::views::take(2)) n += v;
    EXPECT_EQ(n, 3);
  });
}

// ---- move-only payloads ----

PtrChan closed_ptrs(int n) {
  auto ch = gort::make_chan<std::unique_ptr<int>>(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) ch.send(std::make_unique<int>(i));
  ch.close();
  return ch;
}

TEST_P(ChanRange, MoveOnlyByValueAndForwardingReference) {
  run_test([] {
    int want = 0;
    for (std::unique_ptr<int> p : closed_ptrs(5)) {
      EXPECT_TRUE(p && *p == want);
      want++;
    }
    EXPECT_EQ(want, 5);

    std::vector<std::unique_ptr<int>> kept;
    for (auto&& p : closed_ptrs(4)) {
      static_assert(std::is_same_v<decltype(p), std::unique_ptr<int>&&>);
      kept.push_back(std::move(p));
    }
    ASSERT_EQ(kept.size(), 4u);
    for (int i = 0; i < 4; i++) EXPECT_TRUE(kept[i] && *kept[i] == i);

    // Moved out by a transform's by-value parameter; take on move-only.
    auto ch = closed_ptrs(6);
    int sum = 0;
    for (int v : ch | std::views::take(3) | std::views::transform([](std::unique_ptr<int> p) { return *p; })) {
      sum += v;
    }
    EXPECT_EQ(sum, 0 + 1 + 2);
    std::optional<std::unique_ptr<int>> fourth = ch.recv();
    EXPECT_TRUE(fourth && *fourth && **fourth == 3);

    // for_each with a const& parameter, and ranges::copy moving them out.
    int seen = 0;
    std::ranges::for_each(closed_ptrs(3), [&](const std::unique_ptr<int>& p) { seen += p ? 1 : 0; });
    EXPECT_EQ(seen, 3);
    std::vector<std::unique_ptr<int>> moved;
    auto src = closed_ptrs(3);
    std::ranges::move(src, std::back_inserter(moved));
    ASSERT_EQ(moved.size(), 3u);
    EXPECT_TRUE(moved[2] && *moved[2] == 2);
  });
}

// ---- where a range ends ----

TEST_P(ChanRange, ClosedBufferedChannelDrainsThenStops) {
  run_test([] {
    for (size_t cap : {size_t{3}, size_t{8}}) {
      auto ch = gort::make_chan<int>(cap);
      ch.send(10);
      ch.send(20);
      ch.send(30);
      ch.close();
      std::vector<int> got;
      for (int v : ch) got.push_back(v);
      EXPECT_EQ(got, (std::vector<int>{10, 20, 30})) << "cap " << cap;
      for (int v : ch) ADD_FAILURE() << "received " << v << " from a drained channel";
      EXPECT_EQ(std::ranges::distance(ch | std::views::take(5)), 0);
      EXPECT_EQ(ch.recv(), std::nullopt);
    }
  });
}

// A range-for parked waiting for the next value ends when another goroutine
// closes the channel.
TEST_P(ChanRange, RangeStopsWhenClosedWhileWaiting) {
  run_test([] {
    for (size_t cap : {size_t{0}, size_t{2}}) {
      auto ch = gort::make_chan<int>(cap);
      gort::RecvChan<int> in = ch;
      Parked consumer;
      std::atomic<int> count{0};
      std::atomic<int> sum{0};
      Countdown cd(1);
      gort::go([in, &consumer, &count, &sum, &cd] {
        consumer.mark();
        for (int v : in) {
          count.fetch_add(1);
          sum.fetch_add(v);
        }
        cd.done();
      });
      ch.send(1);
      ch.send(2);
      // Both taken and the loop parked for a third.
      EXPECT_TRUE(consumer.wait(WaitReason::kChanRecv)) << "cap " << cap;
      EXPECT_TRUE(gort::test::eventually([&] { return count.load() == 2; }));
      ch.close();
      cd.wait();
      EXPECT_EQ(count.load(), 2) << "cap " << cap;
      EXPECT_EQ(sum.load(), 3);
    }
  });
}

// ---- many Ps ----

// Producers send disjoint values; consumers drain the channel with a plain
// range-for, a transform, repeated take(7)s and ranges::for_each at once.
// Every value arrives exactly once: a view that received ahead would lose
// values at each take's end.
TEST_P(ChanRange, ManyProducersAndViewConsumers) {
  run_test([] {
    constexpr int kProducers = 4;
    const int per = gort::test::stress_size(5000);
    for (size_t cap : {size_t{0}, size_t{16}}) {
      auto ch = gort::make_chan<int>(cap);
      Countdown produced(kProducers);
      for (int p = 0; p < kProducers; p++) {
        gort::go([ch, p, per, &produced] {
          for (int i = 1; i <= per; i++) ch.send(p * per + i);
          produced.done();
        });
      }
      gort::go([ch, &produced] {
        produced.wait();
        ch.close();
      });
      std::atomic<int64_t> total{0};
      std::atomic<int64_t> count{0};
      Countdown consumed(4);
      gort::go([ch, &total, &count, &consumed] {
        for (int v : ch) {
          total.fetch_add(v);
          count.fetch_add(1);
        }
        consumed.done();
      });
      gort::go([ch, &total, &count, &consumed] {
        for (int64_t v : ch | std::views::transform([](int v) { return int64_t{v}; })) {
          total.fetch_add(v);
          count.fetch_add(1);
        }
        consumed.done();
      });
      gort::go([ch, &total, &count, &consumed] {
        for (;;) {
          int n = 0;
          for (int v : ch | std::views::take(7)) {
            total.fetch_add(v);
            count.fetch_add(1);
            n++;
          }
          if (n < 7) break;
        }
        consumed.done();
      });
      gort::go([in = gort::RecvChan<int>(ch), &total, &count, &consumed] {
        std::ranges::for_each(in, [&](int v) {
          total.fetch_add(v);
          count.fetch_add(1);
        });
        consumed.done();
      });
      consumed.wait();
      const int64_t n = int64_t{kProducers} * per;
      EXPECT_EQ(count.load(), n) << "cap " << cap;
      EXPECT_EQ(total.load(), n * (n + 1) / 2) << "cap " << cap;
      EXPECT_EQ(ch.recv(), std::nullopt);
    }
  });
}

}  // namespace
}  // namespace gort_stdlib_test

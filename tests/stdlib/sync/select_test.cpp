// tests/stdlib/sync/select_test.cpp — select (stdlib/sync/select.cpp): uniform choice,
// default, nil and closed channels, the same channel in several cases.
// Selects that park (lock order, close while parked, callbacks, plain
// threads) are in select_park_test.cpp.
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::Parked;
using gort::test::WaitReason;

class Select : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Select);

// The largest deviation of a frequency from p that we accept when each of k
// counts over n independent trials should be Binomial(n, p). By Hoeffding,
// P(|X/n - p| >= t) <= 2 exp(-2 n t^2); with a union bound over the k counts
// and t chosen so that 2k exp(-2 n t^2) = 1e-9, a correct uniform select
// fails this check with probability below 1e-9. (For 4 cases and 40,000
// selects, t = 0.0169: each count within 10,000 +- 675, tighter than +-10%.)
double tolerance(int k, int n) { return std::sqrt(std::log(2.0 * k / 1e-9) / (2.0 * n)); }

void expect_uniform(const std::vector<int64_t>& counts, const std::vector<bool>& ready, int n) {
  int k = 0;
  for (bool r : ready) k += r ? 1 : 0;
  double t = tolerance(static_cast<int>(ready.size()), n);
  for (size_t i = 0; i < counts.size(); i++) {
    if (!ready[i]) {
      EXPECT_EQ(counts[i], 0) << "case " << i << " was never ready but was chosen";
      continue;
    }
    double freq = static_cast<double>(counts[i]) / n;
    EXPECT_NEAR(freq, 1.0 / k, t) << "case " << i << " chosen " << counts[i] << " times out of " << n;
  }
}

// ---- uniform choice ----

TEST_P(Select, UniformChoiceAmongFourReadyCases) {
  run_test([] {
    constexpr int kSelects = 40000;
    std::array<gort::Chan<int>, 4> ch;
    for (int i = 0; i < 4; i++) {
      ch[static_cast<size_t>(i)] = gort::make_chan<int>(1);
      ch[static_cast<size_t>(i)].send(i);
    }
    std::vector<int64_t> counts(4, 0);
    int wrong_value = 0;
    for (int n = 0; n < kSelects; n++) {
      int got = -1;
      auto f = [&](std::optional<int> v) { got = v.value_or(-2); };
      size_t idx = gort::select(gort::on_recv(ch[0], f), gort::on_recv(ch[1], f), gort::on_recv(ch[2], f),
                                gort::on_recv(ch[3], f));
      if (idx >= 4 || got != static_cast<int>(idx)) {
        wrong_value++;
        continue;
      }
      counts[idx]++;
      ch[idx].send(static_cast<int>(idx));  // ready again
    }
    EXPECT_EQ(wrong_value, 0) << "callback values do not match the returned index";
    expect_uniform(counts, {true, true, true, true}, kSelects);
  });
}

// Send and receive cases, ready or not, and a nil channel: the choice is
// uniform among the ready ones and never falls on the others.
TEST_P(Select, UniformAmongReadyCasesOnly) {
  run_test([] {
    constexpr int kSelects = 30000;
    auto closed = gort::make_chan<int>();
    closed.close();
    auto has_value = gort::make_chan<int>(1);
    has_value.send(1);
    auto has_room = gort::make_chan<int>(1);
    auto empty = gort::make_chan<int>();      // no sender: recv not ready
    auto full = gort::make_chan<int>(1);      // full: send not ready
    full.send(0);
    gort::Chan<int> nil;
    std::vector<int64_t> counts(6, 0);
    int bad_callback = 0;
    for (int n = 0; n < kSelects; n++) {
      int ran = -1;
      size_t idx = gort::select(
          gort::on_recv(empty, [&] { ran = 0; }),
          gort::on_recv(closed, [&](std::optional<int> v) { ran = v ? -3 : 1; }),
          gort::on_send(full, 5, [&] { ran = 2; }),
          gort::on_recv(has_value, [&](std::optional<int> v) { ran = v == 1 ? 3 : -3; }),
          gort::on_send(has_room, 7, [&] { ran = 4; }),
          gort::on_recv(nil, [&] { ran = 5; }));
      if (idx >= 6 || ran != static_cast<int>(idx)) bad_callback++;
      if (idx < 6) counts[idx]++;
      if (idx == 3) has_value.send(1);
      if (idx == 4) (void)has_room.recv();
    }
    EXPECT_EQ(bad_callback, 0);
    expect_uniform(counts, {false, true, false, true, true, false}, kSelects);
    EXPECT_EQ(full.len(), 1u);
    EXPECT_EQ(empty.len(), 0u);
  });
}

// More cases than the select keeps on its stack (8): the heap path.
TEST_P(Select, UniformAmongTwelveCases) {
  run_test([] {
    constexpr int kSelects = 36000;
    std::vector<gort::Chan<int>> ch;
    for (int i = 0; i < 12; i++) {
      ch.push_back(gort::make_chan<int>());
      ch.back().close();
    }
    std::vector<int64_t> counts(12, 0);
    for (int n = 0; n < kSelects; n++) {
      size_t idx = gort::select(gort::on_recv(ch[0]), gort::on_recv(ch[1]), gort::on_recv(ch[2]),
                                gort::on_recv(ch[3]), gort::on_recv(ch[4]), gort::on_recv(ch[5]),
                                gort::on_recv(ch[6]), gort::on_recv(ch[7]), gort::on_recv(ch[8]),
                                gort::on_recv(ch[9]), gort::on_recv(ch[10]), gort::on_recv(ch[11]));
      if (idx < 12) counts[idx]++;
    }
    expect_uniform(counts, std::vector<bool>(12, true), kSelects);
  });
}

// ---- default ----

TEST_P(Select, DefaultNeverBlocks) {
  run_test([] {
    auto unbuffered = gort::make_chan<int>();
    auto full = gort::make_chan<int>(1);
    full.send(1);
    gort::Chan<int> nil;
    for (int i = 0; i < 1000; i++) {
      bool default_ran = false;
      bool other_ran = false;
      size_t idx = gort::select(gort::on_recv(unbuffered, [&] { other_ran = true; }),
                                gort::on_send(unbuffered, i, [&] { other_ran = true; }),
                                gort::on_send(full, i, [&] { other_ran = true; }),
                                gort::on_recv(nil, [&] { other_ran = true; }),
                                gort::on_default([&] { default_ran = true; }));
      EXPECT_EQ(idx, 4u);
      EXPECT_TRUE(default_ran);
      EXPECT_FALSE(other_ran);
    }
    // Nothing was sent into the channels by the default path.
    EXPECT_EQ(full.len(), 1u);
    // The default case may come first; it is still the fallback only.
    EXPECT_EQ(gort::select(gort::on_default(), gort::on_recv(unbuffered)), 0u);
    std::optional<int> got;
    EXPECT_EQ(gort::select(gort::on_default(), gort::on_recv(full, [&](std::optional<int> v) { got = v; })), 1u);
    EXPECT_EQ(got, std::optional<int>(1));
    EXPECT_EQ(full.len(), 0u);
    // A select with only a default.
    int ran = 0;
    EXPECT_EQ(gort::select(gort::on_default([&] { ran++; })), 0u);
    EXPECT_EQ(ran, 1);
  });
}

TEST_P(Select, DefaultNotChosenWhenACaseIsReady) {
  run_test([] {
    auto closed = gort::make_chan<int>();
    closed.close();
    auto room = gort::make_chan<int>(1);
    for (int i = 0; i < 2000; i++) {
      EXPECT_EQ(gort::select(gort::on_default(), gort::on_recv(closed)), 1u);
      EXPECT_EQ(gort::select(gort::on_send(room, i), gort::on_default()), 0u);
      EXPECT_EQ(room.recv(), std::optional<int>(i));
    }
  });
}

// A select with default that races with goroutines: it either completes a
// real transfer or takes the default, never loses or invents a value.
TEST_P(Select, DefaultRacingWithSenders) {
  run_test([] {
    auto ch = gort::make_chan<int>();
    constexpr int kSenders = 4;
    constexpr int kEach = 2000;
    Countdown cd(kSenders);
    for (int s = 0; s < kSenders; s++) {
      gort::go([&, s] {
        for (int i = 0; i < kEach; i++) ch.send(s * kEach + i + 1);
        cd.done();
      });
    }
    int64_t sum = 0;
    int got = 0;
    int defaults = 0;
    // Bounded: a lost value fails the test instead of spinning forever.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (got < kSenders * kEach && std::chrono::steady_clock::now() < deadline) {
      size_t idx = gort::select(gort::on_recv(ch, [&](std::optional<int> v) {
                                  sum += v.value_or(0);
                                  got++;
                                }),
                                gort::on_default([&] { defaults++; }));
      if (idx == 1) gort::yield();
    }
    EXPECT_EQ(got, kSenders * kEach);
    if (got == kSenders * kEach) cd.wait();
    int64_t n = kSenders * kEach;
    EXPECT_EQ(sum, n * (n + 1) / 2);
    EXPECT_EQ(gort::select(gort::on_recv(ch), gort::on_default()), 1u);
  });
}

// ---- nil and closed channels ----

TEST_P(Select, NilChannelCasesAreNeverReady) {
  run_test([] {
    gort::Chan<int> nil;
    auto ready = gort::make_chan<int>(1);
    for (int i = 0; i < 2000; i++) {
      ready.send(i);
      int got = -1;
      size_t idx = gort::select(gort::on_recv(nil), gort::on_send(nil, 1),
                                gort::on_recv(ready, [&](std::optional<int> v) { got = *v; }),
                                gort::on_send(nil, 2), gort::on_recv(nil));
      EXPECT_EQ(idx, 2u);
      EXPECT_EQ(got, i);
    }
    // A blocking select whose only non-nil case becomes ready later.
    auto later = gort::make_chan<int>();
    Parked p;
    size_t idx = 99;
    std::optional<int> got;
    Countdown cd(1);
    gort::go([&] {
      p.mark();
      idx = gort::select(gort::on_send(nil, 0), gort::on_recv(later, [&](std::optional<int> v) { got = v; }),
                         gort::on_recv(nil));
      cd.done();
    });
    EXPECT_TRUE(p.wait(WaitReason::kSelect));
    later.send(31);
    cd.wait();
    EXPECT_EQ(idx, 1u);
    EXPECT_EQ(got, std::optional<int>(31));
  });
}

TEST_P(Select, ClosedChannelIsAlwaysReadyForRecv) {
  run_test([] {
    auto ch = gort::make_chan<int>(2);
    ch.send(1);
    ch.send(2);
    ch.close();
    std::vector<std::optional<int>> got;
    for (int i = 0; i < 100; i++) {
      // Blocking select: must not park on a closed channel.
      gort::select(gort::on_recv(ch, [&](std::optional<int> v) { got.push_back(v); }));
    }
    ASSERT_EQ(got.size(), 100u);
    EXPECT_EQ(got[0], std::optional<int>(1));
    EXPECT_EQ(got[1], std::optional<int>(2));
    for (size_t i = 2; i < got.size(); i++) EXPECT_EQ(got[i], std::nullopt) << i;
  });
}

// The Go idiom: receive from several channels until all are closed, turning
// each closed one into nil so it is never chosen again.
TEST_P(Select, FanInUntilAllClosedWithNilOut) {
  run_test([] {
    constexpr int kProducers = 4;
    constexpr int kEach = 3000;
    std::array<gort::Chan<int>, kProducers> ch;
    for (int p = 0; p < kProducers; p++) {
      ch[static_cast<size_t>(p)] = gort::make_chan<int>(static_cast<size_t>(p));  // caps 0..3
      gort::go([c = ch[static_cast<size_t>(p)], p] {
        for (int i = 0; i < kEach; i++) c.send(p * kEach + i);
        c.close();
      });
    }
    std::array<gort::Chan<int>, kProducers> live = ch;
    int open = kProducers;
    std::vector<int> count(kProducers, 0);
    std::vector<int> last(kProducers, -1);
    int64_t sum = 0;
    int closed_twice = 0;
    while (open > 0) {
      auto on = [&](int i) {
        return gort::on_recv(live[static_cast<size_t>(i)], [&, i](std::optional<int> v) {
          auto u = static_cast<size_t>(i);
          if (!v) {
            if (live[u].is_nil()) closed_twice++;
            live[u] = gort::Chan<int>();
            open--;
            return;
          }
          EXPECT_GT(*v, last[u]);
          last[u] = *v;
          count[u]++;
          sum += *v;
        });
      };
      gort::select(on(0), on(1), on(2), on(3));
    }
    EXPECT_EQ(closed_twice, 0);
    for (int p = 0; p < kProducers; p++) EXPECT_EQ(count[static_cast<size_t>(p)], kEach) << p;
    int64_t n = kProducers * kEach;
    EXPECT_EQ(sum, n * (n - 1) / 2);
  });
}

// ---- the same channel in several cases ----

TEST_P(Select, SendAndRecvOnTheSameBufferedChannel) {
  run_test([] {
    auto ch = gort::make_chan<int>(1);
    for (int i = 0; i < 500; i++) {
      // Empty: only the send is ready.
      EXPECT_EQ(gort::select(gort::on_send(ch, i), gort::on_recv(ch)), 0u);
      // Full: only the receive is ready.
      std::optional<int> got;
      EXPECT_EQ(gort::select(gort::on_send(ch, -1), gort::on_recv(ch, [&](std::optional<int> v) { got = v; })),
                1u);
      EXPECT_EQ(got, std::optional<int>(i));
    }
  });
}

// One goroutine parked in select on both ends of an unbuffered channel:
// whichever side the partner takes is the case that runs.
TEST_P(Select, SendAndRecvOnTheSameUnbufferedChannelWhileParked) {
  run_test([] {
    auto ch = gort::make_chan<int>();
    auto result = gort::make_chan<std::pair<size_t, int>>(1);
    auto next = gort::make_chan<int>();  // starts each round
    constexpr int kRounds = 200;
    Parked p;
    gort::go([&, result] {
      for (int r = 0; r < kRounds; r++) {
        int received = -1;
        (void)next.recv();
        p.mark();
        size_t idx = gort::select(gort::on_send(ch, 1000 + r),
                                  gort::on_recv(ch, [&](std::optional<int> v) { received = v.value_or(-2); }));
        result.send({idx, received});
      }
    });
    for (int r = 0; r < kRounds; r++) {
      next.send(r);
      EXPECT_TRUE(p.wait(WaitReason::kSelect));
      if (r % 2 == 0) {
        EXPECT_EQ(ch.recv(), std::optional<int>(1000 + r));
        auto res = *result.recv();
        EXPECT_EQ(res.first, 0u);
        EXPECT_EQ(res.second, -1);
      } else {
        ch.send(r);
        auto res = *result.recv();
        EXPECT_EQ(res.first, 1u);
        EXPECT_EQ(res.second, r);
      }
      // No waiter of the finished select was left behind on the channel.
      EXPECT_EQ(gort::select(gort::on_send(ch, -5), gort::on_recv(ch), gort::on_default()), 2u);
    }
  });
}

TEST_P(Select, RecvTwiceFromTheSameChannel) {
  run_test([] {
    // Ready: both cases are eligible and both get chosen over time.
    auto buf = gort::make_chan<int>(1);
    std::array<int, 2> chosen{0, 0};
    for (int i = 0; i < 1000; i++) {
      buf.send(i);
      int got = -1;
      size_t idx = gort::select(gort::on_recv(buf, [&](std::optional<int> v) { got = *v; }),
                                gort::on_recv(buf, [&](std::optional<int> v) { got = *v; }));
      EXPECT_EQ(got, i);
      if (idx < 2) chosen[idx]++;
    }
    EXPECT_GT(chosen[0], 0);
    EXPECT_GT(chosen[1], 0);
    EXPECT_EQ(chosen[0] + chosen[1], 1000);

    // Parked on two receive cases of one channel: one value runs exactly one
    // callback, and the next value goes to the next select, not to a stale
    // waiter of the previous one.
    auto ch = gort::make_chan<int>();
    constexpr int kRounds = 300;
    auto result = gort::make_chan<std::array<int, 3>>(1);
    Parked p;
    gort::go([&, result] {
      for (int r = 0; r < kRounds; r++) {
        int a = -1, b = -1;
        p.mark();
        size_t idx = gort::select(gort::on_recv(ch, [&](std::optional<int> v) { a = *v; }),
                                  gort::on_recv(ch, [&](std::optional<int> v) { b = *v; }));
        result.send({static_cast<int>(idx), a, b});
      }
    });
    for (int r = 0; r < kRounds; r++) {
      EXPECT_TRUE(p.wait(WaitReason::kSelect));
      ch.send(r);
      auto res = *result.recv();
      if (res[0] == 0) {
        EXPECT_EQ(res[1], r);
        EXPECT_EQ(res[2], -1);
      } else {
        EXPECT_EQ(res[0], 1);
        EXPECT_EQ(res[1], -1);
        EXPECT_EQ(res[2], r);
      }
    }
    EXPECT_EQ(gort::select(gort::on_send(ch, 0), gort::on_default()), 1u);
  });
}

TEST_P(Select, SendTwiceOnTheSameChannel) {
  run_test([] {
    auto ch = gort::make_chan<int>();
    constexpr int kRounds = 300;
    auto result = gort::make_chan<size_t>(1);
    Parked p;
    gort::go([&, result] {
      for (int r = 0; r < kRounds; r++) {
        p.mark();
        result.send(gort::select(gort::on_send(ch, 2 * r), gort::on_send(ch, 2 * r + 1)));
      }
    });
    std::array<int, 2> chosen{0, 0};
    for (int r = 0; r < kRounds; r++) {
      EXPECT_TRUE(p.wait(WaitReason::kSelect));
      int v = ch.recv().value_or(-1);
      size_t idx = *result.recv();
      EXPECT_EQ(v, static_cast<int>(2 * r + idx)) << "the value received is not the chosen case's";
      if (idx < 2) chosen[idx]++;
    }
    EXPECT_GT(chosen[0], 0);
    EXPECT_GT(chosen[1], 0);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

// ---- fatal paths (separate processes) ----

namespace gort_stdlib_test {
namespace {

using gort::test::procs_cfg;

TEST(SelectDeathTest, EmptySelectBlocksForever) {
  EXPECT_EXIT({ gort::run([] { gort::select(); }, procs_cfg(2)); }, ::testing::ExitedWithCode(2),
              "fatal error: all goroutines are asleep - deadlock!(.|\n)*goroutine 1 \\[");
}

TEST(SelectDeathTest, OnlyNilCasesBlockForever) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::Chan<int> nil;
              gort::select(gort::on_recv(nil), gort::on_send(nil, 1));
            },
            procs_cfg(1));
      },
      ::testing::ExitedWithCode(2), "fatal error: all goroutines are asleep - deadlock!");
}

TEST(SelectDeathTest, SelectOnChannelsNobodyUsesDeadlocks) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              auto a = gort::make_chan<int>();
              auto b = gort::make_chan<int>(1);
              b.send(1);
              gort::select(gort::on_recv(a), gort::on_send(b, 2));
            },
            procs_cfg(4));
      },
      ::testing::ExitedWithCode(2), "fatal error: all goroutines are asleep - deadlock!(.|\n)*goroutine 1 \\[select\\]:");
}

}  // namespace
}  // namespace gort_stdlib_test
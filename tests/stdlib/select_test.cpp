// tests/stdlib/select_test.cpp — select (stdlib/select.cpp): uniform choice,
// default, nil and closed channels, the same channel in several cases,
// lock ordering, panics, callbacks and return values.
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::eventually;
using gort::test::panic_message;
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
    gort::go([&] {
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
    gort::go([&] {
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
    gort::go([&] {
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

// ---- lock order ----

// Selects over the same channels listed in opposite orders, on several Ps.
// Each select of the "a-side" pairs with one of the "b-side", so with equal
// numbers every select completes. A lock-order deadlock would hang OS
// threads (not goroutines, so the deadlock detector cannot see it): run in
// a child process with a watchdog.
TEST_P(Select, OppositeOrderSelectsDoNotDeadlock) {
  auto stress = [this] { run_test([] {
    constexpr int kEach = 3;       // goroutines of each of the four kinds
    constexpr int kIters = 3000;   // selects per goroutine
    auto a = gort::make_chan<int>();
    auto b = gort::make_chan<int>();
    std::atomic<int64_t> sent_a{0}, recv_a{0}, sent_b{0}, recv_b{0};
    Countdown cd(4 * kEach);
    for (int g = 0; g < kEach; g++) {
      // a-side, listing (a, b) and (b, a).
      gort::go([&] {
        for (int i = 0; i < kIters; i++) {
          gort::select(gort::on_send(a, 1, [&] { sent_a++; }),
                       gort::on_recv(b, [&](std::optional<int> v) { recv_b += v.value_or(100000); }));
        }
        cd.done();
      });
      gort::go([&] {
        for (int i = 0; i < kIters; i++) {
          gort::select(gort::on_recv(b, [&](std::optional<int> v) { recv_b += v.value_or(100000); }),
                       gort::on_send(a, 1, [&] { sent_a++; }));
        }
        cd.done();
      });
      // b-side, listing (b, a) and (a, b).
      gort::go([&] {
        for (int i = 0; i < kIters; i++) {
          gort::select(gort::on_send(b, 1, [&] { sent_b++; }),
                       gort::on_recv(a, [&](std::optional<int> v) { recv_a += v.value_or(100000); }));
        }
        cd.done();
      });
      gort::go([&] {
        for (int i = 0; i < kIters; i++) {
          gort::select(gort::on_recv(a, [&](std::optional<int> v) { recv_a += v.value_or(100000); }),
                       gort::on_send(b, 1, [&] { sent_b++; }));
        }
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(sent_a.load(), recv_a.load());
    EXPECT_EQ(sent_b.load(), recv_b.load());
    EXPECT_EQ(sent_a.load() + sent_b.load(), int64_t{2} * kEach * kIters);
  }); };
  GORT_EXPECT_SUBPROCESS_OK(90, stress);
}

// Many goroutines selecting over shared buffered and unbuffered channels in
// random-looking orders, as producers and consumers: nothing lost or
// duplicated.
TEST_P(Select, ProducersAndConsumersThroughSelect) {
  auto stress = [this] { run_test([] {
    constexpr int kProducers = 4;
    constexpr int kConsumers = 4;
    constexpr int kEach = 2500;
    auto x = gort::make_chan<int>();
    auto y = gort::make_chan<int>(4);
    auto z = gort::make_chan<int>(1);
    std::atomic<int64_t> sum{0};
    std::atomic<int> count{0};
    Countdown producers(kProducers);
    for (int p = 0; p < kProducers; p++) {
      gort::go([&, p] {
        for (int i = 0; i < kEach; i++) {
          int v = p * kEach + i + 1;
          if (p % 2 == 0) {
            gort::select(gort::on_send(x, v), gort::on_send(y, v), gort::on_send(z, v));
          } else {
            gort::select(gort::on_send(z, v), gort::on_send(y, v), gort::on_send(x, v));
          }
        }
        producers.done();
      });
    }
    auto quit = gort::make_chan<int>();
    Countdown consumers(kConsumers);
    for (int c = 0; c < kConsumers; c++) {
      gort::go([&] {
        bool stop = false;
        auto take = [&](std::optional<int> v) {
          sum += v.value_or(0);
          count++;
        };
        while (!stop) {
          gort::select(gort::on_recv(y, take), gort::on_recv(quit, [&] { stop = true; }),
                       gort::on_recv(x, take), gort::on_recv(z, take));
        }
        consumers.done();
      });
    }
    producers.wait();
    // Everything sent has been handed over or sits in a buffer: drain.
    while (count.load() < kProducers * kEach) gort::yield();
    quit.close();
    consumers.wait();
    int64_t n = kProducers * kEach;
    EXPECT_EQ(count.load(), n);
    EXPECT_EQ(sum.load(), n * (n + 1) / 2);
  }); };
  GORT_EXPECT_SUBPROCESS_OK(90, stress);
}

// Close racing with parked senders (plain sends and select sends) and with
// receivers selecting over all the channels. Every send that returned
// normally delivered its value exactly once; every other send panicked; the
// payloads are all destroyed exactly once.
void close_race(size_t cap) {
  constexpr int kChans = 4;
  constexpr int kSenders = 6;
  constexpr int kReceivers = 4;
  gort::test::Tracked::reset();
  {
    std::array<gort::Chan<gort::test::Tracked>, kChans> ch;
    for (auto& c : ch) c = gort::make_chan<gort::test::Tracked>(cap);
    std::atomic<int64_t> sent_sum{0}, sent_count{0}, recv_sum{0}, recv_count{0};
    std::atomic<int> wrong_panics{0};
    // The receiver that sees the 20000th value closes every channel (from
    // its select callback). Not main: with one P, main could wait long for
    // its turn (see Chan.HandOffPairDoesNotStarveOtherGoroutines).
    std::atomic<bool> closed{false};
    Countdown cd(kSenders + kReceivers);
    for (int s = 0; s < kSenders; s++) {
      gort::go([&, s] {
        for (int i = 0;; i++) {
          int v = s * 1000000 + i + 1;
          auto k = static_cast<size_t>((i + s) % kChans);
          std::string what = panic_message([&] {
            if (s % 2 == 0) {
              ch[k].send(gort::test::Tracked(v));
            } else {
              size_t k2 = (k + 1) % kChans;
              gort::select(gort::on_send(ch[k], gort::test::Tracked(v)),
                           gort::on_send(ch[k2], gort::test::Tracked(v)));
            }
          });
          if (what == "<no panic>") {
            sent_sum += v;
            sent_count++;
            continue;
          }
          if (what != "send on closed channel") wrong_panics++;
          break;
        }
        cd.done();
      });
    }
    for (int r = 0; r < kReceivers; r++) {
      gort::go([&] {
        std::array<gort::Chan<gort::test::Tracked>, kChans> live = ch;
        int open = kChans;
        while (open > 0) {
          auto on = [&](size_t k) {
            return gort::on_recv(live[k], [&, k](std::optional<gort::test::Tracked> t) {
              if (!t) {
                live[k] = gort::Chan<gort::test::Tracked>();
                open--;
                return;
              }
              recv_sum += t->value;
              recv_count++;
              if (recv_count.load() > 20000 && !closed.exchange(true)) {
                for (auto& c : ch) c.close();
              }
            });
          };
          gort::select(on(0), on(1), on(2), on(3));
        }
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(wrong_panics.load(), 0);
    EXPECT_GT(recv_count.load(), 20000);
    EXPECT_EQ(recv_count.load(), sent_count.load()) << "cap " << cap;
    EXPECT_EQ(recv_sum.load(), sent_sum.load()) << "cap " << cap;
  }
  EXPECT_EQ(gort::test::Tracked::live.load(), 0);
  EXPECT_EQ(gort::test::Tracked::misuses.load(), 0);
}

TEST_P(Select, CloseRacingWithSendersAndReceiversUnbuffered) {
  run_test([] { close_race(0); });
}

TEST_P(Select, CloseRacingWithSendersAndReceiversBuffered) {
  run_test([] { close_race(3); });
}

// ---- close while parked ----

TEST_P(Select, SendCaseOnChannelClosedWhileParkedPanics) {
  run_test([] {
    for (size_t cap : {size_t{0}, size_t{1}}) {
      auto ch = gort::make_chan<int>(cap);
      if (cap > 0) ch.send(0);  // full
      auto other = gort::make_chan<int>();
      Parked p;
      std::string what;
      bool callback_ran = false;
      Countdown cd(1);
      gort::go([&] {
        p.mark();
        what = panic_message([&] {
          gort::select(gort::on_recv(other, [&] { callback_ran = true; }),
                       gort::on_send(ch, 1, [&] { callback_ran = true; }));
        });
        cd.done();
      });
      EXPECT_TRUE(p.wait(WaitReason::kSelect));
      ch.close();
      cd.wait();
      EXPECT_EQ(what, "send on closed channel") << "cap " << cap;
      EXPECT_FALSE(callback_ran);
      // The select's waiter on `other` is gone: nobody receives there.
      EXPECT_EQ(gort::select(gort::on_send(other, 1), gort::on_default()), 1u);
    }
  });
}

TEST_P(Select, SendCaseOnClosedChannelPanicsEvenWithDefault) {
  run_test([] {
    auto ch = gort::make_chan<int>(4);
    ch.close();
    EXPECT_EQ(panic_message([&] { gort::select(gort::on_send(ch, 1), gort::on_default()); }),
              "send on closed channel");
  });
}

TEST_P(Select, RecvCaseOnChannelClosedWhileParkedGetsNullopt) {
  run_test([] {
    auto a = gort::make_chan<int>();
    auto b = gort::make_chan<int>();
    Parked p;
    size_t idx = 99;
    std::optional<int> got = 5;
    Countdown cd(1);
    gort::go([&] {
      p.mark();
      idx = gort::select(gort::on_recv(a), gort::on_recv(b, [&](std::optional<int> v) { got = v; }));
      cd.done();
    });
    EXPECT_TRUE(p.wait(WaitReason::kSelect));
    b.close();
    cd.wait();
    EXPECT_EQ(idx, 1u);
    EXPECT_EQ(got, std::nullopt);
  });
}

// ---- callbacks and results ----

TEST_P(Select, ParkedSelectRunsTheCaseThatBecameReady) {
  run_test([] {
    constexpr int kChans = 10;  // more than the select keeps inline
    std::vector<gort::Chan<int>> ch;
    for (int i = 0; i < kChans; i++) ch.push_back(gort::make_chan<int>());
    auto result = gort::make_chan<std::pair<size_t, int>>(1);
    Parked p;
    gort::go([&] {
      for (int r = 0; r < kChans; r++) {
        int got = -1;
        auto f = [&](std::optional<int> v) { got = v.value_or(-2); };
        p.mark();
        size_t idx = gort::select(gort::on_recv(ch[0], f), gort::on_recv(ch[1], f), gort::on_recv(ch[2], f),
                                  gort::on_recv(ch[3], f), gort::on_recv(ch[4], f), gort::on_recv(ch[5], f),
                                  gort::on_recv(ch[6], f), gort::on_recv(ch[7], f), gort::on_recv(ch[8], f),
                                  gort::on_recv(ch[9], f));
        result.send({idx, got});
      }
    });
    for (int r = 0; r < kChans; r++) {
      size_t which = static_cast<size_t>((r * 7) % kChans);
      EXPECT_TRUE(p.wait(WaitReason::kSelect));
      ch[which].send(100 + r);
      auto res = *result.recv();
      EXPECT_EQ(res.first, which);
      EXPECT_EQ(res.second, 100 + r);
    }
  });
}

TEST_P(Select, SendCallbackRunsAfterTheValueWasTaken) {
  run_test([] {
    auto ch = gort::make_chan<std::string>();
    Parked p;
    std::optional<std::string> got;
    Countdown cd(1);
    gort::go([&] {
      p.mark();
      got = ch.recv();
      cd.done();
    });
    EXPECT_TRUE(p.wait(WaitReason::kChanRecv));
    int sends = 0, defaults = 0;
    size_t idx = gort::select(gort::on_send(ch, std::string("hello"), [&] { sends++; }),
                              gort::on_default([&] { defaults++; }));
    EXPECT_EQ(idx, 0u);
    EXPECT_EQ(sends, 1);
    EXPECT_EQ(defaults, 0);
    cd.wait();
    EXPECT_EQ(got, std::optional<std::string>("hello"));
  });
}

// Callbacks run after every channel lock is released: they may use the very
// channels of their select.
TEST_P(Select, CallbacksMayUseTheSelectsChannels) {
  run_test([] {
    auto ch = gort::make_chan<int>(1);
    ch.send(0);
    for (int i = 0; i < 1000; i++) {
      gort::select(gort::on_recv(ch, [&](std::optional<int> v) { ch.send(*v + 1); }),
                   gort::on_send(ch, -1, [] { ADD_FAILURE() << "the buffer was full"; }));
    }
    EXPECT_EQ(ch.recv(), std::optional<int>(1000));
  });
}

// ---- plain threads ----

// (KeepAwake: see Chan.PlainThread*DeadlockDetector for why.)
TEST_P(Select, BlockingSelectInPlainThread) {
  run_test([] {
    gort::test::KeepAwake awake;
    auto a = gort::make_chan<int>();
    auto b = gort::make_chan<int>();
    auto out = gort::make_chan<std::pair<size_t, int>>(4);
    std::thread t([a, b, out] {
      for (int i = 0; i < 200; i++) {
        int got = -1;
        auto f = [&](std::optional<int> v) { got = v.value_or(-2); };
        size_t idx = gort::select(gort::on_recv(a, f), gort::on_recv(b, f));
        out.send({idx, got});
      }
    });
    for (int i = 0; i < 200; i++) {
      if (i % 2 == 0) a.send(i); else b.send(i);
      auto res = *out.recv();
      EXPECT_EQ(res.first, static_cast<size_t>(i % 2));
      EXPECT_EQ(res.second, i);
    }
    t.join();
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

// tests/stdlib/sync/select_park_test.cpp — selects that park (stdlib/sync/select.cpp):
// lock order across channels, close racing with parked cases, callbacks and
// results, and selects in plain threads.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::panic_message;
using gort::test::Parked;
using gort::test::WaitReason;

class SelectPark : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(SelectPark);

// ---- lock order ----

// Selects over the same channels listed in opposite orders, on several Ps.
// Each select of the "a-side" pairs with one of the "b-side", so with equal
// numbers every select completes. A lock-order deadlock would hang OS
// threads (not goroutines, so the deadlock detector cannot see it): run in
// a child process with a watchdog.
TEST_P(SelectPark, OppositeOrderSelectsDoNotDeadlock) {
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
TEST_P(SelectPark, ProducersAndConsumersThroughSelect) {
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

TEST_P(SelectPark, CloseRacingWithSendersAndReceiversUnbuffered) {
  run_test([] { close_race(0); });
}

TEST_P(SelectPark, CloseRacingWithSendersAndReceiversBuffered) {
  run_test([] { close_race(3); });
}

// ---- close while parked ----

TEST_P(SelectPark, SendCaseOnChannelClosedWhileParkedPanics) {
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

TEST_P(SelectPark, SendCaseOnClosedChannelPanicsEvenWithDefault) {
  run_test([] {
    auto ch = gort::make_chan<int>(4);
    ch.close();
    EXPECT_EQ(panic_message([&] { gort::select(gort::on_send(ch, 1), gort::on_default()); }),
              "send on closed channel");
  });
}

TEST_P(SelectPark, RecvCaseOnChannelClosedWhileParkedGetsNullopt) {
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

TEST_P(SelectPark, ParkedSelectRunsTheCaseThatBecameReady) {
  run_test([] {
    constexpr int kChans = 10;  // more than the select keeps inline
    std::vector<gort::Chan<int>> ch;
    for (int i = 0; i < kChans; i++) ch.push_back(gort::make_chan<int>());
    auto result = gort::make_chan<std::pair<size_t, int>>(1);
    Parked p;
    gort::go([&, result] {
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

TEST_P(SelectPark, SendCallbackRunsAfterTheValueWasTaken) {
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
TEST_P(SelectPark, CallbacksMayUseTheSelectsChannels) {
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

// (KeepAwake: see ChanThread.PlainThread*DeadlockDetector for why.)
TEST_P(SelectPark, BlockingSelectInPlainThread) {
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

// tests/stdlib/sync/chan_test.cpp — channels (stdlib/sync/chan.cpp, gort/chan.hpp):
// rendezvous, buffering, close, panics and nil channels. Payloads,
// range-for and handles are in chan_payload_test.cpp, plain threads in
// chan_thread_test.cpp.
#include <chrono>
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

class Chan : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Chan);

// ---- basics ----

TEST_P(Chan, UnbufferedRendezvous) {
  run_test([] {
    auto ch = gort::make_chan<int>();
    EXPECT_EQ(ch.cap(), 0u);
    // No receiver: a send can never complete (a select shows it without
    // blocking).
    EXPECT_EQ(gort::select(gort::on_send(ch, 1), gort::on_default()), 1u);

    std::atomic<bool> sent{false};
    Parked sender;
    Countdown cd(1);
    gort::go([&] {
      sender.mark();
      ch.send(42);
      sent = true;
      cd.done();
    });
    // The sender waits for a receiver, however long that takes.
    EXPECT_TRUE(sender.wait(WaitReason::kChanSend));
    EXPECT_FALSE(sent.load());
    EXPECT_EQ(ch.len(), 0u) << "an unbuffered channel holds nothing";
    EXPECT_EQ(ch.recv(), std::optional<int>(42));
    cd.wait();
    EXPECT_TRUE(sent.load());

    // And the other way round: a parked receiver gets the value.
    Parked receiver;
    std::optional<int> got;
    Countdown cd2(1);
    gort::go([&] {
      receiver.mark();
      got = ch.recv();
      cd2.done();
    });
    EXPECT_TRUE(receiver.wait(WaitReason::kChanRecv));
    ch.send(7);
    cd2.wait();
    EXPECT_EQ(got, std::optional<int>(7));
  });
}

TEST_P(Chan, PingPong) {
  run_test([] {
    auto ping = gort::make_chan<int>();
    auto pong = gort::make_chan<int>();
    constexpr int kRounds = 20000;
    Countdown cd(1);
    gort::go([&] {
      for (int i = 0; i < kRounds; i++) pong.send(*ping.recv() + 1);
      cd.done();
    });
    int v = 0;
    for (int i = 0; i < kRounds; i++) {
      ping.send(v);
      v = *pong.recv();
    }
    cd.wait();
    EXPECT_EQ(v, kRounds);
  });
}

TEST_P(Chan, BufferedLenCapAndFifo) {
  run_test([] {
    auto ch = gort::make_chan<int>(5);
    EXPECT_EQ(ch.cap(), 5u);
    EXPECT_EQ(ch.len(), 0u);
    for (int i = 0; i < 5; i++) {
      ch.send(i);  // never blocks while there is room
      EXPECT_EQ(ch.len(), static_cast<size_t>(i + 1));
    }
    // Full: a send is not ready, a receive is.
    EXPECT_EQ(gort::select(gort::on_send(ch, 99), gort::on_default()), 1u);
    for (int i = 0; i < 5; i++) {
      EXPECT_EQ(ch.recv(), std::optional<int>(i));
      EXPECT_EQ(ch.len(), static_cast<size_t>(4 - i));
    }
    EXPECT_EQ(gort::select(gort::on_recv(ch), gort::on_default()), 1u);
    // Wrap around the ring buffer many times.
    for (int round = 0; round < 100; round++) {
      for (int i = 0; i < 3; i++) ch.send(round * 3 + i);
      for (int i = 0; i < 3; i++) EXPECT_EQ(ch.recv(), std::optional<int>(round * 3 + i));
    }
    EXPECT_EQ(ch.cap(), 5u);
  });
}

// A sender parked on a full buffer: the receiver takes the head, and the
// sender's value goes to the tail, in order.
TEST_P(Chan, BufferedSenderParkedOnFullBufferKeepsOrder) {
  run_test([] {
    auto ch = gort::make_chan<int>(3);
    for (int i = 0; i < 3; i++) ch.send(i);
    constexpr int kBlocked = 4;
    Countdown cd(1);
    Parked sender;
    gort::go([&] {
      for (int i = 3; i < 3 + kBlocked; i++) {
        sender.mark();
        ch.send(i);
      }
      cd.done();
    });
    EXPECT_TRUE(sender.wait(WaitReason::kChanSend));
    EXPECT_EQ(ch.len(), 3u);
    for (int i = 0; i < 3 + kBlocked; i++) EXPECT_EQ(ch.recv(), std::optional<int>(i));
    cd.wait();
    EXPECT_EQ(ch.len(), 0u);
  });
}

// Many senders and receivers on several Ps: every value arrives exactly once,
// and each receiver sees each sender's values in the order they were sent.
void many_to_many(size_t cap) {
  constexpr int kSenders = 8;
  constexpr int kReceivers = 4;
  constexpr int kPerSender = 5000;
  constexpr int kTotal = kSenders * kPerSender;
  auto ch = gort::make_chan<int>(cap);
  auto results = gort::make_chan<int64_t>(kReceivers);
  std::vector<std::atomic<uint8_t>> seen(kTotal);
  std::atomic<int> order_violations{0};
  Countdown senders(kSenders);
  for (int s = 0; s < kSenders; s++) {
    gort::go([&, s] {
      for (int i = 0; i < kPerSender; i++) ch.send(s * kPerSender + i);
      senders.done();
    });
  }
  for (int r = 0; r < kReceivers; r++) {
    // Its own handle of `results`: the send below may still be waking the
    // receiver when this function has the sum and destroys its handle.
    gort::go([&, results] {
      std::vector<int> last(kSenders, -1);
      int64_t sum = 0;
      for (int v : ch) {
        if (v < 0 || v >= kTotal) {
          order_violations++;
          continue;
        }
        seen[static_cast<size_t>(v)].fetch_add(1);
        int s = v / kPerSender;
        if (v <= last[static_cast<size_t>(s)]) order_violations++;
        last[static_cast<size_t>(s)] = v;
        sum += v;
      }
      results.send(sum);
    });
  }
  senders.wait();
  ch.close();
  int64_t sum = 0;
  for (int r = 0; r < kReceivers; r++) sum += *results.recv();
  EXPECT_EQ(sum, int64_t{kTotal} * (kTotal - 1) / 2);
  int missing = 0, duplicated = 0;
  for (auto& s : seen) {
    uint8_t n = s.load();
    if (n == 0) missing++;
    if (n > 1) duplicated++;
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_EQ(order_violations.load(), 0);
}

TEST_P(Chan, ManySendersManyReceiversUnbuffered) {
  run_test([] { many_to_many(0); });
}

TEST_P(Chan, ManySendersManyReceiversBuffered) {
  run_test([] { many_to_many(16); });
}

TEST_P(Chan, ManySendersManyReceiversBufferOfOne) {
  run_test([] { many_to_many(1); });
}

// Go's idiom, by C++'s rules: each goroutine sends its result through its
// own handle of a buffered channel, and the receiver drops its handle as
// soon as it has every value, while the last senders may still be inside
// send (waking the receiver after putting the value in the buffer). The
// senders' handles keep the channel alive until they return; the last one
// destroys it (under ASan, a touch of it after that is reported).
TEST_P(Chan, LastHandleDestroysTheChannelAfterItsSendReturns) {
  run_test([] {
    constexpr int kSenders = 4;
    for (int round = 0; round < 3000; round++) {
      std::optional<gort::Chan<int>> ch = gort::make_chan<int>(kSenders);
      for (int i = 0; i < kSenders; i++) {
        gort::go([c = *ch, i] { c.send(i); });
      }
      int sum = 0;
      for (int i = 0; i < kSenders; i++) sum += *ch->recv();
      ch.reset();
      ASSERT_EQ(sum, kSenders * (kSenders - 1) / 2);
    }
  });
}

// A receiver woken by a send runs next on the sender's P (Go's runnext),
// and in Go it inherits the rest of the sender's time slice, so a pair
// handing values back and forth still gives the P up to the others once per
// slice (docs/preemption.md: with one P, other goroutines keep running with a
// delay of about one time slice). Here main yields a few times while such a
// pair runs. Bounded: the pair gives up after 5 s (500 slices), which fails
// the test.
TEST_P(Chan, HandOffPairDoesNotStarveOtherGoroutines) {
  run_test([] {
    auto ping = gort::make_chan<int>();
    auto pong = gort::make_chan<int>();
    std::atomic<bool> stop{false}, gave_up{false};
    std::atomic<int64_t> rounds{0};
    Countdown cd(2);
    gort::go([&] {
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!stop.load()) {
        if (std::chrono::steady_clock::now() > give_up) {
          gave_up = true;
          break;
        }
        ping.send(1);
        (void)pong.recv();
        rounds++;
      }
      ping.close();
      cd.done();
    });
    gort::go([&] {
      for (int v : ping) pong.send(v);
      cd.done();
    });
    while (rounds.load() < 100) gort::yield();
    for (int i = 0; i < 10; i++) gort::yield();
    stop = true;
    bool late = gave_up.load();
    cd.wait();
    EXPECT_FALSE(late) << "main did not get to run for 5 s while two goroutines handed a value back and forth ("
                       << rounds.load() << " rounds)";
  });
}

// ---- close ----

TEST_P(Chan, ReceiversDrainBufferThenGetNulloptForever) {
  run_test([] {
    auto ch = gort::make_chan<std::string>(4);
    ch.send("a");
    ch.send("b");
    ch.send("c");
    ch.close();
    EXPECT_EQ(ch.len(), 3u);
    EXPECT_EQ(ch.recv(), std::optional<std::string>("a"));
    EXPECT_EQ(ch.recv(), std::optional<std::string>("b"));
    EXPECT_EQ(ch.recv(), std::optional<std::string>("c"));
    for (int i = 0; i < 10; i++) EXPECT_EQ(ch.recv(), std::nullopt);
    EXPECT_EQ(ch.len(), 0u);
    EXPECT_EQ(ch.cap(), 4u);
  });
}

// 10 and 3,000 receivers: past the wake list's inline slots, several of
// its growths, and the points where a long wake-up may yield.
TEST_P(Chan, CloseWakesParkedReceiversWithNullopt) {
  run_test([] {
    for (auto [cap, kReceivers] : {std::pair{size_t{0}, 10}, std::pair{size_t{3}, 10}, std::pair{size_t{0}, 3000}}) {
      auto ch = gort::make_chan<int>(cap);
      std::vector<Parked> parked(kReceivers);
      std::atomic<int> got_nullopt{0};
      Countdown cd(kReceivers);
      for (int i = 0; i < kReceivers; i++) {
        gort::go([&, i] {
          parked[static_cast<size_t>(i)].mark();
          if (ch.recv() == std::nullopt) got_nullopt++;
          cd.done();
        });
      }
      for (auto& p : parked) EXPECT_TRUE(p.wait(WaitReason::kChanRecv));
      ch.close();
      cd.wait();
      EXPECT_EQ(got_nullopt.load(), kReceivers) << "cap " << cap << ", " << kReceivers << " receivers";
    }
  });
}

// A long queue with holes: selects that another channel woke left it from
// the middle, and a second wave queued behind them once their goroutines
// (and stacks) were gone, so the Sudogs the close walks past name gone
// ones as their prefetch hints (Sudog::hint). Every waiter still in the
// queue is woken once, with nullopt; plain threads too.
TEST_P(Chan, CloseWakesEveryWaiterOfALongQueueWithHoles) {
  run_test([] {
    constexpr int kFirst = 3000, kSecond = 600, kThreads = 3;
    auto ch = gort::make_chan<int>();
    auto other = gort::make_chan<int>();
    std::vector<Parked> parked(kFirst + kSecond);
    std::atomic<int> got_nullopt{0}, got_other{0}, selects_closed{0};
    Countdown cd(kFirst + kSecond);
    auto spawn = [&](int i) {
      gort::go([&, i] {
        parked[static_cast<size_t>(i)].mark();
        if (i % 3 == 1 && i < kFirst) {
          std::optional<int> v = 7;
          size_t idx = gort::select(gort::on_recv(ch, [&](std::optional<int> x) { v = x; }),
                                    gort::on_recv(other, [&](std::optional<int> x) { v = x; }));
          if (idx == 1 && v == 42) got_other++;
          if (idx == 0 && v == std::nullopt) selects_closed++;
        } else if (ch.recv() == std::nullopt) {
          got_nullopt++;
        }
        cd.done();
      });
    };
    for (int i = 0; i < kFirst; i++) spawn(i);
    for (int i = 0; i < kFirst; i++) {
      EXPECT_TRUE(parked[static_cast<size_t>(i)].wait(i % 3 == 1 ? WaitReason::kSelect : WaitReason::kChanRecv));
    }
    constexpr int kSends = kFirst / 3 / 2;  // half of the selects leave
    for (int i = 0; i < kSends; i++) other.send(42);
    EXPECT_TRUE(eventually([&] { return cd.left() == kFirst + kSecond - kSends; }));
    for (int i = kFirst; i < kFirst + kSecond; i++) spawn(i);
    for (int i = kFirst; i < kFirst + kSecond; i++) {
      EXPECT_TRUE(parked[static_cast<size_t>(i)].wait(WaitReason::kChanRecv));
    }
    std::atomic<int> threads_nullopt{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
      threads.emplace_back([&] {
        if (ch.recv() == std::nullopt) threads_nullopt++;
      });
    }
    ch.close();
    cd.wait();
    for (auto& t : threads) t.join();
    EXPECT_EQ(got_other.load(), kSends);
    EXPECT_EQ(selects_closed.load(), kFirst / 3 - kSends);
    EXPECT_EQ(got_nullopt.load(), kFirst - kFirst / 3 + kSecond);
    EXPECT_EQ(threads_nullopt.load(), kThreads);
  });
}

TEST_P(Chan, SenderParkedWhenClosedPanics) {
  run_test([] {
    for (size_t cap : {size_t{0}, size_t{2}}) {
      auto ch = gort::make_chan<int>(cap);
      for (size_t i = 0; i < cap; i++) ch.send(static_cast<int>(i));
      constexpr int kSenders = 3;
      std::vector<Parked> parked(kSenders);
      std::vector<std::string> what(kSenders);
      Countdown cd(kSenders);
      for (int i = 0; i < kSenders; i++) {
        gort::go([&, i] {
          parked[static_cast<size_t>(i)].mark();
          what[static_cast<size_t>(i)] = panic_message([&] { ch.send(100 + i); });
          cd.done();
        });
      }
      for (auto& p : parked) EXPECT_TRUE(p.wait(WaitReason::kChanSend));
      ch.close();
      cd.wait();
      for (auto& w : what) EXPECT_EQ(w, "send on closed channel") << "cap " << cap;
      // The values buffered before close are still delivered, and nothing
      // of the failed senders got in.
      for (size_t i = 0; i < cap; i++) EXPECT_EQ(ch.recv(), std::optional<int>(static_cast<int>(i)));
      EXPECT_EQ(ch.recv(), std::nullopt);
    }
  });
}

TEST_P(Chan, SendOnClosedPanics) {
  run_test([] {
    for (size_t cap : {size_t{0}, size_t{1}, size_t{8}}) {
      auto ch = gort::make_chan<int>(cap);
      ch.close();
      EXPECT_EQ(panic_message([&] { ch.send(1); }), "send on closed channel");
      EXPECT_EQ(ch.len(), 0u);
    }
    // The panic is a std::logic_error.
    auto ch = gort::make_chan<int>(1);
    ch.close();
    EXPECT_THROW(ch.send(1), std::logic_error);
  });
}

TEST_P(Chan, CloseOfClosedPanics) {
  run_test([] {
    auto ch = gort::make_chan<int>(1);
    ch.send(5);
    ch.close();
    EXPECT_EQ(panic_message([&] { ch.close(); }), "close of closed channel");
    // The failed close changed nothing.
    EXPECT_EQ(ch.recv(), std::optional<int>(5));
    EXPECT_EQ(ch.recv(), std::nullopt);
  });
}

TEST_P(Chan, CloseOfNilPanics) {
  run_test([] {
    gort::Chan<int> nil;
    EXPECT_EQ(panic_message([&] { nil.close(); }), "close of nil channel");
  });
}

// Exactly one of many concurrent closers succeeds.
TEST_P(Chan, ConcurrentCloseExactlyOneWins) {
  run_test([] {
    for (int round = 0; round < 50; round++) {
      auto ch = gort::make_chan<int>();
      constexpr int kClosers = 8;
      std::atomic<int> ok{0}, panicked{0};
      Countdown cd(kClosers);
      for (int i = 0; i < kClosers; i++) {
        gort::go([&] {
          std::string w = panic_message([&] { ch.close(); });
          if (w == "<no panic>") ok++;
          if (w == "close of closed channel") panicked++;
          cd.done();
        });
      }
      cd.wait();
      EXPECT_EQ(ok.load(), 1);
      EXPECT_EQ(panicked.load(), kClosers - 1);
    }
  });
}

// ---- nil channels ----

TEST_P(Chan, NilChannelIsNeverReady) {
  run_test([] {
    gort::Chan<int> nil;
    EXPECT_TRUE(nil.is_nil());
    EXPECT_FALSE(static_cast<bool>(nil));
    EXPECT_EQ(nil.len(), 0u);
    EXPECT_EQ(nil.cap(), 0u);
    for (int i = 0; i < 100; i++) {
      EXPECT_EQ(gort::select(gort::on_recv(nil), gort::on_default()), 1u);
      EXPECT_EQ(gort::select(gort::on_send(nil, i), gort::on_default()), 1u);
    }
    EXPECT_FALSE(gort::make_chan<int>().is_nil());
  });
}

// Goroutines blocked on a nil channel stay blocked while the rest of the
// program runs to completion (they are abandoned when main returns).
TEST_P(Chan, NilChannelSendAndRecvBlockForever) {
  run_test(
      [] {
        std::atomic<int> returned{0};
        Parked s, r;
        gort::go([&] {
          gort::Chan<int> nil;
          s.mark();
          nil.send(1);
          returned++;
        });
        gort::go([&] {
          gort::Chan<int> nil;
          r.mark();
          (void)nil.recv();
          returned++;
        });
        EXPECT_TRUE(s.wait(WaitReason::kChanSendNilChan));
        EXPECT_TRUE(r.wait(WaitReason::kChanRecvNilChan));
        // Other work keeps running; the blocked pair never returns.
        auto ch = gort::make_chan<int>();
        Countdown cd(1);
        gort::go([&] {
          for (int i = 0; i < 1000; i++) ch.send(i);
          cd.done();
        });
        for (int i = 0; i < 1000; i++) EXPECT_EQ(ch.recv(), std::optional<int>(i));
        cd.wait();
        EXPECT_TRUE(s.now(WaitReason::kChanSendNilChan));
        EXPECT_TRUE(r.now(WaitReason::kChanRecvNilChan));
        EXPECT_EQ(returned.load(), 0);
        // main and the two blocked goroutines (the sender above exits).
        int64_t n = 0;
        EXPECT_TRUE(eventually([&] { return (n = gort::num_goroutine()) == 3; })) << n;
        // The runtime abandons the blocked pair when main returns; they
        // never run again, so their references into this frame are safe.
      },
      /*all_exit=*/false);
}

}  // namespace
}  // namespace gort_stdlib_test

// ---- fatal paths (separate processes) ----

namespace gort_stdlib_test {
namespace {

using gort::test::procs_cfg;

TEST(ChanDeathTest, NilChannelRecvWithNothingElseRunningDeadlocks) {
  for (int procs : {1, 4}) {
    EXPECT_EXIT(
        {
          gort::run(
              [] {
                gort::Chan<int> nil;
                (void)nil.recv();
              },
              procs_cfg(procs));
        },
        ::testing::ExitedWithCode(2),
        "fatal error: all goroutines are asleep - deadlock!(.|\n)*goroutine 1 \\[chan receive \\(nil chan\\)\\]:")
        << "procs=" << procs;
  }
}

TEST(ChanDeathTest, NilChannelSendWithNothingElseRunningDeadlocks) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::Chan<int> nil;
              nil.send(1);
            },
            procs_cfg(2));
      },
      ::testing::ExitedWithCode(2),
      "fatal error: all goroutines are asleep - deadlock!(.|\n)*goroutine 1 \\[chan send \\(nil chan\\)\\]:");
}

// Every goroutine blocked on channels that nobody else can reach.
TEST(ChanDeathTest, AllGoroutinesBlockedOnChannelsDeadlocks) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              auto ch = gort::make_chan<int>();
              for (int i = 0; i < 10; i++) gort::go([ch] { (void)ch.recv(); });
              auto other = gort::make_chan<int>();
              other.send(1);
            },
            procs_cfg(4));
      },
      ::testing::ExitedWithCode(2),
      "fatal error: all goroutines are asleep - deadlock!(.|\n)*goroutine 1 \\[chan send\\]:");
}

TEST(ChanDeathTest, UncaughtSendOnClosedChannelPanics) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              auto ch = gort::make_chan<int>(1);
              ch.close();
              gort::go([ch] {
                gort::test::announce_goroutine();
                ch.send(1);
              });
              auto never = gort::make_chan<int>();
              (void)never.recv();
            },
            procs_cfg(2));
      },
      ::testing::ExitedWithCode(2), gort::test::goroutine_report("panic: send on closed channel\n\n"));
}

TEST(ChanDeathTest, UncaughtCloseOfNilChannelPanicsInMain) {
  EXPECT_EXIT(
      {
        gort::run(
            [] {
              gort::Chan<int> nil;
              nil.close();
            },
            procs_cfg(1));
      },
      ::testing::ExitedWithCode(2), "panic: close of nil channel\n\ngoroutine 1 \\[running\\]:");
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/sync/chan_ring_test.cpp — buffered channels (stdlib/sync/chan_ring.hpp):
// the lock-free ring and the protocol that parks and wakes around it. A
// lost wake-up shows up as a hang, which the deadlock detector turns into a
// failure (every goroutine asleep); a lost or duplicated value shows up in
// the counts and checksums. Run these many times (--gtest_repeat) and under
// ASan/UBSan when touching the protocol.
#include <atomic>
#include <cstdint>
#include <memory>
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
using gort::test::Tracked;
using gort::test::WaitReason;

class ChanRing : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ChanRing);

// A value that says who sent it and in which order.
int64_t encode(int producer, int64_t seq) { return (int64_t{producer} << 32) | seq; }
int producer_of(int64_t v) { return static_cast<int>(v >> 32); }
int64_t seq_of(int64_t v) { return v & 0xffffffff; }

// P producers, C consumers: every value arrives exactly once (count and
// checksum), and each consumer sees each producer's values in order.
void producers_consumers(size_t cap, int producers, int consumers, int64_t per_producer) {
  auto ch = gort::make_chan<int64_t>(cap);
  std::atomic<int64_t> count{0}, sum{0};
  std::atomic<int> order_violations{0};
  Countdown sent(producers);
  Countdown received(consumers);
  for (int p = 0; p < producers; p++) {
    gort::go([ch, p, per_producer, &sent] {
      for (int64_t i = 0; i < per_producer; i++) ch.send(encode(p, i));
      sent.done();
    });
  }
  for (int c = 0; c < consumers; c++) {
    gort::go([ch, producers, &count, &sum, &order_violations, &received] {
      std::vector<int64_t> last(static_cast<size_t>(producers), -1);
      int64_t n = 0, s = 0;
      for (int64_t v : ch) {
        size_t p = static_cast<size_t>(producer_of(v));
        if (p >= last.size() || seq_of(v) <= last[p]) {
          order_violations++;
        } else {
          last[p] = seq_of(v);
        }
        n++;
        s += v;
      }
      count += n;
      sum += s;
      received.done();
    });
  }
  sent.wait();
  ch.close();
  received.wait();
  int64_t want_sum = 0;
  for (int p = 0; p < producers; p++) {
    for (int64_t i = 0; i < per_producer; i++) want_sum += encode(p, i);
  }
  EXPECT_EQ(count.load(), producers * per_producer) << "cap " << cap;
  EXPECT_EQ(sum.load(), want_sum) << "cap " << cap;
  EXPECT_EQ(order_violations.load(), 0) << "cap " << cap;
  EXPECT_EQ(ch.len(), 0u);
}

TEST_P(ChanRing, OneProducerOneConsumer) {
  run_test([] {
    for (size_t cap : {size_t{1}, size_t{2}, size_t{3}, size_t{64}, size_t{1024}}) {
      producers_consumers(cap, 1, 1, 50000);
    }
  });
}

TEST_P(ChanRing, ManyProducersManyConsumers) {
  run_test([] {
    for (size_t cap : {size_t{1}, size_t{2}, size_t{7}, size_t{64}, size_t{1024}}) {
      producers_consumers(cap, 4, 4, 10000);
      producers_consumers(cap, 8, 2, 5000);
      producers_consumers(cap, 2, 8, 5000);
    }
  });
}

// Exactly one sender: a single receiver gets its values in order, across
// many wraps of a small ring, whatever mix of fast path and parking.
TEST_P(ChanRing, FifoPerSender) {
  run_test([] {
    for (size_t cap : {size_t{1}, size_t{2}, size_t{5}}) {
      auto ch = gort::make_chan<int>(cap);
      constexpr int kN = 20000;
      gort::go([ch] {
        for (int i = 0; i < kN; i++) ch.send(i);
        ch.close();
      });
      int want = 0;
      for (int v : ch) {
        if (v != want) {
          ADD_FAILURE() << "cap " << cap << ": got " << v << ", want " << want;
          break;
        }
        want++;
      }
      EXPECT_EQ(want, kN);
      for (int v : ch) ADD_FAILURE() << "extra value " << v;
    }
  });
}

// close racing with senders: every send either returned (and its value is
// received) or panicked `send on closed channel`; nothing is lost, nothing
// arrives twice. Small rings so that some senders are parked when close
// comes.
TEST_P(ChanRing, CloseRacingSendersLosesNothing) {
  run_test([] {
    for (int round = 0; round < 40; round++) {
      size_t cap = size_t{1} << (round % 4);  // 1, 2, 4, 8
      auto ch = gort::make_chan<int64_t>(cap);
      constexpr int kSenders = 6;
      constexpr int kReceivers = 3;
      std::atomic<int64_t> attempted{0}, returned{0}, panicked{0}, returned_sum{0};
      std::atomic<int64_t> delivered{0}, delivered_sum{0};
      std::atomic<int> wrong_panics{0};
      std::atomic<bool> go_close{false};
      Countdown senders(kSenders);
      Countdown receivers(kReceivers);
      for (int s = 0; s < kSenders; s++) {
        gort::go([&, ch, s] {
          for (int64_t i = 0;; i++) {
            int64_t v = encode(s, i);
            attempted++;
            std::string what = panic_message([&] { ch.send(v); });
            if (what == "<no panic>") {
              returned++;
              returned_sum += v;
              if (i == 200) go_close = true;
              continue;
            }
            if (what != "send on closed channel") wrong_panics++;
            panicked++;
            break;
          }
          senders.done();
        });
      }
      for (int r = 0; r < kReceivers; r++) {
        gort::go([&, ch] {
          int64_t n = 0, sum = 0;
          for (int64_t v : ch) {
            n++;
            sum += v;
            if (n % 16 == 0) gort::yield();  // let the ring fill up
          }
          delivered += n;
          delivered_sum += sum;
          receivers.done();
        });
      }
      while (!go_close.load()) gort::yield();
      ch.close();
      senders.wait();
      receivers.wait();
      EXPECT_EQ(wrong_panics.load(), 0);
      EXPECT_EQ(panicked.load(), kSenders) << "each sender stops at its first panic";
      EXPECT_EQ(returned.load() + panicked.load(), attempted.load());
      EXPECT_EQ(delivered.load(), returned.load()) << "round " << round;
      EXPECT_EQ(delivered_sum.load(), returned_sum.load()) << "round " << round;
    }
  });
}

// Plain (non-select) parking on both sides, woken by the other side's
// lock-free operation.
TEST_P(ChanRing, ParkedReceiverWokenByFastSendAndSenderByFastRecv) {
  run_test([] {
    auto ch = gort::make_chan<int>(2);
    Parked receiver;
    Countdown got(1);
    gort::go([&] {
      receiver.mark();
      EXPECT_EQ(ch.recv(), std::optional<int>(7));
      got.done();
    });
    EXPECT_TRUE(receiver.wait(WaitReason::kChanRecv));
    ch.send(7);
    got.wait();

    ch.send(1);
    ch.send(2);
    Parked sender;
    Countdown sent(1);
    gort::go([&] {
      sender.mark();
      ch.send(3);
      sent.done();
    });
    EXPECT_TRUE(sender.wait(WaitReason::kChanSend));
    EXPECT_EQ(ch.len(), 2u);
    EXPECT_EQ(ch.recv(), std::optional<int>(1));
    sent.wait();
    EXPECT_EQ(ch.recv(), std::optional<int>(2));
    EXPECT_EQ(ch.recv(), std::optional<int>(3));
  });
}

// A select parked on buffered channels is woken by a plain lock-free send
// into one of them, and by a lock-free receive that makes room.
TEST_P(ChanRing, SelectParkedOnBufferedWokenByFastPathOps) {
  run_test([] {
    for (int round = 0; round < 20; round++) {
      auto a = gort::make_chan<int>(4);
      auto b = gort::make_chan<int>(4);
      Parked selecting;
      Countdown done(1);
      std::optional<int> got;
      size_t which = 99;
      gort::go([&] {
        selecting.mark();
        which = gort::select(gort::on_recv(a, [&](std::optional<int> v) { got = v; }),
                             gort::on_recv(b, [&](std::optional<int> v) { got = v; }));
        done.done();
      });
      EXPECT_TRUE(selecting.wait(WaitReason::kSelect));
      (round % 2 ? b : a).send(round);
      done.wait();
      EXPECT_EQ(which, static_cast<size_t>(round % 2));
      EXPECT_EQ(got, std::optional<int>(round));
      EXPECT_EQ(a.len() + b.len(), 0u);

      // Both full: the select parks on sending, a receive makes room.
      for (int i = 0; i < 4; i++) {
        a.send(i);
        b.send(i);
      }
      Parked sending;
      Countdown sent(1);
      gort::go([&] {
        sending.mark();
        which = gort::select(gort::on_send(a, 100), gort::on_send(b, 100));
        sent.done();
      });
      EXPECT_TRUE(sending.wait(WaitReason::kSelect));
      auto& from = round % 2 ? b : a;
      EXPECT_EQ(from.recv(), std::optional<int>(0));
      sent.wait();
      EXPECT_EQ(which, static_cast<size_t>(round % 2));
      EXPECT_EQ(from.len(), 4u);
      for (int i = 1; i < 4; i++) EXPECT_EQ(from.recv(), std::optional<int>(i));
      EXPECT_EQ(from.recv(), std::optional<int>(100));
    }
  });
}

TEST_P(ChanRing, SelectParkedOnBufferedWokenByClose) {
  run_test([] {
    auto a = gort::make_chan<int>(3);
    auto never = gort::make_chan<int>();
    Parked selecting;
    Countdown done(1);
    std::optional<int> got = 5;
    gort::go([&] {
      selecting.mark();
      gort::select(gort::on_recv(a, [&](std::optional<int> v) { got = v; }), gort::on_recv(never));
      done.done();
    });
    EXPECT_TRUE(selecting.wait(WaitReason::kSelect));
    a.close();
    done.wait();
    EXPECT_EQ(got, std::nullopt);

    // A select parked sending on a full buffered channel panics on close.
    auto full = gort::make_chan<int>(1);
    full.send(1);
    Parked sending;
    Countdown panicked(1);
    std::string what;
    gort::go([&] {
      sending.mark();
      what = panic_message([&] { gort::select(gort::on_send(full, 2), gort::on_recv(never)); });
      panicked.done();
    });
    EXPECT_TRUE(sending.wait(WaitReason::kSelect));
    full.close();
    panicked.wait();
    EXPECT_EQ(what, "send on closed channel");
    EXPECT_EQ(full.recv(), std::optional<int>(1)) << "the value buffered before close stays";
    EXPECT_EQ(full.recv(), std::nullopt);
  });
}

// Consumers that receive through select (parking on the ring's protocol)
// race with plain ones and with lock-free senders; count and checksum.
TEST_P(ChanRing, SelectConsumersUnderLoad) {
  run_test([] {
    for (size_t cap : {size_t{1}, size_t{3}, size_t{32}}) {
      auto a = gort::make_chan<int64_t>(cap);
      auto b = gort::make_chan<int64_t>(cap);
      auto quit = gort::make_chan<int>();
      constexpr int64_t kPer = 20000;
      std::atomic<int64_t> count{0}, sum{0};
      Countdown producers(2);
      Countdown consumers(3);
      for (int p = 0; p < 2; p++) {
        gort::go([&, ch = p ? b : a, p] {
          for (int64_t i = 0; i < kPer; i++) ch.send(encode(p, i));
          producers.done();
        });
      }
      for (int c = 0; c < 2; c++) {
        gort::go([&] {
          int64_t n = 0, s = 0;
          for (bool stop = false; !stop;) {
            // a closed (after the end) is always ready with nullopt.
            auto take = [&](std::optional<int64_t> v) {
              if (v) n++, s += *v;
            };
            gort::select(gort::on_recv(a, take), gort::on_recv(b, take),
                         gort::on_recv(quit, [&] { stop = true; }));
          }
          count += n;
          sum += s;
          consumers.done();
        });
      }
      gort::go([&] {
        int64_t n = 0, s = 0;
        for (int64_t v : a) n++, s += v;
        count += n;
        sum += s;
        consumers.done();
      });
      producers.wait();
      // Every value is in a ring; once both are empty, stop the consumers.
      while (a.len() + b.len() > 0) gort::yield();
      a.close();
      quit.close();
      consumers.wait();
      int64_t want_sum = 0;
      for (int p = 0; p < 2; p++) {
        for (int64_t i = 0; i < kPer; i++) want_sum += encode(p, i);
      }
      EXPECT_EQ(count.load(), 2 * kPer) << "cap " << cap;
      EXPECT_EQ(sum.load(), want_sum) << "cap " << cap;
    }
  });
}

// len() never leaves [0, cap] while producers and consumers run, and is
// exact when they are quiet.
TEST_P(ChanRing, LenAndCapStayConsistent) {
  run_test([] {
    constexpr size_t kCap = 16;
    auto ch = gort::make_chan<int>(kCap);
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    Countdown workers(4);
    for (int w = 0; w < 2; w++) {
      gort::go([&, ch] {
        for (int i = 0; i < 30000; i++) ch.send(i);
        workers.done();
      });
      gort::go([&, ch] {
        for (int i = 0; i < 30000; i++) ch.recv();
        workers.done();
      });
    }
    Countdown watcher(1);
    gort::go([&, ch] {
      while (!stop.load()) {
        size_t n = ch.len();
        if (n > kCap) bad++;
        if (ch.cap() != kCap) bad++;
        gort::yield();
      }
      watcher.done();
    });
    workers.wait();
    stop = true;
    watcher.wait();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(ch.len(), 0u);
    for (size_t i = 1; i <= kCap; i++) {
      ch.send(1);
      EXPECT_EQ(ch.len(), i);
    }
    ch.close();
    EXPECT_EQ(ch.len(), kCap) << "close keeps what is buffered";
    for (size_t i = kCap; i > 0; i--) {
      EXPECT_EQ(ch.len(), i);
      ch.recv();
    }
    EXPECT_EQ(ch.len(), 0u);
  });
}

// Move-only and non-trivial payloads through a contended ring: none lost,
// none destroyed twice, the rest destroyed with the channel.
TEST_P(ChanRing, MoveOnlyAndTrackedPayloadsUnderContention) {
  Tracked::reset();
  run_test([] {
    auto ptrs = gort::make_chan<std::unique_ptr<int64_t>>(3);
    auto tracked = gort::make_chan<Tracked>(5);
    constexpr int kPer = 5000;
    std::atomic<int64_t> ptr_sum{0}, tracked_sum{0};
    Countdown producers(4);
    Countdown consumers(4);
    for (int p = 0; p < 2; p++) {
      gort::go([&, ptrs] {
        for (int i = 0; i < kPer; i++) ptrs.send(std::make_unique<int64_t>(i));
        producers.done();
      });
      gort::go([&, tracked] {
        for (int i = 0; i < kPer; i++) tracked.send(Tracked(i));
        producers.done();
      });
      gort::go([&, ptrs] {
        int64_t s = 0;
        for (std::unique_ptr<int64_t> v : ptrs) s += *v;  // moved out
        ptr_sum += s;
        consumers.done();
      });
      gort::go([&, tracked] {
        int64_t s = 0;
        for (Tracked& t : tracked) s += t.value;
        tracked_sum += s;
        consumers.done();
      });
    }
    producers.wait();
    ptrs.close();
    tracked.close();
    consumers.wait();
    int64_t want = 2 * int64_t{kPer} * (kPer - 1) / 2;
    EXPECT_EQ(ptr_sum.load(), want);
    EXPECT_EQ(tracked_sum.load(), want);
    // Left in the ring when the last handle goes: destroyed with it.
    auto left = gort::make_chan<Tracked>(4);
    for (int i = 0; i < 3; i++) left.send(Tracked(i));
    left.recv();
    left.send(Tracked(9));
    left.send(Tracked(10));  // wraps
  });
  EXPECT_EQ(Tracked::live.load(), 0) << "values leaked";
  EXPECT_EQ(Tracked::misuses.load(), 0);
  EXPECT_EQ(Tracked::constructed.load(), Tracked::destroyed.load());
}

// A payload whose move takes a while keeps positions in flight long enough
// for others to wait on them (and, being non-trivial, runs its move with
// preemption held off).
struct SlowMove {
  explicit SlowMove(int64_t x) : v(x) {}
  SlowMove(SlowMove&& o) noexcept : v(o.v) {
    for (int i = 0; i < 200; i++) asm volatile("" ::: "memory");  // a move that takes a while
  }
  int64_t v;
};

TEST_P(ChanRing, SlowMovesInFlight) {
  run_test([] {
    auto ch = gort::make_chan<SlowMove>(4);
    constexpr int kPer = 4000;
    std::atomic<int64_t> sum{0}, count{0};
    Countdown producers(3);
    Countdown consumers(3);
    for (int p = 0; p < 3; p++) {
      gort::go([&, ch] {
        for (int i = 0; i < kPer; i++) ch.send(SlowMove(i));
        producers.done();
      });
      gort::go([&, ch] {
        int64_t n = 0, s = 0;
        while (std::optional<SlowMove> v = ch.recv()) n++, s += v->v;
        count += n;
        sum += s;
        consumers.done();
      });
    }
    producers.wait();
    ch.close();
    consumers.wait();
    EXPECT_EQ(count.load(), 3 * kPer);
    EXPECT_EQ(sum.load(), 3 * int64_t{kPer} * (kPer - 1) / 2);
  });
}

// Plain OS threads on the ring next to goroutines (they sleep on a futex
// instead of parking).
TEST_P(ChanRing, PlainThreadsProduceGoroutinesConsume) {
  run_test([] {
    gort::test::KeepAwake awake;
    auto ch = gort::make_chan<int64_t>(8);
    auto finished = gort::make_chan<int>(2);
    constexpr int64_t kPer = 20000;
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; t++) {
      threads.emplace_back([ch, finished] {
        for (int64_t i = 0; i < kPer; i++) ch.send(i);
        finished.send(1);
      });
    }
    std::atomic<int64_t> sum{0};
    Countdown consumers(2);
    for (int c = 0; c < 2; c++) {
      gort::go([&, ch] {
        int64_t s = 0;
        for (int64_t v : ch) s += v;
        sum += s;
        consumers.done();
      });
    }
    finished.recv();
    finished.recv();
    ch.close();
    consumers.wait();
    for (auto& t : threads) t.join();  // both have returned from their last send
    EXPECT_EQ(sum.load(), 2 * kPer * (kPer - 1) / 2);
  });
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/sync/chan_thread_test.cpp — channels used from plain OS threads
// (stdlib/sync/chan.cpp block_waiter): sends, receives and close between threads
// and goroutines, and the deadlock detector with threads around.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::eventually;
using gort::test::KeepAwake;

class ChanThread : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ChanThread);

// ---- plain threads ----
//
// These check what plain threads can do with channels. A KeepAwake
// goroutine keeps the deadlock detector out of the picture; whether the
// detector itself copes with plain threads is checked separately below.

TEST_P(ChanThread, PlainThreadSendsToGoroutine) {
  run_test([] {
    KeepAwake awake;
    for (size_t cap : {size_t{0}, size_t{4}}) {
      auto ch = gort::make_chan<int>(cap);
      std::thread t([ch] {
        for (int i = 0; i < 2000; i++) ch.send(i);
        ch.close();
      });
      int expect = 0;
      for (int v : ch) EXPECT_EQ(v, expect++);
      EXPECT_EQ(expect, 2000);
      t.join();  // it has returned from its last operation already
    }
  });
}

TEST_P(ChanThread, PlainThreadReceivesFromGoroutines) {
  run_test([] {
    KeepAwake awake;
    auto ch = gort::make_chan<int>();
    auto result = gort::make_chan<int64_t>(1);
    std::thread t([ch, result] {
      int64_t sum = 0;
      int n = 0;
      for (int v : ch) {
        sum += v;
        n++;
      }
      result.send(n == 4000 ? sum : -1);
    });
    Countdown cd(4);
    for (int g = 0; g < 4; g++) {
      gort::go([&, g] {
        for (int i = 0; i < 1000; i++) ch.send(g * 1000 + i);
        cd.done();
      });
    }
    cd.wait();
    ch.close();
    EXPECT_EQ(result.recv(), std::optional<int64_t>(int64_t{3999} * 4000 / 2));
    t.join();
  });
}

TEST_P(ChanThread, PlainThreadParkedRecvWokenByClose) {
  run_test([] {
    KeepAwake awake;
    auto ch = gort::make_chan<int>();
    auto reply = gort::make_chan<std::string>(1);
    std::atomic<bool> started{false};
    std::thread t([&] {
      started = true;
      std::optional<int> v = ch.recv();
      reply.send(v ? "value" : "nullopt");
    });
    EXPECT_TRUE(eventually([&] { return started.load(); }));
    // Give the thread a chance to block; either way the outcome is the same.
    for (int i = 0; i < 100; i++) gort::yield();
    ch.close();
    EXPECT_EQ(reply.recv(), std::optional<std::string>("nullopt"));
    t.join();
  });
}

// Plain threads and goroutines on both ends of one channel at once.
TEST_P(ChanThread, PlainThreadsAndGoroutinesMixed) {
  run_test([] {
    KeepAwake awake;
    constexpr int kEach = 1500;
    auto ch = gort::make_chan<int>(2);
    auto sums = gort::make_chan<int64_t>(2);
    auto finished = gort::make_chan<int>(2);
    std::thread producer([ch, finished] {
      for (int i = 0; i < kEach; i++) ch.send(i);
      finished.send(0);
    });
    std::thread consumer([ch, sums] {
      int64_t s = 0;
      for (int v : ch) s += v;
      sums.send(s);
    });
    gort::go([ch, finished] {
      for (int i = kEach; i < 2 * kEach; i++) ch.send(i);
      finished.send(1);
    });
    gort::go([ch, sums] {
      int64_t s = 0;
      for (int v : ch) s += v;
      sums.send(s);
    });
    (void)finished.recv();
    (void)finished.recv();
    ch.close();
    int64_t total = *sums.recv() + *sums.recv();
    EXPECT_EQ(total, int64_t{2 * kEach} * (2 * kEach - 1) / 2);
    producer.join();  // both are past their last operation
    consumer.join();
  });
}

// The deadlock detector must not fire while a plain thread that will send
// is merely busy (docs/runtime.md, Panics and fatal errors: a deadlock is
// reported only when nothing, including an outside thread, can wake a
// goroutine). Run in a child: if it fires, it kills the process.
TEST_P(ChanThread, PlainThreadProducerDoesNotTripDeadlockDetector) {
  auto child = [this] {
    run_test([] {
      auto ch = gort::make_chan<int>();
      std::thread t([ch] {
        // Busy elsewhere for a moment before the first send.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        for (int i = 0; i < 3; i++) ch.send(i);
      });
      for (int i = 0; i < 3; i++) EXPECT_EQ(ch.recv(), std::optional<int>(i));
      t.join();
    });
  };
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

// Same, with the thread as the consumer: between two receives it is outside
// any gort call while every goroutine is parked sending to it.
TEST_P(ChanThread, PlainThreadConsumerDoesNotTripDeadlockDetector) {
  auto child = [this] {
    run_test([] {
      auto ch = gort::make_chan<int>();
      auto done = gort::make_chan<int>(1);
      std::thread t([ch, done] {
        int n = 0;
        for (int v : ch) {
          (void)v;
          std::this_thread::sleep_for(std::chrono::milliseconds(5));  // process it
          n++;
        }
        done.send(n);
      });
      for (int i = 0; i < 10; i++) ch.send(i);
      ch.close();
      EXPECT_EQ(done.recv(), std::optional<int>(10));
      t.join();
    });
  };
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

}  // namespace
}  // namespace gort_stdlib_test

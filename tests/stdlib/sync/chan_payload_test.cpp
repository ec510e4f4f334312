// tests/stdlib/sync/chan_payload_test.cpp — what channels carry and how they
// are held (gort/chan.hpp, stdlib/sync/chan.cpp): move-only, large and audited
// payloads, range-for, and channel handles.
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::panic_message;
using gort::test::Tracked;

class ChanPayload : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(ChanPayload);

// ---- payloads ----

TEST_P(ChanPayload, MoveOnlyPayload) {
  run_test([] {
    for (size_t cap : {size_t{0}, size_t{4}}) {
      auto ch = gort::make_chan<std::unique_ptr<int>>(cap);
      Countdown cd(1);
      gort::go([&] {
        for (int i = 0; i < 100; i++) ch.send(std::make_unique<int>(i));
        ch.close();
        cd.done();
      });
      int expect = 0;
      for (auto&& p : ch) {
        static_assert(std::is_same_v<decltype(p), std::unique_ptr<int>&&>);
        EXPECT_NE(p, nullptr);
        if (p) {
          EXPECT_EQ(*p, expect);
        }
        expect++;
      }
      EXPECT_EQ(expect, 100);
      cd.wait();
    }
  });
}

struct NoDefault {
  explicit NoDefault(int x) : v(x) {}
  NoDefault(const NoDefault&) = default;
  NoDefault(NoDefault&&) noexcept = default;
  int v;
};
static_assert(!std::is_default_constructible_v<NoDefault>);

TEST_P(ChanPayload, PayloadWithoutDefaultConstructor) {
  run_test([] {
    auto ch = gort::make_chan<NoDefault>(2);
    ch.send(NoDefault(1));
    ch.send(NoDefault(2));
    EXPECT_EQ(ch.recv()->v, 1);
    auto unbuffered = gort::make_chan<NoDefault>();
    Countdown cd(1);
    gort::go([&] {
      unbuffered.send(NoDefault(3));
      cd.done();
    });
    EXPECT_EQ(unbuffered.recv()->v, 3);
    cd.wait();
    int got = 0;
    gort::select(gort::on_recv(ch, [&](std::optional<NoDefault> v) { got = v->v; }));
    EXPECT_EQ(got, 2);
  });
}

TEST_P(ChanPayload, LargeAndOverAlignedPayloads) {
  struct alignas(64) Wide {
    char bytes[200];
    uint64_t tag;
  };
  run_test([] {
    auto ch = gort::make_chan<Wide>(3);
    Countdown cd(1);
    gort::go([&] {
      for (uint64_t i = 0; i < 50; i++) {
        Wide w{};
        for (auto& b : w.bytes) b = static_cast<char>(i);
        w.tag = i * 1000;
        ch.send(w);
      }
      cd.done();
    });
    for (uint64_t i = 0; i < 50; i++) {
      std::optional<Wide> w = ch.recv();
      if (!w) {
        ADD_FAILURE() << "channel closed unexpectedly";
        break;
      }
      EXPECT_EQ(reinterpret_cast<uintptr_t>(&*w) % 64, 0u);
      EXPECT_EQ(w->tag, i * 1000);
      EXPECT_EQ(w->bytes[0], static_cast<char>(i));
      EXPECT_EQ(w->bytes[199], static_cast<char>(i));
    }
    cd.wait();
  });
}

// Every value constructed is destroyed exactly once, whatever path it took:
// hand-off, buffer, a sender parked on a full buffer, values still buffered
// when the last handle goes away, failed sends on a closed channel, and
// select cases that were not chosen.
TEST_P(ChanPayload, NonTrivialPayloadsAreDestroyedExactlyOnce) {
  Tracked::reset();
  run_test([] {
    {
      // Unbuffered hand-off to a parked receiver, and to a parked sender.
      auto ch = gort::make_chan<Tracked>();
      Countdown cd(1);
      gort::go([&] {
        for (int i = 0; i < 100; i++) ch.send(Tracked(i));
        cd.done();
      });
      for (int i = 0; i < 100; i++) EXPECT_EQ(ch.recv()->value, i);
      cd.wait();
    }
    {
      // A small buffer with a sender often parked on it.
      auto ch = gort::make_chan<Tracked>(2);
      Countdown cd(1);
      gort::go([&] {
        for (int i = 0; i < 200; i++) ch.send(Tracked(i));
        ch.close();
        cd.done();
      });
      int expect = 0;
      for (Tracked& t : ch) EXPECT_EQ(t.value, expect++);
      EXPECT_EQ(expect, 200);
      cd.wait();
    }
    {
      // Values left buffered when the channel is destroyed, after the ring
      // wrapped around.
      auto ch = gort::make_chan<Tracked>(4);
      for (int i = 0; i < 3; i++) ch.send(Tracked(i));
      for (int i = 0; i < 3; i++) EXPECT_EQ(ch.recv()->value, i);
      for (int i = 0; i < 4; i++) ch.send(Tracked(10 + i));
      EXPECT_EQ(ch.len(), 4u);
      auto copy = ch;
    }
    {
      // Buffered values in a closed channel that is never drained.
      auto ch = gort::make_chan<Tracked>(8);
      for (int i = 0; i < 5; i++) ch.send(Tracked(i));
      ch.close();
      EXPECT_EQ(ch.recv()->value, 0);
    }
    {
      // Sends that panic destroy their argument exactly once.
      auto ch = gort::make_chan<Tracked>(1);
      ch.close();
      for (int i = 0; i < 5; i++) {
        EXPECT_EQ(panic_message([&] { ch.send(Tracked(i)); }), "send on closed channel");
      }
    }
    {
      // Select: the send case not chosen keeps and destroys its value.
      auto a = gort::make_chan<Tracked>(1);
      auto full = gort::make_chan<Tracked>(1);
      full.send(Tracked(-5));
      for (int i = 0; i < 20; i++) {
        size_t idx = gort::select(gort::on_send(a, Tracked(i)), gort::on_send(full, Tracked(100 + i)));
        EXPECT_EQ(idx, 0u);
        EXPECT_EQ(a.recv()->value, i);
      }
      // A receive case whose value the callback ignores.
      a.send(Tracked(7));
      gort::select(gort::on_recv(a, [] {}));
    }
  });
  EXPECT_EQ(Tracked::live.load(), 0) << "values leaked";
  EXPECT_EQ(Tracked::misuses.load(), 0) << "values destroyed twice or used after destruction";
  EXPECT_EQ(Tracked::constructed.load(), Tracked::destroyed.load());
  EXPECT_GT(Tracked::constructed.load(), 600);
}

// ---- range-for ----

TEST_P(ChanPayload, RangeForUntilClosed) {
  run_test([] {
    for (size_t cap : {size_t{0}, size_t{1}, size_t{10}}) {
      auto ch = gort::make_chan<int>(cap);
      Countdown cd(1);
      gort::go([&] {
        for (int i = 1; i <= 1000; i++) ch.send(i);
        ch.close();
        cd.done();
      });
      int count = 0;
      int64_t sum = 0;
      int prev = 0;
      for (int v : ch) {
        EXPECT_EQ(v, prev + 1);
        prev = v;
        count++;
        sum += v;
      }
      EXPECT_EQ(count, 1000);
      EXPECT_EQ(sum, 500500);
      cd.wait();
      // A closed, drained channel: the loop body never runs.
      for (int v : ch) ADD_FAILURE() << "received " << v << " from a drained channel";
    }
  });
}

// `for (T v : ch)` compiles for a move-only T and moves each value out;
// binding by const T&, T&& and auto&& works too (*it is T&&; T& does not
// bind, tests/stdlib/sync/chan_range_test.cpp).
TEST_P(ChanPayload, RangeForMoveOnly) {
  run_test([] {
    for (size_t cap : {size_t{0}, size_t{3}}) {
      auto ch = gort::make_chan<std::unique_ptr<int>>(cap);
      auto feed = [](gort::Chan<std::unique_ptr<int>> ch, int n) {
        gort::go([ch, n] {
          for (int i = 0; i < n; i++) ch.send(std::make_unique<int>(i));
          ch.close();
        });
      };
      feed(ch, 50);
      int want = 0;
      for (std::unique_ptr<int> p : ch) {
        static_assert(std::is_same_v<decltype(p), std::unique_ptr<int>>);
        EXPECT_TRUE(p && *p == want) << "cap " << cap;
        want++;
      }
      EXPECT_EQ(want, 50);

      ch = gort::make_chan<std::unique_ptr<int>>(cap);
      feed(ch, 3);
      std::vector<std::unique_ptr<int>> kept;
      for (std::unique_ptr<int>&& p : ch) kept.push_back(std::move(p));
      EXPECT_EQ(kept.size(), 3u);

      ch = gort::make_chan<std::unique_ptr<int>>(cap);
      feed(ch, 3);
      int n = 0;
      for (const std::unique_ptr<int>& p : ch) n += p ? 1 : 0;
      EXPECT_EQ(n, 3);
    }
  });
}

// A T that can only be move constructed (no assignment at all, as a type
// with a const or reference member): range-for must construct each value
// in place of the last, never assign it.
struct MoveConstructOnly {
  explicit MoveConstructOnly(int v) : p(std::make_unique<int>(v)) {}
  MoveConstructOnly(MoveConstructOnly&&) noexcept = default;
  MoveConstructOnly& operator=(MoveConstructOnly&&) = delete;
  std::unique_ptr<int> p;
};
static_assert(std::is_nothrow_move_constructible_v<MoveConstructOnly>);
static_assert(!std::is_move_assignable_v<MoveConstructOnly>);
static_assert(!std::is_copy_constructible_v<MoveConstructOnly>);

TEST_P(ChanPayload, RangeForMoveConstructOnly) {
  Tracked::reset();
  run_test([] {
    for (size_t cap : {size_t{0}, size_t{3}}) {
      auto ch = gort::make_chan<MoveConstructOnly>(cap);
      auto feed = [](gort::Chan<MoveConstructOnly> ch, int n) {
        gort::go([ch, n] {
          for (int i = 0; i < n; i++) ch.send(MoveConstructOnly(i));
          ch.close();
        });
      };
      feed(ch, 40);
      int want = 0;
      for (MoveConstructOnly v : ch) {
        EXPECT_TRUE(v.p && *v.p == want) << "cap " << cap;
        want++;
      }
      EXPECT_EQ(want, 40);

      ch = gort::make_chan<MoveConstructOnly>(cap);
      feed(ch, 5);
      std::vector<std::unique_ptr<int>> kept;
      for (MoveConstructOnly&& v : ch) kept.push_back(std::move(v.p));
      EXPECT_EQ(kept.size(), 5u);

      ch = gort::make_chan<MoveConstructOnly>(cap);
      feed(ch, 5);
      int n = 0;
      for (const MoveConstructOnly& v : ch) n += v.p ? 1 : 0;
      EXPECT_EQ(n, 5);
    }
    // The iterator destroys each value before taking the next, and the
    // last one with itself: nothing is left alive or destroyed twice.
    auto ch = gort::make_chan<Tracked>(4);
    gort::go([ch] {
      for (int i = 0; i < 20; i++) ch.send(Tracked(i));
      ch.close();
    });
    int sum = 0;
    for (const Tracked& t : ch) sum += t.value;
    EXPECT_EQ(sum, 190);
  });
  EXPECT_EQ(Tracked::live.load(), 0);
  EXPECT_EQ(Tracked::misuses.load(), 0);
}

// ---- handles ----

TEST_P(ChanPayload, CopiesReferToTheSameChannel) {
  run_test([] {
    auto a = gort::make_chan<int>(3);
    gort::Chan<int> b = a;  // copy
    EXPECT_TRUE(a == b);
    b.send(1);
    EXPECT_EQ(a.len(), 1u);
    EXPECT_EQ(a.recv(), std::optional<int>(1));

    gort::Chan<int> c;
    EXPECT_FALSE(c == a);
    c = b;  // copy assignment
    EXPECT_TRUE(c == a);
    gort::Chan<int> d = std::move(c);  // leaves c moved-from, not nil
    EXPECT_FALSE(c.is_nil());
    EXPECT_FALSE(c == gort::Chan<int>());
    EXPECT_EQ(panic_message([&] { c.send(9); }), "send on moved-from gort::Chan");
    EXPECT_TRUE(d == a);
    d.send(2);
    EXPECT_EQ(b.recv(), std::optional<int>(2));

    // Closing through any handle closes the channel.
    d.close();
    EXPECT_EQ(a.recv(), std::nullopt);
    EXPECT_EQ(panic_message([&] { b.close(); }), "close of closed channel");

    // Self-assignment keeps the channel alive.
    auto e = gort::make_chan<int>(1);
    auto& e_ref = e;
    e = e_ref;
    e.send(3);
    EXPECT_EQ(e.recv(), std::optional<int>(3));

    // Distinct channels compare unequal; nil handles compare equal.
    EXPECT_FALSE(gort::make_chan<int>() == gort::make_chan<int>());
    EXPECT_TRUE(gort::Chan<int>() == gort::Chan<int>());

    // A copy made inside a goroutine (captured by value) works after the
    // original handle is gone.
    Countdown cd(1);
    std::optional<int> got;
    {
      auto tmp = gort::make_chan<int>();
      gort::go([tmp, &got, &cd] {
        got = tmp.recv();
        cd.done();
      });
      tmp.send(9);
    }
    cd.wait();
    EXPECT_EQ(got, std::optional<int>(9));
  });
}

// A handle shared by many goroutines that copy and drop it concurrently.
TEST_P(ChanPayload, HandleCopiesFromManyGoroutines) {
  Tracked::reset();
  run_test([] {
    constexpr int kGoroutines = 64;
    auto done = gort::make_chan<int>(kGoroutines);
    {
      auto ch = gort::make_chan<Tracked>(kGoroutines);
      for (int i = 0; i < kGoroutines; i++) {
        gort::go([ch, done, i] {
          for (int k = 0; k < 100; k++) {
            gort::Chan<Tracked> local = ch;
            gort::Chan<Tracked> other;
            other = local;
            if (k % 10 == 0) gort::yield();
          }
          ch.send(Tracked(i));
          done.send(i);
        });
      }
    }
    int64_t sum = 0;
    for (int i = 0; i < kGoroutines; i++) sum += *done.recv();
    EXPECT_EQ(sum, kGoroutines * (kGoroutines - 1) / 2);
  });
  // The last handle went away with 64 values buffered: all destroyed.
  EXPECT_EQ(Tracked::live.load(), 0);
  EXPECT_EQ(Tracked::misuses.load(), 0);
}

}  // namespace
}  // namespace gort_stdlib_test

// tests/stdlib/sync/weighted_semaphore_test.cpp — gort::Semaphore (stdlib/sync/weighted_semaphore.cpp):
// weighted acquire/release, capacity under stress, FIFO fairness,
// try_acquire, the over-release panic, impossible requests, plain threads,
// and acquire(ctx, n) (x/sync's Acquire): cancellation before and while
// queued, a cancelled head letting the next through, grants racing with
// cancellation.
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gort/context.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::eventually;
using gort::test::KeepAwake;
using gort::test::panic_message;
using gort::test::Parked;
using gort::test::WaitReason;
using Clock = std::chrono::steady_clock;

class Semaphore : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Semaphore);

TEST_P(Semaphore, WeightedAcquireAndRelease) {
  run_test([] {
    gort::Semaphore sem(10);
    sem.acquire(3);
    sem.acquire(7);  // exactly full: does not block
    EXPECT_FALSE(sem.try_acquire(1));
    sem.release(3);
    EXPECT_FALSE(sem.try_acquire(4));
    EXPECT_TRUE(sem.try_acquire(3));
    sem.release(10);
    EXPECT_TRUE(sem.try_acquire(10));
    sem.release(5);
    sem.release(5);
    sem.acquire();  // default weight 1
    EXPECT_TRUE(sem.try_acquire(9));
    EXPECT_FALSE(sem.try_acquire());
    sem.release(10);
    // A zero-weight acquire always succeeds when nobody waits.
    sem.acquire(0);
    EXPECT_TRUE(sem.try_acquire(0));
  });
}

// A waiter parks until enough units are released, possibly over several
// releases.
TEST_P(Semaphore, AcquireParksUntilEnoughIsReleased) {
  run_test([] {
    gort::Semaphore sem(5);
    sem.acquire(5);
    Parked p;
    std::atomic<bool> got{false};
    Countdown cd(1);
    gort::go([&] {
      p.mark();
      sem.acquire(3);
      got = true;
      cd.done();
    });
    EXPECT_TRUE(p.wait(WaitReason::kSemacquire));
    sem.release(1);
    sem.release(1);
    EXPECT_TRUE(p.now(WaitReason::kSemacquire)) << "woken with only 2 of 3 units free";
    EXPECT_FALSE(got.load());
    sem.release(1);
    cd.wait();
    EXPECT_TRUE(got.load());
    // 3 held by the waiter (never released), 2 by us.
    EXPECT_FALSE(sem.try_acquire(1));
    sem.release(5);
  });
}

// The units in use never exceed the size, with random weights on many Ps.
TEST_P(Semaphore, NeverExceedsItsSize) {
  run_test([] {
    constexpr int64_t kSize = 10;
    constexpr int kGoroutines = 32;
    constexpr int kIters = 300;
    gort::Semaphore sem(kSize);
    std::atomic<int64_t> in_use{0};
    std::atomic<int64_t> max_in_use{0};
    std::atomic<int> over{0};
    Countdown cd(kGoroutines);
    for (int g = 0; g < kGoroutines; g++) {
      gort::go([&, g] {
        uint32_t x = static_cast<uint32_t>(g) * 2654435761u + 1;
        for (int i = 0; i < kIters; i++) {
          x = x * 1664525u + 1013904223u;
          int64_t w = 1 + (x >> 16) % 4;
          sem.acquire(w);
          int64_t now = in_use.fetch_add(w) + w;
          if (now > kSize) over++;
          int64_t m = max_in_use.load();
          while (now > m && !max_in_use.compare_exchange_weak(m, now)) {
          }
          if (i % 4 == 0) gort::yield();
          in_use.fetch_sub(w);
          sem.release(w);
        }
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(over.load(), 0);
    EXPECT_LE(max_in_use.load(), kSize);
    EXPECT_TRUE(sem.try_acquire(kSize)) << "units were lost";
  });
}

// Waiters are served in order: a large request at the head is not overtaken
// by a smaller one behind it that would fit.
TEST_P(Semaphore, WaitersAreServedInOrder) {
  run_test([] {
    gort::Semaphore sem(2);
    sem.acquire(2);
    gort::Mutex log_mu;
    std::vector<std::string> log;
    auto note = [&](const char* s) {
      std::lock_guard g(log_mu);
      log.emplace_back(s);
    };
    Parked large, small;
    Countdown cd(2);
    gort::go([&] {
      large.mark();
      sem.acquire(2);
      note("large");
      sem.release(2);
      cd.done();
    });
    EXPECT_TRUE(large.wait(WaitReason::kSemacquire));
    gort::go([&] {
      small.mark();
      sem.acquire(1);
      note("small");
      sem.release(1);
      cd.done();
    });
    EXPECT_TRUE(small.wait(WaitReason::kSemacquire));
    sem.release(1);  // one unit free: fits the small request, not the large one
    EXPECT_TRUE(small.now(WaitReason::kSemacquire)) << "the small request overtook the large one";
    bool overtook = sem.try_acquire(1);
    EXPECT_FALSE(overtook) << "try_acquire overtook queued waiters";
    if (overtook) sem.release(1);
    note("release");
    sem.release(1);
    cd.wait();
    EXPECT_EQ(log, (std::vector<std::string>{"release", "large", "small"}));
    EXPECT_TRUE(sem.try_acquire(2));
  });
}

// x/sync's fairness property under load: goroutines keep taking and giving
// back single units; a request for the whole semaphore still gets it.
// Without FIFO order the stream of small requests could keep it out forever;
// bounded: the small ones give up after 20 s, which fails the test.
TEST_P(Semaphore, LargeRequestNotStarvedByStreamOfSmallOnes) {
  run_test([] {
    constexpr int64_t kSize = 4;
    constexpr int kSmall = 8;
    gort::Semaphore sem(kSize);
    std::atomic<bool> large_done{false};
    std::atomic<bool> gave_up{false};
    std::atomic<int64_t> small_rounds{0};
    Countdown cd(kSmall + 1);
    auto deadline = Clock::now() + std::chrono::seconds(20);
    for (int i = 0; i < kSmall; i++) {
      gort::go([&] {
        while (!large_done.load()) {
          if (Clock::now() > deadline) {
            gave_up = true;
            break;
          }
          sem.acquire(1);
          small_rounds++;
          gort::yield();
          sem.release(1);
        }
        cd.done();
      });
    }
    gort::go([&] {
      eventually([&] { return small_rounds.load() > 100; });
      sem.acquire(kSize);
      large_done = true;
      sem.release(kSize);
      cd.done();
    });
    cd.wait();
    EXPECT_FALSE(gave_up.load()) << "the large request starved (" << small_rounds.load() << " small rounds)";
    EXPECT_TRUE(large_done.load());
  });
}

TEST_P(Semaphore, TryAcquire) {
  run_test([] {
    gort::Semaphore sem(3);
    EXPECT_TRUE(sem.try_acquire(2));
    EXPECT_FALSE(sem.try_acquire(2));
    EXPECT_TRUE(sem.try_acquire(1));
    EXPECT_FALSE(sem.try_acquire(1));
    sem.release(3);
    EXPECT_FALSE(sem.try_acquire(4)) << "more than the size";
    EXPECT_TRUE(sem.try_acquire(3));
    sem.release(3);
  });
}

TEST_P(Semaphore, ReleasedMoreThanHeldPanics) {
  run_test([] {
    gort::Semaphore sem(3);
    EXPECT_EQ(panic_message([&] { sem.release(1); }), "semaphore: released more than held");
    sem.acquire(2);
    EXPECT_EQ(panic_message([&] { sem.release(3); }), "semaphore: released more than held");
    // The failed release changed nothing: 2 are still held.
    EXPECT_TRUE(sem.try_acquire(1));
    EXPECT_FALSE(sem.try_acquire(1));
    sem.release(3);
    EXPECT_TRUE(sem.try_acquire(3));
    sem.release(3);
  });
}

// A request larger than the size can never be met: it blocks forever (as
// x/sync's Acquire with a context that is never done) without holding up
// anyone else.
TEST_P(Semaphore, ImpossibleRequestBlocksWithoutBlockingOthers) {
  run_test(
      [] {
        static gort::Semaphore sem(2);  // outlives the abandoned waiter
        Parked p;
        std::atomic<bool> returned{false};
        gort::go([&] {
          p.mark();
          sem.acquire(3);
          returned = true;
        });
        EXPECT_TRUE(p.wait(WaitReason::kSemacquire));
        EXPECT_TRUE(sem.try_acquire(2));
        sem.release(2);
        sem.acquire(1);
        sem.release(1);
        EXPECT_FALSE(returned.load());
        EXPECT_TRUE(p.now(WaitReason::kSemacquire));
      },
      /*all_exit=*/false);
}

TEST_P(Semaphore, PlainThreadsAndGoroutines) {
  run_test([] {
    KeepAwake awake;
    gort::Semaphore sem(2);
    std::atomic<int> in_use{0}, over{0};
    auto body = [&] {
      for (int i = 0; i < 500; i++) {
        sem.acquire(1);
        if (in_use.fetch_add(1) + 1 > 2) over++;
        if (gort::in_goroutine()) gort::yield(); else std::this_thread::yield();
        in_use.fetch_sub(1);
        sem.release(1);
      }
    };
    gort::test::on_threads_and_goroutines(body);
    EXPECT_EQ(over.load(), 0);
    EXPECT_TRUE(sem.try_acquire(2));
  });
}

// A plain thread's request queues like a goroutine's (gmp/sudog.hpp): a
// smaller request that comes after it does not overtake it.
TEST_P(Semaphore, PlainThreadKeepsItsPlaceInTheQueue) {
  run_test([] {
    gort::Semaphore sem(2);
    sem.acquire(2);
    std::atomic<int> got{0};  // who got units first: 1 the thread, 2 the goroutine
    std::atomic<bool> thread_has{false};
    std::thread t([&] {
      sem.acquire(2);
      int none = 0;
      got.compare_exchange_strong(none, 1);
      thread_has = true;
    });
    // Nothing to observe the thread's queueing with but time: give it a
    // moment, then a goroutine asks for 1 unit.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Countdown done(1);
    gort::go([&] {
      sem.acquire(1);
      int none = 0;
      got.compare_exchange_strong(none, 2);
      sem.release(1);
      done.done();
    });
    gort::sleep(absl::Milliseconds(20));
    sem.release(1);  // 1 free: the goroutine's request would fit, the head's does not
    gort::sleep(absl::Milliseconds(20));
    EXPECT_EQ(got.load(), 0) << "a request behind the thread's was served first";
    sem.release(1);  // 2 free: the thread, then the goroutine
    EXPECT_TRUE(eventually([&] { return thread_has.load(); }));
    t.join();
    sem.release(2);
    done.wait();
    EXPECT_EQ(got.load(), 1);
    EXPECT_TRUE(sem.try_acquire(2));
  });
}

TEST_P(Semaphore, CtxAcquireTakesFreeUnitsAndWaitsForReleases) {
  run_test([] {
    gort::Semaphore sem(3);
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    EXPECT_TRUE(sem.acquire(ctx, 2).ok());
    EXPECT_TRUE(sem.acquire(ctx).ok());
    EXPECT_FALSE(sem.try_acquire(1));
    Parked p;
    std::atomic<bool> got{false};
    Countdown cd(1);
    gort::go([&, ctx = ctx] {
      p.mark();
      EXPECT_TRUE(sem.acquire(ctx, 2).ok());
      got = true;
      cd.done();
    });
    EXPECT_TRUE(p.wait(WaitReason::kSelect));
    sem.release(1);
    EXPECT_FALSE(got.load()) << "granted 2 units with 1 free";
    sem.release(1);
    cd.wait();
    EXPECT_TRUE(got.load());
    EXPECT_FALSE(sem.try_acquire(2)) << "the 2 units were not taken";
    sem.release(3);
    EXPECT_TRUE(sem.try_acquire(3));
    cancel();
  });
}

TEST_P(Semaphore, CtxAlreadyDoneFailsEvenWithFreeUnits) {
  run_test([] {
    gort::Semaphore sem(2);
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    cancel();
    absl::Status s = sem.acquire(ctx, 1);
    EXPECT_EQ(s, ctx.err());
    EXPECT_EQ(s.message(), "context canceled");
    EXPECT_TRUE(sem.try_acquire(2)) << "a failed acquire kept units";
    EXPECT_THROW((void)sem.acquire(gort::background(), -1), gort::panic_error);
  });
}

TEST_P(Semaphore, CtxTimeoutWhileQueuedHoldsNothing) {
  run_test([] {
    gort::Semaphore sem(2);
    sem.acquire(2);
    auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(20));
    absl::Status s = sem.acquire(ctx, 1);
    EXPECT_EQ(s, ctx.err());
    EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
    sem.release(2);
    EXPECT_TRUE(sem.try_acquire(2)) << "the timed-out waiter kept units or stayed queued";
    cancel();
  });
}

// A cancelled waiter at the head lets the smaller requests queued behind it
// through at once (they were only waiting because of FIFO order).
TEST_P(Semaphore, CancelledHeadLetsTheNextThrough) {
  run_test([] {
    gort::Semaphore sem(3);
    sem.acquire(2);  // one unit free
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    Parked big, small;
    std::atomic<int> small_got{0};
    absl::Status big_status;
    Countdown cd(2);
    gort::go([&, ctx = ctx] {
      big.mark();
      big_status = sem.acquire(ctx, 3);
      cd.done();
    });
    EXPECT_TRUE(big.wait(WaitReason::kSelect));
    gort::go([&] {
      small.mark();
      sem.acquire(1);
      small_got = 1;
      cd.done();
    });
    EXPECT_TRUE(small.wait(WaitReason::kSemacquire)) << "the small request overtook the queued large one";
    cancel();
    cd.wait();
    EXPECT_EQ(small_got.load(), 1);
    EXPECT_EQ(big_status, absl::CancelledError("context canceled"));
    EXPECT_FALSE(sem.try_acquire(1));
    sem.release(3);
    EXPECT_TRUE(sem.try_acquire(3));
  });
}

TEST_P(Semaphore, CtxImpossibleRequestWaitsForCtxWithoutBlockingOthers) {
  run_test([] {
    gort::Semaphore sem(2);
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    Parked p;
    absl::Status st;
    Countdown cd(1);
    gort::go([&, ctx = ctx] {
      p.mark();
      st = sem.acquire(ctx, 3);
      cd.done();
    });
    EXPECT_TRUE(p.wait(WaitReason::kChanRecv));
    sem.acquire(2);  // not held up by the doomed request
    sem.release(2);
    cancel();
    cd.wait();
    EXPECT_EQ(st, ctx.err());
    EXPECT_TRUE(sem.try_acquire(2));
  });
}

// Grants racing with cancellations and timeouts on several Ps: the capacity
// is never exceeded, every success is released, and at the end every unit
// is back (no grant is lost to a waiter that left).
TEST_P(Semaphore, CtxStressGrantsRacingWithCancellation) {
  run_test([] {
    constexpr int kWorkers = 24;
    constexpr int kRounds = 300;
    constexpr int64_t kSize = 5;
    gort::Semaphore sem(kSize);
    std::atomic<int64_t> in_use{0}, over{0}, ok{0}, failed{0};
    Countdown cd(kWorkers);
    for (int w = 0; w < kWorkers; w++) {
      gort::go([&, w] {
        uint64_t rng = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(w + 1);
        for (int r = 0; r < kRounds; r++) {
          rng ^= rng << 13;
          rng ^= rng >> 7;
          rng ^= rng << 17;
          int64_t n = static_cast<int64_t>(rng % 3) + 1;
          auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Microseconds(rng % 300));
          if (rng % 7 == 0) cancel();
          absl::Status s = sem.acquire(ctx, n);
          if (s.ok()) {
            if (in_use.fetch_add(n) + n > kSize) over++;
            if (rng % 2) gort::yield();
            in_use.fetch_sub(n);
            sem.release(n);
            ok++;
          } else {
            EXPECT_EQ(s, ctx.err());
            failed++;
          }
          cancel();
        }
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(over.load(), 0);
    EXPECT_GT(ok.load(), 0);
    EXPECT_GT(failed.load(), 0);
    EXPECT_TRUE(sem.try_acquire(kSize)) << "units were lost";
  });
}

}  // namespace
}  // namespace gort_stdlib_test

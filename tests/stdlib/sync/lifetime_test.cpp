// tests/stdlib/sync/lifetime_test.cpp — sync objects may be destroyed by whoever
// sees the operation that let it through, while that operation is still
// returning (gmp/lifetime.hpp): the last done() of a WaitGroup, the unlock
// that hands a Mutex or an RWMutex on, the run that finishes a Once, the
// release that grants a Semaphore to a context-aware acquire. Each round
// destroys the object at the earliest moment the idiom allows; under ASan a
// touch of it after that is reported (the ASan build also widens those
// windows).
#include <memory>

#include "gort/context.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::Countdown;
using gort::test::Parked;
using gort::test::WaitReason;

class Lifetime : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Lifetime);

constexpr int kRounds = gort::test::race_scaled(2000);

// Go's fan-in: the waiter's frame, and the WaitGroup in it, goes as soon as
// wait returns, while the last done() may still be waking it.
TEST_P(Lifetime, WaitGroupGoesAsSoonAsWaitReturns) {
  run_test([] {
    for (int round = 0; round < kRounds; round++) {
      auto wg = std::make_unique<gort::WaitGroup>();
      constexpr int kWorkers = 3;
      wg->add(kWorkers);
      for (int i = 0; i < kWorkers; i++) gort::go([w = wg.get()] { w->done(); });
      wg->wait();
      wg.reset();
    }
  });
}

// Each round: lock a new M, start a goroutine that takes it with `take`,
// lets go with `give` and deletes it, then unlock. Every other round the
// goroutine queues first, so that the unlock has someone to wake; in the
// others it may arrive just as the unlock lets it in.
template <class M, class Take, class Give>
void destroyed_by_whom_unlock_lets_in(Take take, Give give) {
  for (int round = 0; round < kRounds; round++) {
    auto mu = std::make_unique<M>();
    Countdown finished(1);
    mu->lock();
    gort::go([m = mu.get(), &finished, take, give] {
      take(*m);
      give(*m);
      delete m;
      finished.done();
    });
    if (round % 2 == 0) gort::yield();
    mu.release()->unlock();
    finished.wait();
  }
}

// POSIX's rule for mutexes: the last to unlock may destroy it, while the
// goroutine whose unlock let it in is still in unlock (waking it).
TEST_P(Lifetime, MutexGoesWithItsLastUnlock) {
  run_test([] {
    destroyed_by_whom_unlock_lets_in<gort::Mutex>([](gort::Mutex& m) { m.lock(); },
                                                  [](gort::Mutex& m) { m.unlock(); });
  });
}

// The same for an RWMutex, whoever the writer's unlock lets in: a reader
// or the next writer.
TEST_P(Lifetime, RWMutexGoesWithTheUnlockThatLetsAReaderIn) {
  run_test([] {
    destroyed_by_whom_unlock_lets_in<gort::RWMutex>([](gort::RWMutex& m) { m.lock_shared(); },
                                                    [](gort::RWMutex& m) { m.unlock_shared(); });
  });
}

TEST_P(Lifetime, RWMutexGoesWithTheUnlockThatLetsAWriterIn) {
  run_test([] {
    destroyed_by_whom_unlock_lets_in<gort::RWMutex>([](gort::RWMutex& m) { m.lock(); },
                                                    [](gort::RWMutex& m) { m.unlock(); });
  });
}

// Every caller but the one that runs f has returned; the last of them sees
// it done and destroys it while the run is still finishing.
TEST_P(Lifetime, OnceGoesWhenSeenDone) {
  run_test([] {
    for (int round = 0; round < kRounds; round++) {
      auto* once = new gort::Once;
      Countdown ran(1);
      gort::go([once, &ran] {
        once->call([&ran] { ran.done(); });
      });
      ran.wait();
      // f has returned: wait until the Once says so, then destroy it.
      while (!once->done()) gort::yield();
      delete once;
    }
  });
}

// golang.org/x/sync's idiom: acquiring every unit waits for the workers,
// and then the semaphore goes, while the release that granted the last
// units may still hold its lock.
TEST_P(Lifetime, SemaphoreGoesAfterAContextAcquireIsGranted) {
  run_test([] {
    for (int round = 0; round < kRounds / 4; round++) {
      auto* sem = new gort::Semaphore(2);
      ASSERT_TRUE(sem->acquire(gort::background(), 2).ok());
      Countdown done(1);
      Parked parked;
      gort::go([sem, &done, &parked] {
        parked.mark();
        EXPECT_TRUE(sem->acquire(gort::background(), 2).ok());
        delete sem;
        done.done();
      });
      EXPECT_TRUE(parked.wait(WaitReason::kSelect));
      sem->release(2);
      done.wait();
    }
  });
}

}  // namespace
}  // namespace gort_stdlib_test

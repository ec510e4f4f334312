// tests/gmp/os/note_test.cpp — Note (gmp/os/note.hpp): one-shot sleep and
// wake-up for runtime threads, with a timeout; wakeup() twice is a bug,
// kick() may come several times.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "gmp/os/clock.hpp"
#include "gmp/os/note.hpp"

namespace gort::internal {
namespace {

TEST(Note, WakeupBeforeSleepReturnsAtOnce) {
  Note n;
  n.wakeup();
  n.sleep();
  EXPECT_TRUE(n.is_set());
  n.clear();
  EXPECT_FALSE(n.is_set());
}

TEST(Note, SleepForTimesOutUnwoken) {
  Note n;
  int64_t t0 = nanotime();
  EXPECT_FALSE(n.sleep_for(20 * 1000 * 1000));
  EXPECT_GE(nanotime() - t0, 20 * 1000 * 1000);
}

TEST(Note, WakeupFromAnotherThreadEndsTheSleep) {
  Note n;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n.wakeup();
  });
  EXPECT_TRUE(n.sleep_for(int64_t{30} * 1000 * 1000 * 1000));
  t.join();
}

TEST(Note, KicksFromSeveralWakersAreOneWakeup) {
  for (int round = 0; round < 200; round++) {
    Note n;
    std::atomic<int> go{0};
    std::thread a([&] {
      while (go.load() == 0) {
      }
      n.kick();
    });
    std::thread b([&] {
      while (go.load() == 0) {
      }
      n.kick();
    });
    go.store(1);
    n.sleep();
    a.join();
    b.join();
    EXPECT_TRUE(n.is_set());
    n.kick();  // set already: no fatal error, nothing to wake
  }
}

TEST(NoteDeathTest, SecondWakeupIsAFatalError) {
  EXPECT_EXIT(
      {
        ::alarm(30);
        Note n;
        n.wakeup();
        n.wakeup();
      },
      ::testing::ExitedWithCode(2), "fatal error: notewakeup: double wakeup");
}

}  // namespace
}  // namespace gort::internal

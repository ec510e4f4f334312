// tests/stdlib/sync/synctest_seed_test.cpp — seeded schedules in a synctest
// bubble (gmp/bubble_sched.cpp): the same seed replays the same
// interleaving, different seeds explore different ones, explore() finds a
// planted order bug and names the seed that replays it, and the rules
// (one P, a valid probability, GORT_SCHEDSEED) are enforced.
#include <stdlib.h>

#include <atomic>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gort/chan.hpp"
#include "gort/sync.hpp"
#include "gort/synctest.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"
#include "tests/testing.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::panic_message;
using gort::test::run_checked;

// Four goroutines, five steps each, every step a call that may park (a
// lock, a channel operation, a sleep): the order they ran in, as a string.
std::string interleave() {
  std::string order;
  gort::Mutex mu;
  auto tokens = gort::make_chan<int>(2);
  gort::WaitGroup wg;
  wg.add(4);
  for (int g = 0; g < 4; g++) {
    gort::go([&, g] {
      for (int step = 0; step < 5; step++) {
        switch (step % 3) {
          case 0: tokens.send(g); tokens.recv(); break;
          case 1: gort::sleep(absl::ZeroDuration()); break;
          case 2: gort::go([] {}); break;
        }
        std::lock_guard l(mu);
        order.push_back(static_cast<char>('a' + g));
      }
      wg.done();
    });
  }
  wg.wait();
  return order;
}

TEST(SynctestSeed, SameSeedSameInterleaving) {
  run_checked(1, [] {
    for (uint64_t seed = 1; seed <= 10; seed++) {
      std::string first;
      uint64_t first_hash = 0;
      for (int run = 0; run < 10; run++) {
        std::string order;
        uint64_t hash = 0;
        gort::synctest::test([&] {
          order = interleave();
          hash = gort::synctest::schedule_hash();
        }, {.seed = seed});
        if (run == 0) {
          first = order;
          first_hash = hash;
          EXPECT_NE(hash, 0u);
        } else {
          EXPECT_EQ(order, first) << "seed " << seed << " run " << run;
          EXPECT_EQ(hash, first_hash) << "seed " << seed << " run " << run;
        }
      }
    }
  });
}

TEST(SynctestSeed, SeedsExploreDistinctInterleavings) {
  run_checked(1, [] {
    constexpr int kRuns = 200;
    std::set<std::string> orders;
    std::vector<uint64_t> hashes = gort::synctest::explore([&] { orders.insert(interleave()); }, {.runs = kRuns});
    ASSERT_EQ(hashes.size(), static_cast<size_t>(kRuns));
    std::set<uint64_t> distinct(hashes.begin(), hashes.end());
    EXPECT_GE(distinct.size(), static_cast<size_t>(kRuns * 9 / 10));
    EXPECT_GE(orders.size(), static_cast<size_t>(kRuns * 9 / 10));
  });
}

// A check-then-act bug: two goroutines each take a slot if none is taken,
// with a call that may park between the check and the act. Only some
// orders expose it.
void planted_bug() {
  // Atomic: the bug is the order, not a data race (which the race build
  // would report on its own).
  std::atomic<int> taken{0};
  auto ch = gort::make_chan<int>(1);
  gort::WaitGroup wg;
  wg.add(2);
  for (int i = 0; i < 2; i++) {
    gort::go([&] {
      if (taken == 0) {
        ch.send(1);
        ch.recv();
        taken++;
      }
      wg.done();
    });
  }
  wg.wait();
  if (taken != 1) throw std::logic_error("taken twice");
}

TEST(SynctestSeed, ExploreFindsAPlantedBugAndTheSeedReplaysIt) {
  run_checked(1, [] {
    testing::internal::CaptureStderr();
    std::string what;
    try {
      gort::synctest::explore(planted_bug, {.runs = 500});
    } catch (const std::logic_error& e) {
      what = e.what();
    }
    std::string err = testing::internal::GetCapturedStderr();
    ASSERT_EQ(what, "taken twice") << "500 seeds never exposed the bug";
    auto at = err.find("synctest: schedule seed ");
    ASSERT_NE(at, std::string::npos) << err;
    uint64_t seed = std::stoull(err.substr(at + 24));
    EXPECT_NE(err.find("(GORT_SCHEDSEED=" + std::to_string(seed) + " replays it)"), std::string::npos) << err;
    for (int i = 0; i < 5; i++) {
      testing::internal::CaptureStderr();
      EXPECT_THROW(gort::synctest::test(planted_bug, {.seed = seed}), std::logic_error);
      testing::internal::GetCapturedStderr();
    }
  });
}

TEST(SynctestSeed, EnvironmentSeedIsTheOptionsSeed) {
  run_checked(1, [] {
    uint64_t by_option = 0, by_env = 0;
    gort::synctest::test([&] {
      interleave();
      by_option = gort::synctest::schedule_hash();
    }, {.seed = 77});
    setenv("GORT_SCHEDSEED", "77", 1);
    gort::synctest::test([&] {
      interleave();
      by_env = gort::synctest::schedule_hash();
    });
    setenv("GORT_SCHEDSEED", "seventy", 1);
    std::string bad = panic_message([] { gort::synctest::test([] {}); });
    unsetenv("GORT_SCHEDSEED");
    EXPECT_EQ(by_env, by_option);
    EXPECT_EQ(bad, "synctest: GORT_SCHEDSEED=seventy is not a number");
  });
}

TEST(SynctestSeed, NeedsOneP) {
  run_checked(2, [] {
    EXPECT_EQ(panic_message([] { gort::synctest::test([] {}, {.seed = 1}); }),
              "synctest: a seeded bubble needs one P (Config::procs = 1), not 2");
    EXPECT_EQ(gort::synctest::schedule_hash(), 0u);
  });
}

TEST(SynctestSeed, BadYieldProbability) {
  run_checked(1, [] {
    EXPECT_THROW(gort::synctest::test([] {}, {.seed = 1, .yield_probability = 1.5}), gort::panic_error);
  });
}

// Time still works in a seeded bubble, and a seeded deadlock names the
// seed.
TEST(SynctestSeed, FakeClockAndDeadlockInASeededBubble) {
  run_checked(1, [] {
    gort::synctest::test([] {
      absl::Time t0 = gort::now();
      gort::WaitGroup wg;
      wg.add(3);
      for (int i = 1; i <= 3; i++) {
        gort::go([&, i] {
          gort::sleep(absl::Seconds(i));
          wg.done();
        });
      }
      wg.wait();
      EXPECT_EQ(gort::now() - t0, absl::Seconds(3));
    }, {.seed = 5});
    testing::internal::CaptureStderr();
    // A WaitGroup, not a channel: see synctest_test.cpp's deadlock tests.
    EXPECT_THROW(gort::synctest::test([] {
      auto wg = std::make_shared<gort::WaitGroup>();
      wg->add(1);
      wg->wait();
    }, {.seed = 6}), gort::panic_error);
    EXPECT_NE(testing::internal::GetCapturedStderr().find("schedule seed 6"), std::string::npos);
  }, /*all_exit=*/false);
}

}  // namespace
}  // namespace gort_stdlib_test

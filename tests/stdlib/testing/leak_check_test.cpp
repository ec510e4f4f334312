// tests/stdlib/testing/leak_check_test.cpp — gort::testing::LeakCheck
// (stdlib/testing/leak_check.cpp), through run() and on its own: a
// goroutine, an OS thread and an fd left behind each fail the test with a
// report that names them; a body that cleans up passes; inside a run only
// what is new since the snapshot counts.
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "gort/chan.hpp"
#include "gort/runtime.hpp"
#include "gort/sync.hpp"
#include "gort/testing.hpp"
#include "tests/stdlib/testing/failures.hpp"

namespace gort_testing_test {
namespace {

// Leftovers are reported after 200 ms instead of 10 s.
gort::testing::RunOptions quick() {
  gort::testing::RunOptions options;
  options.leaks.timeout = absl::Milliseconds(200);
  return options;
}

std::atomic<int> received{0};

// Parked on `ch` until it is closed; not a tail call, so that its frame
// stays on the goroutine's stack for the ignore list to see.
__attribute__((noinline)) void parked_in_library(gort::Chan<int> ch) {
  if (ch.recv()) received++;
  received++;
}

TEST(LeakCheck, PassesABodyThatCleansUp) {
  auto clean = [] {
    gort::WaitGroup wg;
    for (int i = 0; i < 8; i++) {
      wg.add(1);
      gort::go([&wg] { wg.done(); });  // still exiting when wait returns
    }
    wg.wait();
    int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ::close(fd);
    std::thread([] {}).join();
  };
  auto failures = failures_of([&] { gort::testing::run(clean, quick()); });
  for (const auto& f : failures) ADD_FAILURE() << f.message();
}

TEST(LeakCheck, CatchesAGoroutineAndShowsItsTraceback) {
  auto leaky = [] {
    auto ch = gort::make_chan<int>();
    gort::go([ch] { (void)ch.recv(); });  // parked for good
  };
  auto failures = failures_of([&] { gort::testing::run(leaky, quick()); });
  ASSERT_EQ(failures.size(), 1u);
  const std::string msg = failures[0].message();
  EXPECT_TRUE(failures[0].nonfatally_failed());
  EXPECT_TRUE(contains(msg, "1 goroutine leaked")) << msg;
  EXPECT_TRUE(contains(msg, " [chan receive]:\n")) << msg;
  EXPECT_FALSE(contains(msg, "\ngoroutine 1 [")) << "the body's own goroutine is no leak:\n" << msg;
  EXPECT_TRUE(contains(failures[0].file_name(), "leak_check_test.cpp")) << failures[0].file_name();
}

TEST(LeakCheck, CatchesAThreadAndNamesIt) {
  std::atomic<bool> release{false};
  std::thread sleeper;
  auto leaky = [&] {
    sleeper = std::thread([&] {
      pthread_setname_np(pthread_self(), "leaky-sleeper");
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  };
  auto failures = failures_of([&] { gort::testing::run(leaky, quick()); });
  release = true;
  sleeper.join();
  ASSERT_EQ(failures.size(), 1u);
  const std::string msg = failures[0].message();
  EXPECT_TRUE(contains(msg, "1 OS thread leaked")) << msg;
  EXPECT_TRUE(contains(msg, "\"leaky-sleeper\"")) << msg;
}

TEST(LeakCheck, CatchesAnFdAndSaysWhereItPoints) {
  int fd = -1;
  auto leaky = [&] { fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC); };
  EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS(gort::testing::run(leaky, quick()), "1 fd leaked");
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto failures = failures_of([&] { gort::testing::run(leaky, quick()); });
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_TRUE(contains(failures[0].message(), "fd " + std::to_string(fd) + " -> /dev/null")) << failures[0].message();
  ::close(fd);
}

TEST(LeakCheck, ChecksOnlyWhatTheOptionsAsk) {
  int fd = -1;
  gort::testing::RunOptions options = quick();
  options.leaks.fds = false;
  auto failures = failures_of([&] { gort::testing::run([&] { fd = ::open("/dev/null", O_RDONLY); }, options); });
  EXPECT_TRUE(failures.empty());
  ::close(fd);
}

TEST(LeakCheck, CountsFdsAndThreads) {
  int fds = gort::testing::count_fds();
  int threads = gort::testing::count_threads();
  EXPECT_GT(fds, 0);
  EXPECT_GT(threads, 0);
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(gort::testing::count_fds(), fds + 1);
  ::close(fd);
  EXPECT_EQ(gort::testing::settled_fd_count(), fds);
  // A thread an earlier test joined may have been listed still.
  EXPECT_LE(gort::testing::settled_thread_count(), threads);
}

// Inside a run: goroutines alive at the snapshot are not leaks; those
// started since are, unless a frame of theirs is on the ignore list.
GORT_TEST(LeakCheck, InsideARunOnlyNewGoroutinesCount) {
  gort::testing::LeakOptions options;
  options.timeout = absl::Milliseconds(100);
  auto before = gort::make_chan<int>();
  gort::go([before] { (void)before.recv(); });
  gort::testing::LeakCheck check(options);
  EXPECT_TRUE(check.check_goroutines());
  EXPECT_TRUE(check.check_threads());

  auto after = gort::make_chan<int>();
  std::atomic<int64_t> id{0};
  gort::go([after, &id] {
    id = gort::goroutine_id();
    (void)after.recv();
  });
  ASSERT_TRUE(gort::testing::eventually([&] { return id.load() != 0; }));
  ::testing::AssertionResult r = check.check_goroutines();
  EXPECT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), "goroutine " + std::to_string(id.load()) + " [")) << r.message();
  EXPECT_FALSE(check.check());

  options.ignore_functions = {"parked_in_library"};
  gort::testing::LeakCheck ignoring(options);
  auto library = gort::make_chan<int>();
  gort::go(parked_in_library, library);
  EXPECT_TRUE(gort::testing::wait_for_state(
      [](const gort::testing::Goroutine& g) { return g.has_frame("parked_in_library"); }, "chan receive"));
  EXPECT_TRUE(ignoring.check_goroutines());

  // Let them all go, for GORT_TEST's own check.
  before.close();
  after.close();
  library.close();
}

}  // namespace
}  // namespace gort_testing_test

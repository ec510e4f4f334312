// tests/stdlib/testing/goroutines_test.cpp — reading tracebacks and
// waiting on goroutine states (stdlib/testing/goroutines.cpp):
// parse_goroutines on a dump of every shape the runtime prints, and
// wait_for_state succeeding and timing out with what it saw.
#include <atomic>
#include <string>
#include <vector>

#include "gort/chan.hpp"
#include "gort/runtime.hpp"
#include "gort/testing.hpp"
#include "tests/stdlib/testing/failures.hpp"

namespace gort_testing_test {
namespace {

using gort::testing::Goroutine;

TEST(ParseGoroutines, ReadsIdsStatesAndBlocks) {
  const std::string dump =
      "panic: boom\n"
      "\n"
      "goroutine 1 [running]:\n"
      "main()\n"
      "\t/src/a.cpp:3 +0x1f\n"
      "\n"
      "goroutine 7 gp=0x7f0012 m=nil [chan receive, 3 minutes]:\n"
      "worker(int)\n"
      "\t/src/a.cpp:9\n"
      "created by main in goroutine 1\n"
      "\t/src/a.cpp:4 +0x2a\n"
      "\n"
      "goroutine 12 [select (no cases)]:\n"
      "idle()\n"
      "\t/src/a.cpp:20\n";
  std::vector<Goroutine> gs = gort::testing::parse_goroutines(dump);
  ASSERT_EQ(gs.size(), 3u);
  EXPECT_EQ(gs[0].id, 1);
  EXPECT_EQ(gs[0].state, "running");
  EXPECT_EQ(gs[1].id, 7);
  EXPECT_EQ(gs[1].state, "chan receive");
  EXPECT_EQ(gs[1].text,
            "goroutine 7 gp=0x7f0012 m=nil [chan receive, 3 minutes]:\nworker(int)\n\t/src/a.cpp:9\n"
            "created by main in goroutine 1\n\t/src/a.cpp:4 +0x2a\n");
  EXPECT_EQ(gs[2].id, 12);
  EXPECT_EQ(gs[2].state, "select (no cases)");
  EXPECT_EQ(gs[2].text, "goroutine 12 [select (no cases)]:\nidle()\n\t/src/a.cpp:20\n");
  EXPECT_TRUE(gs[1].has_frame("worker"));
  EXPECT_FALSE(gs[1].has_frame("main")) << "\"created by\" names no frame of the goroutine";
  EXPECT_FALSE(gs[1].has_frame("a.cpp")) << "locations are no frames";
  EXPECT_TRUE(gs[0].has_frame("main"));
}

TEST(ParseGoroutines, SkipsWhatIsNoHeader) {
  EXPECT_TRUE(gort::testing::parse_goroutines("").empty());
  EXPECT_TRUE(gort::testing::parse_goroutines("the goroutine 3 [x]:\ngoroutine x [y]:\ngoroutine 4[z]:\n").empty());
}

TEST(WaitForState, NeedsARun) {
  ::testing::AssertionResult r = gort::testing::wait_for_state(1, "running", absl::Milliseconds(10));
  EXPECT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), "not active")) << r.message();
}

// A goroutine parked on a receive (of its own handle of the channel, which
// outlives this one), and its id.
struct Receiver {
  gort::Chan<int> ch = gort::make_chan<int>();
  std::atomic<int64_t> id{0};

  Receiver() {
    gort::go([this, ch = ch] {
      id = gort::goroutine_id();
      (void)ch.recv();
    });
    EXPECT_TRUE(gort::testing::eventually([&] { return id.load() != 0; }));
  }
  ~Receiver() { ch.close(); }
};

GORT_TEST(WaitForState, SeesAGoroutineParkOnAChannel) {
  Receiver r;
  EXPECT_TRUE(gort::testing::wait_for_state(r.id.load(), "chan receive"));
}

GORT_TEST(WaitForState, TimesOutWithWhatItSaw) {
  Receiver r;
  ASSERT_TRUE(gort::testing::wait_for_state(r.id.load(), "chan receive"));
  ::testing::AssertionResult wrong = gort::testing::wait_for_state(r.id.load(), "sleep", absl::Milliseconds(50));
  EXPECT_FALSE(wrong);
  const std::string id = std::to_string(r.id.load());
  EXPECT_TRUE(contains(wrong.message(), "goroutine " + id + " is in state \"chan receive\", not \"sleep\", after 50ms"))
      << wrong.message();
  EXPECT_TRUE(contains(wrong.message(), "\ngoroutine " + id + " [chan receive]:\n")) << "the last dump:\n"
                                                                                   << wrong.message();

  ::testing::AssertionResult gone = gort::testing::wait_for_state(1 << 30, "chan receive", absl::Milliseconds(10));
  EXPECT_FALSE(gone);
  EXPECT_TRUE(contains(gone.message(), "does not exist")) << gone.message();
}

std::atomic<int> woken{0};

__attribute__((noinline)) void waiting_worker(gort::Chan<int> ch) {
  if (!ch.recv()) woken++;
  woken++;
}

GORT_TEST(WaitForState, CountsTheGoroutinesAPredicateChooses) {
  auto ch = gort::make_chan<int>();
  auto worker = [](const Goroutine& g) { return g.has_frame("waiting_worker"); };
  for (int i = 0; i < 3; i++) gort::go(waiting_worker, ch);
  EXPECT_TRUE(gort::testing::wait_for_state(worker, "chan receive", 3));
  ::testing::AssertionResult four = gort::testing::wait_for_state(worker, "chan receive", 4, absl::Milliseconds(20));
  EXPECT_FALSE(four);
  EXPECT_TRUE(contains(four.message(), "wanted 4 of the goroutines asked about in state \"chan receive\"; after 20ms, 3 of the 3 are"))
      << four.message();
  ch.close();
}

}  // namespace
}  // namespace gort_testing_test

// tests/stdlib/pprof/labels_test.cpp — profile labels (stdlib/pprof/labels.cpp,
// Go's pprof.Do / Labels / SetGoroutineLabels): nesting, a key set twice,
// restoring after a throw, inheritance by spawned goroutines, replacing a
// goroutine's set, and plain threads (no labels).
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "gort/pprof.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_pprof_test {
namespace {

using gort::pprof::LabelSet;

class Labels : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Labels);

TEST_P(Labels, NestAndRestore) {
  run_test([] {
    EXPECT_TRUE(gort::pprof::labels().empty());
    gort::pprof::with_labels({{"a", "1"}}, [] {
      EXPECT_EQ(gort::pprof::labels(), (LabelSet{{"a", "1"}}));
      // The inner set adds b and gives a a new value; sorted by key.
      gort::pprof::with_labels({{"b", "2"}, {"a", "3"}}, [] {
        EXPECT_EQ(gort::pprof::labels(), (LabelSet{{"a", "3"}, {"b", "2"}}));
        EXPECT_EQ(gort::pprof::label("a"), std::optional<std::string>("3"));
        EXPECT_EQ(gort::pprof::label("c"), std::nullopt);
      });
      EXPECT_EQ(gort::pprof::labels(), (LabelSet{{"a", "1"}}));
    });
    EXPECT_TRUE(gort::pprof::labels().empty());
  });
}

TEST_P(Labels, KeyGivenTwiceKeepsItsLastValue) {
  run_test([] {
    gort::pprof::with_labels({{"k", "first"}, {"k", "last"}},
                             [] { EXPECT_EQ(gort::pprof::labels(), (LabelSet{{"k", "last"}})); });
  });
}

TEST_P(Labels, ReturnsWhatFReturns) {
  run_test([] {
    int x = 7;
    int& r = gort::pprof::with_labels({{"k", "v"}}, [&x]() -> int& { return x; });
    EXPECT_EQ(&r, &x);
    EXPECT_EQ(gort::pprof::with_labels({{"k", "v"}}, [] { return 42; }), 42);
  });
}

TEST_P(Labels, RestoredWhenFThrows) {
  run_test([] {
    gort::pprof::with_labels({{"outer", "1"}}, [] {
      try {
        gort::pprof::with_labels({{"inner", "2"}}, [] { throw std::runtime_error("boom"); });
      } catch (const std::runtime_error&) {
      }
      EXPECT_EQ(gort::pprof::labels(), (LabelSet{{"outer", "1"}}));
    });
    EXPECT_TRUE(gort::pprof::labels().empty());
  });
}

// A goroutine started under labels has them for its whole life, after the
// scope that set them ended too; one started later has none.
TEST_P(Labels, SpawnedGoroutinesInherit) {
  run_test([] {
    auto gate = gort::make_chan<int>();
    auto got = gort::make_chan<LabelSet>(2);
    gort::pprof::with_labels({{"worker", "a"}}, [&] {
      gort::go([gate, got] {
        (void)gate.recv();  // the parent's scope has ended meanwhile
        got.send(gort::pprof::labels());
        // And its own children inherit in turn.
        gort::go([got] { got.send(gort::pprof::labels()); });
      });
    });
    gate.send(1);
    EXPECT_EQ(*got.recv(), (LabelSet{{"worker", "a"}}));
    EXPECT_EQ(*got.recv(), (LabelSet{{"worker", "a"}}));
    gort::go([got] { got.send(gort::pprof::labels()); });
    EXPECT_TRUE(got.recv()->empty());
  });
}

TEST_P(Labels, SetGoroutineLabels) {
  run_test([] {
    gort::pprof::set_goroutine_labels({{"k", "v"}});
    EXPECT_EQ(gort::pprof::labels(), (LabelSet{{"k", "v"}}));
    auto got = gort::make_chan<LabelSet>(1);
    gort::go([got] { got.send(gort::pprof::labels()); });
    EXPECT_EQ(*got.recv(), (LabelSet{{"k", "v"}}));
    // Inside with_labels it replaces the set until the scope ends, which
    // restores the set from before the scope.
    gort::pprof::with_labels({{"scope", "1"}}, [] {
      gort::pprof::set_goroutine_labels({{"other", "2"}});
      EXPECT_EQ(gort::pprof::labels(), (LabelSet{{"other", "2"}}));
    });
    EXPECT_EQ(gort::pprof::labels(), (LabelSet{{"k", "v"}}));
    gort::pprof::set_goroutine_labels({});
    EXPECT_TRUE(gort::pprof::labels().empty());
  });
}

// Many goroutines replacing their sets while others read them: each sees
// only its own (the sets are per goroutine, not per thread).
TEST_P(Labels, PerGoroutineNotPerThread) {
  run_test([] {
    constexpr int kGoroutines = 32;
    gort::WaitGroup wg;
    std::atomic<int> wrong{0};
    for (int i = 0; i < kGoroutines; i++) {
      wg.add(1);
      gort::go([&, i] {
        const std::string me = std::to_string(i);
        for (int k = 0; k < 200; k++) {
          gort::pprof::with_labels({{"g", me}}, [&] {
            gort::yield();  // may resume on another thread
            if (gort::pprof::label("g") != me) wrong++;
          });
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(wrong.load(), 0);
  });
}

TEST(LabelsThread, PlainThreadHasNone) {
  std::thread t([] {
    int r = gort::pprof::with_labels({{"k", "v"}}, [] {
      EXPECT_TRUE(gort::pprof::labels().empty());
      return 5;
    });
    EXPECT_EQ(r, 5);
    gort::pprof::set_goroutine_labels({{"k", "v"}});
    EXPECT_TRUE(gort::pprof::labels().empty());
    EXPECT_EQ(gort::pprof::label("k"), std::nullopt);
  });
  t.join();
}

}  // namespace
}  // namespace gort_pprof_test

// tests/preempt/goroutine_local_test.cpp — GoroutineLocal<T>
// (preempt/preempt_api.cpp): one value per goroutine, kept across yields,
// parks and moves between threads, destroyed when the goroutine exits, never
// seen by the next goroutine that reuses the descriptor; per-thread values
// on plain threads. (Survival across asynchronous preemption and migration
// is checked in preempt_test.cpp, PreemptedGoroutineResumesOnAnotherThread...)
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gort/time.hpp"
#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

class GoroutineLocal : public ProcsTest {};
GORT_INSTANTIATE_PROCS(GoroutineLocal);

// Counts its constructions and destructions; remembers who made it.
struct Counted {
  static inline std::atomic<int64_t> made{0};
  static inline std::atomic<int64_t> destroyed{0};
  static void reset() {
    made = 0;
    destroyed = 0;
  }
  Counted() { made++; }
  ~Counted() { destroyed++; }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  int64_t owner = 0;
};

TEST_P(GoroutineLocal, EachGoroutineSeesItsOwnValueAcrossSwitches) {
  gort::GoroutineLocal<int64_t> local;
  std::atomic<int64_t> wrong{0};
  std::atomic<int64_t> moved{0};
  run_test([&] {
    constexpr int kGoroutines = 64;
    Countdown cd(kGoroutines);
    for (int i = 0; i < kGoroutines; i++) {
      gort::go([&, i] {
        if (local.get() != 0) wrong++;  // value-initialised
        local.set(i * 7 + 1);
        internal::M* m0 = current_m();
        for (int k = 0; k < 50; k++) {
          if (k % 10 == 9) {
            gort::sleep(absl::Microseconds(50));
          } else {
            gort::yield();
          }
          if (*local != i * 7 + 1) wrong++;
          (*local) += 0;  // operator* gives a reference to the same object
        }
        if (current_m() != m0) moved++;
        cd.done();
      });
    }
    cd.wait();
    // The main goroutine has its own, untouched.
    EXPECT_EQ(local.get(), 0);
  });
  EXPECT_EQ(wrong.load(), 0);
  if (procs() > 1) {
    std::fprintf(stderr, "[info] %lld of 64 goroutines changed threads\n",
                 static_cast<long long>(moved.load()));
  }
}

TEST_P(GoroutineLocal, ValueIsDestroyedWhenItsGoroutineExits) {
  Counted::reset();
  gort::GoroutineLocal<Counted> local;
  run_test([&] {
    constexpr int kTouching = 100;
    Countdown cd(kTouching + 20);
    for (int i = 0; i < kTouching; i++) {
      gort::go([&, i] {
        local->owner = i;
        gort::yield();
        EXPECT_EQ(local->owner, i);
        cd.done();
      });
    }
    // Goroutines that never touch it construct nothing.
    for (int i = 0; i < 20; i++) gort::go([&] { cd.done(); });
    cd.wait();
    // Destruction happens after the body returns, at goroutine exit.
    expect_goroutines_settle(1);
    EXPECT_EQ(Counted::made.load(), kTouching);
    EXPECT_EQ(Counted::destroyed.load(), kTouching);
  });
  EXPECT_EQ(Counted::made.load(), Counted::destroyed.load());
}

TEST_P(GoroutineLocal, RecycledGoroutineStartsWithAFreshValue) {
  gort::GoroutineLocal<std::string> local;
  std::atomic<int> stale{0};
  run_test([&] {
    // One after another, so that the runtime reuses the same descriptors.
    for (int i = 0; i < 200; i++) {
      Countdown cd(1);
      gort::go([&, i] {
        if (!local->empty()) stale++;
        local.set("goroutine " + std::to_string(i));
        cd.done();
      });
      cd.wait();
    }
  });
  EXPECT_EQ(stale.load(), 0) << "a goroutine saw the value of an earlier one";
}

gort::GoroutineLocal<int>* g_other_local;

struct TouchesOther {
  static inline std::atomic<int64_t> destroyed{0};
  ~TouchesOther() {
    // Reading another local during exit is allowed (it may be re-created
    // and must then be destroyed too).
    (void)g_other_local->get();
    destroyed++;
  }
};

TEST_P(GoroutineLocal, IndependentKeysAndDestructorsThatTouchOtherLocals) {
  Counted::reset();
  TouchesOther::destroyed = 0;
  gort::GoroutineLocal<int> a, b;
  gort::GoroutineLocal<int> other;
  g_other_local = &other;
  gort::GoroutineLocal<TouchesOther> toucher;
  gort::GoroutineLocal<Counted> counted;
  run_test([&] {
    Countdown cd(10);
    for (int i = 0; i < 10; i++) {
      gort::go([&, i] {
        a.set(i);
        b.set(-i);
        EXPECT_EQ(a.get(), i);
        EXPECT_EQ(b.get(), -i);
        other.set(5);
        (void)toucher.get();
        (void)counted.get();
        cd.done();
      });
    }
    cd.wait();
    expect_goroutines_settle(1);
  });
  EXPECT_EQ(TouchesOther::destroyed.load(), 10);
  EXPECT_EQ(Counted::made.load(), 10);
  EXPECT_EQ(Counted::destroyed.load(), 10);
}

TEST_P(GoroutineLocal, PlainThreadsFallBackToPerThreadValues) {
  Counted::reset();
  gort::GoroutineLocal<Counted> local;
  gort::GoroutineLocal<int> num;
  auto thread_body = [&](int id, std::atomic<int>* wrong) {
    if (num.get() != 0) (*wrong)++;
    num.set(id);
    local->owner = id;
    std::this_thread::yield();
    if (num.get() != id || local->owner != id) (*wrong)++;
  };
  std::atomic<int> wrong{0};
  // Outside the runtime.
  {
    std::vector<std::thread> ts;
    for (int i = 1; i <= 4; i++) ts.emplace_back(thread_body, i, &wrong);
    for (auto& t : ts) t.join();
  }
  EXPECT_EQ(Counted::made.load(), 4);
  EXPECT_EQ(Counted::destroyed.load(), 4) << "values of exited threads were not destroyed";
  // While it runs, beside goroutines using the same locals.
  run_test([&] {
    std::vector<std::thread> ts;
    for (int i = 5; i <= 8; i++) ts.emplace_back(thread_body, i, &wrong);
    Countdown cd(4);
    for (int i = 0; i < 4; i++) {
      gort::go([&, i] {
        num.set(100 + i);
        gort::yield();
        if (num.get() != 100 + i) wrong++;
        cd.done();
      });
    }
    cd.wait();
    for (auto& t : ts) t.join();
  });
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(Counted::made.load(), 8);
  EXPECT_EQ(Counted::destroyed.load(), 8);
}

}  // namespace
}  // namespace gort::test

// tests/gmp/stackclass_test.cpp — stack size classes (gort::go with
// GoOptions; gmp/stackclass.cpp, the free lists in gmp/newproc.cpp): each
// class's goroutines get stacks of its size, a G is only ever reborn on a
// stack of its own class (across Ps, set_procs and plain threads), a large
// stack holds megabytes of locals, an overflow of any class is Go's report,
// the stats count every class and dead large stacks are released, and
// misuse panics. Asynchronous preemption on small stacks is in
// tests/preempt/preempt_test.cpp.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gort/time.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using gort::GoOptions;
using gort::StackSize;
using internal::kGSize;

constexpr int kClasses = internal::kStackClasses;



// The whole slot of each class (its G at the top included): the run's
// Config::stack_size for the default.
std::vector<size_t> class_sizes() {
  return {gort::runtime_stats().stack_size, gort::kSmallStackSize, gort::kLargeStackSize};
}

StackSize class_size(int c) { return static_cast<StackSize>(c); }

// Whether the calling goroutine's G and stack are those of class c, whose
// slot is `size` bytes: the G at the top of a stack of that size, which
// find_stack names, with the caller's frame in it.
__attribute__((noinline)) bool on_stack_of_class(int c, size_t size) {
  G* g = internal::getg();
  volatile char local = 0;
  auto* here = const_cast<char*>(&local);
  internal::StackSlot slot;
  return g != nullptr && g->stack_class == c && static_cast<size_t>(g->stack_hi - g->stack_lo) == size - kGSize &&
         g->stack_hi == reinterpret_cast<char*>(g) && here >= g->stack_lo && here < g->stack_hi &&
         internal::find_stack(here, &slot) && !slot.guard && slot.lo == g->stack_lo && slot.size == size;
}

// Uses about `bytes` of stack below the caller, 1 KiB a frame.
__attribute__((noinline)) size_t use_stack(size_t bytes) {
  volatile char buf[1024];
  buf[0] = 1;
  buf[sizeof buf - 1] = 2;
  if (bytes <= sizeof buf) return buf[0];
  return use_stack(bytes - sizeof buf) + buf[sizeof buf - 1];
}

// Spawns with the plain go for class 0 every other time, so that both
// entry points are used.
template <class F>
void go_in_class(int c, int i, F f) {
  if (c == 0 && i % 2 == 0) {
    gort::go(std::move(f));
  } else {
    gort::go(GoOptions{.stack = class_size(c)}, std::move(f));
  }
}

// ---- each class's stack ----

// With a Config::stack_size of its own: the default follows it, the small
// and large classes keep their sizes, and find_stack (the fault handler's
// and the tracebacks' lookup) knows every pool.
TEST(StackClass, EachClassHasItsSizeAndFindStackKnowsIt) {
  gort::Config cfg;
  cfg.procs = 2;
  cfg.stack_size = 128 * 1024;
  run_checked(cfg, [] {
    const std::vector<size_t> sizes = class_sizes();
    EXPECT_EQ(sizes[0], 128u * 1024);
    std::atomic<int> bad{0};
    Countdown cd(kClasses);
    for (int c = 0; c < kClasses; c++) {
      go_in_class(c, 0, [&, c] {
        if (!on_stack_of_class(c, sizes[static_cast<size_t>(c)])) bad.fetch_add(1);
        gort::yield();
        // Still so after a switch (maybe on another M).
        if (!on_stack_of_class(c, sizes[static_cast<size_t>(c)])) bad.fetch_add(1);
        cd.done();
      });
    }
    cd.wait();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_TRUE(on_stack_of_class(0, sizes[0])) << "main";
    EXPECT_EQ(gort::runtime_stats().stack_size, 128u * 1024) << "stack_size is the default class's";
  });
}

// A goroutine on a large stack uses 4 MiB of locals (16 times a default
// stack), with a switch in the middle.
__attribute__((noinline)) int touch_four_mib() {
  volatile char big[4 << 20];
  for (size_t i = 0; i < sizeof big; i += 4096) big[i] = static_cast<char>(i >> 12);
  big[sizeof big - 1] = 7;
  gort::yield();
  int ok = 0;
  for (size_t i = 0; i < sizeof big; i += 4096) ok += big[i] == static_cast<char>(i >> 12) ? 1 : 0;
  return ok + (big[sizeof big - 1] == 7 ? 1 : 0);
}

TEST(StackClass, LargeStackHoldsFourMiBOfLocals) {
  run_checked(2, [] {
    std::atomic<int> ok{0};
    std::atomic<bool> large{false};
    Countdown cd(1);
    gort::go(GoOptions{.stack = StackSize::kLarge}, [&] {
      large = on_stack_of_class(2, gort::kLargeStackSize);
      ok = touch_four_mib();
      cd.done();
    });
    cd.wait();
    EXPECT_TRUE(large.load());
    EXPECT_EQ(ok.load(), (4 << 20) / 4096 + 1);
  });
}

// ---- reuse keeps the classes apart ----

// One wave: per[c] goroutines of each class, spawned interleaved, each
// checking its stack before and after a switch and after using some of it;
// class_of records every G seen and in which class (a G seen in two
// classes counts in *mixed), reborn[c] the Gs seen again.
struct Seen {
  std::mutex mu;
  std::map<G*, int> class_of;
  int reborn[kClasses] = {};
  std::atomic<int> bad{0};
  std::atomic<int> mixed{0};
};

void wave(const std::vector<size_t>& sizes, const int (&per)[kClasses], Seen* seen) {
  int total = 0;
  int most = 0;
  for (int n : per) {
    total += n;
    most = std::max(most, n);
  }
  Countdown cd(total);
  for (int i = 0; i < most; i++) {
    for (int c : {1, 0, 2}) {
      if (i >= per[c]) continue;
      const size_t size = sizes[static_cast<size_t>(c)];
      go_in_class(c, i, [seen, &cd, c, size] {
        if (!on_stack_of_class(c, size)) seen->bad.fetch_add(1);
        gort::yield();
        // Most of a small stack's async-preemptible part; a default and a
        // large stack deeper.
        EXPECT_GT(use_stack(c == 1 ? 24 * 1024 : 64 * 1024), 0u);
        if (!on_stack_of_class(c, size)) seen->bad.fetch_add(1);
        {
          std::lock_guard<std::mutex> lock(seen->mu);
          auto [it, fresh] = seen->class_of.emplace(internal::getg(), c);
          if (!fresh) {
            if (it->second != c) {
              seen->mixed.fetch_add(1);
            } else {
              seen->reborn[c]++;
            }
          }
        }
        cd.done();
      });
    }
  }
  cd.wait();
}

class StackClassMix : public ProcsTest {};
GORT_INSTANTIATE_PROCS(StackClassMix);

TEST_P(StackClassMix, EachClassIsRebornOnlyOnItsOwnStacks) {
  run_test([] {
    const std::vector<size_t> sizes = class_sizes();
    const int per[kClasses] = {stress_size(300), stress_size(300), 8};
    Seen seen;
    for (int w = 0; w < 10; w++) wave(sizes, per, &seen);
    EXPECT_EQ(seen.bad.load(), 0) << "a goroutine ran on a stack not of its class";
    EXPECT_EQ(seen.mixed.load(), 0) << "a G was reborn in another class";
    for (int c = 0; c < kClasses; c++) EXPECT_GT(seen.reborn[c], 0) << "class " << c << " never reused a G";
  });
}

// Removing Ps moves each class's free Gs and cached stacks to the others
// (procresize.cpp): they are still reborn in their own class only.
TEST(StackClassMixProcs, SetProcsKeepsTheClassesApart) {
  run_checked(4, [] {
    const std::vector<size_t> sizes = class_sizes();
    const int per[kClasses] = {stress_size(200), stress_size(200), 6};
    Seen seen;
    for (int w = 0; w < 8; w++) {
      wave(sizes, per, &seen);
      gort::set_procs(w % 2 == 0 ? 1 : 4);
    }
    gort::set_procs(4);
    EXPECT_EQ(seen.bad.load(), 0);
    EXPECT_EQ(seen.mixed.load(), 0);
    for (int c = 0; c < kClasses; c++) EXPECT_GT(seen.reborn[c], 0) << "class " << c;
  });
}

// gort::go with options from a plain thread (no P: the global lists and
// the pools directly).
TEST(StackClass, PlainThreadsSpawnEveryClass) {
  run_checked(2, [] {
    const std::vector<size_t> sizes = class_sizes();
    constexpr int kPerClass = 50;
    Countdown cd(kClasses * kPerClass);
    std::atomic<int> bad{0};
    std::atomic<bool> done{false};
    std::thread t([&] {
      for (int i = 0; i < kPerClass; i++) {
        for (int c = 0; c < kClasses; c++) {
          const size_t size = sizes[static_cast<size_t>(c)];
          go_in_class(c, i, [&bad, &cd, c, size] {
            if (!on_stack_of_class(c, size)) bad.fetch_add(1);
            cd.done();
          });
        }
      }
      done = true;
    });
    eventually([&] { return done.load(); });
    t.join();
    cd.wait();
    EXPECT_EQ(bad.load(), 0);
  });
}

// A G whose closure's copy threw goes back to its own class's free list
// (newproc_abort): on one P the next spawn of that class gets it back,
// and a spawn of the default class does not.
struct ThrowsOnCopy {
  ThrowsOnCopy() = default;
  ThrowsOnCopy(const ThrowsOnCopy&) { throw std::runtime_error("copy"); }
  void operator()() const {}
};

TEST(StackClass, AnAbortedSpawnsGGoesBackToItsOwnClass) {
  run_checked(1, [] {
    const std::vector<size_t> sizes = class_sizes();
    // A dead default G on the P's list first.
    Countdown first(1);
    gort::go([&] { first.done(); });
    first.wait();
    expect_goroutines_settle(1);
    const int64_t before = gort::runtime_stats().goroutines_allocated;
    ThrowsOnCopy thrower;
    EXPECT_THROW(gort::go(GoOptions{.stack = StackSize::kSmall}, thrower), std::runtime_error);
    const int64_t after_abort = gort::runtime_stats().goroutines_allocated;
    EXPECT_EQ(after_abort, before + 1) << "the aborted spawn had a fresh small G";
    std::atomic<bool> small_ok{false}, default_ok{false};
    Countdown cd(2);
    gort::go(GoOptions{.stack = StackSize::kSmall}, [&] {
      small_ok = on_stack_of_class(1, sizes[1]);
      cd.done();
    });
    gort::go([&] {
      default_ok = on_stack_of_class(0, sizes[0]);
      cd.done();
    });
    cd.wait();
    EXPECT_TRUE(small_ok.load());
    EXPECT_TRUE(default_ok.load());
    EXPECT_EQ(gort::runtime_stats().goroutines_allocated, after_abort) << "each reused its own class's dead G";
  });
}

// ---- misuse ----

struct CountsCopies {
  std::atomic<int>* copies;
  explicit CountsCopies(std::atomic<int>* c) : copies(c) {}
  CountsCopies(const CountsCopies& o) : copies(o.copies) { copies->fetch_add(1); }
  void operator()() const {}
};

TEST(StackClassMisuse, AValueThatIsNotAStackSizePanicsBeforeCopying) {
  run_checked(2, [] {
    std::atomic<int> copies{0};
    CountsCopies f(&copies);
    try {
      gort::go(GoOptions{.stack = static_cast<StackSize>(7)}, f);
      ADD_FAILURE() << "no panic";
    } catch (const gort::panic_error& e) {
      EXPECT_STREQ(e.what(), "gort::go: GoOptions::stack is 7, not a gort::StackSize");
    }
    EXPECT_EQ(copies.load(), 0);
    EXPECT_EQ(gort::num_goroutine(), 1);
  });
}

TEST(StackClassMisuse, OutsideARunPanicsAsThePlainGo) {
  try {
    gort::go(GoOptions{.stack = StackSize::kSmall}, [] {});
    ADD_FAILURE() << "no panic";
  } catch (const gort::panic_error& e) {
    EXPECT_STREQ(e.what(), "gort::go: the runtime is not running (call it inside gort::run)");
  }
}

// ---- stats and release ----

// Fills 1 MiB of the caller's stack.
__attribute__((noinline)) int touch_one_mib() {
  volatile char buf[1 << 20];
  for (size_t i = 0; i < sizeof buf; i += 4096) buf[i] = 1;
  return buf[0];
}

// Large goroutines count in goroutines_allocated and stack_slabs like any
// other; once dead, those beyond the class's bounds (two per P, four kept
// warm) are released by the scavenger, their pages with them.
TEST(StackClassStats, LargeStacksAreCountedAndReleased) {
  constexpr int kGs = 100;
  constexpr int kProcs = 2;
  run_checked(kProcs, [] {
    const gort::RuntimeStats st0 = gort::runtime_stats();
    const size_t before = rss_bytes();
    Gate gate;
    Countdown cd(kGs);
    for (int i = 0; i < kGs; i++) {
      gort::go(GoOptions{.stack = StackSize::kLarge}, [&] {
        EXPECT_EQ(touch_one_mib(), 1);
        gate.wait();
        cd.done();
      });
    }
    ASSERT_TRUE(eventually([&] { return gate.waiting() == kGs; }, std::chrono::seconds(60)));
    const gort::RuntimeStats during = gort::runtime_stats();
    const size_t rss_during = rss_bytes();
    EXPECT_EQ(during.goroutines, kGs + 1);
    EXPECT_GE(during.goroutines_allocated, kGs + 1);
    // 7 large slots to a 64 MiB slab.
    const size_t per_slab = (64u << 20) / (gort::kLargeStackSize + internal::kGuardSize);
    EXPECT_GE(internal::runtime.sized_stacks[1].slabs() * per_slab, static_cast<size_t>(kGs));
    EXPECT_GE(during.stack_slabs, st0.stack_slabs + internal::runtime.sized_stacks[1].slabs());
    EXPECT_EQ(during.stack_size, st0.stack_size);
    gate.open();
    cd.wait();
    expect_goroutines_settle(1);
    // Main, two dead large Gs on each P, four on the global list.
    const int64_t bound = 1 + 2 * kProcs + internal::kStackClassTable[2].warm;
    int64_t now = 0;
    eventually(
        [&] {
          gort::sleep(absl::Milliseconds(20));  // lets the Ps go idle
          return (now = gort::runtime_stats().goroutines_allocated) <= bound;
        },
        std::chrono::seconds(30));
    EXPECT_LE(now, bound) << "dead large Gs beyond the class's bounds were not released";
#ifndef GORT_ASAN
    // What stays: those Gs' touched pages and the pool's four warm stacks
    // (a MiB each), not the hundred. (Not in the sanitizer builds, whose
    // shadow of the released stacks stays resident.)
    if (!internal::kRaceEnabled) {
      const size_t after = rss_bytes();
      EXPECT_GE(rss_during - before, size_t{kGs} << 20);
      EXPECT_LE(after > before ? after - before : 0, (rss_during - before) / 4)
          << "before " << before << " during " << rss_during << " after " << after;
    }
#else
    (void)before, (void)rss_during;
#endif
  });
}

// ---- overflow ----

volatile int g_depth_limit = INT_MAX;

__attribute__((noinline)) int recurse(int depth) {
  volatile char buf[256];
  buf[0] = static_cast<char>(depth);
  if (depth >= g_depth_limit) return buf[0];
  return recurse(depth + 1) + buf[0];
}

__attribute__((noinline)) int recurse_large_frames(int depth) {
  volatile char buf[64 * 1024];
  buf[0] = static_cast<char>(depth);
  buf[sizeof buf - 1] = buf[0];
  if (depth >= g_depth_limit) return buf[0];
  return recurse_large_frames(depth + 1) + buf[sizeof buf - 1];
}

// The overflow report, for a slot of `size` bytes.
::testing::Matcher<const std::string&> overflow_of(size_t size) {
  std::string limit = "runtime: goroutine stack exceeds " + std::to_string(size - kGSize) + "-byte limit\n";
  return output_that(
      [limit](const std::string& out) {
        return goroutine_report("fatal error: stack overflow\n\n").Matches(out) && out.find(limit) != std::string::npos;
      },
      "Go's stack overflow report for the announced goroutine, with \"" + limit + "\"");
}

// A recursion of ~120 KiB runs on the default and the large stacks and
// overflows a small one, into its guard: Go's report, the small limit.
TEST(StackClassOverflow, RecursionThatFitsTheDefaultStackOverflowsASmallOne) {
  GORT_SKIP_IN_RACE_BUILD("the traceback of an overflow is best effort");
  EXPECT_EXIT(
      {
        ::alarm(30);
        gort::Config cfg;
        cfg.procs = 1;
        gort::run(
            [] {
              g_depth_limit = 400;
              Countdown fits(2);
              gort::go([&] {
                recurse(0);
                fits.done();
              });
              gort::go(GoOptions{.stack = StackSize::kLarge}, [&] {
                recurse(0);
                fits.done();
              });
              fits.wait();
              gort::go(GoOptions{.stack = StackSize::kSmall}, [] {
                announce_goroutine();
                recurse(0);
                std::_Exit(0);
              });
              Event never;
              never.wait();
            },
            cfg);
      },
      ::testing::ExitedWithCode(2), overflow_of(gort::kSmallStackSize));
}

// A large stack's guard too (64 KiB frames probe every page, so they
// land in it rather than jump it).
TEST(StackClassOverflow, UnboundedRecursionOnALargeStack) {
  GORT_SKIP_IN_RACE_BUILD("the traceback of an overflow is best effort");
  EXPECT_EXIT(
      {
        ::alarm(60);
        gort::Config cfg;
        cfg.procs = 2;
        gort::run(
            [] {
              gort::go(GoOptions{.stack = StackSize::kLarge}, [] {
                announce_goroutine();
                recurse_large_frames(0);
              });
              Event never;
              never.wait();
            },
            cfg);
      },
      ::testing::ExitedWithCode(2), overflow_of(gort::kLargeStackSize));
}

// ---- tracebacks ----

std::atomic<int64_t> g_child_id{0}, g_parent_id{0};

constexpr int kMakeSmallChildLine = __LINE__ + 4;
__attribute__((noinline)) void make_small_child(Event* stop, Countdown* done) {
  g_parent_id = gort::goroutine_id();
  asm volatile("");
  gort::go(GoOptions{.stack = StackSize::kSmall}, [stop, done] {
    g_child_id = gort::goroutine_id();
    stop->wait();
    done->done();
  });
  asm volatile("");
}

// "created by" names the function with the go statement, as for the plain
// go (the overload is inlined into it too).
TEST(StackClassTraceback, CreatedByNamesTheCreatingFunction) {
  run_checked(2, [] {
    Event stop;
    Countdown done(2);
    gort::go([&] {
      make_small_child(&stop, &done);
      done.done();
    });
    ASSERT_TRUE(eventually([&] { return stop.has_waiter(); }));
    std::string s = gort::stack(true);
    std::string child = goroutine_block(s, g_child_id);
    EXPECT_NE(child.find("created by gort::test::(anonymous namespace)::make_small_child("), std::string::npos)
        << child;
    EXPECT_NE(child.find(" in goroutine " + std::to_string(g_parent_id) + "\n"), std::string::npos) << child;
    EXPECT_NE(child.find("stackclass_test.cpp:" + std::to_string(kMakeSmallChildLine) + " +0x"), std::string::npos)
        << child;
    stop.set();
    done.wait();
  });
}

}  // namespace
}  // namespace gort::test

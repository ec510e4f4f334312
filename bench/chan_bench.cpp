// bench/chan_bench.cpp — channels, select and the sync package against Go's.
// Twin: bench/go/chan_bench/main.go.
//
// Every case is a whole-process workload (see bench_util.hpp), timed from
// the first goroutine spawned to the last result received:
//
//   pingpong/procs:1, /procs:2   the main goroutine sends i on unbuffered
//                      `ping` and waits for it back on unbuffered `pong`; a
//                      partner goroutine echoes (range over ping, send on
//                      pong). N = 1,000,000 round trips; ns/roundtrip =
//                      elapsed / N.
//   buffered_1x1/procs:2, buffered_4x4/procs:2   one channel of int with
//                      capacity 1024; P producer goroutines send N =
//                      10,000,000 items between them, C consumer goroutines
//                      range over it; the last producer to finish closes it.
//                      ns/item = elapsed / N.
//   select4/procs:2    4 unbuffered channels, each fed N/4 values by its own
//                      producer goroutine; the main goroutine receives all
//                      N = 1,000,000 in a loop of 4-case selects.
//                      ns/message = elapsed / N.
//   mutex100/procs:2   100 goroutines each do N/100 rounds of lock, counter++,
//                      unlock on one Mutex; N = 10,000,000. ns/lock =
//                      elapsed / N.
//   rwmutex100/procs:2 100 goroutines each do N/100 operations on one
//                      RWMutex: every tenth a write (lock, counter++,
//                      unlock), the others a read (lock_shared, read the
//                      counter, unlock_shared); N = 10,000,000. ns/access =
//                      elapsed / N.
//   waitgroup_fanin/procs:2   wg.add(N) once, then N = 100,000 goroutines
//                      each call wg.done(); the main goroutine waits.
//                      ns/goroutine = elapsed / N (spawning included).
//
// Each case checks its result (sum of values, counter) and fails the run on
// a mismatch, so a fast wrong answer cannot pass for a fast one.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <vector>

#include <benchmark/benchmark.h>
#include <gort/gort.hpp>

#include "bench_util.hpp"

namespace {

using gortbench::Stopwatch;

constexpr int64_t kRoundTrips = 1'000'000;
constexpr int64_t kItems = 10'000'000;
constexpr size_t kBufferedCap = 1024;
constexpr int64_t kSelectMessages = 1'000'000;
constexpr int kMutexGoroutines = 100;
constexpr int64_t kLocks = 10'000'000;
constexpr int64_t kFanin = 100'000;

// Splits n into `parts` shares that differ by at most one.
int64_t share(int64_t n, int parts, int i) { return n / parts + (i < n % parts ? 1 : 0); }

// Sum of 0..k-1 over every share, for checking what consumers received.
int64_t expected_sum(int64_t n, int parts) {
  int64_t s = 0;
  for (int i = 0; i < parts; i++) {
    int64_t k = share(n, parts, i);
    s += k * (k - 1) / 2;
  }
  return s;
}

void check(benchmark::State& state, bool ok, const char* what) {
  if (!ok) state.SkipWithError(what);
}

void pingpong(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kRoundTrips);
  double seconds = 0;
  int64_t sum = 0;
  gort::run(
      [&] {
        auto ping = gort::make_chan<int64_t>();
        auto pong = gort::make_chan<int64_t>();
        Stopwatch sw;
        gort::go([ping, pong] {
          for (int64_t v : ping) pong.send(v);
        });
        for (int64_t i = 0; i < n; i++) {
          ping.send(i);
          sum += *pong.recv();
        }
        seconds = sw.seconds();
        ping.close();
      },
      gort::Config{.procs = procs});
  check(state, sum == n * (n - 1) / 2, "pingpong: wrong sum");
  state.SetIterationTime(seconds);
  state.counters["ns/roundtrip"] = seconds * 1e9 / static_cast<double>(n);
}

void buffered(benchmark::State& state, int procs, int producers, int consumers) {
  const int64_t n = gortbench::scaled(kItems);
  double seconds = 0;
  std::atomic<int64_t> sum{0};
  gort::run(
      [&] {
        auto ch = gort::make_chan<int64_t>(kBufferedCap);
        std::atomic<int> producing{producers};
        gort::WaitGroup consumed;
        Stopwatch sw;
        consumed.add(consumers);
        for (int c = 0; c < consumers; c++) {
          gort::go([ch, &sum, &consumed] {
            int64_t local = 0;
            for (int64_t v : ch) local += v;
            sum.fetch_add(local, std::memory_order_relaxed);
            consumed.done();
          });
        }
        for (int p = 0; p < producers; p++) {
          gort::go([ch, &producing, k = share(n, producers, p)] {
            for (int64_t i = 0; i < k; i++) ch.send(i);
            if (producing.fetch_sub(1, std::memory_order_acq_rel) == 1) ch.close();
          });
        }
        consumed.wait();
        seconds = sw.seconds();
      },
      gort::Config{.procs = procs});
  check(state, sum.load() == expected_sum(n, producers), "buffered: wrong sum");
  state.SetIterationTime(seconds);
  state.counters["ns/item"] = seconds * 1e9 / static_cast<double>(n);
}

void select4(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kSelectMessages);
  double seconds = 0;
  int64_t sum = 0;
  gort::run(
      [&] {
        std::vector<gort::Chan<int64_t>> chs;
        for (int i = 0; i < 4; i++) chs.push_back(gort::make_chan<int64_t>());
        Stopwatch sw;
        for (int i = 0; i < 4; i++) {
          gort::go([ch = chs[i], k = share(n, 4, i)] {
            for (int64_t j = 0; j < k; j++) ch.send(j);
          });
        }
        auto add = [&sum](std::optional<int64_t> v) { sum += *v; };
        for (int64_t m = 0; m < n; m++) {
          gort::select(gort::on_recv(chs[0], add), gort::on_recv(chs[1], add),
                       gort::on_recv(chs[2], add), gort::on_recv(chs[3], add));
        }
        seconds = sw.seconds();
      },
      gort::Config{.procs = procs});
  check(state, sum == expected_sum(n, 4), "select4: wrong sum");
  state.SetIterationTime(seconds);
  state.counters["ns/message"] = seconds * 1e9 / static_cast<double>(n);
}

// kMutexGoroutines goroutines share n rounds of work(k) between them (each
// runs its share k); returns the seconds from the first spawn to the last
// done.
template <class Work>
double on_100_goroutines(int64_t n, int procs, Work work) {
  double seconds = 0;
  gort::run(
      [&] {
        gort::WaitGroup wg;
        Stopwatch sw;
        wg.add(kMutexGoroutines);
        for (int g = 0; g < kMutexGoroutines; g++) {
          gort::go([&, k = share(n, kMutexGoroutines, g)] {
            work(k);
            wg.done();
          });
        }
        wg.wait();
        seconds = sw.seconds();
      },
      gort::Config{.procs = procs});
  return seconds;
}

void mutex100(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kLocks);
  // The mutex and the counter it guards side by side, in one cache line, as
  // they end up in the Go twin (the compiler moves both captured variables
  // to the heap, 8 bytes apart); apart, every critical section would move
  // two contended lines between the cores instead of one.
  struct {
    gort::Mutex mu;
    int64_t counter = 0;
  } shared;
  double seconds = on_100_goroutines(n, procs, [&](int64_t k) {
    for (int64_t i = 0; i < k; i++) {
      std::lock_guard lock(shared.mu);
      shared.counter++;
    }
  });
  check(state, shared.counter == n, "mutex100: lost increments");
  state.SetIterationTime(seconds);
  state.counters["ns/lock"] = seconds * 1e9 / static_cast<double>(n);
}

void rwmutex100(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kLocks);
  struct {
    gort::RWMutex mu;
    int64_t counter = 0;
  } shared;
  std::atomic<int64_t> writes{0};
  double seconds = on_100_goroutines(n, procs, [&](int64_t k) {
    int64_t mine = 0, seen = 0;
    for (int64_t i = 0; i < k; i++) {
      if (i % 10 == 0) {
        std::lock_guard lock(shared.mu);
        shared.counter++;
        mine++;
      } else {
        std::shared_lock lock(shared.mu);
        seen += shared.counter;
      }
    }
    benchmark::DoNotOptimize(seen);
    writes.fetch_add(mine, std::memory_order_relaxed);
  });
  check(state, shared.counter == writes.load(), "rwmutex100: lost increments");
  state.SetIterationTime(seconds);
  state.counters["ns/access"] = seconds * 1e9 / static_cast<double>(n);
}

void waitgroup_fanin(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kFanin);
  double seconds = 0;
  gort::run(
      [&] {
        gort::WaitGroup wg;
        Stopwatch sw;
        wg.add(n);
        for (int64_t i = 0; i < n; i++) gort::go([&wg] { wg.done(); });
        wg.wait();
        seconds = sw.seconds();
      },
      gort::Config{.procs = procs});
  state.SetIterationTime(seconds);
  state.counters["ns/goroutine"] = seconds * 1e9 / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  gortbench::register_once("pingpong", 1, pingpong);
  gortbench::register_once("pingpong", 2, pingpong);
  gortbench::register_once("buffered_1x1", 2, [](benchmark::State& s, int p) { buffered(s, p, 1, 1); });
  gortbench::register_once("buffered_4x4", 2, [](benchmark::State& s, int p) { buffered(s, p, 4, 4); });
  gortbench::register_once("select4", 2, select4);
  gortbench::register_once("mutex100", 2, mutex100);
  gortbench::register_once("rwmutex100", 2, rwmutex100);
  gortbench::register_once("waitgroup_fanin", 2, waitgroup_fanin);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// bench/gmp_bench.cpp — the scheduler core against Go's: spawning, switching,
// and the memory a parked goroutine costs. Twin: bench/go/gmp_bench/main.go.
//
// Every case is a whole-process workload (see bench_util.hpp): bench/compare
// runs each one in a fresh process, so the peak RSS it reports is the case's.
//
//   spawn_join/procs:2  the main goroutine does {wg.add(1); go([&]{wg.done();})}
//                       1,000,000 times, then wg.wait(). Reports ns/goroutine
//                       (elapsed / N) and peak_rss_MiB (VmHWM of the process).
//   spawn_join_warm/procs:2  the same after one untimed round, so that
//                       goroutine descriptors and stacks are recycled.
//   yield_ping/procs:1  the main goroutine and one other each call yield() N =
//                       1,000,000 times on one P; ns/switch = elapsed / (2N).
//   parked/procs:2      1,000,000 goroutines each block receiving from one
//                       shared unbuffered channel; bytes/goroutine = (RSS +
//                       page tables once all have started - the same before
//                       spawning) / N, pte_bytes/goroutine the page tables'
//                       part; then the channel is closed and all are joined.
//                       spawn_ms: from the first go to all started (parked);
//                       wake_ms: from close to all joined (a million wake-ups).
//   burst/procs:2       the same with 100,000 goroutines: the first burst of
//                       a fresh process (nothing recycled, every stack new).
//                       us/goroutine = spawn time / N; wake_ms.
//   burst_1, burst_100, burst_10k (procs:2)  the same with 1, 100 and
//                       10,000 goroutines: a fresh process's first go (its
//                       fixed costs: a thread to wake, the stack cache's
//                       first refill) and small first bursts.
//   small_parked/procs:2  parked with every goroutine on a small stack
//                       (go with GoOptions{.stack = StackSize::kSmall}, 64 KiB):
//                       what a parked goroutine costs at that size
//                       (docs/stacks.md, "Stack size classes"). No Go twin:
//                       Go has no stack sizes to choose.
//   large_parked/procs:2  parked with 10,000 goroutines on large (8 MiB)
//                       stacks. No Go twin.
//   sleepers/procs:2    10,000 goroutines, the i-th sleeps i % 99 ms as it
//                       starts (timers firing while the spawning goes on).
//                       spawn_ms: the spawning loop; late_max_ms: the worst
//                       lateness of a wake-up (woke - started - its sleep);
//                       late_p99_ms: the 99th percentile of the lateness
//                       (of all N sorted, the one at floor(0.99 (N - 1))).
//   skynet/procs:2      1,000,000 goroutines in a 10-ary tree: each leaf sends
//                       its number on its parent's buffered channel, each
//                       inner node sums its ten children and sends the sum
//                       up. ms = the median of 3 warm rounds (after one cold
//                       round, reported as cold_ms).
//   os_mutex/procs:1    a goroutine locks and unlocks an uncontended
//                       std::mutex N = 10,000,000 times: ns/lock is the pair,
//                       through libgort's interposed pthread_mutex_lock/unlock
//                       (they count the OS locks an M holds, so that it is
//                       never preempted holding one); ns/lock_unwrapped is the
//                       same loop calling libc's functions directly, the
//                       difference being what the counting costs. Go's twin
//                       uses an uncontended sync.Mutex.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <mutex>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include <absl/time/time.h>
#include <benchmark/benchmark.h>
#include <gort/gort.hpp>

#include "bench_util.hpp"

namespace {

using gortbench::Stopwatch;

constexpr int64_t kGoroutines = 1'000'000;
constexpr int64_t kYields = 1'000'000;

// One round of spawn+join; returns elapsed seconds.
double spawn_join_round(int64_t n) {
  gort::WaitGroup wg;
  Stopwatch sw;
  for (int64_t i = 0; i < n; i++) {
    wg.add(1);
    gort::go([&wg] { wg.done(); });
  }
  wg.wait();
  return sw.seconds();
}

void spawn_join(benchmark::State& state, int procs, bool warm) {
  const int64_t n = gortbench::scaled(kGoroutines);
  double seconds = 0;
  gort::run(
      [&] {
        if (warm) spawn_join_round(n);
        seconds = spawn_join_round(n);
      },
      gort::Config{.procs = procs});
  state.SetIterationTime(seconds);
  state.counters["ns/goroutine"] = seconds * 1e9 / static_cast<double>(n);
  state.counters["peak_rss_MiB"] = gortbench::mib(gortbench::peak_rss_bytes());
}

void yield_ping(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kYields);
  double seconds = 0;
  gort::run(
      [&] {
        std::atomic<bool> done{false};
        Stopwatch sw;
        gort::go([&done, n] {
          for (int64_t i = 0; i < n; i++) gort::yield();
          done.store(true, std::memory_order_release);
        });
        for (int64_t i = 0; i < n; i++) gort::yield();
        while (!done.load(std::memory_order_acquire)) gort::yield();
        seconds = sw.seconds();
      },
      gort::Config{.procs = procs});
  state.SetIterationTime(seconds);
  state.counters["ns/switch"] = seconds * 1e9 / static_cast<double>(2 * n);
}

constexpr int64_t kBurst = 100'000;

// What the process holds: resident pages and its page tables.
int64_t memory_bytes() { return gortbench::rss_bytes() + gortbench::page_table_bytes(); }

// n goroutines park on one channel, then are woken by its close. `stack`:
// their stack size (the plain go for StackSize::kDefault).
void park_and_wake(benchmark::State& state, int procs, int64_t n, bool per_goroutine,
                   gort::StackSize stack = gort::StackSize::kDefault) {
  double seconds = 0, spawn = 0, wake = 0;
  int64_t delta = 0, pte_delta = 0;
  gort::run(
      [&] {
        auto ch = gort::make_chan<int>(0);
        gort::WaitGroup started;
        gort::WaitGroup finished;
        const int64_t before = memory_bytes();
        const int64_t pte_before = gortbench::page_table_bytes();
        Stopwatch sw;
        for (int64_t i = 0; i < n; i++) {
          started.add(1);
          finished.add(1);
          auto body = [ch, &started, &finished]() mutable {
            started.done();
            ch.recv();
            finished.done();
          };
          if (stack == gort::StackSize::kDefault) {
            gort::go(std::move(body));
          } else {
            gort::go({.stack = stack}, std::move(body));
          }
        }
        started.wait();
        spawn = sw.seconds();
        delta = memory_bytes() - before;
        pte_delta = gortbench::page_table_bytes() - pte_before;
        Stopwatch wake_sw;
        ch.close();
        finished.wait();
        wake = wake_sw.seconds();
        seconds = sw.seconds();
      },
      gort::Config{.procs = procs});
  const auto per = [n](double v) { return v / static_cast<double>(n); };
  state.SetIterationTime(seconds);
  state.counters["bytes/goroutine"] = per(static_cast<double>(delta));
  state.counters["pte_bytes/goroutine"] = per(static_cast<double>(pte_delta));
  if (per_goroutine) {
    state.counters["us/goroutine"] = per(spawn * 1e6);
  } else {
    state.counters["spawn_ms"] = spawn * 1e3;
  }
  state.counters["wake_ms"] = wake * 1e3;
  state.counters["peak_rss_MiB"] = gortbench::mib(gortbench::peak_rss_bytes());
}

void parked(benchmark::State& state, int procs) {
  park_and_wake(state, procs, gortbench::scaled(kGoroutines), false);
}

void small_parked(benchmark::State& state, int procs) {
  park_and_wake(state, procs, gortbench::scaled(kGoroutines), false, gort::StackSize::kSmall);
}

// 10,000, not a million: each large stack's guard and top lie under page
// tables of their own (8 KiB a goroutine), and a million would reserve
// 7.6 TiB of address space.
constexpr int64_t kLargeParked = 10'000;

void large_parked(benchmark::State& state, int procs) {
  park_and_wake(state, procs, gortbench::scaled(kLargeParked), false, gort::StackSize::kLarge);
}

void burst(benchmark::State& state, int procs) { park_and_wake(state, procs, gortbench::scaled(kBurst), true); }

// The first burst at smaller sizes (every size from 1 up).
template <int64_t N>
void burst_n(benchmark::State& state, int procs) {
  park_and_wake(state, procs, gortbench::scaled(N), true);
}

constexpr int64_t kSleepers = 10'000;

void sleepers(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kSleepers);
  double spawn = 0, seconds = 0;
  // Each goroutine writes its lateness to its own slot; sorted once all
  // have been joined, for the worst and the 99th percentile.
  std::vector<int64_t> late_ns(static_cast<size_t>(n));
  gort::run(
      [&] {
        gort::WaitGroup wg;
        Stopwatch sw;
        for (int64_t i = 0; i < n; i++) {
          wg.add(1);
          gort::go([&wg, &late_ns, i] {
            const auto d = std::chrono::milliseconds(i % 99);
            const auto start = std::chrono::steady_clock::now();
            gort::sleep(absl::FromChrono(d));
            late_ns[static_cast<size_t>(i)] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  std::chrono::steady_clock::now() - start - d)
                                                  .count();
            wg.done();
          });
        }
        spawn = sw.seconds();
        wg.wait();
        seconds = sw.seconds();
      },
      gort::Config{.procs = procs});
  std::sort(late_ns.begin(), late_ns.end());
  // floor(0.99 (n - 1)) in integers, as the Go twin computes it.
  const int64_t p99 = late_ns[static_cast<size_t>((n - 1) * 99 / 100)];
  state.SetIterationTime(seconds);
  state.counters["spawn_ms"] = spawn * 1e3;
  state.counters["late_max_ms"] = static_cast<double>(late_ns.back()) / 1e6;
  state.counters["late_p99_ms"] = static_cast<double>(p99) / 1e6;
}

void skynet_node(gort::Chan<int64_t> up, int64_t num, int64_t size) {
  if (size == 1) {
    up.send(num);
    return;
  }
  auto rc = gort::make_chan<int64_t>(10);
  for (int64_t i = 0; i < 10; i++) gort::go(skynet_node, rc, num + i * (size / 10), size / 10);
  int64_t sum = 0;
  for (int i = 0; i < 10; i++) sum += *rc.recv();
  up.send(sum);
}

// One skynet round of `size` leaves (a power of 10); returns seconds, or -1
// if the sum is wrong.
double skynet_round(int64_t size) {
  Stopwatch sw;
  auto c = gort::make_chan<int64_t>(1);
  gort::go(skynet_node, c, int64_t{0}, size);
  int64_t sum = *c.recv();
  double t = sw.seconds();
  return sum == size * (size - 1) / 2 ? t : -1;
}

void skynet(benchmark::State& state, int procs) {
  int64_t size = 10;
  while (size * 10 <= gortbench::scaled(kGoroutines)) size *= 10;
  double cold = 0, warm[3] = {0, 0, 0};
  gort::run(
      [&] {
        cold = skynet_round(size);
        for (double& w : warm) w = skynet_round(size);
      },
      gort::Config{.procs = procs});
  std::sort(std::begin(warm), std::end(warm));
  if (cold < 0 || warm[0] < 0) state.SkipWithError("skynet: wrong sum");
  state.SetIterationTime(warm[1]);
  state.counters["ms"] = warm[1] * 1e3;
  state.counters["cold_ms"] = cold * 1e3;
  state.counters["peak_rss_MiB"] = gortbench::mib(gortbench::peak_rss_bytes());
}

constexpr int64_t kLocks = 10'000'000;

void os_mutex(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kLocks);
  using LockFn = int (*)(pthread_mutex_t*);
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  auto raw_lock = reinterpret_cast<LockFn>(dlsym(libc, "pthread_mutex_lock"));
  auto raw_unlock = reinterpret_cast<LockFn>(dlsym(libc, "pthread_mutex_unlock"));
  double seconds = 0, unwrapped = 0;
  gort::run(
      [&] {
        std::mutex mu;
        Stopwatch sw;
        for (int64_t i = 0; i < n; i++) {
          mu.lock();
          mu.unlock();
        }
        seconds = sw.seconds();
        pthread_mutex_t* raw = mu.native_handle();
        Stopwatch sw2;
        for (int64_t i = 0; i < n; i++) {
          raw_lock(raw);
          raw_unlock(raw);
        }
        unwrapped = sw2.seconds();
      },
      gort::Config{.procs = procs});
  if (libc != nullptr) dlclose(libc);
  state.SetIterationTime(seconds);
  state.counters["ns/lock"] = seconds * 1e9 / static_cast<double>(n);
  state.counters["ns/lock_unwrapped"] = unwrapped * 1e9 / static_cast<double>(n);
}

constexpr int64_t kResizes = 400;

// set_procs: the pause of a stop of the world. Two goroutines spin in
// call-free loops (they must be preempted each time) while the main one
// switches between 1 and 2 Ps.
void set_procs(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kResizes);
  double seconds = 0;
  gort::run(
      [&] {
        std::atomic<bool> stop{false};
        gort::WaitGroup wg;
        for (int i = 0; i < 2; i++) {
          wg.add(1);
          gort::go([&] {
            uint64_t x = 0;
            while (!stop.load(std::memory_order_relaxed)) {
              for (int k = 0; k < 1000; k++) x = x * 33 + static_cast<uint64_t>(k);
              benchmark::DoNotOptimize(x);
            }
            wg.done();
          });
        }
        Stopwatch sw;
        for (int64_t i = 0; i < n; i++) gort::set_procs(1 + static_cast<int>(i % procs));
        seconds = sw.seconds();
        stop = true;
        wg.wait();
      },
      gort::Config{.procs = procs});
  state.SetIterationTime(seconds);
  state.counters["us/call"] = seconds * 1e6 / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  gortbench::register_once("spawn_join", 2, [](benchmark::State& s, int p) { spawn_join(s, p, false); });
  gortbench::register_once("spawn_join_warm", 2, [](benchmark::State& s, int p) { spawn_join(s, p, true); });
  gortbench::register_once("yield_ping", 1, yield_ping);
  gortbench::register_once("parked", 2, parked);
  gortbench::register_once("small_parked", 2, small_parked);
  gortbench::register_once("large_parked", 2, large_parked);
  gortbench::register_once("burst", 2, burst);
  gortbench::register_once("burst_1", 2, burst_n<1>);
  gortbench::register_once("burst_100", 2, burst_n<100>);
  gortbench::register_once("burst_10k", 2, burst_n<10'000>);
  gortbench::register_once("sleepers", 2, sleepers);
  gortbench::register_once("skynet", 2, skynet);
  gortbench::register_once("os_mutex", 1, os_mutex);
  gortbench::register_once("set_procs", 2, set_procs);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// bench/preempt_bench.cpp — preemption against Go's: how late a sleeping
// goroutine wakes while call-free loops hog the Ps, and what the monitor
// thread costs a CPU-bound program. Twin: bench/go/preempt_bench/main.go.
//
// Every case is a whole-process workload (see bench_util.hpp).
//
//   latency/procs:1     one spinner goroutine runs a loop with no calls
//                       (`while (!stop) x++`); the main goroutine sleeps 1 ms
//                       200 times. lateness = time asleep - 1 ms; reports
//                       lateness_p50_us, lateness_p99_us, lateness_max_us.
//                       Default time slice (10 ms, Go's forcePreemptNS).
//   latency_slice1ms/procs:1  the same with Config::time_slice = 1 ms. Go has
//                       no such knob: its twin runs the default workload, so
//                       the row shows what a shorter slice buys.
//   latency/procs:2     2 Ps, 2 spinners, the same measurement.
//   sysmon_overhead/procs:2  2 goroutines each run a fixed multiply-xorshift
//                       hash chain (240 M steps, ~0.5 s), no spinners,
//                       nothing to switch to; ns/iter (per chain step, per
//                       goroutine) with preemption on, median of 9 rounds.
//                       gort also reports overhead_pct: the same chains with
//                       Config::preempt = false, and overhead_vs_threads_pct:
//                       on two plain std::threads, no runtime at all; each
//                       the median over the rounds of the ratio within a
//                       round (the variants run back to back, so machine
//                       load affects them alike). Target: overhead_pct <= 1.
//                       Those two time the whole spawn-to-join (what the Go
//                       twin times); loop_overhead_vs_threads_pct compares
//                       only the chains themselves, each timed by its worker
//                       after all have started (a spin barrier), so runtime
//                       and thread start-up are out of it (target <= 1).
//                       sysmon_wakeups_per_s: the sysmon thread's sleeps per
//                       second while the chains ran (target <= 200).
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <gort/gort.hpp>

#include "bench_util.hpp"

namespace {

using gortbench::Stopwatch;

constexpr int64_t kSleeps = 200;
constexpr int64_t kChainSteps = 240'000'000;  // ~0.5 s per goroutine here
constexpr int kOverheadRounds = 9;

// The spinners' loop: a relaxed load and a relaxed store, no call, so only an
// asynchronous preemption takes the P away.
void spin(const std::atomic<bool>* stop, std::atomic<uint64_t>* counter) {
  while (!stop->load(std::memory_order_relaxed)) {
    counter->store(counter->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

void latency(benchmark::State& state, int procs, absl::Duration slice) {
  const int64_t n = gortbench::scaled(kSleeps);
  std::vector<double> late_us;
  late_us.reserve(static_cast<size_t>(n));
  double seconds = 0;
  gort::Config cfg;
  cfg.procs = procs;
  cfg.time_slice = slice;
  gort::run(
      [&] {
        std::atomic<bool> stop{false};
        std::atomic<uint64_t> counter{0};
        gort::WaitGroup wg;
        for (int i = 0; i < procs; i++) {
          wg.add(1);
          gort::go([&] {
            spin(&stop, &counter);
            wg.done();
          });
        }
        Stopwatch total;
        for (int64_t i = 0; i < n; i++) {
          Stopwatch sw;
          gort::sleep(absl::Milliseconds(1));
          late_us.push_back(sw.seconds() * 1e6 - 1000.0);
        }
        seconds = total.seconds();
        stop.store(true, std::memory_order_relaxed);
        wg.wait();
      },
      cfg);
  state.SetIterationTime(seconds);
  state.counters["lateness_p50_us"] = percentile(late_us, 0.50);
  state.counters["lateness_p99_us"] = percentile(late_us, 0.99);
  state.counters["lateness_max_us"] = percentile(late_us, 1.0);
}

// One step of the chain; the Go twin computes the same function.
inline uint64_t chain(uint64_t x, int64_t steps) {
  for (int64_t i = 0; i < steps; i++) {
    x = x * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    x ^= x >> 29;
  }
  return x;
}

std::atomic<uint64_t> g_sink{0};

// What one variant of sysmon_overhead took: `wall` from before the spawns
// to the last join (what the Go twin times), `loop` the mean over the
// workers of each one's own chain, timed after every worker has started (a
// spin barrier), so that starting and stopping the runtime or its threads
// is not in it.
struct ChainTimes {
  double wall = 0;
  double loop = 0;
};

// One worker: waits until all `procs` are running, then times its chain.
double timed_chain(std::atomic<int>* ready, int procs, int64_t steps, int i) {
  ready->fetch_add(1, std::memory_order_acq_rel);
  while (ready->load(std::memory_order_acquire) < procs) {
  }
  Stopwatch sw;
  g_sink.fetch_add(chain(static_cast<uint64_t>(i) + 1, steps), std::memory_order_relaxed);
  return sw.seconds();
}

// The sysmon thread's sleeps so far (each of its wake-ups ends one): the
// voluntary context switches of the thread named gort-sysmon, -1 if none.
int64_t sysmon_sleeps() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int64_t n = -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string dir = std::string("/proc/self/task/") + e->d_name;
    std::ifstream comm(dir + "/comm");
    std::string name;
    if (!std::getline(comm, name) || name != "gort-sysmon") continue;
    std::ifstream status(dir + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) n = std::stoll(line.substr(24));
    }
    break;
  }
  closedir(d);
  return n;
}

// `procs` goroutines run one chain each, in a fresh runtime. *wakeups_per_s
// (if not null): sysmon's wake-ups per second while they ran.
ChainTimes chains_in_gort(int procs, int64_t steps, bool preempt, double* wakeups_per_s) {
  ChainTimes t;
  gort::Config cfg;
  cfg.procs = procs;
  cfg.preempt = preempt;
  gort::run(
      [&] {
        gort::WaitGroup wg;
        std::atomic<int> ready{0};
        std::vector<double> loops(static_cast<size_t>(procs));
        // Counted in the steady state, from 100 ms after the start (past
        // sysmon's back-off from 20 µs) to the first chain's end, by a
        // plain thread that runs no goroutine.
        // It sleeps in between rather than poll, so as not to be a cost of
        // its own.
        std::mutex mu;
        std::condition_variable cv;
        bool first_done = false;
        std::thread counter;
        if (wakeups_per_s != nullptr) {
          counter = std::thread([&] {
            std::unique_lock<std::mutex> lock(mu);
            if (cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return first_done; })) return;
            int64_t s0 = sysmon_sleeps();
            Stopwatch window;
            cv.wait(lock, [&] { return first_done; });
            int64_t s1 = sysmon_sleeps();
            if (s0 >= 0 && s1 >= 0) *wakeups_per_s = static_cast<double>(s1 - s0) / window.seconds();
          });
        }
        Stopwatch sw;
        for (int i = 0; i < procs; i++) {
          wg.add(1);
          gort::go([&, i] {
            loops[static_cast<size_t>(i)] = timed_chain(&ready, procs, steps, i);
            {
              std::lock_guard<std::mutex> lock(mu);
              first_done = true;
            }
            cv.notify_one();
            wg.done();
          });
        }
        wg.wait();
        t.wall = sw.seconds();
        if (counter.joinable()) counter.join();
        for (double l : loops) t.loop += l / procs;
      },
      cfg);
  return t;
}

ChainTimes chains_in_threads(int procs, int64_t steps) {
  ChainTimes t;
  std::atomic<int> ready{0};
  std::vector<double> loops(static_cast<size_t>(procs));
  Stopwatch sw;
  std::vector<std::thread> threads;
  for (int i = 0; i < procs; i++) {
    threads.emplace_back([&, i] { loops[static_cast<size_t>(i)] = timed_chain(&ready, procs, steps, i); });
  }
  for (auto& th : threads) th.join();
  t.wall = sw.seconds();
  for (double l : loops) t.loop += l / procs;
  return t;
}

double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

void sysmon_overhead(benchmark::State& state, int procs) {
  const int64_t steps = gortbench::scaled(kChainSteps);
  std::vector<double> on, vs_off, vs_threads, loop_vs_threads, wakeups;
  // Each round runs the three variants back to back, in a rotating order,
  // and is compared within itself: the load of a shared machine drifts
  // over seconds, far more than the 1% being measured.
  for (int r = 0; r < kOverheadRounds; r++) {
    ChainTimes t[3];
    double w = 0;
    for (int k = 0; k < 3; k++) {
      int variant = (r + k) % 3;
      t[variant] = variant == 2 ? chains_in_threads(procs, steps)
                                : chains_in_gort(procs, steps, variant == 0, variant == 0 ? &w : nullptr);
    }
    on.push_back(t[0].wall);
    vs_off.push_back((t[0].wall / t[1].wall - 1.0) * 100.0);
    vs_threads.push_back((t[0].wall / t[2].wall - 1.0) * 100.0);
    loop_vs_threads.push_back((t[0].loop / t[2].loop - 1.0) * 100.0);
    wakeups.push_back(w);
  }
  double t_on = median(on);
  state.SetIterationTime(t_on);
  state.counters["ns/iter"] = t_on * 1e9 / static_cast<double>(steps);
  state.counters["overhead_pct"] = median(vs_off);
  state.counters["overhead_vs_threads_pct"] = median(vs_threads);
  state.counters["loop_overhead_vs_threads_pct"] = median(loop_vs_threads);
  state.counters["sysmon_wakeups_per_s"] = median(wakeups);
}

}  // namespace

int main(int argc, char** argv) {
  gortbench::register_once("latency", 1, [](benchmark::State& s, int p) {
    latency(s, p, absl::Milliseconds(10));
  });
  gortbench::register_once("latency_slice1ms", 1, [](benchmark::State& s, int p) {
    latency(s, p, absl::Milliseconds(1));
  });
  gortbench::register_once("latency", 2, [](benchmark::State& s, int p) {
    latency(s, p, absl::Milliseconds(10));
  });
  gortbench::register_once("sysmon_overhead", 2, sysmon_overhead);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

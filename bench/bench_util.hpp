// bench/bench_util.hpp — what every gort benchmark program shares with its Go
// twin (bench/go/internal/harness): case names, workload scaling, memory
// figures.
//
// Conventions (bench/compare relies on them):
//
//  - A case is named "<workload>/procs:<N>"; it runs with N Ps on both sides.
//    bench/compare also exports GORT_MAXPROCS=N and GOMAXPROCS=N.
//  - Whole-process workloads (spawn a million goroutines, measure RSS) are
//    registered with `register_once`: exactly one iteration, manual time, and
//    bench/compare runs each case in a fresh process so that peak RSS
//    (VmHWM) belongs to that case alone.
//  - Results are Google Benchmark counters whose name is the metric and unit,
//    e.g. "ns/goroutine", "bytes/goroutine", "peak_rss_MiB". The Go twin
//    prints the same names. Lower is better, except for metrics whose name
//    ends in "/s" (throughput). A case without counters is compared on
//    Google Benchmark's own time per iteration, reported as "ns/op".
//  - GORT_BENCH_SCALE (default 1) scales the workload sizes (`scaled`) and
//    the fixed durations (`scale`), for smoke runs (`bench/compare --quick`
//    uses 0.1).
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace gortbench {

// GORT_BENCH_SCALE (default 1; a value that is not positive counts as 1).
inline double scale() {
  double s = 1.0;
  if (const char* env = std::getenv("GORT_BENCH_SCALE")) s = std::strtod(env, nullptr);
  return s > 0 ? s : 1.0;
}

// n scaled by GORT_BENCH_SCALE, at least 1.
inline int64_t scaled(int64_t n) {
  auto v = static_cast<int64_t>(static_cast<double>(n) * scale());
  return v < 1 ? 1 : v;
}

// CPU time of the whole process so far, user + system, every thread
// (getrusage RUSAGE_SELF; Go's twin: harness.CPUSeconds, the same call).
inline double process_cpu_seconds() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Resident set size now, from /proc/self/statm (pages * page size).
inline int64_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long size = 0, resident = 0;
  int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (n != 2) return -1;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

// A "Name:   N kB" field of /proc/self/status, in bytes (-1 if missing).
inline int64_t status_bytes(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  size_t len = std::strlen(field);
  int64_t kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
      kib = std::strtoll(line + len + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

// Peak resident set size of this process (VmHWM).
inline int64_t peak_rss_bytes() { return status_bytes("VmHWM"); }

// The page tables of this process (VmPTE): memory a goroutine costs beyond
// its resident pages, one page-table page per 2 MiB of address space used.
inline int64_t page_table_bytes() { return status_bytes("VmPTE"); }

inline double mib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Wall-clock stopwatch (steady clock), as Go's time.Now/time.Since.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

inline std::string case_name(const std::string& workload, int procs) {
  return workload + "/procs:" + std::to_string(procs);
}

// Registers a whole-process case: `body(state, procs)` runs once (one
// iteration) and must call state.SetIterationTime with the seconds it
// measured and set its counters. Runs only meaningfully in a fresh process
// (bench/compare passes --benchmark_filter=^<name>$).
template <class F>
void register_once(const std::string& workload, int procs, F body) {
  benchmark::RegisterBenchmark(case_name(workload, procs).c_str(),
                               [body, procs](benchmark::State& state) {
                                 for (auto _ : state) body(state, procs);
                               })
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace gortbench

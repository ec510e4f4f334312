// samples/demo — a tour of gort, section by section.
//
// Each section prints a header, does something Go programs do, checks its
// own result and says how long it took. The program exits with status 1 if
// a check fails. Run it with `./bootstrap demo`, or `build/samples/demo/demo`;
// GORT_MAXPROCS=N sets the number of processors (Ps) of sections 1 and 2.
//
// Sections:
//   1. 100,000 goroutines: spawn, compute, report back (gort::go, WaitGroup)
//   2. a channel pipeline: the concurrent prime sieve (sieve.cpp)
//   3. preemption: an infinite loop with no calls on one P, with preemption
//      on and off, each in a child process (preemption.cpp)
//   4. an echo server and 1,000 concurrent blocking-style clients on 2 Ps
//      (echo.cpp)
//
// Sections 1-2 share one runtime; section 3 runs between runtimes (its
// children have their own), and section 4 starts a fresh one with 2 Ps:
// gort::run may be called again once it has returned.
#include <gort/gort.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "demo.hpp"

namespace demo {
namespace {

void print_stats() {
  gort::RuntimeStats st = gort::runtime_stats();
  std::printf("  runtime: %d Ps, %d Ms (OS threads; %d idle now), %lld goroutine(s) alive\n",
              st.procs, st.threads, st.idle_threads, static_cast<long long>(st.goroutines));
  std::printf("  memory:  %lld goroutine descriptors with stacks (live + dead kept for reuse),\n"
              "           %zu stack slab(s) of %zu KiB stacks with %s guards\n",
              static_cast<long long>(st.goroutines_allocated), st.stack_slabs,
              st.stack_size / 1024, st.stack_guard);
}

// Steps for n to reach 1 in the Collatz sequence: a little work of a size
// that varies from goroutine to goroutine.
int collatz_steps(uint64_t n) {
  int steps = 0;
  while (n != 1) {
    n = (n % 2 == 0) ? n / 2 : 3 * n + 1;
    steps++;
  }
  return steps;
}

}  // namespace

// 1. Spawn many goroutines, each computes something small and reports back.
bool many_goroutines() {
  constexpr int kGoroutines = 100'000;
  header(1, "100,000 goroutines");
  std::printf("  each goroutine computes the Collatz steps of its number and adds them up\n");

  std::atomic<int64_t> total{0};
  gort::WaitGroup wg;
  auto start = Clock::now();
  for (int i = 1; i <= kGoroutines; i++) {
    wg.add(1);
    gort::go([&total, &wg, i] {
      total.fetch_add(collatz_steps(static_cast<uint64_t>(i)), std::memory_order_relaxed);
      wg.done();
    });
  }
  double spawned_ms = ms_since(start);
  wg.wait();
  double ms = ms_since(start);

  std::printf("  %d goroutines spawned in %.1f ms, all reported back after %.1f ms"
              " (%.2f us per goroutine)\n",
              kGoroutines, spawned_ms, ms, ms * 1000.0 / kGoroutines);
  print_stats();

  int64_t expected = 0;
  for (int i = 1; i <= kGoroutines; i++) expected += collatz_steps(static_cast<uint64_t>(i));
  std::printf("  total steps: %lld (computed sequentially: %lld)\n",
              static_cast<long long>(total.load()), static_cast<long long>(expected));
  return check(total.load() == expected, "every goroutine reported back");
}

}  // namespace demo

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], demo::kChildFlag) == 0) {
    return demo::preemption_child(std::strcmp(argv[2], "on") == 0, std::strtol(argv[3], nullptr, 10));
  }
  auto start = demo::Clock::now();
  std::printf("gort demo: Go's concurrency model in C++20\n");
  bool ok = gort::run([] {
              std::printf("%d processor%s (Ps); set GORT_MAXPROCS to change it\n", gort::procs(),
                          gort::procs() == 1 ? "" : "s");
              bool ok = demo::many_goroutines();
              ok &= demo::prime_sieve();
              return ok ? 0 : 1;
            }) == 0;
  ok &= demo::preemption(argv[0]);
  gort::Config two_ps;
  two_ps.procs = 2;
  ok &= gort::run([] { return demo::echo_server() ? 0 : 1; }, two_ps) == 0;
  std::printf("\n%s (%.1f s)\n", ok ? "demo: all sections ok" : "demo: SOME SECTIONS FAILED",
              demo::ms_since(start) / 1000.0);
  return ok ? 0 : 1;
}

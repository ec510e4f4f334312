// samples/demo/sieve.cpp — section 2: a channel pipeline, the concurrent
// prime sieve of Go's tour (samples/prime_sieve has the stand-alone one).
//
// A generator sends 2, 3, 4, ... down an unbuffered channel; every prime
// found gets a filter goroutine that passes on only what it does not divide,
// so after N primes N filters are chained by N + 1 channels. Here the chain
// shuts down the way Go pipelines do: the generator stops at a bound known
// to exceed the Nth prime and closes its channel; each filter, when its
// input is closed and drained, closes its output; the main goroutine drains
// the last channel until it closes.
#include <gort/gort.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "demo.hpp"

namespace demo {
namespace {

constexpr int kPrimes = 1000;

// Rosser's bound: the nth prime is below n (ln n + ln ln n) for n >= 6.
int nth_prime_bound(int n) {
  double x = n;
  return static_cast<int>(x * (std::log(x) + std::log(std::log(x)))) + 1;
}

void generate(int limit, gort::Chan<int> out) {
  for (int i = 2; i <= limit; i++) out.send(i);
  out.close();
}

void filter(int prime, gort::Chan<int> in, gort::Chan<int> out, std::atomic<int64_t>* received) {
  int64_t n = 0;
  for (int v : in) {
    n++;
    if (v % prime != 0) out.send(v);
  }
  // Counted before the close: once the main goroutine sees the last channel
  // closed, every filter's count is in.
  received->fetch_add(n, std::memory_order_relaxed);
  out.close();
}

std::vector<int> sequential_primes(int n, int limit) {
  std::vector<bool> composite(static_cast<size_t>(limit) + 1, false);
  std::vector<int> primes;
  for (int i = 2; i <= limit && static_cast<int>(primes.size()) < n; i++) {
    if (composite[static_cast<size_t>(i)]) continue;
    primes.push_back(i);
    for (int64_t j = int64_t{i} * i; j <= limit; j += i) composite[static_cast<size_t>(j)] = true;
  }
  return primes;
}

}  // namespace

bool prime_sieve() {
  header(2, "a channel pipeline: the concurrent prime sieve");
  const int limit = nth_prime_bound(kPrimes);
  std::printf("  a generator sends 2..%d down a channel; each prime found starts a filter\n"
              "  goroutine that drops its multiples, so %d primes make a chain of %d goroutines\n",
              limit, kPrimes, kPrimes + 1);

  std::atomic<int64_t> received{0};
  std::vector<int> primes;
  auto start = Clock::now();
  auto ch = gort::make_chan<int>();
  gort::go(generate, limit, ch);
  for (int i = 0; i < kPrimes; i++) {
    int prime = *ch.recv();
    primes.push_back(prime);
    auto next = gort::make_chan<int>();
    gort::go(filter, prime, ch, next, &received);
    ch = next;
  }
  int64_t past_n = 0;
  for (int v : ch) {
    (void)v;  // primes beyond the Nth, which passed every filter
    past_n++;
  }
  double ms = ms_since(start);
  int64_t handoffs = received.load() + kPrimes + past_n;

  std::printf("  the first %d primes:", kPrimes);
  for (int i = 0; i < 20; i++) std::printf(" %d", primes[static_cast<size_t>(i)]);
  std::printf(" ...\n  ...");
  for (int i = kPrimes - 8; i < kPrimes; i++) std::printf(" %d", primes[static_cast<size_t>(i)]);
  std::printf("\n");
  std::printf("  %d primes in %.1f ms: %lld values passed between goroutines"
              " (%.2f us per hand-off)\n",
              kPrimes, ms, static_cast<long long>(handoffs), ms * 1000.0 / static_cast<double>(handoffs));
  return check(primes == sequential_primes(kPrimes, limit),
               "the pipeline's primes match a sequential sieve");
}

}  // namespace demo

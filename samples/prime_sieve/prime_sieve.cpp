// prime_sieve — the concurrent prime sieve from Go's tour, with gort.
//
// A generator goroutine sends 2, 3, 4, ... down a channel. Each prime found
// gets a filter goroutine that passes on only the numbers it does not
// divide, so the pipeline grows one goroutine per prime: after N primes
// there are N + 1 goroutines chained by N + 1 unbuffered channels, and every
// number travels through all the filters below it.
//
// Usage: prime_sieve [N]   (default 100; prints the first N primes)
#include <gort/gort.hpp>

#include <cstdio>
#include <cstdlib>

namespace {

// Sends 2, 3, 4, ... to ch until done is closed.
void generate(gort::Chan<int> ch, gort::Chan<std::monostate> done) {
  for (int i = 2;; i++) {
    bool stop = false;
    gort::select(gort::on_send(ch, i), gort::on_recv(done, [&] { stop = true; }));
    if (stop) return;
  }
}

// Copies values from in to out, dropping multiples of prime.
void filter(gort::Chan<int> in, gort::Chan<int> out, int prime, gort::Chan<std::monostate> done) {
  for (;;) {
    std::optional<int> v;
    bool stop = false;
    gort::select(gort::on_recv(in, [&](std::optional<int> x) { v = x; }),
                 gort::on_recv(done, [&] { stop = true; }));
    if (stop || !v) return;
    if (*v % prime == 0) continue;
    gort::select(gort::on_send(out, *v), gort::on_recv(done, [&] { stop = true; }));
    if (stop) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 100;
  if (n <= 0) {
    std::fprintf(stderr, "usage: %s [N > 0]\n", argv[0]);
    return 2;
  }
  return gort::run([n] {
    auto done = gort::make_chan<std::monostate>();
    gort::WaitGroup wg;
    auto ch = gort::make_chan<int>();
    wg.add(1);
    gort::go([&wg, ch, done] { generate(ch, done); wg.done(); });
    for (int i = 0; i < n; i++) {
      int prime = *ch.recv();
      std::printf("%d\n", prime);
      auto next = gort::make_chan<int>();
      wg.add(1);
      gort::go([&wg, ch, next, prime, done] { filter(ch, next, prime, done); wg.done(); });
      ch = next;
    }
    // Closing done stops every goroutine of the chain; wait for all of them
    // so nothing is left running when main returns.
    done.close();
    wg.wait();
    return 0;
  });
}

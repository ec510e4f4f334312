// tests/install/hello.cpp — a program from outside the tree: it sees only the
// installed headers and library, found through pkg-config.
#include <gort/gort.hpp>

#include <cstdio>

int main() {
  int rc = gort::run([] {
    constexpr int kN = 10;
    auto values = gort::make_chan<int>();
    for (int i = 1; i <= kN; i++) {
      gort::go([values](int v) { values.send(v); }, i);
    }
    int sum = 0;
    for (int i = 0; i < kN; i++) sum += *values.recv();
    // Every sender has handed its value over; wait until all have exited.
    while (gort::num_goroutine() > 1) gort::yield();
    std::printf("hello from goroutine %lld: %d goroutines summed to %d, %lld left\n",
                static_cast<long long>(gort::goroutine_id()), kN, sum,
                static_cast<long long>(gort::num_goroutine()));
    return 7;
  });
  std::printf("gort::run returned %d\n", rc);
  return rc == 7 ? 0 : 1;
}

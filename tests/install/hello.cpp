// tests/install/hello.cpp — a program from outside the tree: it sees only the
// installed headers and library, found through pkg-config.
#include <gort/gort.hpp>

#include <atomic>
#include <cstdio>

int main() {
  std::atomic<int> sum{0};
  int rc = gort::run([&] {
    constexpr int kN = 10;
    for (int i = 1; i <= kN; i++) {
      gort::go([&sum](int v) { sum.fetch_add(v); }, i);
    }
    // Wait for every goroutine to finish using nothing but the runtime API.
    while (gort::num_goroutine() > 1) gort::yield();
    std::printf("hello from goroutine %lld: %d goroutines summed to %d, %lld left\n",
                static_cast<long long>(gort::goroutine_id()), kN, sum.load(),
                static_cast<long long>(gort::num_goroutine()));
    return 7;
  });
  std::printf("gort::run returned %d\n", rc);
  return rc == 7 ? 0 : 1;
}

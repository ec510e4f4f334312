// tests/install/tail_sleep.cpp — a goroutine whose lambda calls gort::sleep
// in tail position (a jump: the lambda leaves no frame of its own), built
// as a release program (-O2, no -g) against the installed library. It
// prints every goroutine's traceback; install_test.sh checks that the
// sleeper shows gort::sleep at its file:line in gort's sources (from the
// installed library's debug information) and nothing of the runtime's.
#include <gort/gort.hpp>

#include <cstdio>
#include <string>

int main() {
  return gort::run([] {
    gort::go([] { gort::sleep(absl::Seconds(30)); });
    // Until it sleeps; it is abandoned when main returns.
    std::string s;
    for (int i = 0; i < 10000; i++) {
      s = gort::stack(true);
      if (s.find("[sleep]") != std::string::npos) break;
      gort::sleep(absl::Milliseconds(1));
    }
    std::fputs(s.c_str(), stdout);
  });
}

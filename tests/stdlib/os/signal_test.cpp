// tests/stdlib/os/signal_test.cpp — gort::signal (stdlib/os/signal.cpp), Go's
// os/signal: signals arrive as channel values (from goroutines' threads and
// plain threads), every watching channel gets each one, a full channel
// drops instead of blocking, stop/ignore/reset put dispositions back, bad
// signals and nil channels panic, and a run leaves no handler, fd or
// goroutine behind.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gort/signal.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort_stdlib_test {
namespace {

using gort::test::panic_message;

// The handler now installed for sig.
void* handler_of(int sig) {
  struct sigaction cur;
  sigaction(sig, nullptr, &cur);
  return (cur.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<void*>(cur.sa_sigaction)
                                          : reinterpret_cast<void*>(cur.sa_handler);
}

// Receives from ch, or -1 after `wait`.
int recv_within(const gort::Chan<int>& ch, absl::Duration wait) {
  int got = -1;
  auto timeout = gort::after(wait);
  gort::select(gort::on_recv(ch, [&](std::optional<int> v) { got = v.value_or(-2); }), gort::on_recv(timeout));
  return got;
}

class Signal : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Signal);

TEST_P(Signal, ArrivesAsAChannelValue) {
  void* before = handler_of(SIGUSR1);
  run_test([] {
    auto ch = gort::make_chan<int>(1);
    gort::signal::notify(ch, {SIGUSR1});
    for (int i = 0; i < 20; i++) {
      ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
      EXPECT_EQ(recv_within(ch, absl::Seconds(10)), SIGUSR1) << i;
    }
    gort::signal::stop(ch);
  });
  EXPECT_EQ(handler_of(SIGUSR1), before) << "stop did not put the disposition back";
}

TEST_P(Signal, EveryWatchingChannelGetsItAndStopRemovesOne) {
  run_test([] {
    auto a = gort::make_chan<int>(4), b = gort::make_chan<int>(4);
    gort::signal::notify(a, {SIGUSR1, SIGUSR2});
    gort::signal::notify(b, {SIGUSR2});
    kill(getpid(), SIGUSR2);
    EXPECT_EQ(recv_within(a, absl::Seconds(10)), SIGUSR2);
    EXPECT_EQ(recv_within(b, absl::Seconds(10)), SIGUSR2);
    gort::signal::stop(a);
    kill(getpid(), SIGUSR2);
    EXPECT_EQ(recv_within(b, absl::Seconds(10)), SIGUSR2);
    EXPECT_EQ(recv_within(a, absl::Milliseconds(50)), -1) << "a stopped channel still gets signals";
    // Adding signals to a registered channel.
    gort::signal::notify(b, {SIGUSR1});
    kill(getpid(), SIGUSR1);
    EXPECT_EQ(recv_within(b, absl::Seconds(10)), SIGUSR1);
    gort::signal::stop(b);
  });
}

TEST_P(Signal, AFullChannelDropsInsteadOfBlocking) {
  run_test([] {
    auto ch = gort::make_chan<int>(1);
    gort::signal::notify(ch, {SIGUSR1});
    for (int i = 0; i < 50; i++) kill(getpid(), SIGUSR1);
    EXPECT_EQ(recv_within(ch, absl::Seconds(10)), SIGUSR1);
    // Whatever was merged or dropped, the relay never blocked: a later
    // signal still arrives.
    while (recv_within(ch, absl::Milliseconds(50)) != -1) {
    }
    kill(getpid(), SIGUSR1);
    EXPECT_EQ(recv_within(ch, absl::Seconds(10)), SIGUSR1);
    gort::signal::stop(ch);
  });
}

TEST_P(Signal, FromAPlainThread) {
  run_test([] {
    auto ch = gort::make_chan<int>(1);
    gort::signal::notify(ch, {SIGUSR2});
    std::thread t([&] {
      // Delivered to this thread, which runs no goroutine.
      pthread_kill(pthread_self(), SIGUSR2);
    });
    EXPECT_EQ(recv_within(ch, absl::Seconds(10)), SIGUSR2);
    t.join();
    gort::signal::stop(ch);
  });
}

// On one P whose only goroutine never parks (it yields), nothing but
// sysmon polls the network. It must, even before any M ever polled: a
// last_poll that read as "never" would make sysmon wait for a first poll
// that never comes, and the relay goroutine, parked in the poller, would
// not be woken for good.
TEST(SignalOneP, ThePollerIsPolledWhileTheOnlyPNeverIdles) {
  gort::test::run_checked(1, [] {
    auto ch = gort::make_chan<int>(1);
    gort::signal::notify(ch, {SIGUSR1});
    gort::yield();  // let the relay park in the poller
    kill(getpid(), SIGUSR1);
    int got = -1;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got == -1 && std::chrono::steady_clock::now() < deadline) {
      gort::select(gort::on_recv(ch, [&](std::optional<int> v) { got = v.value_or(-2); }), gort::on_default());
      gort::yield();
    }
    EXPECT_EQ(got, SIGUSR1);
    gort::signal::stop(ch);
  });
}

TEST_P(Signal, IgnoreAndReset) {
  void* before = handler_of(SIGUSR2);
  run_test([] {
    auto ch = gort::make_chan<int>(1);
    gort::signal::notify(ch, {SIGUSR2});
    EXPECT_FALSE(gort::signal::ignored(SIGUSR2));
    gort::signal::ignore({SIGUSR2});
    EXPECT_TRUE(gort::signal::ignored(SIGUSR2));
    kill(getpid(), SIGUSR2);  // ignored: neither delivered nor fatal
    EXPECT_EQ(recv_within(ch, absl::Milliseconds(50)), -1);
    gort::signal::reset({SIGUSR2});
    EXPECT_FALSE(gort::signal::ignored(SIGUSR2));
    gort::signal::stop(ch);
  });
  EXPECT_EQ(handler_of(SIGUSR2), before);
  EXPECT_FALSE(gort::signal::ignored(0));
  EXPECT_FALSE(gort::signal::ignored(1000));
}

TEST_P(Signal, SigquitCanBeTakenFromTheDumpAndGivenBack) {
  run_test([] {
    void* dump = handler_of(SIGQUIT);
    auto ch = gort::make_chan<int>(1);
    gort::signal::notify(ch, {SIGQUIT});
    kill(getpid(), SIGQUIT);  // delivered, no goroutine dump, no exit
    EXPECT_EQ(recv_within(ch, absl::Seconds(10)), SIGQUIT);
    gort::signal::stop(ch);
    EXPECT_EQ(handler_of(SIGQUIT), dump);
  });
}

TEST_P(Signal, BadInputPanics) {
  run_test([] {
    auto ch = gort::make_chan<int>(1);
    EXPECT_EQ(panic_message([&] { gort::signal::notify(ch, {0}); }),
              "gort::signal::notify: signal 0 out of range [1, 64]");
    EXPECT_EQ(panic_message([&] { gort::signal::notify(ch, {65}); }),
              "gort::signal::notify: signal 65 out of range [1, 64]");
    EXPECT_EQ(panic_message([&] { gort::signal::notify(ch, {SIGKILL}); }),
              "gort::signal::notify: signal 9 (KILL) cannot be caught");
    EXPECT_EQ(panic_message([&] { gort::signal::notify(ch, {SIGSEGV}); }),
              "gort::signal::notify: signal 11 (SEGV) reports faults (gort turns them into fatal errors)");
    EXPECT_EQ(panic_message([&] { gort::signal::notify(ch, {SIGURG}); }),
              "gort::signal::notify: signal 23 (URG) is the runtime's preemption signal");
    EXPECT_EQ(panic_message([&] { gort::signal::ignore({SIGSTOP}); }),
              "gort::signal::ignore: signal 19 (STOP) cannot be caught");
    EXPECT_EQ(panic_message([&] { gort::signal::notify(gort::Chan<int>(), {SIGUSR1}); }),
              "os/signal: Notify using nil channel");
    gort::signal::stop(ch);  // never registered: nothing happens
  });
  auto ch = gort::make_chan<int>(1);
  EXPECT_EQ(panic_message([&] { gort::signal::notify(ch, {SIGUSR1}); }),
            "gort::signal::notify: the runtime is not running");
}

TEST_P(Signal, ARunLeavesNoHandlerBehind) {
  void* before = handler_of(SIGUSR1);
  // Registered and never stopped: the end of the run undoes it (and
  // run_test checks that no fd or thread is left).
  run_test(
      [] {
        auto ch = gort::make_chan<int>(1);
        gort::signal::notify(ch, {SIGUSR1, SIGHUP});
        kill(getpid(), SIGUSR1);
        EXPECT_EQ(recv_within(ch, absl::Seconds(10)), SIGUSR1);
      },
      /*all_exit=*/false);
  EXPECT_EQ(handler_of(SIGUSR1), before);
  // And the next run starts afresh.
  run_test([] {
    auto ch = gort::make_chan<int>(1);
    gort::signal::notify(ch, {SIGUSR1});
    kill(getpid(), SIGUSR1);
    EXPECT_EQ(recv_within(ch, absl::Seconds(10)), SIGUSR1);
    gort::signal::stop(ch);
  });
}

TEST_P(Signal, NotifyAllAndManyWatchers) {
  run_test([] {
    std::vector<gort::Chan<int>> chans;
    for (int i = 0; i < 20; i++) {
      chans.push_back(gort::make_chan<int>(8));
      gort::signal::notify(chans.back());  // every relayable signal
    }
    kill(getpid(), SIGWINCH);
    kill(getpid(), SIGHUP);
    for (auto& ch : chans) {
      int a = recv_within(ch, absl::Seconds(10)), b = recv_within(ch, absl::Seconds(10));
      EXPECT_TRUE((a == SIGWINCH && b == SIGHUP) || (a == SIGHUP && b == SIGWINCH)) << a << " " << b;
    }
    for (auto& ch : chans) gort::signal::stop(ch);
    EXPECT_FALSE(gort::signal::ignored(SIGHUP));
  });
}

}  // namespace
}  // namespace gort_stdlib_test

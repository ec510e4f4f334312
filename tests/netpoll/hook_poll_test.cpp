// tests/netpoll/hook_poll_test.cpp — a library's own event loop on
// goroutines (netpoll/hook/poll.cpp): poll, ppoll, select, pselect,
// epoll_wait and epoll_pwait park until a descriptor is ready, one closes,
// or the timeout passes, and answer as libc's do.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/netpoll/c_event_loop.h"
#include "tests/netpoll/hook_helpers.hpp"

namespace {

using gort::test::close_pipe;
using gort::test::hooked_pipe;
using gort::test::ms_created;
using gort::test::Parked;
using gort::test::Pipe;
using gort::test::raw_pipe;
using gort::test::WaitReason;

using Clock = std::chrono::steady_clock;

class HookPoll : public gort::test::ProcsTest {};
GORT_INSTANTIATE_HOOK_PROCS(HookPoll);

int64_t ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

TEST_P(HookPoll, PollParksUntilADescriptorIsReady) {
  run_test([] {
    Pipe a = hooked_pipe(), b = raw_pipe();
    Parked poller;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      pollfd fds[2] = {{a.r, POLLIN, 0}, {b.r, POLLIN, 0}};
      poller.mark();
      int n = ::poll(fds, 2, -1);
      EXPECT_EQ(n, 1);
      EXPECT_EQ(fds[0].revents, 0);
      EXPECT_EQ(fds[1].revents, POLLIN);
      wg.done();
    });
    ASSERT_TRUE(poller.wait(WaitReason::kIOWait)) << "poll(2) did not park";
    ASSERT_EQ(::write(b.w, "x", 1), 1);
    wg.wait();
    close_pipe(a);
    close_pipe(b);
  });
}

TEST_P(HookPoll, TimeoutsAndImmediateAnswers) {
  run_test([] {
    Pipe p = hooked_pipe();
    pollfd in{p.r, POLLIN, 0};
    auto t0 = Clock::now();
    EXPECT_EQ(::poll(&in, 1, 50), 0);
    EXPECT_GE(ms_since(t0), 49);
    EXPECT_EQ(::poll(&in, 1, 0), 0);
    pollfd out{p.w, POLLOUT, 0};
    EXPECT_EQ(::poll(&out, 1, -1), 1) << "a writable pipe is ready at once";
    EXPECT_EQ(out.revents, POLLOUT);
    // No descriptors: a sleep.
    t0 = Clock::now();
    EXPECT_EQ(::poll(nullptr, 0, 30), 0);
    EXPECT_GE(ms_since(t0), 29);
    // A negative descriptor is ignored, a closed one is POLLNVAL.
    int gone = ::dup(p.r);
    ::close(gone);
    pollfd bad[2] = {{-1, POLLIN, 0}, {gone, POLLIN, 0}};
    EXPECT_EQ(::poll(bad, 2, 100), 1);
    EXPECT_EQ(bad[1].revents, POLLNVAL);
    // ppoll without a mask is poll with a timespec.
    timespec ts{0, 40 * 1000000};
    t0 = Clock::now();
    EXPECT_EQ(::ppoll(&in, 1, &ts, nullptr), 0);
    EXPECT_GE(ms_since(t0), 39);
    close_pipe(p);
  });
}

TEST_P(HookPoll, SelectAndPselect) {
  run_test([] {
    Pipe a = hooked_pipe(), b = hooked_pipe();
    gort::go([&] {
      gort::sleep(absl::Milliseconds(20));
      EXPECT_EQ(::write(a.w, "a", 1), 1);
    });
    fd_set r;
    FD_ZERO(&r);
    FD_SET(a.r, &r);
    FD_SET(b.r, &r);
    timeval tv{5, 0};
    int n = ::select(std::max(a.r, b.r) + 1, &r, nullptr, nullptr, &tv);
    EXPECT_EQ(n, 1);
    EXPECT_TRUE(FD_ISSET(a.r, &r));
    EXPECT_FALSE(FD_ISSET(b.r, &r));
    EXPECT_LT(tv.tv_sec, 5) << "Linux's select leaves the time not slept";
    // A timeout clears the sets.
    FD_ZERO(&r);
    FD_SET(b.r, &r);
    timeval short_tv{0, 30000};
    auto t0 = Clock::now();
    EXPECT_EQ(::select(b.r + 1, &r, nullptr, nullptr, &short_tv), 0);
    EXPECT_GE(ms_since(t0), 29);
    EXPECT_FALSE(FD_ISSET(b.r, &r));
    // pselect, with and without a signal mask (the masked one is made as
    // it is, on its thread).
    FD_ZERO(&r);
    FD_SET(a.r, &r);
    timespec ts{1, 0};
    EXPECT_EQ(::pselect(a.r + 1, &r, nullptr, nullptr, &ts, nullptr), 1) << "a's byte is still there";
    sigset_t mask;
    sigemptyset(&mask);
    FD_ZERO(&r);
    FD_SET(b.r, &r);
    timespec tiny{0, 10 * 1000000};
    EXPECT_EQ(::pselect(b.r + 1, &r, nullptr, nullptr, &tiny, &mask), 0);
    close_pipe(a);
    close_pipe(b);
  });
}

TEST_P(HookPoll, EpollWaitOnTheProgramsOwnEpoll) {
  run_test([] {
    Pipe p = hooked_pipe();
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(ep, 0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 77;
    ASSERT_EQ(::epoll_ctl(ep, EPOLL_CTL_ADD, p.r, &ev), 0);
    Parked waiter;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      epoll_event got[4];
      waiter.mark();
      int n = ::epoll_wait(ep, got, 4, -1);
      EXPECT_EQ(n, 1);
      if (n == 1) {
        EXPECT_EQ(got[0].data.u64, 77u);
      }
      wg.done();
    });
    ASSERT_TRUE(waiter.wait(WaitReason::kIOWait)) << "epoll_wait did not park";
    ASSERT_EQ(::write(p.w, "e", 1), 1);
    wg.wait();
    char c;
    ASSERT_EQ(::read(p.r, &c, 1), 1);
    epoll_event none[1];
    auto t0 = Clock::now();
    EXPECT_EQ(::epoll_wait(ep, none, 1, 30), 0);
    EXPECT_GE(ms_since(t0), 29);
    sigset_t mask;
    sigemptyset(&mask);
    EXPECT_EQ(::epoll_pwait(ep, none, 1, 10, &mask), 0);
    ::close(ep);
    close_pipe(p);
  });
}

// A close of a descriptor a goroutine polls wakes it: poll reports it.
TEST_P(HookPoll, CloseOfAPolledDescriptorWakesThePoller) {
  run_test([] {
    Pipe p = hooked_pipe();
    Parked poller;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      pollfd fd{p.r, POLLIN, 0};
      poller.mark();
      EXPECT_EQ(::poll(&fd, 1, 10000), 1);
      EXPECT_EQ(fd.revents, POLLNVAL);
      wg.done();
    });
    ASSERT_TRUE(poller.wait(WaitReason::kIOWait));
    ::close(p.r);
    wg.wait();
    ::close(p.w);
  });
}

// Goroutines polling the same descriptor are all woken by its event.
TEST_P(HookPoll, EveryPollerOfADescriptorWakes) {
  run_test([] {
    Pipe p = hooked_pipe();
    constexpr int kPollers = 10;
    std::vector<Parked> parked(kPollers);
    std::atomic<int> woke{0};
    gort::WaitGroup wg;
    for (int i = 0; i < kPollers; i++) {
      wg.add(1);
      gort::go([&, i] {
        pollfd fd{p.r, POLLIN, 0};
        parked[i].mark();
        if (::poll(&fd, 1, -1) == 1 && fd.revents == POLLIN) woke++;
        wg.done();
      });
    }
    for (auto& w : parked) ASSERT_TRUE(w.wait(WaitReason::kIOWait));
    ASSERT_EQ(::write(p.w, "!", 1), 1);
    wg.wait();
    EXPECT_EQ(woke.load(), kPollers);
    close_pipe(p);
  });
}

// A C library's own loop (a shared library that waits with poll, select
// or epoll_wait between non-blocking reads) on many goroutines at once:
// each parks in its wait, and no thread is made for them.
TEST_P(HookPoll, ACLibrarysOwnLoopOnManyGoroutines) {
  run_test([] {
    for (cel_wait how : {CEL_POLL, CEL_SELECT, CEL_EPOLL}) {
      constexpr int kLoops = 50;
      int ms_before = ms_created();
      std::vector<Pipe> pipes(kLoops);
      for (auto& p : pipes) ASSERT_GE((p = hooked_pipe(O_CLOEXEC | O_NONBLOCK)).r, 0);
      std::atomic<int> done{0};
      gort::WaitGroup wg;
      for (int i = 0; i < kLoops; i++) {
        wg.add(1);
        gort::go([&, i] {
          char buf[6];
          if (cel_read_all(pipes[i].r, buf, 6, how, 10000) == 6 && std::string(buf, 6) == "abcdef") done++;
          wg.done();
        });
      }
      gort::sleep(absl::Milliseconds(20));
      for (auto& p : pipes) {
        ASSERT_EQ(::write(p.w, "abc", 3), 3);
      }
      gort::sleep(absl::Milliseconds(5));
      for (auto& p : pipes) {
        ASSERT_EQ(::write(p.w, "def", 3), 3);
      }
      wg.wait();
      EXPECT_EQ(done.load(), kLoops) << "wait kind " << how;
      EXPECT_LE(ms_created() - ms_before, gort::procs()) << "wait kind " << how;
      for (auto& p : pipes) close_pipe(p);
    }
  });
}

// A thread that holds an OS lock waits in the kernel, with its P handed
// off: the other goroutines run meanwhile, even on one P.
TEST_P(HookPoll, PollUnderAnOsLockHandsOffTheP) {
  run_test([] {
    Pipe p = hooked_pipe();
    std::mutex m;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      std::lock_guard<std::mutex> hold(m);
      pollfd fd{p.r, POLLIN, 0};
      EXPECT_EQ(::poll(&fd, 1, 10000), 1);
      wg.done();
    });
    gort::sleep(absl::Milliseconds(20));  // runs although the poller's thread waits
    ASSERT_EQ(::write(p.w, "x", 1), 1);
    wg.wait();
    close_pipe(p);
  });
}

}  // namespace

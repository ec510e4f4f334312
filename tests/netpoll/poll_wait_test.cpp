// tests/netpoll/poll_wait_test.cpp — poll_wait's `trusted` answer
// (netpoll/poll_desc.cpp). A reader woken by an event that the poller
// harvested after it parked knows input is there without asking the kernel
// (a session's kept goroutine then spares a poll(2) per request); readiness
// left from before the wait may be stale (an event harvested before the
// reader's last read, for data that read took) and so may a hint
// (poll_wake_reader): neither may be trusted. Trusting a stale wake-up
// would run a session's turn whose read then waits, holding a goroutine.
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "gmp/sched.hpp"
#include "gmp/os/clock.hpp"
#include "gort/sync.hpp"
#include "netpoll/netpoll.hpp"
#include "netpoll/poll_desc.hpp"
#include "tests/netpoll/hook_helpers.hpp"

namespace {

using gort::internal::PollDesc;
using gort::test::eventually;
using gort::test::Parked;
using gort::test::WaitReason;

class PollWait : public gort::test::ProcsTest {};
GORT_INSTANTIATE_HOOK_PROCS(PollWait);

// A Unix stream pair made past the libc hooks: `reader` non-blocking and in
// the poller, `writer` written with plain system calls (no hint: only the
// kernel's event reports the data).
struct Pair {
  int reader = -1, writer = -1;
  PollDesc* pd = nullptr;
};

Pair open_pair() {
  int sv[2];
  Pair p;
  if (::syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
    ADD_FAILURE() << "socketpair: " << errno;
    return p;
  }
  p.reader = sv[0];
  p.writer = sv[1];
  p.pd = gort::internal::poll_open(p.reader);
  EXPECT_NE(p.pd, nullptr) << "poll_open: " << errno;
  return p;
}

void close_pair(Pair& p) {
  if (p.pd != nullptr) {
    gort::internal::poll_evict(p.pd);
    if (gort::internal::poll_close(p.pd)) ::syscall(SYS_close, p.reader);
  } else if (p.reader >= 0) {
    ::syscall(SYS_close, p.reader);
  }
  if (p.writer >= 0) ::syscall(SYS_close, p.writer);
  p = {};
}

bool put_byte(const Pair& p) { return ::syscall(SYS_write, p.writer, "x", 1) == 1; }
// Reads what is queued; the number of bytes.
long take_all(const Pair& p) {
  char buf[64];
  long total = 0, n;
  while ((n = ::syscall(SYS_read, p.reader, buf, sizeof buf)) > 0) total += n;
  return total;
}

// Waits once with `trusted` in a goroutine, parked before the test goes on.
struct Waiter {
  Parked parked;
  gort::WaitGroup done;
  std::atomic<int> result{-1};
  std::atomic<bool> trusted{false};

  void start(PollDesc* pd) {
    done.add(1);
    gort::go([this, pd] {
      parked.mark();
      bool t = false;
      result.store(gort::internal::poll_wait(pd, 'r', &t));
      trusted.store(t);
      done.done();
    });
    ASSERT_TRUE(parked.wait(WaitReason::kIOWait)) << "the reader did not park";
  }
};

// With one P the poller runs only once the reader and the writer have
// parked, so every harvest begins after the park. With more, an idle M may
// have been blocked in the poller since before the reader parked: what it
// reports is not vouched for (it may have collected the event before the
// reader's last read), and the reader asks the kernel instead.
TEST_P(PollWait, AnEventHarvestedAfterTheParkIsTrusted) {
  const int procs = GetParam();
  run_test([procs] {
    Pair p = open_pair();
    ASSERT_NE(p.pd, nullptr);
    int trusted = 0;
    constexpr int kRounds = 50;
    for (int i = 0; i < kRounds; i++) {
      Waiter w;
      w.start(p.pd);
      ASSERT_TRUE(put_byte(p));
      w.done.wait();
      EXPECT_EQ(w.result.load(), gort::internal::kPollOk);
      if (procs == 1) {
        EXPECT_TRUE(w.trusted.load()) << "round " << i;
      }
      trusted += w.trusted.load();
      EXPECT_EQ(take_all(p), 1);
    }
    EXPECT_GT(trusted, 0) << "no wake-up of " << kRounds << " was vouched for";
    close_pair(p);
  });
}

TEST_P(PollWait, ReadinessHarvestedBeforeTheWaitIsNotTrusted) {
  run_test([] {
    Pair p = open_pair();
    ASSERT_NE(p.pd, nullptr);
    // The event is harvested with nobody waiting on it (the slot holds
    // kReady), then a read takes the data: the readiness left behind is
    // stale. The poller runs while some goroutine waits in it: a bystander
    // on another pair.
    Pair other = open_pair();
    ASSERT_NE(other.pd, nullptr);
    Waiter bystander;
    bystander.start(other.pd);
    ASSERT_TRUE(put_byte(p));
    ASSERT_TRUE(eventually([&] { return p.pd->rg.load() == 1; })) << "no harvest left readiness behind";
    EXPECT_EQ(take_all(p), 1);
    ASSERT_TRUE(put_byte(other));
    bystander.done.wait();
    close_pair(other);
    bool trusted = true;
    EXPECT_EQ(gort::internal::poll_wait(p.pd, 'r', &trusted), gort::internal::kPollOk);
    EXPECT_FALSE(trusted) << "a stale readiness was vouched for";
    close_pair(p);
  });
}

TEST_P(PollWait, AHintIsNotTrusted) {
  const int procs = GetParam();
  run_test([procs] {
    Pair p = open_pair();
    ASSERT_NE(p.pd, nullptr);
    Waiter w;
    w.start(p.pd);
    gort::internal::G* g = gort::internal::poll_wake_reader(gort::internal::poll_tag(p.pd));
    ASSERT_NE(g, nullptr) << "the hint found no parked reader";
    gort::internal::ready_after_write(g);
    w.done.wait();
    EXPECT_EQ(w.result.load(), gort::internal::kPollOk);
    EXPECT_FALSE(w.trusted.load()) << "a hint was vouched for";
    // The next wait of the same descriptor is trusted again (with one P:
    // see AnEventHarvestedAfterTheParkIsTrusted).
    Waiter w2;
    w2.start(p.pd);
    ASSERT_TRUE(put_byte(p));
    w2.done.wait();
    if (procs == 1) {
      EXPECT_TRUE(w2.trusted.load());
    }
    EXPECT_EQ(take_all(p), 1);
    close_pair(p);
  });
}

TEST_P(PollWait, ADeadlineOrACloseIsNoReadiness) {
  run_test([] {
    Pair p = open_pair();
    ASSERT_NE(p.pd, nullptr);
    Waiter w;
    w.start(p.pd);
    gort::internal::poll_set_deadline(p.pd, gort::internal::nanotime() + 1000000, 'r');
    w.done.wait();
    EXPECT_EQ(w.result.load(), gort::internal::kPollErrTimeout);
    EXPECT_FALSE(w.trusted.load());
    gort::internal::poll_set_deadline(p.pd, 0, 'r');
    Waiter w2;
    w2.start(p.pd);
    gort::internal::poll_evict(p.pd);
    w2.done.wait();
    EXPECT_EQ(w2.result.load(), gort::internal::kPollErrClosing);
    EXPECT_FALSE(w2.trusted.load());
    close_pair(p);
  });
}

}  // namespace

// tests/stdlib/net/net_deadline_test.cpp — gort::net deadlines and dial
// cancellation: read/write/accept deadlines, deadlines in the past, resets,
// dial with a cancelled context, a context deadline and dial_timeout
// against a listener whose accept queue is full (its SYNs go unanswered).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "gmp/clock_rand.hpp"
#include "gort/context.hpp"
#include "gort/net.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "netpoll/netpoll.hpp"
#include "stdlib/net/net_fd.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::make_pair;
using gort::test::msg;
using gort::test::must;
using gort::test::NetTest;
using gort::test::Pair;
using gort::test::Parked;
using gort::test::read_exactly;
using gort::test::write_str;
using gort::test::WaitReason;

const absl::Status kTimeout = absl::DeadlineExceededError("i/o timeout");

// xorshift64: the stress tests' reproducible choices.
uint64_t next_random(uint64_t* x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}


// A listening socket with a backlog of 0 whose queue is already full: a
// connect to it is neither accepted nor refused (Linux drops the SYN).
class Blackhole {
 public:
  Blackhole() {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(lfd_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(lfd_, 0), 0);
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    addr_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    // Fill the queue (the first connection is queued, the others hang).
    for (int i = 0; i < 3; i++) {
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      ::connect(c, reinterpret_cast<sockaddr*>(&a), len);
      fillers_.push_back(c);
    }
    gort::sleep(absl::Milliseconds(20));
  }
  ~Blackhole() {
    for (int c : fillers_) ::close(c);
    ::close(lfd_);
  }
  const std::string& addr() const { return addr_; }

 private:
  int lfd_ = -1;
  std::vector<int> fillers_;
  std::string addr_;
};

TEST_P(NetTest, ReadDeadlineFiresWhileParked) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    absl::Time start = absl::Now();
    EXPECT_TRUE(p.client.set_read_deadline(start + absl::Milliseconds(50)).ok());
    char b[16];
    auto r = p.client.read(absl::MakeSpan(b));
    absl::Duration took = absl::Now() - start;
    EXPECT_EQ(r.status(), kTimeout);
    EXPECT_TRUE(gort::net::is_timeout_error(r.status()));
    EXPECT_GE(took, absl::Milliseconds(45));
    EXPECT_LT(took, absl::Seconds(5));
    // Still expired: fails at once.
    EXPECT_EQ(p.client.read(absl::MakeSpan(b)).status(), kTimeout);
    // A later deadline makes the connection usable again.
    EXPECT_TRUE(p.client.set_read_deadline(absl::Now() + absl::Seconds(30)).ok());
    EXPECT_TRUE(write_str(p.server, "late").ok());
    EXPECT_EQ(read_exactly(p.client, 4).value_or(""), "late");
    // Writes were never affected.
    EXPECT_TRUE(write_str(p.client, "ok").ok());
  });
}

TEST_P(NetTest, DeadlineResetWhileParked) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    // A reader parks with a short deadline; another goroutine pushes the
    // deadline out before it fires; data then arrives.
    EXPECT_TRUE(p.client.set_read_deadline(absl::Now() + absl::Milliseconds(100)).ok());
    Parked parked;
    gort::WaitGroup wg;
    absl::StatusOr<std::string> got;
    wg.add(1);
    gort::go([&] {
      parked.mark();
      got = read_exactly(p.client, 3);
      wg.done();
    });
    EXPECT_TRUE(parked.wait(WaitReason::kIOWait));
    EXPECT_TRUE(p.client.set_read_deadline(absl::InfiniteFuture()).ok());
    gort::sleep(absl::Milliseconds(150));
    EXPECT_TRUE(write_str(p.server, "abc").ok());
    wg.wait();
    EXPECT_EQ(got.value_or("<error>"), "abc");
  });
}

// Pushing a pending deadline back leaves its timer armed at the old time
// (netpoll/poll_deadline.cpp, "Deadlines"): when that comes, the timer is
// re-armed, and the deadline fires at the time last set, never before.
TEST_P(NetTest, DeadlinePushedBackFiresAtItsNewTime) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    char b[4];
    for (bool write_side : {false, true}) {
      absl::Time start = absl::Now();
      auto set = [&](absl::Time t) {
        return write_side ? p.client.set_write_deadline(t) : p.client.set_read_deadline(t);
      };
      EXPECT_TRUE(set(start + absl::Milliseconds(40)).ok());
      absl::Time last = start + absl::Milliseconds(120);
      EXPECT_TRUE(set(last).ok());
      absl::Status st;
      if (write_side) {
        // Fill the socket's buffers until the write blocks, then time out.
        std::string chunk(64 * 1024, 'w');
        for (;;) {
          auto n = p.client.write(absl::MakeConstSpan(chunk.data(), chunk.size()));
          if (!n.ok()) {
            st = n.status();
            break;
          }
        }
      } else {
        st = p.client.read(absl::MakeSpan(b)).status();
      }
      EXPECT_EQ(st, kTimeout) << (write_side ? "write" : "read");
      EXPECT_GE(absl::Now(), last - absl::Microseconds(20))
          << (write_side ? "write" : "read") << " timed out at the first deadline";
    }
  });
}

// A reader parked while another goroutine keeps pushing its deadline back,
// 30 ms ahead every 5 ms: no timeout while it does, then one at the last
// deadline set.
TEST_P(NetTest, DeadlineKeptPushedBackWhileParked) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    EXPECT_TRUE(p.client.set_read_deadline(absl::Now() + absl::Milliseconds(30)).ok());
    std::atomic<bool> pushing{true};
    gort::WaitGroup wg;
    absl::Time last;
    wg.add(1);
    gort::go([&] {
      absl::Time until = absl::Now() + absl::Milliseconds(200);
      while (absl::Now() < until) {
        last = absl::Now() + absl::Milliseconds(30);
        EXPECT_TRUE(p.client.set_read_deadline(last).ok());
        gort::sleep(absl::Milliseconds(5));
      }
      pushing.store(false);
      wg.done();
    });
    char b[4];
    auto n = p.client.read(absl::MakeSpan(b));
    EXPECT_EQ(n.status(), kTimeout);
    EXPECT_FALSE(pushing.load()) << "timed out while the deadline was being pushed back";
    wg.wait();
    EXPECT_GE(absl::Now(), last - absl::Microseconds(20));
  });
}

// A deadline pushed back just as it fires: the firing of the old one,
// already claimed by the timer's runner when the new deadline is set, must
// not expire the new one (Go's netpoll deadline seq). Each round arms a
// read deadline 200 µs ahead, spins until about then (on a P of its own,
// so another M runs the timer), pushes it 10 s out and reads a byte that
// is already there: a timeout is the old firing taking the new deadline.
TEST_P(NetTest, DeadlinePushedBackAsItFiresKeepsTheNewOne) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    const int rounds = gort::test::stress_size(3000);
    int timeouts = 0;
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < rounds && timeouts == 0; i++) {
      if (!write_str(p.server, "z").ok()) return;
      absl::Time first = absl::Now() + absl::Microseconds(200);
      EXPECT_TRUE(p.client.set_read_deadline(first).ok());
      absl::Time push_at = first + absl::Microseconds(static_cast<int64_t>(next_random(&x) % 60) - 30);
      while (absl::Now() < push_at) {
      }
      EXPECT_TRUE(p.client.set_read_deadline(absl::Now() + absl::Seconds(10)).ok());
      // A stale firing would land within microseconds of the push.
      absl::Time settle = absl::Now() + absl::Microseconds(30);
      while (absl::Now() < settle) {
      }
      char c;
      auto n = p.client.read(absl::MakeSpan(&c, 1));
      if (!n.ok()) {
        timeouts++;
        ADD_FAILURE() << "round " << i << ": " << n.status();
      }
    }
  });
}

// Goroutines that set one connection's read deadline at random (pushed
// back, moved earlier, cleared, in the past) while a reader keeps reading:
// afterwards a deadline still fires on time, whatever path each call took.
// A deadline left set with no timer armed at or before it would let the
// last reads wait for data that only the rescue below sends.
TEST_P(NetTest, DeadlineSettersRacingLeaveItsTimerArmed) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    std::atomic<bool> stop{false};
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      char b[64];
      while (!stop.load()) (void)p.client.read(absl::MakeSpan(b));
      wg.done();
    });
    const int setters = 4, calls = gort::test::stress_size(4000);
    std::atomic<int> setting{setters};
    for (int i = 0; i < setters; i++) {
      wg.add(1);
      gort::go([&, i] {
        uint64_t x = 0x9E3779B97F4A7C15ull * (i + 1);
        for (int k = 0; k < calls; k++) {
          next_random(&x);
          absl::Time now = absl::Now();
          switch (x % 8) {
            case 0: (void)p.client.set_read_deadline(absl::InfiniteFuture()); break;
            case 1: (void)p.client.set_read_deadline(now - absl::Milliseconds(1)); break;
            case 2: (void)p.client.set_read_deadline(now + absl::Microseconds(50)); break;
            default:
              (void)p.client.set_read_deadline(now + absl::Microseconds(static_cast<int64_t>(x % 5000)));
          }
          if (x % 16 == 0) gort::yield();
          if (x % 64 == 1) (void)write_str(p.server, "d");
        }
        setting.fetch_sub(1);
        wg.done();
      });
    }
    while (setting.load() > 0) gort::sleep(absl::Milliseconds(1));
    stop.store(true);
    (void)p.client.set_read_deadline(absl::Now() - absl::Seconds(1));  // ends the reader's read
    wg.wait();
    // Drain what the setters wrote, then check that deadlines fire.
    (void)p.client.set_read_deadline(absl::Now() + absl::Milliseconds(20));
    char b[256];
    while (p.client.read(absl::MakeSpan(b)).ok()) {
    }
    for (int r = 0; r < 20; r++) {
      std::atomic<bool> returned{false};
      gort::WaitGroup rescue;
      rescue.add(1);
      gort::go([&] {
        absl::Time give_up = absl::Now() + absl::Seconds(2);
        while (!returned.load() && absl::Now() < give_up) gort::sleep(absl::Milliseconds(1));
        if (!returned.load()) (void)write_str(p.server, "r");
        rescue.done();
      });
      // Even rounds: armed, then pushed back (no lock, the timer stays at
      // the first time). Odd rounds: a later one moved earlier (locked).
      absl::Time t = absl::Now() + absl::Milliseconds(1);
      EXPECT_TRUE(p.client.set_read_deadline(r % 2 == 0 ? t : t + absl::Milliseconds(1)).ok());
      if (r % 2 == 0) t += absl::Milliseconds(1);
      EXPECT_TRUE(p.client.set_read_deadline(t).ok());
      auto n = p.client.read(absl::MakeSpan(b));
      returned.store(true);
      EXPECT_EQ(n.status(), kTimeout) << "round " << r << ": the deadline never fired";
      rescue.wait();
    }
  });
}

// A poll descriptor holds its two deadline timers only while one of its
// deadlines is pending (netpoll/poll_deadline.cpp, "Deadlines"): an idle
// connection without one carries none.
TEST_P(NetTest, DeadlineTimersOnlyWhileADeadlineIsPending) {
  run_test([] {
    using gort::internal::poll_deadline_timers_attached;
    const int64_t base = poll_deadline_timers_attached();
    Pair p = make_pair();
    if (!p.server) return;
    EXPECT_EQ(poll_deadline_timers_attached(), base);
    const absl::Time later = absl::Now() + absl::Hours(1);
    EXPECT_TRUE(p.server.set_read_deadline(later).ok());
    EXPECT_EQ(poll_deadline_timers_attached(), base + 1);
    EXPECT_TRUE(p.server.set_write_deadline(later).ok());
    EXPECT_EQ(poll_deadline_timers_attached(), base + 1) << "one pair per descriptor";
    EXPECT_TRUE(p.server.set_read_deadline(absl::InfiniteFuture()).ok());
    EXPECT_EQ(poll_deadline_timers_attached(), base + 1) << "the write deadline is still pending";
    EXPECT_TRUE(p.server.set_write_deadline(absl::Now() - absl::Seconds(1)).ok());
    EXPECT_EQ(poll_deadline_timers_attached(), base) << "expired and cleared: none pending";
    // A deadline that fires gives them back too, and the next one works.
    EXPECT_TRUE(p.server.set_write_deadline(absl::InfiniteFuture()).ok());
    // Long enough not to fire before the count is read on a loaded machine.
    EXPECT_TRUE(p.server.set_read_deadline(absl::Now() + absl::Milliseconds(300)).ok());
    EXPECT_EQ(poll_deadline_timers_attached(), base + 1);
    char b[8];
    EXPECT_EQ(p.server.read(absl::MakeSpan(b)).status(), kTimeout);
    EXPECT_EQ(poll_deadline_timers_attached(), base);
    EXPECT_TRUE(p.server.set_read_deadline(absl::Now() + absl::Milliseconds(10)).ok());
    EXPECT_EQ(p.server.read(absl::MakeSpan(b)).status(), kTimeout);
    // Closed with a deadline pending: given back.
    EXPECT_TRUE(p.client.set_deadline(absl::Now() + absl::Hours(1)).ok());
    EXPECT_EQ(poll_deadline_timers_attached(), base + 1);
    EXPECT_TRUE(p.client.close().ok());
    EXPECT_EQ(poll_deadline_timers_attached(), base);
  });
}

// A deadline moved earlier, but not past where its timer is armed, leaves
// the timer there (poll_set_deadline): the timer's firing must then arm it
// again for the deadline it finds, so the read times out at the new
// deadline, neither at the timer's first time nor never. Moved earlier than
// the timer, the timer moves too.
TEST_P(NetTest, DeadlineMovedEarlierButAfterItsTimer) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    char b[8];
    // Timer armed at +40 ms; the deadline pushed back (lock-free) to an
    // hour, then set to +200 ms: the timer stays at +40 ms.
    absl::Time start = absl::Now();
    EXPECT_TRUE(p.server.set_read_deadline(start + absl::Milliseconds(40)).ok());
    EXPECT_TRUE(p.server.set_read_deadline(start + absl::Hours(1)).ok());
    EXPECT_TRUE(p.server.set_read_deadline(start + absl::Milliseconds(200)).ok());
    EXPECT_EQ(p.server.read(absl::MakeSpan(b)).status(), kTimeout);
    absl::Duration took = absl::Now() - start;
    EXPECT_GE(took, absl::Milliseconds(195)) << "not at the timer's first time";
    EXPECT_LT(took, absl::Seconds(10));
    // Timer at an hour, the deadline moved to +30 ms: the timer moves.
    start = absl::Now();
    EXPECT_TRUE(p.server.set_read_deadline(start + absl::Hours(1)).ok());
    EXPECT_TRUE(p.server.set_read_deadline(start + absl::Milliseconds(30)).ok());
    EXPECT_EQ(p.server.read(absl::MakeSpan(b)).status(), kTimeout);
    took = absl::Now() - start;
    EXPECT_GE(took, absl::Milliseconds(25));
    EXPECT_LT(took, absl::Seconds(10)) << "the timer moved earlier with the deadline";
    // Data before the deadline still reads.
    EXPECT_TRUE(p.server.set_read_deadline(absl::Now() + absl::Milliseconds(20)).ok());
    EXPECT_TRUE(p.server.set_read_deadline(absl::Now() + absl::Hours(1)).ok());
    EXPECT_TRUE(p.server.set_read_deadline(absl::Now() + absl::Seconds(5)).ok());
    gort::sleep(absl::Milliseconds(60));  // past the timer's first time
    ASSERT_TRUE(gort::test::write_str(p.client, "x").ok());
    EXPECT_EQ(must(p.server.read(absl::MakeSpan(b))), 1u);
  });
}

// Timers move between descriptors as deadlines come and go and connections
// close: a firing claimed before its timers moved must not expire the
// deadline of the descriptor they serve next. Readers on several Ps set
// short deadlines, clear some of them (then data must arrive, not a
// timeout), and close and reopen their connections all along.
TEST_P(NetTest, DeadlineTimersRecycledAcrossConnections) {
  run_test([] {
    using gort::internal::poll_deadline_timers_attached;
    const int64_t base = poll_deadline_timers_attached();
    const int workers = 4, rounds = gort::test::stress_size(300);
    std::atomic<int> wrong{0}, timeouts{0}, delivered{0};
    gort::WaitGroup wg;
    for (int w = 0; w < workers; w++) {
      wg.add(1);
      gort::go([&, w] {
        uint64_t x = 0x9E3779B97F4A7C15ull * (w + 1);
        Pair p = make_pair();
        for (int r = 0; r < rounds && p.server; r++) {
          next_random(&x);
          const absl::Duration d = absl::Microseconds(static_cast<int64_t>(x % 2000));
          (void)p.client.set_read_deadline(absl::Now() + d);
          char b[8];
          if (x % 3 == 0) {
            // Cleared before it fires: a stale firing of its timers (or of
            // another descriptor's that they served before) must not show.
            (void)p.client.set_read_deadline(absl::InfiniteFuture());
            if (x % 2 == 0) gort::sleep(d + absl::Microseconds(200));
            (void)write_str(p.server, "x");
            auto n = p.client.read(absl::MakeSpan(b, 1));
            if (n.ok() && *n == 1) {
              delivered++;
            } else {
              wrong++;
            }
          } else {
            auto n = p.client.read(absl::MakeSpan(b, 1));
            if (n.status() == kTimeout) {
              timeouts++;
            } else {
              wrong++;
            }
          }
          if (x % 7 == 0) p = make_pair();  // the old pair closes: its descriptors recycle
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(wrong.load(), 0) << timeouts.load() << " timeouts, " << delivered.load() << " deliveries";
    EXPECT_GT(timeouts.load(), 0);
    EXPECT_GT(delivered.load(), 0);
    EXPECT_EQ(poll_deadline_timers_attached(), base);
  });
}

TEST_P(NetTest, DeadlineInThePastFailsAtOnce) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    EXPECT_TRUE(write_str(p.server, "ready").ok());
    gort::sleep(absl::Milliseconds(10));
    // Data is ready, yet a past deadline wins (as in Go).
    EXPECT_TRUE(p.client.set_deadline(absl::Now() - absl::Seconds(1)).ok());
    char b[16];
    absl::Time start = absl::Now();
    EXPECT_EQ(p.client.read(absl::MakeSpan(b)).status(), kTimeout);
    EXPECT_EQ(p.client.write(absl::MakeConstSpan("x", 1)).status(), kTimeout);
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    // Unix epoch + 1 s (Go's aLongTimeAgo) is past too.
    EXPECT_TRUE(p.client.set_read_deadline(absl::UnixEpoch() + absl::Seconds(1)).ok());
    EXPECT_EQ(p.client.read(absl::MakeSpan(b)).status(), kTimeout);
    // InfinitePast and InfiniteFuture both mean "no deadline".
    EXPECT_TRUE(p.client.set_deadline(absl::InfinitePast()).ok());
    EXPECT_EQ(read_exactly(p.client, 5).value_or(""), "ready");
    EXPECT_TRUE(p.client.set_write_deadline(absl::Now() - absl::Seconds(1)).ok());
    EXPECT_TRUE(p.client.set_write_deadline(absl::InfiniteFuture()).ok());
    EXPECT_TRUE(write_str(p.client, "x").ok());
  });
}

// The conversion of a deadline to the poller's clock, at its edges: none,
// past (even by a fraction of a nanosecond), ahead, and beyond int64's
// nanoseconds either way.
TEST(PollDeadline, ConvertsEveryKindOfTime) {
  using gort::internal::nanotime;
  using gort::internal::poll_deadline;
  constexpr int64_t kFar = int64_t{1} << 62;
  const int64_t now = nanotime();
  EXPECT_EQ(poll_deadline(absl::InfinitePast(), now), 0);
  EXPECT_EQ(poll_deadline(absl::InfiniteFuture(), now), 0);
  EXPECT_EQ(poll_deadline(absl::Now() - absl::Seconds(1), now), 1);
  EXPECT_EQ(poll_deadline(absl::UnixEpoch() + absl::Seconds(1), now), 1);
  EXPECT_EQ(poll_deadline(absl::FromCivil(absl::CivilSecond(1000, 1, 1), absl::UTCTimeZone()), now), 1);
  EXPECT_EQ(poll_deadline(absl::FromCivil(absl::CivilSecond(3000, 1, 1), absl::UTCTimeZone()), now), kFar);
  EXPECT_EQ(poll_deadline(absl::FromUnixSeconds(int64_t{1} << 40), now), kFar);
  // An hour ahead: an hour of nanotime ahead, give or take the two clocks'
  // readings (the wall-clock offset is read at most a millisecond apart).
  const int64_t t = nanotime();
  const int64_t d = poll_deadline(absl::Now() + absl::Hours(1), t);
  EXPECT_NEAR(static_cast<double>(d - t), 3600e9, 5e6);
  // Two milliseconds ago and a quarter nanosecond: past still (whole
  // nanoseconds, floored).
  const int64_t t2 = nanotime();
  const int64_t wall = absl::ToUnixNanos(absl::Now());
  const int64_t at = poll_deadline(absl::FromUnixNanos(wall - 2'000'000) + absl::Nanoseconds(0.25), t2);
  EXPECT_EQ(at, 1);
}

// Deadlines set in quick succession (the wall-clock offset they are
// converted with is cached for a millisecond): one a microsecond past fails
// at once, one a few milliseconds ahead fires, never before its time.
TEST_P(NetTest, DeadlinesCloseToNow) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    char b[16];
    for (int i = 0; i < 20; i++) {
      EXPECT_TRUE(p.client.set_read_deadline(absl::Now() - absl::Microseconds(1)).ok());
      EXPECT_EQ(p.client.read(absl::MakeSpan(b)).status(), kTimeout);
      absl::Time t = absl::Now() + absl::Milliseconds(1 + i % 3);
      EXPECT_TRUE(p.client.set_read_deadline(t).ok());
      EXPECT_EQ(p.client.read(absl::MakeSpan(b)).status(), kTimeout);
      // Allow for the two clocks' rounding, not for a stale offset.
      EXPECT_GE(absl::Now(), t - absl::Microseconds(20)) << "round " << i << ": fired early";
    }
    // And the connection still works.
    EXPECT_TRUE(p.client.set_read_deadline(absl::Now() + absl::Seconds(10)).ok());
    EXPECT_TRUE(write_str(p.server, "ok").ok());
    EXPECT_EQ(read_exactly(p.client, 2).value_or(""), "ok");
  });
}

TEST_P(NetTest, WriteDeadlineWithFullBuffers) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    EXPECT_TRUE(p.client.set_write_buffer(4096).ok());
    EXPECT_TRUE(p.server.set_read_buffer(4096).ok());
    // Nobody reads: the write fills the buffers, parks, and times out.
    std::string big(64 << 20, 'w');
    absl::Time start = absl::Now();
    EXPECT_TRUE(p.client.set_write_deadline(start + absl::Milliseconds(100)).ok());
    auto w = p.client.write(absl::MakeConstSpan(big.data(), big.size()));
    EXPECT_EQ(w.status(), kTimeout);
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  });
}

TEST_P(NetTest, AcceptDeadline) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    EXPECT_TRUE(ln.set_deadline(absl::Now() + absl::Milliseconds(30)).ok());
    auto c = ln.accept();
    EXPECT_EQ(c.status(), kTimeout);
    EXPECT_TRUE(ln.set_deadline(absl::InfiniteFuture()).ok());
    auto d = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(ln.accept().ok());
  });
}

TEST_P(NetTest, UdpReadDeadline) {
  run_test([] {
    auto pc = must(gort::net::listen_packet("udp", "127.0.0.1:0"));
    EXPECT_TRUE(pc.set_read_deadline(absl::Now() + absl::Milliseconds(20)).ok());
    char b[8];
    EXPECT_EQ(pc.read_from(absl::MakeSpan(b)).status(), kTimeout);
    EXPECT_TRUE(pc.set_deadline(absl::InfiniteFuture()).ok());
    EXPECT_TRUE(pc.write_to(absl::MakeConstSpan("hi", 2), pc.local_addr()).ok());
    EXPECT_EQ(pc.read_from(absl::MakeSpan(b)).value_or(std::pair<size_t, std::string>{}).first, 2u);
  });
}

TEST_P(NetTest, DialWithCancelledContext) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    cancel();
    auto c = gort::net::dial(ctx, "tcp", ln.addr());
    EXPECT_EQ(c.status(), absl::CancelledError("dial tcp " + ln.addr() + ": operation was canceled"));
    // A live context works, and its interrupter goroutine is gone after
    // dial returns (run_test checks that every goroutine exited).
    auto [ctx2, cancel2] = gort::with_cancel(gort::background());
    auto ok = gort::net::dial(ctx2, "tcp", ln.addr());
    EXPECT_TRUE(ok.ok()) << ok.status();
    cancel2();
    auto [ctx3, cancel3] = gort::with_timeout(gort::background(), absl::Seconds(30));
    auto ok3 = gort::net::dial(ctx3, "tcp", "localhost:" + ln.addr().substr(ln.addr().rfind(':') + 1));
    EXPECT_TRUE(ok3.ok()) << ok3.status();
    cancel3();
  });
}

TEST_P(NetTest, DialCancelledWhileConnecting) {
  run_test([] {
    Blackhole hole;
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    gort::go([cancel = cancel] {
      gort::sleep(absl::Milliseconds(50));
      cancel();
    });
    absl::Time start = absl::Now();
    auto c = gort::net::dial(ctx, "tcp", hole.addr());
    absl::Duration took = absl::Now() - start;
    EXPECT_EQ(c.status(), absl::CancelledError("dial tcp " + hole.addr() + ": operation was canceled"));
    EXPECT_GE(took, absl::Milliseconds(45));
    EXPECT_LT(took, absl::Seconds(5));
    gort::sleep(absl::Milliseconds(10));  // let the canceller exit
  });
}

TEST_P(NetTest, DialContextDeadline) {
  run_test([] {
    Blackhole hole;
    auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(60));
    absl::Time start = absl::Now();
    auto c = gort::net::dial(ctx, "tcp", hole.addr());
    absl::Duration took = absl::Now() - start;
    EXPECT_EQ(c.status(), absl::DeadlineExceededError("dial tcp " + hole.addr() + ": i/o timeout"));
    EXPECT_TRUE(gort::net::is_timeout_error(c.status()));
    EXPECT_GE(took, absl::Milliseconds(55));
    EXPECT_LT(took, absl::Seconds(5));
    cancel();
  });
}

TEST_P(NetTest, DialTimeout) {
  run_test([] {
    Blackhole hole;
    absl::Time start = absl::Now();
    auto c = gort::net::dial_timeout("tcp", hole.addr(), absl::Milliseconds(60));
    absl::Duration took = absl::Now() - start;
    EXPECT_EQ(c.status(), absl::DeadlineExceededError("dial tcp " + hole.addr() + ": i/o timeout"));
    EXPECT_GE(took, absl::Milliseconds(55));
    EXPECT_LT(took, absl::Seconds(5));
    // A timeout already spent fails without waiting.
    auto d = gort::net::dial_timeout("tcp", hole.addr(), absl::Milliseconds(-1));
    EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded);
    // Zero means no timeout (Go's Dialer.Timeout), here against a live peer.
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    EXPECT_TRUE(gort::net::dial_timeout("tcp", ln.addr(), absl::ZeroDuration()).ok());
  });
}


}  // namespace

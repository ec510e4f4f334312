// tests/stdlib/net/net_read_test.cpp — NetFD::read after a read that emptied
// the socket, and Conn::wait_readable. A short stream read drains the
// socket, and so does a TCP read that fills its buffer when the kernel says
// it left nothing behind (TCP_INQ): the next read waits for readiness before
// trying the system call. These tests pin down the states that such a read
// leaves behind without a new event (end of stream, a reset, close_read)
// and the data that arrives between two reads: every one must be reported
// promptly, never waited for. Each read runs under a deadline, so a lost
// wake-up fails with "i/o timeout" instead of hanging.
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "gort/net.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::must;
using gort::test::NetTest;
using gort::test::write_str;

constexpr absl::Duration kPatience = absl::Seconds(10);

struct Pair {
  gort::net::Conn client;
  gort::net::Conn server;
};

// A connected pair over `network` ("tcp" or "unix").
Pair connect(const std::string& network, const std::string& address) {
  Pair p;
  auto ln = must(gort::net::listen(network, address), "listen");
  if (!ln) return p;
  auto c = must(gort::net::dial(network, ln.addr()), "dial");
  auto s = ln.accept();
  EXPECT_TRUE(s.ok()) << s.status();
  if (s.ok()) p.server = std::move(*s);
  p.client = std::move(c);
  return p;
}

// Reads once with a big buffer under a deadline.
absl::StatusOr<std::string> read_some(gort::net::Conn& c) {
  EXPECT_TRUE(c.set_read_deadline(absl::Now() + kPatience).ok());
  char buf[4096];
  auto n = c.read(absl::MakeSpan(buf));
  if (!n.ok()) return n.status();
  return std::string(buf, *n);
}

// Runs `body` over TCP and over a Unix socket.
template <class F>
void over_both(F body) {
  body(connect("tcp", "127.0.0.1:0"));
  gort::test::TempDir dir;
  body(connect("unix", dir.path() + "/sock"));
}

TEST_P(NetTest, EndOfStreamBehindAShortRead) {
  run_test([] {
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      // The data and the FIN are both queued before the first read.
      EXPECT_TRUE(write_str(p.server, "last words").ok());
      EXPECT_TRUE(p.server.close().ok());
      gort::sleep(absl::Milliseconds(20));
      EXPECT_EQ(read_some(p.client).value_or("?"), "last words");
      auto eof = read_some(p.client);
      ASSERT_TRUE(eof.ok()) << eof.status();
      EXPECT_EQ(*eof, "");
    });
  });
}

TEST_P(NetTest, CloseWriteBehindAShortRead) {
  run_test([] {
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      EXPECT_TRUE(write_str(p.server, "half").ok());
      EXPECT_TRUE(p.server.close_write().ok());
      gort::sleep(absl::Milliseconds(20));
      EXPECT_EQ(read_some(p.client).value_or("?"), "half");
      EXPECT_EQ(read_some(p.client).value_or("?"), "");
      // The other direction still works.
      EXPECT_TRUE(write_str(p.client, "back").ok());
      EXPECT_EQ(read_some(p.server).value_or("?"), "back");
    });
  });
}

TEST_P(NetTest, ResetBehindAShortRead) {
  run_test([] {
    Pair p = connect("tcp", "127.0.0.1:0");
    if (!p.client || !p.server) return;
    EXPECT_TRUE(write_str(p.client, "ping").ok());
    EXPECT_EQ(read_some(p.server).value_or("?"), "ping");
    // Data, then an RST (SO_LINGER 0 with unread data pending on the
    // server's side is not needed: linger 0 alone resets).
    EXPECT_TRUE(write_str(p.server, "pong").ok());
    EXPECT_TRUE(p.server.set_linger(0).ok());
    EXPECT_TRUE(p.server.close().ok());
    gort::sleep(absl::Milliseconds(20));
    // Linux drops queued data when the RST arrives, so the first read may
    // already be the error; what must not happen is a wait.
    absl::StatusOr<std::string> r = read_some(p.client);
    if (r.ok() && !r->empty()) {
      EXPECT_EQ(*r, "pong");
      r = read_some(p.client);
    }
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("Connection reset by peer"), std::string::npos) << r.status();
  });
}

TEST_P(NetTest, CloseReadBehindAShortRead) {
  run_test([] {
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      EXPECT_TRUE(write_str(p.server, "x").ok());
      EXPECT_EQ(read_some(p.client).value_or("?"), "x");
      EXPECT_TRUE(p.client.close_read().ok());
      EXPECT_EQ(read_some(p.client).value_or("?"), "");
    });
  });
}

TEST_P(NetTest, DataArrivingBetweenReads) {
  run_test([] {
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      for (int i = 0; i < 50; i++) {
        std::string m = "m" + std::to_string(i);
        EXPECT_TRUE(write_str(p.server, m).ok());
        EXPECT_EQ(read_some(p.client).value_or("?"), m);
        // The next message lands while the reader is away: sent by this
        // goroutine itself, or after a pause, or by another goroutine.
        if (i % 3 == 1) gort::sleep(absl::Microseconds(200));
      }
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&] {
        EXPECT_TRUE(write_str(p.server, "from afar").ok());
        wg.done();
      });
      wg.wait();
      EXPECT_EQ(read_some(p.client).value_or("?"), "from afar");
    });
  });
}

// A writer trickles random-sized pieces with pauses while the reader takes
// them with a large buffer (so its reads are mostly short): everything
// arrives, in order, with no read waiting out its deadline.
TEST_P(NetTest, TrickleThroughShortReads) {
  run_test([] {
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      constexpr int kBytes = 200'000;
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&] {
        uint64_t x = 7;
        std::string piece;
        for (int sent = 0; sent < kBytes;) {
          x = x * 6364136223846793005ULL + 1442695040888963407ULL;
          int len = std::min<int>(kBytes - sent, 1 + static_cast<int>((x >> 33) % 3000));
          piece.clear();
          for (int i = 0; i < len; i++) piece.push_back(static_cast<char>((sent + i) * 131 % 251));
          EXPECT_TRUE(write_str(p.server, piece).ok());
          sent += len;
          switch ((x >> 20) % 4) {
            case 0: gort::yield(); break;
            case 1: gort::sleep(absl::Microseconds(50)); break;
            default: break;
          }
        }
        EXPECT_TRUE(p.server.close_write().ok());
        wg.done();
      });
      int64_t got = 0;
      bool in_order = true;
      for (;;) {
        auto r = read_some(p.client);
        ASSERT_TRUE(r.ok()) << r.status();
        if (r->empty()) break;
        for (char ch : *r) {
          in_order &= ch == static_cast<char>(got * 131 % 251);
          got++;
        }
      }
      EXPECT_TRUE(in_order);
      EXPECT_EQ(got, kBytes);
      wg.wait();
    });
  });
}

// Reads exactly n bytes with reads of exactly the bytes still missing (the
// message-at-a-time pattern: such a read fills its buffer, and over TCP the
// next one asks the kernel how much it left, TCP_INQ), under a deadline.
absl::StatusOr<std::string> read_exact(gort::net::Conn& c, size_t n) {
  EXPECT_TRUE(c.set_read_deadline(absl::Now() + kPatience).ok());
  std::string out(n, '\0');
  for (size_t got = 0; got < n;) {
    auto r = c.read(absl::MakeSpan(out.data() + got, n - got));
    if (!r.ok()) return r.status();
    if (*r == 0) return out.substr(0, got);  // end of stream
    got += *r;
  }
  return out;
}

// Fixed-size messages read one at a time: some queued several at once (a
// full read that leaves data behind must not wait), some arriving while
// the reader waits, some after it has emptied the socket.
TEST_P(NetTest, MessageSizedReads) {
  run_test([] {
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      constexpr size_t kMsg = 64;
      auto msg = [](int i) { return std::string(kMsg, static_cast<char>('a' + i % 26)); };
      int next = 0;
      for (int round = 0; round < 30; round++) {
        int burst = 1 + round % 3;
        gort::WaitGroup wg;
        wg.add(1);
        gort::go([&, burst, first = next] {
          if (round % 2 == 1) gort::sleep(absl::Microseconds(300));
          std::string all;
          for (int k = 0; k < burst; k++) all += msg(first + k);
          EXPECT_TRUE(write_str(p.server, all).ok());
          wg.done();
        });
        for (int k = 0; k < burst; k++, next++) {
          auto r = read_exact(p.client, kMsg);
          ASSERT_TRUE(r.ok()) << "message " << next << ": " << r.status();
          EXPECT_EQ(*r, msg(next));
        }
        wg.wait();
      }
    });
  });
}

// End of stream right behind data read with full reads: queued before the
// reads, or arriving after the last one emptied the socket.
TEST_P(NetTest, EndOfStreamBehindFullReads) {
  run_test([] {
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      EXPECT_TRUE(write_str(p.server, std::string(64, 'x') + std::string(64, 'y')).ok());
      EXPECT_TRUE(p.server.close_write().ok());
      gort::sleep(absl::Milliseconds(20));
      EXPECT_EQ(read_exact(p.client, 64).value_or("?"), std::string(64, 'x'));
      EXPECT_EQ(read_exact(p.client, 64).value_or("?"), std::string(64, 'y'));
      auto eof = read_exact(p.client, 64);
      ASSERT_TRUE(eof.ok()) << eof.status();
      EXPECT_EQ(*eof, "");
    });
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      EXPECT_TRUE(write_str(p.server, std::string(128, 'z')).ok());
      EXPECT_EQ(read_exact(p.client, 64).value_or("?"), std::string(64, 'z'));
      EXPECT_EQ(read_exact(p.client, 64).value_or("?"), std::string(64, 'z'));
      gort::go([srv = &p.server] {
        gort::sleep(absl::Milliseconds(5));
        EXPECT_TRUE(srv->close_write().ok());
      });
      auto eof = read_exact(p.client, 64);
      ASSERT_TRUE(eof.ok()) << eof.status();
      EXPECT_EQ(*eof, "");
      gort::sleep(absl::Milliseconds(10));  // the closer is done with p.server
    });
  });
}

TEST_P(NetTest, WaitReadableConsumesNothing) {
  run_test([] {
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&] {
        gort::sleep(absl::Milliseconds(5));
        EXPECT_TRUE(write_str(p.server, "abc").ok());
        wg.done();
      });
      EXPECT_TRUE(p.client.set_read_deadline(absl::Now() + kPatience).ok());
      EXPECT_TRUE(p.client.wait_readable().ok());  // parks until "abc"
      EXPECT_TRUE(p.client.wait_readable().ok());  // still there
      EXPECT_EQ(read_some(p.client).value_or("?"), "abc");
      wg.wait();
      // After a short read the next wait parks until new data.
      EXPECT_TRUE(write_str(p.server, "def").ok());
      EXPECT_TRUE(p.client.wait_readable().ok());
      EXPECT_EQ(read_some(p.client).value_or("?"), "def");
      // End of stream counts as readable.
      EXPECT_TRUE(p.server.close().ok());
      EXPECT_TRUE(p.client.wait_readable().ok());
      EXPECT_EQ(read_some(p.client).value_or("?"), "");
    });
  });
}

TEST_P(NetTest, WaitReadableDeadlineAndClose) {
  run_test([] {
    Pair p = connect("tcp", "127.0.0.1:0");
    if (!p.client || !p.server) return;
    EXPECT_TRUE(p.client.set_read_deadline(absl::Now() + absl::Milliseconds(20)).ok());
    absl::Status s = p.client.wait_readable();
    EXPECT_TRUE(gort::net::is_timeout_error(s)) << s;
    EXPECT_EQ(s, absl::DeadlineExceededError("i/o timeout"));
    EXPECT_TRUE(p.client.set_read_deadline(absl::InfiniteFuture()).ok());
    // Close from another goroutine wakes a parked wait_readable.
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      gort::sleep(absl::Milliseconds(5));
      EXPECT_TRUE(p.client.close().ok());
      wg.done();
    });
    s = p.client.wait_readable();
    EXPECT_TRUE(gort::net::is_closed_error(s)) << s;
    wg.wait();
    EXPECT_TRUE(gort::net::is_closed_error(p.client.wait_readable()));
    gort::net::Conn none;
    EXPECT_EQ(none.wait_readable(), absl::InvalidArgumentError("invalid argument"));
  });
}

TEST_P(NetTest, WaitReadableSeesAPendingReset) {
  run_test([] {
    Pair p = connect("tcp", "127.0.0.1:0");
    if (!p.client || !p.server) return;
    EXPECT_TRUE(p.server.set_linger(0).ok());
    EXPECT_TRUE(p.server.close().ok());
    EXPECT_TRUE(p.client.set_read_deadline(absl::Now() + kPatience).ok());
    EXPECT_TRUE(p.client.wait_readable().ok());
    auto r = read_some(p.client);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("Connection reset by peer"), std::string::npos) << r.status();
  });
}

// Reads until `want` bytes have arrived, the stream ends or a read fails.
absl::StatusOr<std::string> read_until(gort::net::Conn& c, size_t want) {
  std::string got;
  while (got.size() < want) {
    absl::StatusOr<std::string> r = read_some(c);
    if (!r.ok()) return r.status();
    if (r->empty()) break;
    got += *r;
  }
  return got;
}

// Reads until `want` has arrived in full, which must be what arrives.
void expect_to_read(gort::net::Conn& c, std::string_view want) {
  absl::StatusOr<std::string> got = read_until(c, want.size());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, want);
}

// sendmsg(2) of `data` on c's descriptor, passing a descriptor along with
// it (SCM_RIGHTS, a duplicate of stderr). The data is small, so it never
// blocks.
void send_with_fd(gort::net::Conn& c, std::string_view data) {
  int pass_fd = dup(STDERR_FILENO);
  ASSERT_GE(pass_fd, 0) << strerror(errno);
  absl::Status s = c.syscall_conn().control([&](int fd) {
    iovec iov{const_cast<char*>(data.data()), data.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof ctl;
    cmsghdr* cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    EXPECT_EQ(sendmsg(fd, &mh, 0), static_cast<ssize_t>(data.size())) << strerror(errno);
  });
  EXPECT_TRUE(s.ok()) << s;
  close(pass_fd);
}

// Urgent data (MSG_OOB) stops a read short at its mark with the rest of the
// stream still queued, and no new event comes for what is already there: the
// read after it must try read(2), not wait for readiness. The urgent byte
// itself is not in the stream (no SO_OOBINLINE).
TEST_P(NetTest, UrgentMarkBehindAShortRead) {
  run_test([] {
    over_both([](Pair p) {
      if (!p.client || !p.server) return;
      EXPECT_TRUE(write_str(p.server, "hello").ok());
      bool oob = true;
      absl::Status s = p.server.syscall_conn().control([&](int fd) {
        // AF_UNIX has MSG_OOB only with CONFIG_AF_UNIX_OOB.
        oob = send(fd, "!", 1, MSG_OOB) == 1 || errno != EOPNOTSUPP;
      });
      ASSERT_TRUE(s.ok()) << s;
      if (!oob) return;
      EXPECT_TRUE(write_str(p.server, "world").ok());
      gort::sleep(absl::Milliseconds(20));
      expect_to_read(p.client, "helloworld");
    });
  });
}

// A Unix stream read stops after a message that carried descriptors
// (SCM_RIGHTS; a plain read discards them), with later data queued behind
// it and no event to come for it.
TEST_P(NetTest, PassedDescriptorBehindAShortRead) {
  run_test([] {
    gort::test::TempDir dir;
    Pair p = connect("unix", dir.path() + "/sock");
    if (!p.client || !p.server) return;
    send_with_fd(p.server, "ab");
    EXPECT_TRUE(write_str(p.server, "cd").ok());
    gort::sleep(absl::Milliseconds(20));
    expect_to_read(p.client, "abcd");
    // And again while the reader, having emptied the socket, waits.
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      gort::sleep(absl::Milliseconds(5));
      send_with_fd(p.server, "ef");
      EXPECT_TRUE(write_str(p.server, "gh").ok());
      wg.done();
    });
    expect_to_read(p.client, "efgh");
    wg.wait();
  });
}

// With SO_PASSCRED on the reader, a Unix stream read does not join data
// from two senders (here the test and a forked child writing to the same
// socket): it stops at the change, with the child's data queued.
TEST_P(NetTest, SenderChangeBehindAShortRead) {
  run_test([] {
    gort::test::TempDir dir;
    Pair p = connect("unix", dir.path() + "/sock");
    if (!p.client || !p.server) return;
    absl::Status s = p.client.syscall_conn().control([](int fd) {
      int on = 1;
      EXPECT_EQ(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on), 0) << strerror(errno);
    });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(write_str(p.server, "ab").ok());
    s = p.server.syscall_conn().control([](int fd) {
      pid_t pid = fork();
      if (pid == 0) _exit(write(fd, "cd", 2) == 2 ? 0 : 1);  // async-signal-safe only
      ASSERT_GT(pid, 0) << strerror(errno);
      int status = 0;
      EXPECT_EQ(waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    });
    ASSERT_TRUE(s.ok()) << s;
    gort::sleep(absl::Milliseconds(20));
    expect_to_read(p.client, "abcd");
  });
}

// NetTest is instantiated for 1, 2 and 4 Ps in net_test.cpp.

}  // namespace

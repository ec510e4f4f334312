// tests/stdlib/net/net_peer_test.cpp — TCP connections with both ends in this
// process (stdlib/net/net_peer.hpp): they are paired when made, over IPv4,
// IPv6 and a dual-stack listener, whichever end comes first; connections to
// and from other processes, and Unix sockets, are not; closing forgets an
// end that waits; and a write on a paired connection runs the reader it
// wakes on the writer's P (runtime_stats().readied_after_write), with no
// message lost or reordered, on 1, 2 and 4 Ps. Every read has a deadline,
// so a lost wake-up fails with "i/o timeout" instead of hanging.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "gort/net.hpp"
#include "gort/runtime.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "netpoll/netpoll.hpp"
#include "stdlib/net/net_fd.hpp"
#include "stdlib/net/net_peer.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::internal::NetFDAccess;
using gort::test::must;
using gort::test::NetTest;
using gort::test::read_exactly;
using gort::test::write_str;

constexpr absl::Duration kPatience = absl::Seconds(10);

bool paired(const gort::net::Conn& c) { return NetFDAccess::fd(c)->in_process_peer(); }

struct Pair {
  gort::net::Conn client, server;
};

// Dials `address` (on `ln`) and accepts, under deadlines.
Pair connect(gort::net::Listener& ln, const std::string& address) {
  Pair p;
  EXPECT_TRUE(ln.set_deadline(absl::Now() + kPatience).ok());
  auto accepted = gort::make_chan<gort::net::Conn>(1);
  gort::go([&ln, accepted] {
    auto s = ln.accept();
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) accepted.send(std::move(*s));
    accepted.close();
  });
  p.client = must(gort::net::dial("tcp", address), "dial");
  if (auto s = accepted.recv()) p.server = std::move(*s);
  return p;
}

// n round trips of `size` bytes: a writes, b echoes, a checks.
void ping_pong(gort::net::Conn& a, gort::net::Conn& b, int n, size_t size = 64) {
  gort::WaitGroup wg;
  wg.add(1);
  gort::go([&] {
    for (int i = 0; i < n; i++) {
      EXPECT_TRUE(b.set_read_deadline(absl::Now() + kPatience).ok());
      auto m = read_exactly(b, size);
      if (!m.ok() || m->size() != size || !write_str(b, *m).ok()) {
        ADD_FAILURE() << "echo " << i << ": " << m.status();
        break;
      }
    }
    wg.done();
  });
  for (int i = 0; i < n; i++) {
    std::string msg(size, static_cast<char>('a' + i % 26));
    msg.replace(0, std::to_string(i).size(), std::to_string(i));
    if (!write_str(a, msg).ok()) break;
    EXPECT_TRUE(a.set_read_deadline(absl::Now() + kPatience).ok());
    auto back = read_exactly(a, size);
    if (!back.ok() || *back != msg) {
      ADD_FAILURE() << "round trip " << i << ": " << back.status();
      break;
    }
  }
  wg.wait();
}

// A plain blocking socket bound to the loopback address of `family`,
// listening; its port in *port. Outside gort: for a child process.
int plain_listener(int family, int* port) {
  int s = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *in;
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    len = sizeof *in6;
  }
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(s, 8) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    ADD_FAILURE() << "plain listener: " << strerror(errno);
    if (s >= 0) ::close(s);
    return -1;
  }
  *port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                  : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return s;
}

// In a forked child (only system calls): echoes what fd sends until EOF.
[[noreturn]] void child_echo(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) ::_exit(n == 0 ? 0 : 1);
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(fd, buf + off, static_cast<size_t>(n - off));
      if (w <= 0) ::_exit(1);
      off += w;
    }
  }
}

int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool have_ipv6_loopback() {
  int s = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_addr = in6addr_loopback;
  bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&in6), sizeof in6) == 0;
  ::close(s);
  return ok;
}

class NetPeer : public NetTest {};

TEST_P(NetPeer, BothEndsInThisProcessArePaired) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"), "listen");
    for (int i = 0; i < 3; i++) {
      Pair p = connect(ln, ln.addr());
      EXPECT_TRUE(paired(p.client)) << i;
      EXPECT_TRUE(paired(p.server)) << i;
      ping_pong(p.client, p.server, 20);
      ping_pong(p.server, p.client, 20);
    }
    EXPECT_EQ(gort::internal::peer_waiting(), 0u);
  });
}

// The registry itself, on descriptors it would never see (Unix sockets)
// given made-up endpoints: either end may come first (the acceptor waits
// only while a dial to its address is under way); the same client with
// another server does not pair; non-loopback addresses are ignored;
// closing forgets.
gort::internal::SockAddr ipv4(const char* ip, int port) {
  gort::internal::SockAddr a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.ss);
  in->sin_family = AF_INET;
  inet_pton(AF_INET, ip, &in->sin_addr);
  in->sin_port = htons(static_cast<uint16_t>(port));
  a.len = sizeof *in;
  return a;
}

TEST_P(NetPeer, RegistryPairsEitherEndFirstAndOnlyTheSameConnection) {
  using gort::internal::PeerEnd;
  using gort::internal::peer_register;
  using gort::internal::peer_waiting;
  run_test([] {
    gort::test::TempDir dir;
    std::string path = dir.path() + "/r.sock";
    auto ln = must(gort::net::listen("unix", path), "listen unix");
    std::vector<gort::net::Conn> conns;
    for (int i = 0; i < 8; i++) conns.push_back(must(gort::net::dial("unix", path), "dial unix"));
    auto fd = [&](int i) { return NetFDAccess::fd(conns[i]); };
    const auto client = ipv4("127.0.0.1", 40000), server = ipv4("127.0.0.1", 8080);

    peer_register(fd(0), client, server, PeerEnd::kDialer);
    EXPECT_EQ(peer_waiting(), 1u);
    EXPECT_FALSE(fd(0)->in_process_peer());
    peer_register(fd(1), client, server, PeerEnd::kAcceptor);
    EXPECT_TRUE(fd(0)->in_process_peer());
    EXPECT_TRUE(fd(1)->in_process_peer());
    EXPECT_EQ(peer_waiting(), 0u);

    // The acceptor first, while its dialer is still dialing; another client
    // address on 127/8.
    const auto client2 = ipv4("127.0.0.2", 40000);
    {
      gort::internal::PeerDial dialing(server);
      peer_register(fd(2), client2, server, PeerEnd::kAcceptor);
      EXPECT_EQ(peer_waiting(), 1u);
      peer_register(fd(3), client2, server, PeerEnd::kDialer);
    }
    EXPECT_TRUE(fd(2)->in_process_peer());
    EXPECT_TRUE(fd(3)->in_process_peer());

    // An acceptor with no dial of ours under way: its client is another
    // process, and it does not wait.
    peer_register(fd(4), ipv4("127.0.0.1", 40001), server, PeerEnd::kAcceptor);
    EXPECT_EQ(peer_waiting(), 0u);
    EXPECT_FALSE(fd(4)->in_process_peer());

    // The same client to another server is another connection.
    peer_register(fd(4), client, server, PeerEnd::kDialer);
    {
      const auto other_server = ipv4("127.0.0.1", 8081);
      gort::internal::PeerDial dialing(other_server);
      peer_register(fd(5), client, other_server, PeerEnd::kAcceptor);
    }
    EXPECT_FALSE(fd(4)->in_process_peer());
    EXPECT_FALSE(fd(5)->in_process_peer());
    EXPECT_EQ(peer_waiting(), 2u);

    // Not loopback: ignored.
    peer_register(fd(6), ipv4("10.1.2.3", 5000), ipv4("10.1.2.4", 80), PeerEnd::kDialer);
    peer_register(fd(7), ipv4("10.1.2.3", 5000), ipv4("10.1.2.4", 80), PeerEnd::kAcceptor);
    EXPECT_FALSE(fd(6)->in_process_peer());
    EXPECT_FALSE(fd(7)->in_process_peer());
    EXPECT_EQ(peer_waiting(), 2u);

    // Closing the waiting ones forgets them; the paired ones have nothing
    // to forget.
    conns.clear();
    EXPECT_EQ(peer_waiting(), 0u);
  });
}

TEST_P(NetPeer, Ipv6AndDualStackListenersPairToo) {
  if (!have_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback here";
  run_test([] {
    auto ln6 = must(gort::net::listen("tcp", "[::1]:0"), "listen [::1]");
    Pair p = connect(ln6, ln6.addr());
    EXPECT_TRUE(paired(p.client));
    EXPECT_TRUE(paired(p.server));
    // A dual-stack listener sees an IPv4 dialer as ::ffff:127.0.0.1.
    auto any = must(gort::net::listen("tcp", ":0"), "listen :0");
    std::string port = any.addr().substr(any.addr().rfind(':') + 1);
    Pair q = connect(any, "127.0.0.1:" + port);
    EXPECT_TRUE(paired(q.client)) << any.addr();
    EXPECT_TRUE(paired(q.server)) << any.addr();
    ping_pong(q.client, q.server, 20);
    EXPECT_EQ(gort::internal::peer_waiting(), 0u);
  });
}

TEST_P(NetPeer, UnixSocketsAreNotPaired) {
  run_test([] {
    gort::test::TempDir dir;
    std::string path = dir.path() + "/peer.sock";
    auto ln = must(gort::net::listen("unix", path), "listen unix");
    auto c = must(gort::net::dial("unix", path), "dial unix");
    auto s = must(ln.accept(), "accept unix");
    EXPECT_FALSE(paired(c));
    EXPECT_FALSE(paired(s));
    EXPECT_EQ(gort::internal::peer_waiting(), 0u);
  });
}

// The other end in a child process: never paired, and writes wake nobody
// (readied_after_write does not move). Our dialer waits for a peer that never
// registers and is forgotten when it closes; our acceptor does not wait.
TEST_P(NetPeer, ConnectionsToAndFromOtherProcessesAreNotPaired) {
  run_test([] {
    const int64_t placed = gort::runtime_stats().readied_after_write;
    // We dial a child's listener.
    int port = 0;
    int lfd = plain_listener(AF_INET, &port);
    ASSERT_GE(lfd, 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      int c = ::accept(lfd, nullptr, nullptr);
      child_echo(c);
    }
    ::close(lfd);
    {
      auto c = must(gort::net::dial("tcp", "127.0.0.1:" + std::to_string(port)), "dial child");
      EXPECT_FALSE(paired(c));
      EXPECT_EQ(gort::internal::peer_waiting(), 1u);
      for (int i = 0; i < 50; i++) {
        std::string msg = "message " + std::to_string(i);
        ASSERT_TRUE(write_str(c, msg).ok());
        ASSERT_TRUE(c.set_read_deadline(absl::Now() + kPatience).ok());
        EXPECT_EQ(must(read_exactly(c, msg.size())), msg);
      }
    }
    EXPECT_EQ(wait_child(pid), 0);
    EXPECT_EQ(gort::internal::peer_waiting(), 0u);

    // A child dials us.
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"), "listen");
    int lport = std::stoi(ln.addr().substr(ln.addr().rfind(':') + 1));
    pid = ::fork();
    if (pid == 0) {
      int c = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in in{};
      in.sin_family = AF_INET;
      in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      in.sin_port = htons(static_cast<uint16_t>(lport));
      if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&in), sizeof in) != 0) ::_exit(3);
      child_echo(c);
    }
    {
      auto s = must(ln.accept(), "accept child");
      EXPECT_FALSE(paired(s));
      EXPECT_EQ(gort::internal::peer_waiting(), 0u) << "an acceptor waits only for a dial of ours";
      ASSERT_TRUE(write_str(s, "hello").ok());
      ASSERT_TRUE(s.set_read_deadline(absl::Now() + kPatience).ok());
      EXPECT_EQ(must(read_exactly(s, 5)), "hello");
    }
    EXPECT_EQ(wait_child(pid), 0);
    EXPECT_EQ(gort::internal::peer_waiting(), 0u);
    EXPECT_EQ(gort::runtime_stats().readied_after_write, placed)
        << "writes to another process's sockets polled the network";
  });
}

// Many connections made at once from many goroutines, then echoed over
// concurrently: every one is paired, no message is lost or reordered, the
// writers' Ps run what their writes woke, and closing leaves nothing
// behind.
TEST_P(NetPeer, ManyConnectionsAtOnceArePairedAndEchoed) {
  static constexpr int kConns = 64;
  static constexpr int kRoundTrips = 200;
  run_test([this] {
    const int64_t placed = gort::runtime_stats().readied_after_write;
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"), "listen");
    std::vector<gort::net::Conn> servers(kConns);
    std::vector<gort::net::Conn> clients(kConns);
    ASSERT_TRUE(ln.set_deadline(absl::Now() + kPatience).ok());
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      for (int i = 0; i < kConns; i++) {
        auto s = ln.accept();
        if (!s.ok()) {
          ADD_FAILURE() << s.status();
          break;
        }
        servers[i] = std::move(*s);
      }
      wg.done();
    });
    for (int i = 0; i < kConns; i++) {
      wg.add(1);
      gort::go([&, i] {
        clients[i] = must(gort::net::dial("tcp", ln.addr()), "dial");
        wg.done();
      });
    }
    wg.wait();
    for (int i = 0; i < kConns; i++) {
      ASSERT_TRUE(paired(clients[i])) << i;
      ASSERT_TRUE(paired(servers[i])) << i;
    }
    EXPECT_EQ(gort::internal::peer_waiting(), 0u);
    // Accept order is not dial order: echo each client over its own server
    // end, found by address.
    for (int i = 0; i < kConns; i++) {
      int j = 0;
      while (j < kConns && servers[j].remote_addr() != clients[i].local_addr()) j++;
      ASSERT_LT(j, kConns) << clients[i].local_addr();
      wg.add(1);
      gort::go([&, i, j] {
        ping_pong(clients[i], servers[j], kRoundTrips);
        wg.done();
      });
    }
    wg.wait();
    int64_t placed_now = gort::runtime_stats().readied_after_write - placed;
    EXPECT_GT(placed_now, 0) << "no write ran the reader it woke on its own P";
    clients.clear();
    servers.clear();
    EXPECT_EQ(gort::internal::peer_waiting(), 0u);
  });
}

// A closed end's poll descriptor serves the next connection opened: a write
// on the old connection, whose other end is gone, must not wake the reader
// parked on it there (the peer's tag names the old use); the new
// connection's data still reaches it. (Whether the new connection's write
// or the poller wakes it is a race with several Ps: an M blocked in the
// poller may see the event first.)
TEST_P(NetPeer, AWriteToAClosedPeerWakesNoReaderOfItsDescriptorsNextUse) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"), "listen");
    Pair old = connect(ln, ln.addr());
    ASSERT_TRUE(paired(old.client));
    const gort::internal::PollDesc* freed = NetFDAccess::fd(old.server)->poll_desc();
    ASSERT_TRUE(old.server.close().ok());
    Pair next = connect(ln, ln.addr());
    ASSERT_TRUE(paired(next.client));
    gort::net::Conn* reuser = nullptr;
    for (gort::net::Conn* c : {&next.client, &next.server}) {
      if (NetFDAccess::fd(*c)->poll_desc() == freed) reuser = c;
    }
    ASSERT_NE(reuser, nullptr) << "the closed end's poll descriptor was not the next one used";
    gort::net::Conn* writer = reuser == &next.client ? &next.server : &next.client;

    const int64_t parked_before = gort::internal::netpoll_waiters();
    auto got = gort::make_chan<std::string>(1);
    gort::go([reuser, got] {
      EXPECT_TRUE(reuser->set_read_deadline(absl::Now() + kPatience).ok());
      auto m = read_exactly(*reuser, 5);
      got.send(m.ok() ? *m : m.status().ToString());
    });
    while (gort::internal::netpoll_waiters() == parked_before) gort::sleep(absl::Milliseconds(1));

    const int64_t placed = gort::runtime_stats().readied_after_write;
    ASSERT_TRUE(write_str(old.client, "stale").ok());
    EXPECT_EQ(gort::runtime_stats().readied_after_write, placed)
        << "a write whose other end had closed woke the reader of the descriptor's next use";
    ASSERT_TRUE(write_str(*writer, "fresh").ok());
    EXPECT_EQ(got.recv().value_or("nothing"), "fresh");
  });
}

// Each write hands the P to the goroutine it wakes (runnext), so an echoing
// pair keeps the P between them, as a channel ping-pong does; like that
// one, the pair shares one time slice, and the rest of the P still runs. A
// goroutine sleeping 1 ms at a time keeps waking while a pair echoes for
// 300 ms (starved, it would wake once, at the end).
TEST_P(NetPeer, AnEchoingPairLeavesTheRestOfItsPRunning) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"), "listen");
    Pair p = connect(ln, ln.addr());
    ASSERT_TRUE(paired(p.client));
    const absl::Time end = absl::Now() + absl::Milliseconds(300);
    ASSERT_TRUE(p.client.set_read_deadline(end + kPatience).ok());
    ASSERT_TRUE(p.server.set_read_deadline(end + kPatience).ok());
    std::atomic<bool> stop{false};
    int ticks = 0;
    absl::Duration worst_gap;
    gort::WaitGroup wg;
    wg.add(2);
    gort::go([&] {
      absl::Time last = absl::Now();
      while (!stop.load()) {
        gort::sleep(absl::Milliseconds(1));
        absl::Time now = absl::Now();
        worst_gap = std::max(worst_gap, now - last);
        last = now;
        ticks++;
      }
      wg.done();
    });
    gort::go([&] {
      char buf[64];
      for (;;) {
        auto n = p.server.read(absl::MakeSpan(buf));
        if (!n.ok() || *n == 0 || !p.server.write(absl::MakeConstSpan(buf, *n)).ok()) break;
      }
      wg.done();
    });
    int trips = 0;
    const std::string msg(64, 'x');
    while (absl::Now() < end) {
      ASSERT_TRUE(write_str(p.client, msg).ok());
      ASSERT_EQ(must(read_exactly(p.client, msg.size())), msg);
      trips++;
    }
    stop.store(true);
    ASSERT_TRUE(p.client.close().ok());  // the echoer reads EOF
    wg.wait();
    EXPECT_GT(trips, 100);
    EXPECT_GE(ticks, 10) << "the sleeper barely ran while the pair echoed (worst gap " << worst_gap << ")";
  });
}

GORT_INSTANTIATE_STDLIB_PROCS(NetPeer);

}  // namespace

// tests/stdlib/net/net_test.cpp — gort::net round trips: TCP over IPv4 and
// IPv6, Unix stream sockets, UDP, large transfers, half-close, plain
// threads, many connections.
#include <sys/resource.h>
#include <sys/stat.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gort/context.hpp"
#include "gort/net.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::must;
using gort::test::NetTest;
using gort::test::read_exactly;
using gort::test::read_to_eof;
using gort::test::write_str;

// Accepts one connection and echoes it until end of stream.
void echo_once(gort::net::Listener& ln, gort::WaitGroup& wg) {
  wg.add(1);
  gort::go([&ln, &wg] {
    auto c = ln.accept();
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) {
      char buf[1024];
      for (;;) {
        auto n = c->read(absl::MakeSpan(buf));
        EXPECT_TRUE(n.ok()) << n.status();
        if (!n.ok() || *n == 0) break;
        EXPECT_TRUE(c->write(absl::MakeConstSpan(buf, *n)).ok());
      }
    }
    wg.done();
  });
}

void echo_round_trip(const char* network, const std::string& address) {
  auto ln = must(gort::net::listen(network, address), "listen");
  if (!ln) return;
  gort::WaitGroup wg;
  echo_once(ln, wg);
  auto c = must(gort::net::dial(network, ln.addr()), "dial");
  if (c) {
    EXPECT_EQ(c.remote_addr(), ln.addr());
    EXPECT_EQ(c.network(), network);
    for (const std::string& m : {std::string("hello"), std::string("gort"), std::string(3000, 'x')}) {
      EXPECT_TRUE(write_str(c, m).ok());
      auto back = read_exactly(c, m.size());
      EXPECT_TRUE(back.ok()) << back.status();
      if (back.ok()) {
        EXPECT_EQ(*back, m);
      }
    }
    EXPECT_TRUE(c.close().ok());
  }
  wg.wait();
}

TEST_P(NetTest, TcpEcho) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    EXPECT_EQ(ln.addr().rfind("127.0.0.1:", 0), 0u) << ln.addr();
    EXPECT_NE(ln.addr(), "127.0.0.1:0");
    gort::WaitGroup wg;
    std::string server_local, server_remote;
    wg.add(1);
    gort::go([&] {
      auto c = ln.accept();
      EXPECT_TRUE(c.ok()) << c.status();
      if (c.ok()) {
        server_local = c->local_addr();
        server_remote = c->remote_addr();
        auto m = read_exactly(*c, 5);
        EXPECT_TRUE(m.ok());
        EXPECT_TRUE(write_str(*c, "echo:" + m.value_or("")).ok());
      }
      wg.done();
    });
    auto c = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(c, "hello").ok());
    auto r = read_exactly(c, 10);
    EXPECT_EQ(r.value_or(""), "echo:hello");
    wg.wait();
    EXPECT_EQ(server_local, ln.addr());
    EXPECT_EQ(server_remote, c.local_addr());
    EXPECT_EQ(c.remote_addr(), ln.addr());
    // The server closed its end: end of stream.
    auto eof = c.read(absl::MakeSpan(std::string(8, ' ').data(), 8));
    EXPECT_TRUE(eof.ok());
    EXPECT_EQ(eof.value_or(99), 0u);
  });
}

TEST_P(NetTest, Tcp4AndTcpNetworks) {
  run_test([] {
    echo_round_trip("tcp4", "127.0.0.1:0");
    echo_round_trip("tcp", "127.0.0.1:0");
  });
}

TEST_P(NetTest, Tcp6Echo) {
  run_test([] {
    auto probe = gort::net::listen("tcp6", "[::1]:0");
    if (!probe.ok()) {
      GTEST_SKIP() << "no IPv6 loopback: " << probe.status();
    }
    EXPECT_EQ(probe->addr().rfind("[::1]:", 0), 0u) << probe->addr();
    (void)probe->close();
    echo_round_trip("tcp6", "[::1]:0");
    echo_round_trip("tcp", "[::1]:0");
  });
}

TEST_P(NetTest, WildcardListenerIsDualStack) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", ":0"));
    if (!ln) return;
    std::string port = ln.addr().substr(ln.addr().rfind(':') + 1);
    gort::WaitGroup wg;
    echo_once(ln, wg);
    auto c = must(gort::net::dial("tcp", "127.0.0.1:" + port));
    if (c) {
      EXPECT_TRUE(write_str(c, "v4").ok());
      EXPECT_EQ(read_exactly(c, 2).value_or(""), "v4");
      (void)c.close();
    }
    wg.wait();
    // Empty host on dial: the local system.
    echo_once(ln, wg);
    auto c2 = must(gort::net::dial("tcp", ":" + port));
    if (c2) {
      EXPECT_TRUE(write_str(c2, "local").ok());
      EXPECT_EQ(read_exactly(c2, 5).value_or(""), "local");
      (void)c2.close();
    }
    wg.wait();
  });
}

TEST_P(NetTest, DialHostName) {
  run_test([] {
    // "localhost" may resolve to ::1 first; the listener is on 127.0.0.1,
    // so dial must go on to the next address.
    auto ln = must(gort::net::listen("tcp", "localhost:0"));
    if (!ln) return;
    EXPECT_EQ(ln.addr().rfind("127.0.0.1:", 0), 0u) << ln.addr();
    std::string port = ln.addr().substr(ln.addr().rfind(':') + 1);
    gort::WaitGroup wg;
    echo_once(ln, wg);
    auto c = must(gort::net::dial("tcp", "localhost:" + port));
    if (c) {
      EXPECT_TRUE(write_str(c, "by name").ok());
      EXPECT_EQ(read_exactly(c, 7).value_or(""), "by name");
      (void)c.close();
    }
    wg.wait();
    auto hosts = gort::net::lookup_host("localhost");
    EXPECT_TRUE(hosts.ok()) << hosts.status();
    bool has_v4 = false;
    for (auto& h : hosts.value_or(std::vector<std::string>{})) has_v4 = has_v4 || h == "127.0.0.1";
    EXPECT_TRUE(has_v4);
    auto lit = gort::net::lookup_host("::1");
    EXPECT_EQ(lit.value_or(std::vector<std::string>{}), std::vector<std::string>{"::1"});
    auto [ctx, cancel] = gort::with_cancel(gort::background());
    cancel();
    auto cancelled = gort::net::lookup_host(ctx, "localhost");
    EXPECT_EQ(cancelled.status(), absl::CancelledError("lookup localhost: operation was canceled"));
    auto [ctx2, cancel2] = gort::with_timeout(gort::background(), absl::Seconds(30));
    auto timed = gort::net::lookup_host(ctx2, "localhost");  // in its own goroutine
    EXPECT_TRUE(timed.ok()) << timed.status();
    cancel2();
  });
}

TEST_P(NetTest, UnixEcho) {
  run_test([] {
    gort::test::TempDir dir;
    std::string path = dir.path() + "/sock";
    {
      auto ln = must(gort::net::listen("unix", path));
      if (!ln) return;
      EXPECT_EQ(ln.addr(), path);
      struct stat st;
      EXPECT_EQ(::stat(path.c_str(), &st), 0);
      gort::WaitGroup wg;
      std::string server_local;
      wg.add(1);
      gort::go([&] {
        auto c = ln.accept();
        EXPECT_TRUE(c.ok()) << c.status();
        if (c.ok()) {
          server_local = c->local_addr();
          auto all = read_to_eof(*c);
          EXPECT_TRUE(write_str(*c, "got " + all.value_or("?")).ok());
        }
        wg.done();
      });
      auto c = must(gort::net::dial("unix", path));
      if (c) {
        EXPECT_EQ(c.remote_addr(), path);
        EXPECT_EQ(c.network(), "unix");
        EXPECT_TRUE(write_str(c, "over unix").ok());
        EXPECT_TRUE(c.close_write().ok());
        EXPECT_EQ(read_to_eof(c).value_or(""), "got over unix");
      }
      wg.wait();
      EXPECT_EQ(server_local, path);
      EXPECT_TRUE(ln.close().ok());
      // Closing the listener removes its socket file, as in Go.
      EXPECT_NE(::stat(path.c_str(), &st), 0);
    }
    // Abstract sockets.
    std::string abstract = "@gort-net-test-" + std::to_string(::getpid());
    echo_round_trip("unix", abstract);
  });
}

TEST_P(NetTest, UdpRoundTrip) {
  run_test([] {
    auto a = must(gort::net::listen_packet("udp", "127.0.0.1:0"));
    auto b = must(gort::net::listen_packet("udp4", "127.0.0.1:0"));
    if (!a || !b) return;
    EXPECT_EQ(a.local_addr().rfind("127.0.0.1:", 0), 0u);
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      // Echo two datagrams back to their sender.
      for (int i = 0; i < 2; i++) {
        char buf[2048];
        auto r = b.read_from(absl::MakeSpan(buf));
        EXPECT_TRUE(r.ok()) << r.status();
        if (!r.ok()) break;
        auto w = b.write_to(absl::MakeConstSpan(buf, r->first), r->second);
        EXPECT_TRUE(w.ok()) << w.status();
      }
      wg.done();
    });
    std::string m = "datagram";
    auto w = a.write_to(absl::MakeConstSpan(m.data(), m.size()), b.local_addr());
    EXPECT_EQ(w.value_or(0), m.size());
    char buf[2048];
    auto r = a.read_from(absl::MakeSpan(buf));
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) {
      EXPECT_EQ(std::string(buf, r->first), m);
      EXPECT_EQ(r->second, b.local_addr());
    }
    // A connected UDP socket (dial "udp") talks to the same echoer.
    auto c = must(gort::net::dial("udp", b.local_addr()));
    if (c) {
      EXPECT_EQ(c.remote_addr(), b.local_addr());
      EXPECT_TRUE(write_str(c, "connected").ok());
      auto n = c.read(absl::MakeSpan(buf));
      EXPECT_EQ(std::string(buf, n.value_or(0)), "connected");
    }
    wg.wait();
    EXPECT_TRUE(a.close().ok());
    EXPECT_TRUE(gort::net::is_closed_error(a.close()));
  });
}

TEST_P(NetTest, Udp6AndDualStack) {
  run_test([] {
    auto any = must(gort::net::listen_packet("udp", ":0"));
    if (!any) return;
    std::string port = any.local_addr().substr(any.local_addr().rfind(':') + 1);
    auto v4 = must(gort::net::listen_packet("udp", "127.0.0.1:0"));
    std::string m = "to the wildcard";
    EXPECT_TRUE(v4.write_to(absl::MakeConstSpan(m.data(), m.size()), "127.0.0.1:" + port).ok());
    char buf[256];
    auto r = any.read_from(absl::MakeSpan(buf));
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) {
      EXPECT_EQ(std::string(buf, r->first), m);
      EXPECT_EQ(r->second, v4.local_addr());  // IPv4-mapped prints as IPv4
      // And back, to an IPv4 address from the dual-stack socket.
      EXPECT_TRUE(any.write_to(absl::MakeConstSpan(buf, r->first), r->second).ok());
      auto back = v4.read_from(absl::MakeSpan(buf));
      EXPECT_EQ(back.ok() ? std::string(buf, back->first) : "", m);
    }
  });
}

// Both directions at once: each side writes `size` bytes while reading the
// other's, and compares checksums.
void full_duplex(const char* network, const std::string& address, size_t size) {
  auto ln = must(gort::net::listen(network, address));
  if (!ln) return;
  auto pattern = [](uint64_t seed, size_t n) {
    std::string s(n, '\0');
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      s[i] = static_cast<char>(x >> 56);
    }
    return s;
  };
  const std::string up = pattern(1, size), down = pattern(2, size);
  gort::WaitGroup wg;
  auto pump = [&wg, size](gort::net::Conn* c, const std::string* out, uint64_t* in_sum) {
    wg.add(2);
    gort::go([c, out, &wg] {
      // Odd-sized writes exercise partial writes and parking on EAGAIN.
      size_t off = 0;
      while (off < out->size()) {
        size_t n = std::min<size_t>(out->size() - off, 1 << 20 | 12345);
        auto w = c->write(absl::MakeConstSpan(out->data() + off, n));
        EXPECT_TRUE(w.ok()) << w.status();
        if (!w.ok()) break;
        off += n;
      }
      EXPECT_TRUE(c->close_write().ok());
      wg.done();
    });
    gort::go([c, in_sum, size, &wg] {
      std::string buf(64 * 1024 + 7, '\0');
      uint64_t h = gort::test::fnv(nullptr, 0);
      size_t total = 0;
      for (;;) {
        auto r = c->read(absl::MakeSpan(buf));
        EXPECT_TRUE(r.ok()) << r.status();
        if (!r.ok() || *r == 0) break;
        h = gort::test::fnv(buf.data(), *r, h);
        total += *r;
      }
      EXPECT_EQ(total, size);
      *in_sum = h;
      wg.done();
    });
  };
  gort::net::Conn server;
  uint64_t server_in = 0, client_in = 0;
  wg.add(1);
  gort::go([&] {
    auto c = ln.accept();
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) {
      server = std::move(*c);
      pump(&server, &down, &server_in);
    }
    wg.done();
  });
  auto client = must(gort::net::dial(network, ln.addr()));
  if (client) pump(&client, &up, &client_in);
  wg.wait();
  EXPECT_EQ(server_in, gort::test::fnv(up.data(), up.size()));
  EXPECT_EQ(client_in, gort::test::fnv(down.data(), down.size()));
}

TEST_P(NetTest, LargeTransferBothDirections) {
  run_test([] {
    full_duplex("tcp", "127.0.0.1:0", 16 << 20);
    gort::test::TempDir dir;
    full_duplex("unix", dir.path() + "/big", 16 << 20);
  });
}

TEST_P(NetTest, HalfClose) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      auto c = ln.accept();
      EXPECT_TRUE(c.ok());
      if (c.ok()) {
        // Reads until the client's close_write, then answers.
        auto all = read_to_eof(*c);
        EXPECT_EQ(all.value_or("?"), "ping ping");
        EXPECT_TRUE(write_str(*c, "pong").ok());
        EXPECT_TRUE(c->close().ok());
      }
      wg.done();
    });
    auto c = must(gort::net::dial("tcp", ln.addr()));
    if (c) {
      EXPECT_TRUE(write_str(c, "ping ").ok());
      EXPECT_TRUE(write_str(c, "ping").ok());
      EXPECT_TRUE(c.close_write().ok());
      // Writing after close_write is an error (EPIPE), not a signal.
      auto w = c.write(absl::MakeConstSpan("x", 1));
      EXPECT_FALSE(w.ok());
      EXPECT_EQ(read_to_eof(c).value_or(""), "pong");
    }
    wg.wait();
  });
}

TEST_P(NetTest, PlainThreadClient) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    gort::WaitGroup wg;
    echo_once(ln, wg);
    echo_once(ln, wg);
    std::string addr = ln.addr();
    std::string got;
    absl::Status timeout;
    std::atomic<bool> finished{false};
    // A plain OS thread: poll_wait sleeps the thread instead of parking.
    std::thread t([&] {
      auto c = gort::net::dial("tcp", addr);
      if (!c.ok()) {
        got = c.status().ToString();
      } else {
        std::string m(100000, 'p');
        auto w = c->write(absl::MakeConstSpan(m.data(), m.size()));
        auto r = read_exactly(*c, m.size());
        got = w.ok() && r.ok() && *r == m ? "ok" : "mismatch";
        (void)c->set_read_deadline(absl::Now() + absl::Milliseconds(30));
        char b[4];
        timeout = c->read(absl::MakeSpan(b)).status();
        // A context from a plain thread: its interrupter is a goroutine.
        auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(30));
        auto c2 = gort::net::dial(ctx, "tcp", addr);
        if (!c2.ok()) got = c2.status().ToString();
        cancel();
      }
      finished.store(true);
    });
    // Join without blocking this P's other goroutines.
    while (!finished.load()) gort::sleep(absl::Milliseconds(1));
    t.join();
    EXPECT_EQ(got, "ok");
    EXPECT_EQ(timeout, absl::DeadlineExceededError("i/o timeout"));
    wg.wait();
  });
}

// The one instantiation of the NetTest suite for every net_*_test.cpp.
GORT_INSTANTIATE_STDLIB_PROCS(NetTest);

// Each of `kConns` clients echoes a few messages through the server at once.
TEST(NetStress, ThousandConnectionsOnTwoPs) {
  static constexpr int kConns = 1000;
  static constexpr int kMessages = 5;
  rlimit rl;
  ::getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < 2 * kConns + 100) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 2 * kConns + 200);
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 2 * kConns + 100) GTEST_SKIP() << "RLIMIT_NOFILE too low";
  }
  gort::test::run_checked(2, [] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    std::atomic<int> served{0}, ok_clients{0};
    gort::WaitGroup servers, clients;
    servers.add(1);
    gort::go([&] {
      for (;;) {
        auto c = ln.accept();
        if (!c.ok()) {
          EXPECT_TRUE(gort::net::is_closed_error(c.status())) << c.status();
          break;
        }
        servers.add(1);
        gort::go([&servers, &served, c = std::move(*c)]() mutable {
          char buf[256];
          for (;;) {
            auto n = c.read(absl::MakeSpan(buf));
            if (!n.ok() || *n == 0) break;
            if (!c.write(absl::MakeConstSpan(buf, *n)).ok()) break;
          }
          served.fetch_add(1);
          servers.done();
        });
      }
      servers.done();
    });
    std::string addr = ln.addr();
    // All connections are open at the same time: each client waits on the
    // gate before its last message.
    auto gate = gort::make_chan<int>();
    std::atomic<int> connected{0};
    for (int i = 0; i < kConns; i++) {
      clients.add(1);
      gort::go([&, i] {
        auto c = gort::net::dial("tcp", addr);
        EXPECT_TRUE(c.ok()) << c.status();
        if (c.ok()) {
          bool good = true;
          for (int m = 0; m < kMessages && good; m++) {
            if (m == kMessages - 1) {
              connected.fetch_add(1);
              gate.recv();
            }
            std::string s = "conn " + std::to_string(i) + " msg " + std::to_string(m);
            good = write_str(*c, s).ok();
            auto r = read_exactly(*c, s.size());
            good = good && r.ok() && *r == s;
          }
          EXPECT_TRUE(good) << "client " << i;
          if (good) ok_clients.fetch_add(1);
        } else {
          connected.fetch_add(1);
          gate.recv();
        }
        clients.done();
      });
    }
    EXPECT_TRUE(gort::test::eventually([&] { return connected.load() == kConns; },
                                       std::chrono::seconds(60)));
    gate.close();
    clients.wait();
    EXPECT_EQ(ok_clients.load(), kConns);
    EXPECT_TRUE(ln.close().ok());
    servers.wait();
    EXPECT_EQ(served.load(), kConns);
  });
}

}  // namespace

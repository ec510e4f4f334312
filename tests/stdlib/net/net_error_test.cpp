// tests/stdlib/net/net_error_test.cpp — gort::net errors: malformed input,
// refused and reset connections, broken pipes, misuse; Go's texts.
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <thread>

#include "gort/net.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "stdlib/net/net_error.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::msg;
using gort::test::must;
using gort::test::NetTest;
using gort::test::write_str;

// A port on 127.0.0.1 with nothing listening (it was, a moment ago).
std::string closed_port_addr() {
  auto ln = gort::net::listen("tcp", "127.0.0.1:0");
  EXPECT_TRUE(ln.ok());
  if (!ln.ok()) return "127.0.0.1:1";
  std::string addr = ln->addr();
  return addr;  // ~Listener closes it
}

TEST(NetAddr, SplitHostPort) {
  struct Case {
    const char* in;
    const char* host;
    const char* port;
  } ok[] = {
      {"localhost:80", "localhost", "80"},  {"127.0.0.1:0", "127.0.0.1", "0"},
      {"[::1]:80", "::1", "80"},            {"[fe80::1%lo]:443", "fe80::1%lo", "443"},
      {":80", "", "80"},                    {"host:", "host", ""},
      {"[::]:http", "::", "http"},
  };
  for (auto& c : ok) {
    auto r = gort::net::split_host_port(c.in);
    ASSERT_TRUE(r.ok()) << c.in << ": " << r.status();
    EXPECT_EQ(r->first, c.host) << c.in;
    EXPECT_EQ(r->second, c.port) << c.in;
  }
  struct Bad {
    const char* in;
    const char* err;
  } bad[] = {
      {"127.0.0.1", "address 127.0.0.1: missing port in address"},
      {"", "address : missing port in address"},
      {"::1:80", "address ::1:80: too many colons in address"},
      {"[::1]", "address [::1]: missing port in address"},
      {"[::1:80", "address [::1:80: missing ']' in address"},
      {"[::1]:80:90", "address [::1]:80:90: too many colons in address"},
      {"[::1]x:80", "address [::1]x:80: missing port in address"},
      {"a[b:80", "address a[b:80: unexpected '[' in address"},
      {"a]b:80", "address a]b:80: unexpected ']' in address"},
  };
  for (auto& c : bad) {
    auto r = gort::net::split_host_port(c.in);
    ASSERT_FALSE(r.ok()) << c.in;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(msg(r.status()), c.err);
  }
  EXPECT_EQ(gort::net::join_host_port("::1", "80"), "[::1]:80");
  EXPECT_EQ(gort::net::join_host_port("example.com", "80"), "example.com:80");
  EXPECT_EQ(gort::net::join_host_port("", "0"), ":0");
}

TEST_P(NetTest, MalformedAddresses) {
  run_test([] {
    struct Case {
      const char* network;
      const char* address;
      const char* err;
    } cases[] = {
        {"tcp", "127.0.0.1", "dial tcp: address 127.0.0.1: missing port in address"},
        {"tcp", "1.2.3.4:99999", "dial tcp: address 1.2.3.4:99999: invalid port"},
        {"tcp", "1.2.3.4:-1", "dial tcp: address 1.2.3.4:-1: invalid port"},
        {"tcp", "1.2.3.4:99999999999999999999", "dial tcp: address 1.2.3.4:99999999999999999999: invalid port"},
        {"tcp", "::1:80", "dial tcp: address ::1:80: too many colons in address"},
        {"tcp", "[::1:80", "dial tcp: address [::1:80: missing ']' in address"},
        {"tcp", "127.0.0.1:nosuchservice", "dial tcp: lookup tcp/nosuchservice: unknown port"},
        {"udp", "127.0.0.1:nosuchservice", "dial udp: lookup udp/nosuchservice: unknown port"},
        {"tcp", "", "dial tcp: missing address"},
        {"tcp4", "[::1]:80", "dial tcp4: address ::1: no suitable address found"},
        {"tcp6", "127.0.0.1:80", "dial tcp6: address 127.0.0.1: no suitable address found"},
        {"foo", "127.0.0.1:80", "dial foo: unknown network foo"},
        {"", "127.0.0.1:80", "dial : unknown network "},
        {"TCP", "127.0.0.1:80", "dial TCP: unknown network TCP"},
        {"unix", "", "dial unix: missing address"},
    };
    for (auto& c : cases) {
      auto r = gort::net::dial(c.network, c.address);
      EXPECT_FALSE(r.ok()) << c.network << " " << c.address;
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
      EXPECT_EQ(msg(r.status()), c.err);
    }
    auto l = gort::net::listen("foo", ":0");
    EXPECT_EQ(l.status(), absl::InvalidArgumentError("listen foo: unknown network foo"));
    l = gort::net::listen("tcp", "127.0.0.1:65536");
    EXPECT_EQ(l.status(), absl::InvalidArgumentError("listen tcp: address 127.0.0.1:65536: invalid port"));
    l = gort::net::listen("udp", "127.0.0.1:0");
    EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(msg(l.status())).find("unexpected address type"), std::string::npos) << l.status();
    auto p = gort::net::listen_packet("tcp", "127.0.0.1:0");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    p = gort::net::listen_packet("udp", "127.0.0.1");
    EXPECT_EQ(p.status(), absl::InvalidArgumentError("listen udp: address 127.0.0.1: missing port in address"));
    std::string long_path(200, 'x');
    l = gort::net::listen("unix", "/tmp/" + long_path);
    EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument);
    // A service name is a port.
    auto svc = gort::net::dial_timeout("tcp", "127.0.0.1:echo", absl::Seconds(5));
    EXPECT_FALSE(svc.ok());
    EXPECT_EQ(msg(svc.status()), "dial tcp 127.0.0.1:7: connect: Connection refused");
    // write_to with a bad address.
    auto pc = must(gort::net::listen_packet("udp", "127.0.0.1:0"));
    auto w = pc.write_to(absl::MakeConstSpan("x", 1), "127.0.0.1");
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(msg(w.status())).find("missing port in address"), std::string::npos) << w.status();
    w = pc.write_to(absl::MakeConstSpan("x", 1), "[::1]:9");  // IPv4 socket, IPv6 peer
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  });
}

TEST_P(NetTest, ConnectionRefused) {
  run_test([] {
    std::string addr = closed_port_addr();
    auto c = gort::net::dial("tcp", addr);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status(), absl::UnavailableError("dial tcp " + addr + ": connect: Connection refused"));
    gort::test::TempDir dir;
    auto u = gort::net::dial("unix", dir.path() + "/nobody");
    EXPECT_EQ(u.status(), absl::NotFoundError("dial unix " + dir.path() +
                                              "/nobody: connect: No such file or directory"));
  });
}

TEST_P(NetTest, AddressInUse) {
  run_test([] {
    auto a = must(gort::net::listen("tcp", "127.0.0.1:0"));
    auto b = gort::net::listen("tcp", a.addr());
    EXPECT_EQ(b.status(), absl::AlreadyExistsError("listen tcp " + a.addr() + ": bind: Address already in use"));
    gort::test::TempDir dir;
    auto u = must(gort::net::listen("unix", dir.path() + "/s"));
    auto u2 = gort::net::listen("unix", dir.path() + "/s");
    EXPECT_EQ(u2.status().code(), absl::StatusCode::kAlreadyExists);
    auto p = must(gort::net::listen_packet("udp", "127.0.0.1:0"));
    auto p2 = gort::net::listen_packet("udp", p.local_addr());
    EXPECT_EQ(p2.status().code(), absl::StatusCode::kAlreadyExists);
  });
}

// An address the host does not have (TEST-NET-1 is never assigned; bind
// sends nothing): EADDRNOTAVAIL is Unavailable, not AlreadyExists as
// absl's errno table has it.
TEST_P(NetTest, AddressNotAvailable) {
  run_test([] {
    auto l = gort::net::listen("tcp", "192.0.2.1:0");
    EXPECT_EQ(l.status(), absl::UnavailableError(
                              "listen tcp 192.0.2.1:0: bind: Cannot assign requested address"));
    auto p = gort::net::listen_packet("udp", "192.0.2.1:0");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable) << p.status();
  });
}

TEST(NetErrors, ErrnoCodes) {
  using gort::internal::errno_code;
  EXPECT_EQ(errno_code(EADDRINUSE), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(errno_code(EADDRNOTAVAIL), absl::StatusCode::kUnavailable);
  EXPECT_EQ(errno_code(EALREADY), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(errno_code(EMSGSIZE), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(errno_code(ECONNREFUSED), absl::StatusCode::kUnavailable);
  EXPECT_EQ(errno_code(ECONNRESET), absl::StatusCode::kUnavailable);
  EXPECT_EQ(errno_code(ETIMEDOUT), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(errno_code(ENOENT), absl::StatusCode::kNotFound);
  EXPECT_EQ(errno_code(EACCES), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(errno_code(EPIPE), absl::StatusCode::kFailedPrecondition);
}

TEST(NetErrors, PermissionDenied) {
  auto child = [] {
    // As root, drop to nobody first (in the child only).
    if (::geteuid() == 0 && ::setuid(65534) != 0) return;  // cannot: vacuous
    gort::test::run_checked(1, [] {
      auto l = gort::net::listen("tcp", "127.0.0.1:80");
      EXPECT_EQ(l.status(), absl::PermissionDeniedError("listen tcp 127.0.0.1:80: bind: Permission denied"));
    });
  };
  GORT_EXPECT_SUBPROCESS_OK(30, child);
}

TEST_P(NetTest, ResetByPeer) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      auto c = ln.accept();
      EXPECT_TRUE(c.ok());
      if (c.ok()) {
        char b[16];
        EXPECT_EQ(c->read(absl::MakeSpan(b)).value_or(0), 4u);
        // SO_LINGER 0: close sends RST instead of FIN.
        EXPECT_TRUE(c->set_linger(0).ok());
        EXPECT_TRUE(c->close().ok());
      }
      wg.done();
    });
    auto c = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(c, "ping").ok());
    wg.wait();
    char b[16];
    auto r = c.read(absl::MakeSpan(b));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status(), absl::UnavailableError("read tcp " + c.local_addr() + "->" + c.remote_addr() +
                                                 ": read: Connection reset by peer"));
    // The connection is dead but still open: writes fail too, no signal.
    auto w = c.write(absl::MakeConstSpan("x", 1));
    EXPECT_FALSE(w.ok());
  });
}

TEST_P(NetTest, WriteToClosedPeerIsAnErrorNotSigpipe) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      auto c = ln.accept();
      EXPECT_TRUE(c.ok());
      wg.done();  // ~Conn closes the server side at once
    });
    auto c = must(gort::net::dial("tcp", ln.addr()));
    wg.wait();
    // The first write may still succeed (the peer answers it with RST);
    // a later one must fail with EPIPE or ECONNRESET.
    std::string chunk(64 * 1024, 'z');
    absl::Status st;
    for (int i = 0; i < 100 && st.ok(); i++) {
      st = c.write(absl::MakeConstSpan(chunk.data(), chunk.size())).status();
      if (st.ok()) gort::sleep(absl::Milliseconds(1));
    }
    ASSERT_FALSE(st.ok());
    std::string m(msg(st));
    EXPECT_EQ(m.rfind("write tcp " + c.local_addr() + "->" + c.remote_addr() + ": write: ", 0), 0u) << m;
    EXPECT_TRUE(m.find("Broken pipe") != std::string::npos ||
                m.find("Connection reset by peer") != std::string::npos)
        << m;
    EXPECT_TRUE(st.code() == absl::StatusCode::kFailedPrecondition ||
                st.code() == absl::StatusCode::kUnavailable)
        << st;
  });
}

TEST_P(NetTest, CallsWithoutSocket) {
  run_test([] {
    gort::net::Conn c;
    EXPECT_FALSE(c.valid());
    char b[4];
    EXPECT_EQ(c.read(absl::MakeSpan(b)).status(), absl::InvalidArgumentError("invalid argument"));
    EXPECT_EQ(c.write(absl::MakeConstSpan(b, 4)).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c.close().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c.set_deadline(absl::Now()).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c.local_addr(), "");
    EXPECT_EQ(c.native_handle(), -1);
    gort::net::Listener l;
    EXPECT_EQ(l.accept().status().code(), absl::StatusCode::kInvalidArgument);
    gort::net::PacketConn p;
    EXPECT_EQ(p.read_from(absl::MakeSpan(b)).status().code(), absl::StatusCode::kInvalidArgument);
    // Moved-from objects hold no socket either.
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    gort::net::Listener moved = std::move(ln);
    EXPECT_FALSE(ln.valid());
    EXPECT_TRUE(moved.valid());
    EXPECT_EQ(ln.close().code(), absl::StatusCode::kInvalidArgument);
  });
}

// Move-assigning over an open socket closes it; moving onto itself keeps
// it; the descriptors all go.
TEST_P(NetTest, MoveAssignmentReleasesTheSocketItReplaces) {
  run_test([] {
    int before = gort::test::count_fds();
    auto a = must(gort::net::listen("tcp", "127.0.0.1:0"));
    auto b = must(gort::net::listen("tcp", "127.0.0.1:0"));
    std::string b_addr = b.addr();
    EXPECT_EQ(gort::test::count_fds(), before + 2);
    a = std::move(b);
    EXPECT_EQ(gort::test::count_fds(), before + 1);
    EXPECT_EQ(a.addr(), b_addr);
    EXPECT_FALSE(b.valid());
    auto& self = a;
    a = std::move(self);
    EXPECT_TRUE(a.valid());
    auto c = must(gort::net::dial("tcp", a.addr()));
    auto s = must(a.accept());
    gort::net::Conn d;
    d = std::move(c);
    EXPECT_FALSE(c.valid());
    EXPECT_EQ(must(d.write(absl::MakeConstSpan("x", 1))), 1u);
    char got = 0;
    EXPECT_EQ(must(s.read(absl::MakeSpan(&got, 1))), 1u);
    EXPECT_EQ(got, 'x');
    s = gort::net::Conn();
    d = gort::net::Conn();
    a = gort::net::Listener();
    EXPECT_EQ(gort::test::count_fds(), before);
  });
}

TEST_P(NetTest, CallsOnClosedSocket) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    auto c = must(gort::net::dial("tcp", ln.addr()));
    auto s = must(ln.accept());
    const absl::Status closed = absl::FailedPreconditionError("use of closed network connection");
    EXPECT_TRUE(c.close().ok());
    char b[4];
    EXPECT_EQ(c.read(absl::MakeSpan(b)).status(), closed);
    EXPECT_EQ(c.write(absl::MakeConstSpan(b, 4)).status(), closed);
    EXPECT_EQ(c.set_deadline(absl::Now()), closed);
    EXPECT_EQ(c.set_read_deadline(absl::Now()), closed);
    EXPECT_EQ(c.close_write(), closed);
    EXPECT_EQ(c.set_no_delay(true), closed);
    EXPECT_EQ(c.close(), closed);
    EXPECT_TRUE(gort::net::is_closed_error(c.close()));
    EXPECT_FALSE(c.local_addr().empty());  // addresses survive close, as in Go
    EXPECT_TRUE(ln.close().ok());
    EXPECT_EQ(ln.accept().status(), closed);
    EXPECT_EQ(ln.close(), closed);
    // The peer sees end of stream.
    EXPECT_EQ(s.read(absl::MakeSpan(b)).value_or(99), 0u);
  });
}

TEST(NetRuntime, OutsideRunIsAnError) {
  auto l = gort::net::listen("tcp", "127.0.0.1:0");
  EXPECT_EQ(l.status().code(), absl::StatusCode::kFailedPrecondition);
  auto d = gort::net::dial("tcp", "127.0.0.1:1");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  // Malformed input is reported first, runtime or not.
  EXPECT_EQ(gort::net::dial("foo", "x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NetErrors, SigpipeStaysDefault) {
  // The suite relies on MSG_NOSIGNAL, not on SIGPIPE being ignored.
  struct sigaction sa;
  ::sigaction(SIGPIPE, nullptr, &sa);
  EXPECT_EQ(sa.sa_handler, SIG_DFL);
}

}  // namespace

// tests/stdlib/net/tls_test.cpp — gort::tls (stdlib/net/tls.cpp): handshake and
// echo over real sockets, verification on by default with Go's error texts
// (unknown authority, wrong host, expired), SNI and ALPN, client
// certificates, close_notify as end of stream, deadlines and contexts
// during a handshake the peer never answers, concurrent read and write,
// bad configuration, and nothing leaked (run_test). Certificates are made
// here with OpenSSL: a CA, and leaves signed by it.
#include <atomic>
#include <string>

#include "gort/context.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "gort/tls.hpp"
#include "tests/stdlib/net/net_helpers.hpp"
#include "tests/tls_pki.hpp"

namespace {

using gort::test::Pem;
using gort::test::pki;
using gort::test::msg;
using gort::test::must;
using gort::test::NetTest;

gort::tls::Config server_config(const Pem& id) {
  gort::tls::Config c;
  c.cert_pem = id.cert;
  c.key_pem = id.key;
  return c;
}

gort::tls::Config client_config(std::string name = "localhost") {
  gort::tls::Config c;
  c.root_ca_pem = pki().ca.cert;
  c.server_name = std::move(name);
  return c;
}

// Serves one connection: echoes until EOF; records the server side's view.
struct EchoServer {
  gort::tls::Listener ln;
  gort::WaitGroup wg;
  absl::Status handshake;
  std::string sni, alpn, peer, suite;

  explicit EchoServer(const gort::tls::Config& cfg) {
    ln = must(gort::tls::listen("tcp", "127.0.0.1:0", cfg));
    if (!ln.valid()) return;
    wg.add(1);
    gort::go([this] {
      auto c = ln.accept();
      if (c.ok()) {
        handshake = c->handshake();
        if (handshake.ok()) {
          sni = c->server_name();
          alpn = c->negotiated_protocol();
          peer = c->peer_subject();
          suite = c->cipher_suite();
          char buf[4096];
          for (;;) {
            auto n = c->read(absl::MakeSpan(buf));
            if (!n.ok() || *n == 0) break;
            if (!c->write(absl::MakeConstSpan(buf, *n)).ok()) break;
          }
        }
        (void)c->close();
      }
      wg.done();
    });
  }
  std::string port() const { return ln.addr().substr(ln.addr().rfind(':') + 1); }
  ~EchoServer() {
    (void)ln.close();
    wg.wait();
  }
};

std::string read_n(gort::tls::Conn& c, size_t n) {
  std::string out;
  char buf[4096];
  while (out.size() < n) {
    auto r = c.read(absl::MakeSpan(buf, std::min(sizeof buf, n - out.size())));
    if (!r.ok() || *r == 0) break;
    out.append(buf, *r);
  }
  return out;
}

class Tls : public NetTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Tls);

TEST_P(Tls, HandshakeVerifiesAndEchoes) {
  run_test([] {
    auto scfg = server_config(pki().server);
    scfg.next_protos = {"h2", "http/1.1"};
    EchoServer srv(scfg);
    auto ccfg = client_config();
    ccfg.next_protos = {"http/1.1", "h2"};
    auto c = gort::tls::dial("tcp", "localhost:" + srv.port(), ccfg);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->negotiated_protocol(), "h2") << "the server's preference wins (Go)";
    EXPECT_EQ(c->version(), "TLSv1.3");
    EXPECT_EQ(c->cipher_suite(), "TLS_AES_128_GCM_SHA256") << "Go's first TLS 1.3 suite, as two Go peers agree";
    EXPECT_NE(c->peer_subject().find("CN=localhost"), std::string::npos) << c->peer_subject();
    for (int i = 0; i < 50; i++) {
      std::string m = "message " + std::to_string(i);
      ASSERT_TRUE(c->write_string(m).ok());
      EXPECT_EQ(read_n(*c, m.size()), m);
    }
    std::string big(1 << 20, 'x');
    for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>('a' + i % 26);
    gort::go([&c, &big] { (void)c->write_string(big); });
    EXPECT_TRUE(read_n(*c, big.size()) == big) << "1 MiB echoed through records of 16 KiB";
    EXPECT_TRUE(c->close().ok());
    srv.wg.wait();
    EXPECT_TRUE(srv.handshake.ok()) << srv.handshake;
    EXPECT_EQ(srv.sni, "localhost");
    EXPECT_EQ(srv.alpn, "h2");
    EXPECT_EQ(srv.suite, "TLS_AES_128_GCM_SHA256");
    gort::tls::Conn none;
    EXPECT_EQ(none.cipher_suite(), "");
  });
}

TEST_P(Tls, UnknownAuthorityWrongHostAndExpiredFailInGoWords) {
  run_test([] {
    {
      EchoServer srv(server_config(pki().other_ca_server));
      auto c = gort::tls::dial("tcp", "localhost:" + srv.port(), client_config());
      ASSERT_FALSE(c.ok());
      EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
      EXPECT_EQ(msg(c.status()), "tls: failed to verify certificate: x509: certificate signed by unknown authority");
    }
    {
      EchoServer srv(server_config(pki().server));
      auto c = gort::tls::dial("tcp", "127.0.0.1:" + srv.port(), client_config("example.com"));
      ASSERT_FALSE(c.ok());
      EXPECT_EQ(msg(c.status()),
                "tls: failed to verify certificate: x509: certificate is valid for localhost, 127.0.0.1, not example.com");
    }
    {
      EchoServer srv(server_config(pki().expired));
      auto c = gort::tls::dial("tcp", "localhost:" + srv.port(), client_config());
      ASSERT_FALSE(c.ok());
      EXPECT_EQ(msg(c.status()), "tls: failed to verify certificate: x509: certificate has expired or is not yet valid");
    }
    {
      // The system's roots do not know the test CA: verification is on by default.
      EchoServer srv(server_config(pki().server));
      gort::tls::Config plain;
      auto c = gort::tls::dial("tcp", "localhost:" + srv.port(), plain);
      ASSERT_FALSE(c.ok());
      EXPECT_EQ(msg(c.status()), "tls: failed to verify certificate: x509: certificate signed by unknown authority");
    }
    {
      // An IP address is verified against the certificate's IP names.
      EchoServer srv(server_config(pki().server));
      gort::tls::Config ip = client_config("");
      auto c = gort::tls::dial("tcp", "127.0.0.1:" + srv.port(), ip);
      EXPECT_TRUE(c.ok()) << c.status();
      if (c.ok()) (void)c->close();
    }
    {
      EchoServer srv(server_config(pki().other_ca_server));
      gort::tls::Config skip;
      skip.insecure_skip_verify = true;
      auto c = gort::tls::dial("tcp", "localhost:" + srv.port(), skip);
      EXPECT_TRUE(c.ok()) << c.status();
      if (c.ok()) (void)c->close();
    }
  });
}

TEST_P(Tls, AlpnWithoutCommonProtocolFails) {
  run_test([] {
    auto scfg = server_config(pki().server);
    scfg.next_protos = {"h2"};
    EchoServer srv(scfg);
    auto ccfg = client_config();
    ccfg.next_protos = {"spdy/3"};
    auto c = gort::tls::dial("tcp", "localhost:" + srv.port(), ccfg);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(msg(c.status()), "tls: no application protocol");
  });
}

TEST_P(Tls, ClientCertificates) {
  run_test([] {
    auto scfg = server_config(pki().server);
    scfg.client_auth = gort::tls::ClientAuth::kRequireAndVerify;
    scfg.root_ca_pem = pki().ca.cert;
    {
      EchoServer srv(scfg);
      auto ccfg = client_config();
      ccfg.cert_pem = pki().client.cert;
      ccfg.key_pem = pki().client.key;
      auto c = gort::tls::dial("tcp", "localhost:" + srv.port(), ccfg);
      ASSERT_TRUE(c.ok()) << c.status();
      ASSERT_TRUE(c->write_string("hi").ok());
      EXPECT_EQ(read_n(*c, 2), "hi");
      (void)c->close();
      srv.wg.wait();
      EXPECT_NE(srv.peer.find("CN=a client"), std::string::npos) << srv.peer;
    }
    {
      EchoServer srv(scfg);
      auto c = gort::tls::dial("tcp", "localhost:" + srv.port(), client_config());
      // TLS 1.3: the client learns of the refusal on its first read.
      char buf[8];
      absl::Status s = c.ok() ? c->read(absl::MakeSpan(buf)).status() : c.status();
      EXPECT_FALSE(s.ok());
      srv.wg.wait();
      EXPECT_EQ(srv.handshake, absl::UnauthenticatedError("tls: client didn't provide a certificate"));
    }
  });
}

TEST_P(Tls, CloseNotifyIsEndOfStream) {
  run_test([] {
    auto ln = must(gort::tls::listen("tcp", "127.0.0.1:0", server_config(pki().server)));
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      auto c = ln.accept();
      if (c.ok()) {
        (void)c->write_string("bye");
        (void)c->close();  // close_notify
      }
      wg.done();
    });
    auto c = must(gort::tls::dial("tcp", ln.addr(), client_config("127.0.0.1")));
    EXPECT_EQ(read_n(c, 3), "bye");
    char buf[8];
    auto n = c.read(absl::MakeSpan(buf));
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, 0u);
    wg.wait();
    EXPECT_TRUE(c.close().ok());
    EXPECT_TRUE(gort::net::is_closed_error(c.write_string("late").status()));
  });
}

TEST_P(Tls, SilentPeerHandshakeTimesOutOrIsCancelled) {
  run_test([] {
    // A TCP listener that never speaks TLS.
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    gort::WaitGroup wg;
    wg.add(1);
    gort::net::Conn held[2];
    gort::go([&] {
      for (auto& h : held) {
        auto c = ln.accept();
        if (c.ok()) h = std::move(*c);
      }
      wg.done();
    });
    auto raw = must(gort::net::dial("tcp", ln.addr()));
    auto c = must(gort::tls::Conn::client(std::move(raw), client_config("localhost")));
    EXPECT_TRUE(c.set_deadline(absl::Now() + absl::Milliseconds(50)).ok());
    absl::Status s = c.handshake();
    EXPECT_TRUE(gort::net::is_timeout_error(s)) << s;
    EXPECT_EQ(c.handshake(), s) << "the result is kept";
    auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(50));
    auto d = gort::tls::dial(ctx, "tcp", ln.addr(), client_config("localhost"));
    EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded) << d.status();
    cancel();
    wg.wait();
  });
}

TEST_P(Tls, ConcurrentReadAndWrite) {
  run_test([] {
    EchoServer srv(server_config(pki().server));
    auto c = must(gort::tls::dial("tcp", "localhost:" + srv.port(), client_config()));
    constexpr int kMessages = 2000;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      for (int i = 0; i < kMessages; i++) {
        if (!c.write_string("0123456789abcdef").ok()) break;
      }
      wg.done();
    });
    std::string got = read_n(c, kMessages * 16);
    wg.wait();
    EXPECT_EQ(got.size(), size_t{kMessages} * 16);
    EXPECT_EQ(got.substr(got.size() - 16), "0123456789abcdef");
    (void)c.close();
  });
}

TEST_P(Tls, BadConfigurationIsAClearError) {
  run_test([] {
    gort::tls::Config none;
    EXPECT_EQ(msg(gort::tls::listen("tcp", "127.0.0.1:0", none).status()),
              "tls: neither Certificates, GetCertificate, nor GetConfigForClient set in Config");
    gort::tls::Config missing;
    missing.cert_file = "/nonexistent/server.crt";
    missing.key_file = "/nonexistent/server.key";
    EXPECT_EQ(msg(gort::tls::listen("tcp", "127.0.0.1:0", missing).status()),
              "open /nonexistent/server.crt: No such file or directory");
    gort::tls::Config garbage;
    garbage.cert_pem = "not a certificate";
    garbage.key_pem = "nor a key";
    EXPECT_EQ(msg(gort::tls::listen("tcp", "127.0.0.1:0", garbage).status()),
              "tls: failed to find any PEM data in certificate input");
    gort::tls::Config mismatched;
    mismatched.cert_pem = pki().server.cert;
    mismatched.key_pem = pki().client.key;
    EXPECT_EQ(msg(gort::tls::listen("tcp", "127.0.0.1:0", mismatched).status()),
              "tls: private key does not match public key");
    gort::tls::Config noname;
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    EXPECT_EQ(msg(gort::tls::Conn::client(must(gort::net::dial("tcp", ln.addr())), noname).status()),
              "tls: either ServerName or InsecureSkipVerify must be specified in the tls.Config");
    gort::tls::Conn empty;
    EXPECT_EQ(empty.handshake(), absl::InvalidArgumentError("invalid argument"));
    char buf[4];
    EXPECT_EQ(empty.read(absl::MakeSpan(buf)).status(), absl::InvalidArgumentError("invalid argument"));
  });
}

}  // namespace

// tests/stdlib/net/tls_resume_test.cpp — ClientSessionCache
// (stdlib/net/tls_session_cache.cpp) and resumption in gort::tls: a second
// dial resumes once the ticket was read, Go's rules on which session is
// offered (not one made without verification to a verifying client; one
// whose resumption failed is dropped), a server that cannot take the
// ticket falls back to a full handshake, LRU order and capacity, and many
// goroutines sharing a cache on several Ps; nothing leaked (run_test,
// ASan).
#include <atomic>
#include <string>
#include <vector>

#include "gort/sync.hpp"
#include "gort/tls.hpp"
#include "tests/stdlib/net/net_helpers.hpp"
#include "tests/tls_pki.hpp"

namespace {

using gort::test::must;
using gort::test::NetTest;
using gort::test::Pem;
using gort::test::pki;

// Echoes on every connection it accepts until closed; counts handshakes.
struct Server {
  gort::tls::Listener ln;
  gort::WaitGroup wg;
  std::atomic<int> handshakes{0};

  explicit Server(const Pem& id) {
    gort::tls::Config cfg;
    cfg.cert_pem = id.cert;
    cfg.key_pem = id.key;
    ln = must(gort::tls::listen("tcp", "127.0.0.1:0", cfg));
    if (!ln.valid()) return;
    wg.add(1);
    gort::go([this] {
      for (;;) {
        auto c = ln.accept();
        if (!c.ok()) break;
        wg.add(1);
        gort::go([this](gort::tls::Conn conn) {
          if (conn.handshake().ok()) {
            handshakes++;
            char buf[256];
            for (;;) {
              auto n = conn.read(absl::MakeSpan(buf));
              if (!n.ok() || *n == 0 || !conn.write(absl::MakeConstSpan(buf, *n)).ok()) break;
            }
          }
          (void)conn.close();
          wg.done();
        }, std::move(*c));
      }
      wg.done();
    });
  }
  ~Server() {
    (void)ln.close();
    wg.wait();
  }
};

gort::tls::Config client(std::shared_ptr<gort::tls::ClientSessionCache> cache, std::string name = "localhost") {
  gort::tls::Config c;
  c.root_ca_pem = pki().ca.cert;
  c.server_name = std::move(name);
  c.client_session_cache = std::move(cache);
  return c;
}

// Dials, echoes one message (which also takes the server's TLS 1.3 ticket
// into the cache), closes. Returns whether the handshake resumed; fails
// the test on any error.
bool dial_echo(const Server& srv, const gort::tls::Config& cfg) {
  auto c = gort::tls::dial("tcp", srv.ln.addr(), cfg);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return false;
  EXPECT_TRUE(c->write_string("ping").ok());
  char buf[4];
  size_t got = 0;
  while (got < sizeof buf) {
    auto n = c->read(absl::MakeSpan(buf + got, sizeof buf - got));
    if (!n.ok() || *n == 0) break;
    got += *n;
  }
  EXPECT_EQ(std::string(buf, got), "ping");
  bool resumed = c->did_resume();
  EXPECT_TRUE(c->close().ok());
  return resumed;
}

class TlsResume : public NetTest {};
GORT_INSTANTIATE_STDLIB_PROCS(TlsResume);

TEST_P(TlsResume, SecondDialResumesOnceTheTicketWasRead) {
  run_test([] {
    Server srv(pki().server);
    auto cache = std::make_shared<gort::tls::ClientSessionCache>();
    auto cfg = client(cache);
    EXPECT_FALSE(dial_echo(srv, cfg)) << "nothing to resume yet";
    EXPECT_EQ(cache->size(), 1u) << "the server's one ticket, under \"localhost\"";
    for (int i = 0; i < 5; i++) EXPECT_TRUE(dial_echo(srv, cfg)) << "dial " << i;
    EXPECT_EQ(cache->size(), 1u) << "each new ticket replaces the last";

    // A resumed connection still knows its server and verified name.
    auto c = must(gort::tls::dial("tcp", srv.ln.addr(), cfg));
    ASSERT_TRUE(c.handshake().ok());
    EXPECT_TRUE(c.did_resume());
    EXPECT_NE(c.peer_subject().find("CN=localhost"), std::string::npos) << c.peer_subject();
    (void)c.close();

    // A client that closes at once never reads the ticket: nothing stored.
    auto fresh = std::make_shared<gort::tls::ClientSessionCache>();
    auto quick = must(gort::tls::dial("tcp", srv.ln.addr(), client(fresh)));
    EXPECT_FALSE(quick.did_resume());
    (void)quick.close();
    EXPECT_EQ(fresh->size(), 0u);

    // Without a cache, never.
    EXPECT_FALSE(dial_echo(srv, client(nullptr)));
    EXPECT_FALSE(dial_echo(srv, client(nullptr)));
    gort::tls::Conn none;
    EXPECT_FALSE(none.did_resume());
  });
}

TEST_P(TlsResume, UnverifiedSessionIsNotOfferedToAVerifyingClient) {
  run_test([] {
    Server srv(pki().server);
    auto cache = std::make_shared<gort::tls::ClientSessionCache>();
    gort::tls::Config insecure;
    insecure.server_name = "localhost";
    insecure.insecure_skip_verify = true;
    insecure.client_session_cache = cache;
    EXPECT_FALSE(dial_echo(srv, insecure));
    EXPECT_TRUE(dial_echo(srv, insecure)) << "the insecure client resumes its own";
    auto verifying = client(cache);
    EXPECT_FALSE(dial_echo(srv, verifying)) << "Go: a session made without verification never serves a verifying client";
    EXPECT_TRUE(dial_echo(srv, verifying)) << "its own, verified, session replaced the other";
    EXPECT_TRUE(dial_echo(srv, insecure)) << "a verified session serves an insecure client";
  });
}

TEST_P(TlsResume, OtherServerFallsBackToAFullHandshakeOrDropsTheSession) {
  run_test([] {
    auto cache = std::make_shared<gort::tls::ClientSessionCache>();
    auto cfg = client(cache);
    {
      Server a(pki().server);
      EXPECT_FALSE(dial_echo(a, cfg));
      EXPECT_TRUE(dial_echo(a, cfg));
    }
    // Another server for the same name (another ticket key): it cannot
    // decrypt the ticket, so the handshake is a full one, and succeeds.
    {
      Server b(pki().server);
      EXPECT_FALSE(dial_echo(b, cfg));
      EXPECT_EQ(b.handshakes.load(), 1);
      EXPECT_TRUE(dial_echo(b, cfg)) << "b's own ticket replaced a's";
    }
    // One whose certificate the client rejects: the failed resumption
    // drops the session, as Go's client does.
    ASSERT_EQ(cache->size(), 1u);
    Server bad(pki().other_ca_server);
    auto c = gort::tls::dial("tcp", bad.ln.addr(), cfg);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(std::string(c.status().message()).find("certificate signed by unknown authority"), std::string::npos)
        << c.status();
    EXPECT_EQ(cache->size(), 0u);
  });
}

TEST_P(TlsResume, LeastRecentlyUsedGoesFirst) {
  run_test([] {
    Server srv(pki().server);
    auto cache = std::make_shared<gort::tls::ClientSessionCache>(2);
    // Keys are server names; these clients skip verification, so any name
    // reaches the one server.
    auto named = [&](const std::string& name) {
      gort::tls::Config c;
      c.server_name = name;
      c.insecure_skip_verify = true;
      c.client_session_cache = cache;
      return c;
    };
    EXPECT_FALSE(dial_echo(srv, named("a")));
    EXPECT_FALSE(dial_echo(srv, named("b")));
    EXPECT_TRUE(dial_echo(srv, named("a"))) << "a is now the most recent";
    EXPECT_FALSE(dial_echo(srv, named("c")));
    EXPECT_EQ(cache->size(), 2u);
    EXPECT_TRUE(dial_echo(srv, named("a")));
    EXPECT_FALSE(dial_echo(srv, named("b"))) << "b was the least recently used when c came";

    // Go's capacity below 1 means 64.
    auto dflt = std::make_shared<gort::tls::ClientSessionCache>(0);
    for (int i = 0; i < 65; i++) {
      auto c = named("n" + std::to_string(i));
      c.client_session_cache = dflt;
      EXPECT_FALSE(dial_echo(srv, c));
    }
    EXPECT_EQ(dflt->size(), 64u);
  });
}

TEST_P(TlsResume, ManyGoroutinesShareOneCache) {
  run_test([] {
    Server srv(pki().server);
    auto cache = std::make_shared<gort::tls::ClientSessionCache>(2);
    std::atomic<int> resumed{0}, dials{0};
    gort::WaitGroup wg;
    for (int g = 0; g < 8; g++) {
      wg.add(1);
      gort::go([&, g] {
        for (int i = 0; i < 12; i++) {
          // Three names over two slots: entries are replaced and evicted
          // while others read them.
          gort::tls::Config c;
          c.server_name = std::string(1, static_cast<char>('x' + (g + i) % 3));
          c.insecure_skip_verify = true;
          c.client_session_cache = cache;
          if (dial_echo(srv, c)) resumed++;
          dials++;
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(dials.load(), 96);
    EXPECT_GT(resumed.load(), 0);
    EXPECT_LE(cache->size(), 2u);
  });
}

}  // namespace

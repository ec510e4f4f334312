// tests/stdlib/net/server_test.cpp — gort::net::Server (stdlib/net/server.cpp):
// serving many clients, shutdown with requests in flight and with a
// deadline that passes, idle connections closed at shutdown, the
// connection limit, idle and read timeouts, a handler that throws, TLS,
// misuse, and a stress run on several Ps; run_test checks that no
// descriptor or goroutine leaks.
#include <atomic>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/server.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "gort/tls.hpp"
#include "tests/stdlib/net/net_helpers.hpp"
#include "tests/tls_pki.hpp"

namespace {

using gort::test::msg;
using gort::test::must;
using gort::test::eventually;
using gort::test::NetTest;
using gort::test::Serving;
using gort::test::read_exactly;
using gort::test::write_str;

// Echoes each input until end of stream, idle in wait_input between them.
void echo(gort::net::ServerConn& c) {
  char buf[512];
  while (c.wait_input()) {
    auto n = c.read(absl::MakeSpan(buf));
    if (!n.ok() || *n == 0) return;
    if (!c.write(absl::MakeConstSpan(buf, *n)).ok()) return;
  }
}

TEST_P(NetTest, ServerEchoesManyClientsAndShutsDown) {
  run_test([] {
    gort::net::Server srv(echo);
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    gort::WaitGroup wg;
    std::atomic<int> ok{0};
    for (int i = 0; i < 20; i++) {
      wg.add(1);
      gort::go([&, i] {
        auto c = must(gort::net::dial("tcp", ln.addr()));
        for (int j = 0; j < 5 && c; j++) {
          std::string m = "client " + std::to_string(i) + " message " + std::to_string(j);
          EXPECT_TRUE(write_str(c, m).ok());
          EXPECT_EQ(read_exactly(c, m.size()).value_or(""), m);
        }
        ok.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(ok.load(), 20);
    // The clients are gone; their handlers follow.
    EXPECT_TRUE(eventually([&] { return srv.num_conns() == 0; })) << srv.num_conns();
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    absl::Status r = serving.result();
    EXPECT_TRUE(gort::net::is_server_closed(r)) << r;
    EXPECT_EQ(msg(r), "gort: Server closed");
    // Later serves and shutdowns.
    EXPECT_TRUE(gort::net::is_server_closed(srv.serve(ln)));
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(srv.close().ok());
  });
}

TEST_P(NetTest, ServerShutdownWaitsForRequestsInFlightAndClosesIdleOnes) {
  run_test([] {
    auto in_handler = gort::make_chan<std::monostate>(1);
    auto release = gort::make_chan<std::monostate>();
    gort::net::Server srv([&](gort::net::ServerConn& c) {
      char buf[16];
      while (c.wait_input()) {
        auto n = c.read(absl::MakeSpan(buf));
        if (!n.ok() || *n == 0) return;
        if (std::string_view(buf, *n) == "slow") {
          in_handler.send({});
          (void)release.recv();
        }
        if (!c.write(absl::MakeConstSpan(buf, *n)).ok()) return;
      }
    });
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto idle = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(idle, "hi").ok());
    EXPECT_EQ(read_exactly(idle, 2).value_or(""), "hi");  // now idle in wait_input
    auto busy = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(busy, "slow").ok());
    (void)in_handler.recv();
    EXPECT_TRUE(eventually([&] { return srv.num_idle() == 1; }));

    auto shut = gort::make_chan<absl::Status>(1);
    gort::go([&, shut] { shut.send(srv.shutdown(gort::background())); });
    // The idle connection is closed at once; the busy one is not.
    EXPECT_EQ(gort::test::read_to_eof(idle).value_or("error"), "");
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
    bool early = false;
    gort::select(gort::on_recv(shut, [&] { early = true; }), gort::on_recv(gort::after(absl::Milliseconds(50))));
    EXPECT_FALSE(early) << "shutdown returned while a request was in flight";
    EXPECT_EQ(srv.num_conns(), 1u);
    // New clients are refused (the listener is closed).
    EXPECT_FALSE(gort::net::dial("tcp", ln.addr()).ok());
    release.close();
    EXPECT_EQ(read_exactly(busy, 4).value_or(""), "slow");
    // Its handler sees the shutdown at its next wait_input and ends.
    EXPECT_EQ(gort::test::read_to_eof(busy).value_or("error"), "");
    EXPECT_TRUE(shut.recv().value_or(absl::InternalError("none")).ok());
    EXPECT_EQ(srv.num_conns(), 0u);
  });
}

TEST_P(NetTest, ServerShutdownGivesUpAtTheDeadlineAndCloseEndsTheRest) {
  run_test([] {
    auto reading = gort::make_chan<std::monostate>(1);
    absl::Status read_err, ctx_err;
    gort::net::Server srv([&](gort::net::ServerConn& c) {
      // Reads without wait_input: busy as far as shutdown can tell.
      char buf[16];
      EXPECT_TRUE(c.context().err().ok());
      reading.send({});
      auto n = c.read(absl::MakeSpan(buf));
      read_err = n.status();
      ctx_err = c.context().err();
    });
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto c = must(gort::net::dial("tcp", ln.addr()));
    (void)reading.recv();
    auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Milliseconds(30));
    absl::Status s = srv.shutdown(ctx);
    cancel();
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_EQ(srv.num_conns(), 1u);
    EXPECT_TRUE(srv.close().ok());
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());  // now everything has ended
    EXPECT_TRUE(gort::net::is_closed_error(read_err)) << read_err;
    EXPECT_EQ(ctx_err.code(), absl::StatusCode::kCancelled) << ctx_err;
    EXPECT_EQ(srv.num_conns(), 0u);
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

TEST_P(NetTest, ServerLimitsConnections) {
  run_test([] {
    std::atomic<int> served{0};
    gort::net::Server srv(
        [&](gort::net::ServerConn& c) {
          served.fetch_add(1);
          echo(c);
        },
        {.max_conns = 2});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto a = must(gort::net::dial("tcp", ln.addr()));
    auto b = must(gort::net::dial("tcp", ln.addr()));
    auto third = must(gort::net::dial("tcp", ln.addr()));  // in the kernel's backlog
    EXPECT_TRUE(write_str(a, "a").ok());
    EXPECT_TRUE(write_str(b, "b").ok());
    EXPECT_TRUE(write_str(third, "c").ok());
    EXPECT_EQ(read_exactly(a, 1).value_or(""), "a");
    EXPECT_EQ(read_exactly(b, 1).value_or(""), "b");
    EXPECT_TRUE(third.set_read_deadline(absl::Now() + absl::Milliseconds(100)).ok());
    auto early = read_exactly(third, 1);
    EXPECT_TRUE(!early.ok() && gort::net::is_timeout_error(early.status())) << "served past the limit";
    EXPECT_EQ(served.load(), 2);
    EXPECT_EQ(srv.num_conns(), 2u);
    EXPECT_TRUE(a.close().ok());
    EXPECT_TRUE(third.set_read_deadline(absl::InfiniteFuture()).ok());
    EXPECT_EQ(read_exactly(third, 1).value_or(""), "c");
    EXPECT_EQ(served.load(), 3);
    // Shutdown also ends an accept loop that waits for a free slot.
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

TEST_P(NetTest, ServerIdleTimeoutClosesASilentConnection) {
  run_test([] {
    auto waited = gort::make_chan<bool>(1);
    gort::net::Server srv(
        [&](gort::net::ServerConn& c) {
          bool first = c.wait_input();
          waited.send(first);
        },
        {.idle_timeout = absl::Milliseconds(30)});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto c = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_EQ(waited.recv().value_or(true), false);
    EXPECT_EQ(gort::test::read_to_eof(c).value_or("error"), "");
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

// Without a read timeout a request's reads have no deadline, whatever the
// idle timeout (the server defers the idle deadline, keeping its timer for
// the next wait: poll_defer_deadline); the next wait's idle deadline still
// closes a connection that goes silent. Rounds, so that the deferred
// timer's firing meets waits of several ages.
TEST_P(NetTest, ServerIdleTimeoutDoesNotCutARequestAndStillClosesIdleOnes) {
  run_test([] {
    gort::net::Server srv(
        [](gort::net::ServerConn& c) {
          while (c.wait_input()) {
            // A request of two parts, the second much later than the
            // idle timeout after the first.
            std::string got;
            char buf[64];
            while (got.size() < 4) {
              auto n = c.read(absl::MakeSpan(buf));
              if (!n.ok() || *n == 0) return;
              got.append(buf, *n);
            }
            if (!c.write(absl::MakeConstSpan(got)).ok()) return;
          }
        },
        {.idle_timeout = absl::Milliseconds(60)});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto c = must(gort::net::dial("tcp", ln.addr()));
    for (int round = 0; round < 3; round++) {
      ASSERT_TRUE(write_str(c, "ab").ok());
      gort::sleep(absl::Milliseconds(150));  // within the request: no timeout
      ASSERT_TRUE(write_str(c, "cd").ok());
      EXPECT_EQ(read_exactly(c, 4).value_or("error"), "abcd") << "round " << round;
      gort::sleep(absl::Milliseconds(20 * round));  // idle, but not for long
    }
    // Silent now: the idle deadline closes it.
    absl::Time start = absl::Now();
    EXPECT_EQ(gort::test::read_to_eof(c).value_or("error"), "");
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

// A request's own read deadline that expired does not fail the wait for
// the next one: the idle deadline replaces it first (NetFD::wait_input sets
// it before it looks at the deadline, as a separate call would have).
TEST_P(NetTest, ServerWaitAfterARequestWhoseReadDeadlineExpired) {
  run_test([] {
    gort::net::Server srv(
        [](gort::net::ServerConn& c) {
          while (c.wait_input()) {
            char buf[8];
            auto n = c.read(absl::MakeSpan(buf));
            if (!n.ok() || *n == 0) return;
            // The handler's own deadline for more of the request, which
            // does not come.
            if (!c.set_read_deadline(absl::Now() + absl::Milliseconds(20)).ok()) return;
            absl::Status more = c.read(absl::MakeSpan(buf)).status();
            if (!gort::net::is_timeout_error(more)) return;
            if (!c.write(absl::MakeConstSpan(std::string_view("timeout"))).ok()) return;
          }
        },
        {.idle_timeout = absl::Seconds(30)});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto c = must(gort::net::dial("tcp", ln.addr()));
    for (int round = 0; round < 3; round++) {
      ASSERT_TRUE(write_str(c, "a").ok());
      EXPECT_EQ(read_exactly(c, 7).value_or("error"), "timeout") << "round " << round;
      gort::sleep(absl::Milliseconds(10 * round));
    }
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

TEST_P(NetTest, ServerReadAndWriteTimeouts) {
  run_test([] {
    auto result = gort::make_chan<absl::Status>(1);
    gort::net::Server srv(
        [&](gort::net::ServerConn& c) {
          char buf[8];
          result.send(c.read(absl::MakeSpan(buf)).status());  // no input: the read deadline
        },
        {.read_timeout = absl::Milliseconds(30), .write_timeout = absl::Seconds(5)});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto c = must(gort::net::dial("tcp", ln.addr()));
    absl::Status s = result.recv().value_or(absl::OkStatus());
    EXPECT_TRUE(gort::net::is_timeout_error(s)) << s;
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

TEST_P(NetTest, ServerHandlerThatThrowsIsReportedAndTheServerGoesOn) {
  run_test([] {
    testing::internal::CaptureStderr();
    gort::net::Server srv([&](gort::net::ServerConn& c) {
      char buf[8];
      auto n = c.read(absl::MakeSpan(buf));
      if (n.ok() && *n > 0 && buf[0] == 't') throw std::out_of_range("vector::at");
      if (n.ok() && *n > 0 && buf[0] == 'n') throw 42;
      if (n.ok()) (void)c.write(absl::MakeConstSpan(buf, *n));
    });
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto bad = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(bad, "throw").ok());
    EXPECT_EQ(gort::test::read_to_eof(bad).value_or("error"), "");  // closed
    auto number = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(number, "number").ok());
    EXPECT_EQ(gort::test::read_to_eof(number).value_or("error"), "");  // closed
    auto good = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(good, "ok").ok());
    EXPECT_EQ(read_exactly(good, 2).value_or(""), "ok");
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("gort: panic serving " + bad.local_addr() + ": std::out_of_range: vector::at\n"),
              std::string::npos)
        << err;
    // Types and values as the unrecovered panic names them (gmp/diag/exception.hpp).
    EXPECT_NE(err.find("gort: panic serving " + number.local_addr() + ": int: 42\n"), std::string::npos) << err;
  });
}

TEST_P(NetTest, ServerServesTls) {
  run_test([] {
    gort::tls::Config scfg;
    scfg.cert_pem = gort::test::pki().server.cert;
    scfg.key_pem = gort::test::pki().server.key;
    gort::tls::Config ccfg;
    ccfg.root_ca_pem = gort::test::pki().ca.cert;
    ccfg.server_name = "localhost";
    gort::net::Server srv([](gort::net::ServerConn& c) {
      EXPECT_EQ(c.net_conn(), nullptr);
      EXPECT_NE(c.tls_conn(), nullptr);
      echo(c);
    });
    auto ln = must(gort::tls::listen("tcp", "127.0.0.1:0", scfg));
    if (!ln.valid()) return;
    Serving serving(srv, ln);
    auto c = must(gort::tls::dial("tcp", ln.addr(), ccfg));
    if (!c) return;
    for (std::string m : {"one", "two", "three"}) {
      EXPECT_TRUE(c.write_string(m).ok());
      std::string got(m.size(), '\0');
      size_t n = 0;
      while (n < m.size()) {
        auto r = c.read(absl::MakeSpan(got.data() + n, got.size() - n));
        if (!r.ok() || *r == 0) break;
        n += *r;
      }
      EXPECT_EQ(got, m);
    }
    EXPECT_TRUE(eventually([&] { return srv.num_idle() == 1; }));
    // Shutdown closes the idle TLS connection: close_notify, end of stream.
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    char buf[8];
    EXPECT_EQ(c.read(absl::MakeSpan(buf)).value_or(99), 0u);
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

TEST_P(NetTest, ServerDestroyedWithHandlersRunningClosesAndWaits) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    std::atomic<int> ended{0};
    gort::Chan<absl::Status> done = gort::make_chan<absl::Status>(1);
    auto c1 = gort::net::Conn();
    {
      auto reading = gort::make_chan<std::monostate>(1);
      gort::net::Server srv([&](gort::net::ServerConn& c) {
        char buf[8];
        reading.send({});
        (void)c.read(absl::MakeSpan(buf));
        ended.fetch_add(1);
      });
      gort::go([&srv, &ln, done] { done.send(srv.serve(ln)); });
      c1 = must(gort::net::dial("tcp", ln.addr()));
      (void)reading.recv();
    }  // ~Server
    EXPECT_EQ(ended.load(), 1);
    EXPECT_TRUE(gort::net::is_server_closed(done.recv().value_or(absl::OkStatus())));
    EXPECT_EQ(gort::test::read_to_eof(c1).value_or("error"), "");
  });
}

TEST_P(NetTest, ServerMisuse) {
  run_test([] {
    EXPECT_THROW(gort::net::Server(nullptr), gort::panic_error);
    EXPECT_THROW(gort::net::Server(echo, {.max_conns = -1}), gort::panic_error);
    // serve returns an accept error other than closing as it is.
    gort::net::Server srv(echo);
    gort::net::Listener none;
    absl::Status s = srv.serve(none);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  });
}

// Many clients on several Ps, shutdown while they are still talking: every
// client ends with its last reply or end of stream, nothing leaks.
TEST_P(NetTest, ServerStressShutdownWhileBusy) {
  run_test([] {
    gort::net::Server srv(echo, {.max_conns = 64, .idle_timeout = absl::Seconds(10)});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    gort::WaitGroup wg;
    std::atomic<int> replies{0};
    for (int i = 0; i < 100; i++) {
      wg.add(1);
      gort::go([&, i] {
        auto c = gort::net::dial("tcp", ln.addr());
        if (c.ok()) {
          for (int j = 0; j < 50; j++) {
            std::string m = std::to_string(i * 1000 + j);
            if (!write_str(*c, m).ok()) break;
            auto r = read_exactly(*c, m.size());
            if (!r.ok() || r->size() != m.size()) break;
            EXPECT_EQ(*r, m);
            replies.fetch_add(1);
          }
        }
        wg.done();
      });
    }
    EXPECT_TRUE(eventually([&] { return replies.load() > 200; }));
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_EQ(srv.num_conns(), 0u);
    wg.wait();
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

}  // namespace

// tests/stdlib/net/server_idle_test.cpp — session servers (stdlib/net/
// server_idle.cpp): idle connections held without a goroutine and woken for
// their next turn (after keeping their goroutine for keep_goroutine), input
// read ahead running the next turn at once, idle
// timeouts, a peer that closes or half-closes while idle, a turn that also
// waits with a goroutine, shutdown and close with idle sessions, and an
// idle server that is not a deadlock; run_test checks that nothing leaks.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/server.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/net/net_helpers.hpp"
#include "tests/testing.hpp"

namespace {

using gort::net::Next;
using gort::net::ServerConn;
using gort::test::must;
using gort::test::eventually;
using gort::test::NetTest;
using gort::test::Serving;
using gort::test::read_exactly;
using gort::test::write_str;

std::atomic<int> g_sessions{0};  // live sessions

// Answers each complete line ("x\n" -> "x!\n"), one line per turn; what is
// left of the input stays in the pooled buffer.
struct LineSession : gort::net::Session {
  LineSession() { g_sessions.fetch_add(1); }
  ~LineSession() override { g_sessions.fetch_sub(1); }
  Next turn(ServerConn& c) override {
    std::string& in = c.buffer();
    size_t nl;
    while ((nl = in.find('\n')) == std::string::npos) {
      char chunk[256];
      auto n = c.read(absl::MakeSpan(chunk));
      if (!n.ok()) return Next::kClose;
      if (*n == 0) {  // end of stream: a half-closed peer still gets an answer
        (void)c.write_string("bye\n");
        return Next::kClose;
      }
      in.append(chunk, *n);
    }
    std::string line = in.substr(0, nl);
    in.erase(0, nl + 1);
    turns++;
    if (line == "wait") {
      // A turn may also wait with its goroutine, as a handler does.
      if (!c.wait_input()) return Next::kClose;
      return Next::kWaitInput;
    }
    if (!c.write_string(line + "!\n").ok()) return Next::kClose;
    return Next::kWaitInput;
  }
  int turns = 0;
};

gort::net::Sessions line_sessions() {
  return gort::net::Sessions{[](ServerConn&) { return std::make_unique<LineSession>(); }};
}

TEST_P(NetTest, SessionsIdleWithoutAGoroutine) {
  run_test([] {
    constexpr int kConns = 100;
    gort::net::Server srv(line_sessions());
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    int64_t before = gort::num_goroutine();
    std::vector<gort::net::Conn> cs;
    for (int i = 0; i < kConns; i++) {
      cs.push_back(must(gort::net::dial("tcp", ln.addr())));
      std::string m = "hello " + std::to_string(i);
      EXPECT_TRUE(write_str(cs.back(), m + "\n").ok());
      EXPECT_EQ(read_exactly(cs.back(), m.size() + 2).value_or(""), m + "!\n");
    }
    EXPECT_TRUE(eventually([&] { return srv.num_idle() == kConns; })) << srv.num_idle();
    EXPECT_EQ(srv.num_conns(), static_cast<size_t>(kConns));
    // The connections are idle with no goroutine each: one watcher only.
    EXPECT_TRUE(eventually([&] { return gort::num_goroutine() <= before + 1; }))
        << gort::num_goroutine() << " goroutines, " << before << " before";
    // Each wakes for its next turn.
    for (int i = 0; i < kConns; i++) {
      EXPECT_TRUE(write_str(cs[i], "again\n").ok());
      EXPECT_EQ(read_exactly(cs[i], 7).value_or(""), "again!\n");
    }
    // Shutdown closes them all at once and destroys their sessions.
    EXPECT_TRUE(eventually([&] { return srv.num_idle() == kConns; }));
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_EQ(g_sessions.load(), 0);
    EXPECT_EQ(srv.num_conns(), 0u);
    for (auto& c : cs) EXPECT_EQ(gort::test::read_to_eof(c).value_or("error"), "");
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

TEST_P(NetTest, SessionsInputReadAheadRunsTheNextTurnAtOnce) {
  run_test([] {
    gort::net::Server srv(line_sessions());
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto c = must(gort::net::dial("tcp", ln.addr()));
    // Three pipelined lines in one write: one turn each, no further input.
    EXPECT_TRUE(write_str(c, "a\nb\nc\n").ok());
    EXPECT_EQ(read_exactly(c, 9).value_or(""), "a!\nb!\nc!\n");
    // A line split across two writes, with an idle wait between.
    EXPECT_TRUE(write_str(c, "sp").ok());
    gort::sleep(absl::Milliseconds(20));
    EXPECT_TRUE(write_str(c, "lit\n").ok());
    EXPECT_EQ(read_exactly(c, 7).value_or(""), "split!\n");
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

TEST_P(NetTest, SessionsPeerClosesOrHalfClosesWhileIdle) {
  run_test([] {
    gort::net::Server srv(line_sessions());
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto a = must(gort::net::dial("tcp", ln.addr()));
    auto b = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(a, "x\n").ok());
    EXPECT_TRUE(write_str(b, "y\n").ok());
    EXPECT_EQ(read_exactly(a, 3).value_or(""), "x!\n");
    EXPECT_EQ(read_exactly(b, 3).value_or(""), "y!\n");
    EXPECT_TRUE(eventually([&] { return srv.num_idle() == 2; }));
    EXPECT_TRUE(a.close().ok());  // gone while idle: its session ends
    EXPECT_TRUE(b.close_write().ok());  // half-closed: it still gets its answer
    EXPECT_EQ(gort::test::read_to_eof(b).value_or("error"), "bye\n");
    EXPECT_TRUE(eventually([&] { return srv.num_conns() == 0 && g_sessions.load() == 0; }));
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

TEST_P(NetTest, SessionsIdleTimeout) {
  run_test([] {
    // The talker's gaps (15 ms plus a round trip) stay far below the idle
    // timeout even on a loaded machine under a sanitizer, where a 40 ms
    // timeout once closed the talker too.
    gort::net::Server srv(line_sessions(), {.idle_timeout = absl::Milliseconds(150)});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    auto quiet = must(gort::net::dial("tcp", ln.addr()));
    auto talker = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(quiet, "q\n").ok());
    EXPECT_EQ(read_exactly(quiet, 3).value_or(""), "q!\n");
    // The talker keeps renewing its deadline; the quiet one times out.
    absl::Time start = absl::Now();
    for (int i = 0; i < 6; i++) {
      EXPECT_TRUE(write_str(talker, "t\n").ok());
      EXPECT_EQ(read_exactly(talker, 3).value_or(""), "t!\n");
      gort::sleep(absl::Milliseconds(15));
    }
    EXPECT_EQ(gort::test::read_to_eof(quiet).value_or("error"), "");
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
    EXPECT_TRUE(write_str(talker, "still\n").ok());
    EXPECT_EQ(read_exactly(talker, 7).value_or(""), "still!\n");
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_EQ(g_sessions.load(), 0);
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

// The goroutine each turn of an IdSession ran on, in order.
std::mutex g_ids_mu;
std::vector<int64_t> g_turn_goroutines;

struct IdSession : LineSession {
  Next turn(ServerConn& c) override {
    {
      std::lock_guard<std::mutex> lock(g_ids_mu);
      g_turn_goroutines.push_back(gort::goroutine_id());
    }
    return LineSession::turn(c);
  }
};

std::vector<int64_t> turn_goroutines() {
  std::lock_guard<std::mutex> lock(g_ids_mu);
  return g_turn_goroutines;
}

// ServerConfig::keep_goroutine: once a quick answer has earned it, input
// within it runs the next turn on the same goroutine; while it lasts the connection counts as idle (shutdown
// closes it at once); once it has passed the connection holds no goroutine
// and its next turn runs on a new one. 0 gives the goroutine back at once.
TEST_P(NetTest, SessionsKeepTheirGoroutineForKeepGoroutine) {
  run_test([] {
    gort::net::Sessions id_sessions{[](ServerConn&) { return std::make_unique<IdSession>(); }};
    auto exchange = [](gort::net::Conn& c, const std::string& m) {
      EXPECT_TRUE(write_str(c, m + "\n").ok());
      EXPECT_EQ(read_exactly(c, m.size() + 2).value_or(""), m + "!\n");
    };
    {
      // Long enough never to pass here: every turn on the first goroutine.
      gort::net::Server srv(id_sessions, {.keep_goroutine = absl::Seconds(60)});
      auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
      if (!ln) return;
      Serving serving(srv, ln);
      g_turn_goroutines.clear();
      auto c = must(gort::net::dial("tcp", ln.addr()));
      for (int i = 0; i < 6; i++) exchange(c, "k" + std::to_string(i));
      auto ids = turn_goroutines();
      ASSERT_EQ(ids.size(), 6u);
      // The first wait keeps no goroutine: no client has answered quickly
      // yet (KeepCredit). Its quick answer earns the next one.
      EXPECT_NE(ids[0], ids[1]) << "the first wait kept its goroutine without any credit";
      for (size_t i = 2; i < ids.size(); i++) {
        EXPECT_EQ(ids[i], ids[1]) << "turn " << i << ": an answer within keep_goroutine ran on another goroutine";
      }
      // Waiting with its goroutine, the connection is idle: shutdown closes
      // it at once instead of waiting the 60 s out.
      EXPECT_TRUE(eventually([&] { return srv.num_idle() == 1; })) << srv.num_idle();
      auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(20));
      EXPECT_TRUE(srv.shutdown(ctx).ok());
      EXPECT_EQ(g_sessions.load(), 0);
      EXPECT_EQ(gort::test::read_to_eof(c).value_or("error"), "");
      EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
    }
    for (absl::Duration keep : {absl::ZeroDuration(), absl::Milliseconds(20)}) {
      gort::net::Server srv(id_sessions, {.keep_goroutine = keep});
      auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
      if (!ln) return;
      Serving serving(srv, ln);
      int64_t before = gort::num_goroutine();
      g_turn_goroutines.clear();
      auto c = must(gort::net::dial("tcp", ln.addr()));
      exchange(c, "a");
      // Past keep_goroutine (a kept goroutine and the watcher count the
      // same): only the watcher is left.
      gort::sleep(keep + absl::Milliseconds(200));
      EXPECT_TRUE(eventually([&] { return gort::num_goroutine() <= before + 1; }))
          << gort::num_goroutine() << " goroutines, " << before << " before (keep " << keep << ")";
      exchange(c, "b");
      auto ids = turn_goroutines();
      ASSERT_EQ(ids.size(), 2u);
      EXPECT_NE(ids[0], ids[1]) << "keep " << keep << ": the turn after the idle wait ran on the old goroutine";
      EXPECT_TRUE(srv.shutdown(gort::background()).ok());
      EXPECT_EQ(g_sessions.load(), 0);
      EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
    }
  });
}

// Many kept goroutines at once: one sweeper ends every wait that passes
// keep_goroutine, and each connection's next turn then runs on a new
// goroutine; the sweeper itself leaves once none is kept.
TEST_P(NetTest, SessionsManyKeptWaitsEndAtKeepGoroutine) {
  run_test([] {
    constexpr int kConns = 24;
    const absl::Duration keep = absl::Milliseconds(30);
    gort::net::Server srv(line_sessions(), {.keep_goroutine = keep});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    int64_t before = gort::num_goroutine();
    std::vector<gort::net::Conn> conns;
    for (int i = 0; i < kConns; i++) {
      conns.push_back(must(gort::net::dial("tcp", ln.addr())));
      // Two quick answers: the second wait keeps its goroutine (KeepCredit).
      for (const char* m : {"a", "b"}) {
        EXPECT_TRUE(write_str(conns.back(), std::string(m) + "\n").ok());
        EXPECT_EQ(read_exactly(conns.back(), 3).value_or(""), std::string(m) + "!\n");
      }
    }
    // While they last, the kept waits hold goroutines.
    EXPECT_GT(gort::num_goroutine(), before + 1);
    // Then only the watcher is left: no kept wait, no sweeper.
    EXPECT_TRUE(eventually([&] { return gort::num_goroutine() <= before + 1; }))
        << gort::num_goroutine() << " goroutines, " << before << " before";
    EXPECT_EQ(srv.num_idle(), kConns);
    for (auto& c : conns) {
      EXPECT_TRUE(write_str(c, "c\n").ok());
      EXPECT_EQ(read_exactly(c, 3).value_or(""), "c!\n");
    }
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_EQ(g_sessions.load(), 0);
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

// Input that comes as keep_goroutine runs out: whoever takes the
// connection off the kept list decides, and either way the request is
// answered. A wait the sweeper ended must leave no expired deadline behind
// (the turn's read would fail with a timeout and the client would see the
// connection close), and a wait that ended with input must not be ended
// again by the sweeper.
TEST_P(NetTest, SessionsInputAsKeepGoroutineRunsOut) {
  run_test([] {
    gort::net::Server srv(line_sessions(), {.keep_goroutine = absl::Milliseconds(1)});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    Serving serving(srv, ln);
    constexpr int kClients = 4, kRounds = 150;
    gort::WaitGroup wg;
    std::atomic<int> answered{0};
    for (int k = 0; k < kClients; k++) {
      wg.add(1);
      gort::go([&, k] {
        auto c = must(gort::net::dial("tcp", ln.addr()));
        for (int i = 0; i < kRounds; i++) {
          std::string m = "m" + std::to_string(k) + "_" + std::to_string(i);
          if (!write_str(c, m + "\n").ok()) break;
          if (read_exactly(c, m.size() + 2).value_or("") != m + "!\n") break;
          answered.fetch_add(1);
          // Pauses around keep_goroutine: before it, at it and past it.
          gort::sleep(absl::Microseconds((i * 7 + k * 13) % 2100));
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(answered.load(), kClients * kRounds);
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_EQ(g_sessions.load(), 0);
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
  });
}

TEST_P(NetTest, SessionsTurnThatWaitsWithItsGoroutineAndThrows) {
  run_test([] {
    testing::internal::CaptureStderr();
    struct Thrower : gort::net::Session {
      Next turn(ServerConn& c) override {
        char b[8];
        auto n = c.read(absl::MakeSpan(b));
        if (n.ok() && *n > 0 && b[0] == '!') throw std::runtime_error("bad input");
        return Next::kWaitInput;
      }
    };
    gort::net::Server srv(line_sessions());
    gort::net::Server bad(gort::net::Sessions{[](ServerConn&) { return std::make_unique<Thrower>(); }});
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    auto ln2 = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln || !ln2) return;
    Serving serving(srv, ln);
    Serving serving2(bad, ln2);
    auto c = must(gort::net::dial("tcp", ln.addr()));
    EXPECT_TRUE(write_str(c, "wait\n").ok());  // that turn waits in wait_input
    EXPECT_TRUE(eventually([&] { return srv.num_idle() == 1; }));
    EXPECT_TRUE(write_str(c, "go\n").ok());
    EXPECT_EQ(read_exactly(c, 4).value_or(""), "go!\n");
    auto d = must(gort::net::dial("tcp", ln2.addr()));
    EXPECT_TRUE(write_str(d, "!").ok());
    EXPECT_EQ(gort::test::read_to_eof(d).value_or("error"), "");
    EXPECT_TRUE(srv.shutdown(gort::background()).ok());
    EXPECT_TRUE(bad.shutdown(gort::background()).ok());
    EXPECT_TRUE(gort::net::is_server_closed(serving.result()));
    EXPECT_TRUE(gort::net::is_server_closed(serving2.result()));
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(": std::runtime_error: bad input\n"), std::string::npos) << err;
  });
}

TEST_P(NetTest, SessionsCloseAndDestroyWithIdleSessions) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    gort::net::Conn c;
    gort::Chan<absl::Status> done = gort::make_chan<absl::Status>(1);
    {
      gort::net::Server srv(line_sessions());
      gort::go([&srv, &ln, done] { done.send(srv.serve(ln)); });
      c = must(gort::net::dial("tcp", ln.addr()));
      EXPECT_TRUE(write_str(c, "z\n").ok());
      EXPECT_EQ(read_exactly(c, 3).value_or(""), "z!\n");
      EXPECT_TRUE(eventually([&] { return srv.num_idle() == 1; }));
    }  // ~Server: close, then wait
    EXPECT_EQ(g_sessions.load(), 0);
    EXPECT_TRUE(gort::net::is_server_closed(done.recv().value_or(absl::OkStatus())));
    EXPECT_EQ(gort::test::read_to_eof(c).value_or("error"), "");
    EXPECT_THROW(gort::net::Server(gort::net::Sessions{}), gort::panic_error);
  });
}

// Every goroutine blocked, the listener closed, sessions idle in the
// server's poller: not a deadlock. A plain thread wakes one a little later.
TEST(SessionsDeadlock, AnIdleServerIsNotADeadlock) {
  auto child = [] {
    int rc = gort::run([] {
      auto quit = gort::make_chan<std::monostate>();
      struct Quitter : gort::net::Session {
        explicit Quitter(gort::Chan<std::monostate> q) : quit(std::move(q)) {}
        Next turn(ServerConn& c) override {
          if (first) {  // straight to the poller, without a goroutine
            first = false;
            return Next::kWaitInput;
          }
          char b[8];
          auto n = c.read(absl::MakeSpan(b));
          if (n.ok() && *n > 0) quit.close();
          return Next::kClose;
        }
        gort::Chan<std::monostate> quit;
        bool first = true;
      };
      gort::net::Server srv(gort::net::Sessions{[quit](ServerConn&) { return std::make_unique<Quitter>(quit); }});
      auto ln = gort::net::listen("tcp", "127.0.0.1:0");
      if (!ln.ok()) return 1;
      std::string addr = ln->addr();
      auto served = gort::make_chan<absl::Status>(1);
      gort::go([&, served] { served.send(srv.serve(*ln)); });
      std::atomic<bool> connected{false};
      std::thread client([addr, &connected] {
        auto c = gort::net::dial("tcp", addr);
        connected = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        if (c.ok()) (void)c->write(absl::MakeConstSpan("q", 1));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      });
      while (!connected.load() || srv.num_conns() == 0) gort::sleep(absl::Milliseconds(1));
      (void)ln->close();  // no goroutine waits in accept from here on
      (void)served.recv();
      (void)quit.recv();  // all goroutines blocked; only the idle session can end this
      client.join();
      return srv.shutdown(gort::background()).ok() ? 0 : 1;
    });
    if (rc != 0) std::_Exit(rc);
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

}  // namespace

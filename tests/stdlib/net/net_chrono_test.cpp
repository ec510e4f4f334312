// tests/stdlib/net/net_chrono_test.cpp — std::chrono time points and
// durations in gort/net.hpp, gort/os.hpp, gort/tls.hpp and gort/server.hpp
// (gort/chrono.hpp): every set_*deadline takes a steady_clock or
// system_clock time point beside absl::Time, dial_timeout and
// set_keep_alive_period a chrono duration, ServerConfig's timeouts either
// kind; and a steady_clock deadline on a read or an accept expires with the
// usual "i/o timeout".
//
// The conversions themselves: tests/gmp/chrono_test.cpp.
#include <chrono>
#include <string>

#include "absl/time/clock.h"
#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/net.hpp"
#include "gort/os.hpp"
#include "gort/server.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "gort/tls.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::make_pair;
using gort::test::must;
using gort::test::NetTest;
using gort::test::Pair;
using gort::test::read_exactly;
using gort::test::Serving;
using gort::test::write_str;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using System = std::chrono::system_clock;

const absl::Status kTimeout = absl::DeadlineExceededError("i/o timeout");

// ---- compile time: which calls take what ----

// C has set_deadline, set_read_deadline and set_write_deadline for T.
template <class C, class T>
concept ThreeDeadlines = requires(C& c, T t) {
  { c.set_deadline(t) } -> std::same_as<absl::Status>;
  { c.set_read_deadline(t) } -> std::same_as<absl::Status>;
  { c.set_write_deadline(t) } -> std::same_as<absl::Status>;
};
template <class C>
constexpr bool kTakesTimePoints = ThreeDeadlines<C, absl::Time> && ThreeDeadlines<C, Steady::time_point> &&
                                  ThreeDeadlines<C, System::time_point> && ThreeDeadlines<C, std::chrono::sys_seconds>;

static_assert(kTakesTimePoints<gort::net::Conn>);
static_assert(kTakesTimePoints<gort::net::PacketConn>);
static_assert(kTakesTimePoints<gort::os::File>);
static_assert(kTakesTimePoints<gort::tls::Conn>);
// A duration is not a deadline.
static_assert(!ThreeDeadlines<gort::net::Conn, std::chrono::seconds> && !ThreeDeadlines<gort::os::File, absl::Duration>);

template <class T>
concept ListenerDeadline = requires(gort::net::Listener& l, T t) {
  { l.set_deadline(t) } -> std::same_as<absl::Status>;
};
static_assert(ListenerDeadline<absl::Time> && ListenerDeadline<Steady::time_point> &&
              ListenerDeadline<System::time_point> && !ListenerDeadline<std::chrono::seconds>);

template <class T>
concept ServerConnDeadlines = requires(gort::net::ServerConn& c, T t) {
  { c.set_read_deadline(t) } -> std::same_as<absl::Status>;
  { c.set_write_deadline(t) } -> std::same_as<absl::Status>;
};
static_assert(ServerConnDeadlines<absl::Time> && ServerConnDeadlines<Steady::time_point> &&
              ServerConnDeadlines<System::time_point>);

template <class D>
concept DurationCalls = requires(gort::net::Conn& c, D d) {
  { c.set_keep_alive_period(d) } -> std::same_as<absl::Status>;
  { gort::net::dial_timeout("tcp", "127.0.0.1:1", d) } -> std::same_as<absl::StatusOr<gort::net::Conn>>;
};
static_assert(DurationCalls<absl::Duration> && DurationCalls<std::chrono::seconds> &&
              DurationCalls<std::chrono::duration<double>> && !DurationCalls<Steady::time_point>);

// ServerConfig's timeouts: either kind, in designated initializers too.
static_assert(requires { gort::net::ServerConfig{.idle_timeout = 30s, .read_timeout = absl::Seconds(5)}; });
static_assert(requires(gort::net::ServerConfig cfg) {
  cfg.write_timeout = 250ms;
  cfg.write_timeout = absl::Milliseconds(250);
  { cfg.read_timeout == absl::InfiniteDuration() } -> std::same_as<bool>;
});

// ---- run time ----

class NetChrono : public NetTest {};
GORT_INSTANTIATE_STDLIB_PROCS(NetChrono);

TEST_P(NetChrono, SteadyClockReadDeadlineTimesOut) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    // dial_timeout with a chrono timeout connects as the absl one does.
    auto dialed = must(gort::net::dial_timeout("tcp", p.ln.addr(), 20s));
    EXPECT_TRUE(dialed);
    auto start = Steady::now();
    EXPECT_TRUE(p.client.set_read_deadline(start + 50ms).ok());
    char b[16];
    auto r = p.client.read(absl::MakeSpan(b));
    EXPECT_EQ(r.status(), kTimeout);
    EXPECT_TRUE(gort::net::is_timeout_error(r.status()));
    EXPECT_GE(Steady::now() - start, 45ms);  // through the wall clock: a little slack
    // A steady time in the past fails at once, even with data waiting (Go).
    EXPECT_TRUE(write_str(p.server, "late").ok());
    EXPECT_TRUE(p.client.set_deadline(Steady::now() - 1s).ok());
    EXPECT_EQ(p.client.read(absl::MakeSpan(b)).status(), kTimeout);
    // A far steady time (the end of steady_clock) is as good as none.
    EXPECT_TRUE(p.client.set_read_deadline(Steady::time_point::max()).ok());
    EXPECT_EQ(read_exactly(p.client, 4).value_or(""), "late");
    EXPECT_TRUE(p.client.set_keep_alive_period(30s).ok());
  });
}

TEST_P(NetChrono, SystemClockWriteDeadlineAndAbslStillWork) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    // Fill the socket: the write parks until its deadline.
    EXPECT_TRUE(p.client.set_write_deadline(System::now() + 50ms).ok());
    std::string big(1 << 20, 'x');
    absl::Status s;
    for (int i = 0; i < 64 && s.ok(); i++) s = write_str(p.client, big);
    EXPECT_EQ(s, kTimeout);
    EXPECT_TRUE(p.client.set_write_deadline(absl::InfiniteFuture()).ok());
    EXPECT_TRUE(p.client.set_read_deadline(absl::Now() + absl::Milliseconds(20)).ok());
    char b[4];
    EXPECT_EQ(p.client.read(absl::MakeSpan(b)).status(), kTimeout);
  });
}

TEST_P(NetChrono, SteadyClockAcceptDeadline) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    if (!ln) return;
    EXPECT_TRUE(ln.set_deadline(Steady::now() + 30ms).ok());
    EXPECT_EQ(ln.accept().status(), kTimeout);
  });
}

TEST_P(NetChrono, SteadyClockDeadlineOnAPipe) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    EXPECT_TRUE(r.set_read_deadline(Steady::now() + 30ms).ok());
    char b[4];
    EXPECT_EQ(r.read(absl::MakeSpan(b)).status(), kTimeout);
    EXPECT_TRUE(r.set_read_deadline(absl::InfiniteFuture()).ok());
    EXPECT_TRUE(w.write_string("ok").ok());
    EXPECT_EQ(must(r.read(absl::MakeSpan(b))), 2u);
  });
}

TEST_P(NetChrono, ServerTimeoutsFromChrono) {
  run_test([] {
    auto result = gort::make_chan<absl::Status>(1);
    gort::net::Server srv(
        [&](gort::net::ServerConn& c) {
          char buf[8];
          result.send(c.read(absl::MakeSpan(buf)).status());  // no input: the read deadline
        },
        {.read_timeout = 30ms, .write_timeout = 5s});
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

}  // namespace

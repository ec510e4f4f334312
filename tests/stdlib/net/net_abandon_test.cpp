// tests/stdlib/net/net_abandon_test.cpp — sockets that outlive their gort::run
// (netpoll/poll_desc.cpp poll_abandon_all): a goroutine left parked in a
// read, or a Conn kept past the run, must not leak its fd nor leave the
// poller's waiter count behind for the deadlock detector of the next run.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "gort/net.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::count_fds;
using gort::test::must;
using gort::test::Parked;
using gort::test::WaitReason;

struct Pair {
  gort::net::Conn client;
  gort::net::Conn server;
};

// The child's own checks: a message and a distinct exit status, so that
// the death test's expectation names what went wrong.
void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "check failed: %s\n", what);
  std::fflush(nullptr);
  ::_exit(3);
}

// Run 1 connects two pairs over loopback. The first pair goes to a goroutine
// that parks in read and is abandoned when main returns; the second is kept
// by the caller past the run.
void run_and_abandon(std::optional<gort::net::Conn>* kept) {
  gort::run([kept] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    auto pair = std::make_shared<Pair>();
    pair->client = must(gort::net::dial("tcp", ln.addr()));
    pair->server = must(ln.accept());
    Parked parked;
    gort::go([pair, &parked] {
      char buf[16];
      parked.mark();
      auto r = pair->server.read(absl::MakeSpan(buf));
      std::fprintf(stderr, "abandoned read returned: %s\n", r.status().ToString().c_str());
    });
    check(parked.wait(WaitReason::kIOWait), "the reader did not park in the poller");
    *kept = must(gort::net::dial("tcp", ln.addr()));
    auto peer = must(ln.accept());
    (void)peer;  // closed when main returns; *kept stays open
  });
}

TEST(NetAbandon, NextRunStillDetectsDeadlockAndFdsAreClosed) {
  EXPECT_EXIT(
      {
        ::alarm(30);
        int before = count_fds();
        std::optional<gort::net::Conn> kept;
        run_and_abandon(&kept);
        check(count_fds() == before, "fds of the abandoned sockets are still open");
        // The fd numbers are free for reuse: the stale Conn must neither
        // touch them nor close them again.
        int p[2];
        check(::pipe(p) == 0, "pipe");
        check(gort::net::is_closed_error(kept->write(absl::MakeConstSpan("x", 1)).status()),
              "a write on a Conn kept past its run is not the closed error");
        kept.reset();
        check(::fcntl(p[0], F_GETFD) != -1 && ::fcntl(p[1], F_GETFD) != -1,
              "destroying the stale Conn closed an fd it no longer owns");
        ::close(p[0]);
        ::close(p[1]);
        gort::run([] { gort::make_chan<int>().recv(); });
        std::fprintf(stderr, "run 2 returned\n");
        ::_exit(4);
      },
      ::testing::ExitedWithCode(2), "fatal error: all goroutines are asleep - deadlock!");
}

}  // namespace

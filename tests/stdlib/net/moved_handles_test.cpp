// tests/stdlib/net/moved_handles_test.cpp — use after a move, the one rule
// every movable I/O handle follows (docs/standard-cpp.md, "Copying and
// moving handles"): a moved-from net::Conn, Listener, PacketConn, os::File,
// tls::Conn, tls::Listener or exec::Cmd holds nothing, and each call returns
// absl::InvalidArgumentError("invalid argument") at once (Go's nil Conn or
// *File), never parks, crashes or panics; queries read -1 / ""; the handle
// it moved to works; assigning to the moved-from one makes it usable again.
// (A moved-from Chan panics instead: tests/stdlib/sync/chan_moved_test.cpp.)
#include <signal.h>

#include <string>
#include <utility>

#include "gort/exec.hpp"
#include "gort/net.hpp"
#include "gort/os.hpp"
#include "gort/tls.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::must;
using gort::test::read_exactly;
using gort::test::write_str;

const absl::Status kInvalid = absl::InvalidArgumentError("invalid argument");

class MovedHandles : public gort::test::NetTest {};
GORT_INSTANTIATE_STDLIB_PROCS(MovedHandles);

TEST_P(MovedHandles, NetConn) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    gort::net::Conn client = must(gort::net::dial("tcp", ln.addr()));
    gort::net::Conn server = must(ln.accept());
    gort::net::Conn moved_to = std::move(client);
    char b[4] = {};
    EXPECT_FALSE(client.valid());
    EXPECT_FALSE(static_cast<bool>(client));
    EXPECT_EQ(client.read(absl::MakeSpan(b)).status(), kInvalid);
    EXPECT_EQ(client.write(absl::MakeConstSpan(b, 4)).status(), kInvalid);
    EXPECT_EQ(client.wait_readable(), kInvalid);
    EXPECT_EQ(client.set_deadline(absl::Now()), kInvalid);
    EXPECT_EQ(client.set_read_deadline(absl::Now()), kInvalid);
    EXPECT_EQ(client.set_write_deadline(absl::Now()), kInvalid);
    EXPECT_EQ(client.close_write(), kInvalid);
    EXPECT_EQ(client.close_read(), kInvalid);
    EXPECT_EQ(client.set_no_delay(true), kInvalid);
    EXPECT_EQ(client.close(), kInvalid);
    EXPECT_EQ(client.syscall_conn().read([](int) { return true; }), kInvalid);
    EXPECT_EQ(client.native_handle(), -1);
    EXPECT_EQ(client.local_addr(), "");
    EXPECT_EQ(client.remote_addr(), "");
    EXPECT_EQ(client.network(), "");
    // The socket moved with the handle.
    EXPECT_TRUE(write_str(moved_to, "ping").ok());
    EXPECT_EQ(read_exactly(server, 4).value_or("error"), "ping");
    // Move assignment leaves the source empty too; assigning revives.
    gort::net::Conn third;
    third = std::move(moved_to);
    EXPECT_EQ(moved_to.write(absl::MakeConstSpan(b, 1)).status(), kInvalid);
    client = std::move(third);
    EXPECT_TRUE(write_str(client, "pong").ok());
    EXPECT_EQ(read_exactly(server, 4).value_or("error"), "pong");
  });
}

TEST_P(MovedHandles, NetListenerAndPacketConn) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    std::string addr = ln.addr();
    gort::net::Listener moved_to = std::move(ln);
    EXPECT_FALSE(ln.valid());
    EXPECT_EQ(ln.accept().status(), kInvalid);
    EXPECT_EQ(ln.set_deadline(absl::Now()), kInvalid);
    EXPECT_EQ(ln.close(), kInvalid);
    EXPECT_EQ(ln.addr(), "");
    EXPECT_EQ(ln.native_handle(), -1);
    EXPECT_EQ(moved_to.addr(), addr);
    gort::net::Conn c = must(gort::net::dial("tcp", addr));
    gort::net::Conn s = must(moved_to.accept());
    EXPECT_TRUE(s.valid());

    auto pc = must(gort::net::listen_packet("udp", "127.0.0.1:0"));
    gort::net::PacketConn pc2 = std::move(pc);
    char b[4] = {};
    EXPECT_FALSE(pc.valid());
    EXPECT_EQ(pc.read_from(absl::MakeSpan(b)).status(), kInvalid);
    EXPECT_EQ(pc.write_to(absl::MakeConstSpan(b, 1), pc2.local_addr()).status(), kInvalid);
    EXPECT_EQ(pc.set_read_buffer(4096), kInvalid);
    EXPECT_EQ(pc.close(), kInvalid);
    EXPECT_EQ(pc.local_addr(), "");
    EXPECT_TRUE(pc2.write_to(absl::MakeConstSpan("x", 1), pc2.local_addr()).ok());
    auto got = pc2.read_from(absl::MakeSpan(b));
    EXPECT_TRUE(got.ok() && got->first == 1u && b[0] == 'x');
  });
}

TEST_P(MovedHandles, OsFile) {
  run_test([] {
    auto ends = must(gort::os::pipe());
    gort::os::File r = std::move(ends.first);
    gort::os::File w;
    w = std::move(ends.second);
    gort::os::File& gone = ends.second;
    char b[4] = {};
    EXPECT_FALSE(gone.valid());
    EXPECT_EQ(gone.write_string("x").status(), kInvalid);
    EXPECT_EQ(gone.read(absl::MakeSpan(b)).status(), kInvalid);
    EXPECT_EQ(gone.set_deadline(absl::Now()), kInvalid);
    EXPECT_EQ(gone.close(), kInvalid);
    EXPECT_EQ(gone.syscall_conn().write([](int) { return true; }), kInvalid);
    EXPECT_EQ(gone.fd(), -1);
    EXPECT_EQ(gone.name(), "");
    EXPECT_FALSE(gone.pollable());
    EXPECT_EQ(ends.first.read(absl::MakeSpan(b)).status(), kInvalid);
    EXPECT_EQ(w.name(), "|1");
    EXPECT_TRUE(w.write_string("abc").ok());
    auto n = r.read(absl::MakeSpan(b));
    EXPECT_TRUE(n.ok() && *n == 3u);
  });
}

TEST_P(MovedHandles, TlsConnAndListener) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    gort::net::Conn raw = must(gort::net::dial("tcp", ln.addr()));
    gort::net::Conn server = must(ln.accept());
    gort::tls::Config cfg;
    cfg.insecure_skip_verify = true;
    gort::tls::Conn tc = must(gort::tls::Conn::client(std::move(raw), cfg));
    // Taking a moved-from net::Conn is the same error.
    EXPECT_EQ(gort::tls::Conn::client(std::move(raw), cfg).status(), kInvalid);
    gort::tls::Conn moved_to = std::move(tc);
    char b[4] = {};
    EXPECT_FALSE(tc.valid());
    EXPECT_EQ(tc.handshake(), kInvalid);
    EXPECT_EQ(tc.handshake(gort::background()), kInvalid);
    EXPECT_EQ(tc.read(absl::MakeSpan(b)).status(), kInvalid);
    EXPECT_EQ(tc.write_string("x").status(), kInvalid);
    EXPECT_EQ(tc.wait_readable(), kInvalid);
    EXPECT_EQ(tc.set_deadline(absl::Now()), kInvalid);
    EXPECT_EQ(tc.close_write(), kInvalid);
    EXPECT_EQ(tc.close(), kInvalid);
    EXPECT_FALSE(tc.input_pending());
    EXPECT_EQ(tc.native_handle(), -1);
    EXPECT_EQ(tc.local_addr(), "");
    EXPECT_EQ(tc.version(), "");
    EXPECT_TRUE(moved_to.valid());
    EXPECT_NE(moved_to.native_handle(), -1);
    EXPECT_TRUE(moved_to.close().ok());

    gort::tls::Listener tl(must(gort::net::listen("tcp", "127.0.0.1:0")), cfg);
    gort::tls::Listener tl2 = std::move(tl);
    EXPECT_FALSE(tl.valid());
    EXPECT_EQ(tl.accept().status(), kInvalid);
    EXPECT_EQ(tl.close(), kInvalid);
    EXPECT_EQ(tl.addr(), "");
    EXPECT_TRUE(tl2.valid());
    EXPECT_TRUE(tl2.close().ok());
  });
}

TEST_P(MovedHandles, ExecCmd) {
  run_test([] {
    gort::exec::Cmd cmd = gort::exec::command("true");
    gort::exec::Cmd moved_to = std::move(cmd);
    EXPECT_EQ(cmd.start(), kInvalid);
    EXPECT_EQ(cmd.wait(), kInvalid);
    EXPECT_EQ(cmd.run(), kInvalid);
    EXPECT_EQ(cmd.output().status(), kInvalid);
    EXPECT_EQ(cmd.combined_output().status(), kInvalid);
    EXPECT_EQ(cmd.set_stdin("x"), kInvalid);
    EXPECT_EQ(cmd.stdin_pipe().status(), kInvalid);
    EXPECT_EQ(cmd.stdout_pipe().status(), kInvalid);
    EXPECT_EQ(cmd.stderr_pipe().status(), kInvalid);
    EXPECT_EQ(cmd.kill(), kInvalid);
    EXPECT_EQ(cmd.signal(SIGTERM), kInvalid);
    EXPECT_EQ(cmd.pid(), -1);
    EXPECT_EQ(cmd.exit_code(), -1);
    EXPECT_TRUE(moved_to.run().ok());
    EXPECT_EQ(moved_to.exit_code(), 0);

    // A started child moves with its Cmd: the moved-from one cannot wait
    // for it or kill it; the one it moved to reaps it.
    gort::exec::Cmd sleeper = gort::exec::command("sleep", {"10"});
    absl::Status started = sleeper.start();
    EXPECT_TRUE(started.ok()) << started;
    if (!started.ok()) return;
    gort::exec::Cmd owner = gort::exec::command("true");
    owner = std::move(sleeper);
    EXPECT_EQ(sleeper.wait(), kInvalid);
    EXPECT_EQ(sleeper.kill(), kInvalid);
    EXPECT_GT(owner.pid(), 0);
    EXPECT_TRUE(owner.kill().ok());
    EXPECT_EQ(owner.wait().message(), "signal: killed");
    // Assigning a new Cmd makes the moved-from one usable.
    sleeper = gort::exec::command("true");
    EXPECT_TRUE(sleeper.run().ok());
  });
}

}  // namespace

// tests/stdlib/os/os_file_test.cpp — gort::os::File (stdlib/os/os_file.cpp) and
// gort::RawConn: pipes park readers and writers on the poller, end of file,
// close wakes blocked calls, deadlines, EPIPE instead of SIGPIPE, regular
// files through gort::blocking, new_file's polled / blocking / borrowed
// descriptors, FIFOs, RawConn on pipes, socketpairs and net::Conn, bad
// input, Go's texts for calls on a closed File, and no fd or goroutine
// left behind (run_test checks).
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gort/net.hpp"
#include "gort/os.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "netpoll/fd_table.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::msg;
using gort::test::must;
using gort::test::NetTest;
using gort::test::Parked;
using gort::test::WaitReason;

// A RawConn's call on a closed File: os.ErrClosed's text alone.
const absl::Status kClosed = absl::FailedPreconditionError("file already closed");

// A File's call on a closed File: Go's PathError around os.ErrClosed.
absl::Status closed(const std::string& op, const std::string& name) {
  return absl::FailedPreconditionError(op + " " + name + ": file already closed");
}

std::string read_all(gort::os::File& f) {
  std::string out;
  char buf[4096];
  for (;;) {
    auto n = f.read(absl::MakeSpan(buf));
    if (!n.ok()) {
      ADD_FAILURE() << n.status();
      return out;
    }
    if (*n == 0) return out;
    out.append(buf, *n);
  }
}

bool sigpipe_pending() {
  sigset_t s;
  sigpending(&s);
  return sigismember(&s, SIGPIPE) != 0;
}

class OsFile : public NetTest {};
GORT_INSTANTIATE_STDLIB_PROCS(OsFile);

TEST_P(OsFile, PipeCarriesDataAndEndsWithEOF) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    EXPECT_EQ(r.name(), "|0");
    EXPECT_EQ(w.name(), "|1");
    EXPECT_TRUE(r.pollable());
    EXPECT_TRUE(w.pollable());
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&w = w, &wg] {
      for (int i = 0; i < 100; i++) EXPECT_TRUE(w.write_string("line " + std::to_string(i) + "\n").ok());
      EXPECT_TRUE(w.close().ok());
      wg.done();
    });
    std::string got = read_all(r);
    wg.wait();
    std::string want;
    for (int i = 0; i < 100; i++) want += "line " + std::to_string(i) + "\n";
    EXPECT_EQ(got, want);
  });
}

TEST_P(OsFile, ReadParksUntilAWriterWrites) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    Parked reader;
    gort::WaitGroup wg;
    std::string got;
    wg.add(1);
    gort::go([&] {
      reader.mark();
      char buf[16];
      auto n = r.read(absl::MakeSpan(buf));
      if (n.ok()) got.assign(buf, *n);
      wg.done();
    });
    ASSERT_TRUE(reader.wait(WaitReason::kIOWait)) << "read on an empty pipe did not park";
    EXPECT_TRUE(w.write_string("wake").ok());
    wg.wait();
    EXPECT_EQ(got, "wake");
  });
}

TEST_P(OsFile, LargeTransferThroughAFullPipeParksTheWriter) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    std::string data(4 << 20, '\0');
    for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<char>(i * 131 + i / 4096);
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      auto n = w.write_string(data);  // 4 MiB into a 64 KiB pipe: parks many times
      EXPECT_TRUE(n.ok()) << n.status();
      if (n.ok()) {
        EXPECT_EQ(*n, data.size());
      }
      EXPECT_TRUE(w.close().ok());
      wg.done();
    });
    std::string got = read_all(r);
    wg.wait();
    EXPECT_TRUE(got == data) << "got " << got.size() << " bytes of " << data.size();
  });
}

TEST_P(OsFile, CloseWakesABlockedReadAndWriteWithTheClosedError) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    // Fill the pipe so that the next write blocks.
    std::string chunk(1 << 16, 'x');
    while (::write(w.fd(), chunk.data(), chunk.size()) > 0) {
    }
    Parked reader, writer;
    absl::Status rs, ws;
    gort::WaitGroup wg;
    wg.add(2);
    auto p2 = must(gort::os::pipe());  // an empty pipe to block the reader on
    gort::go([&] {
      reader.mark();
      char buf[8];
      rs = p2.first.read(absl::MakeSpan(buf)).status();
      wg.done();
    });
    gort::go([&] {
      writer.mark();
      ws = w.write_string("more").status();
      wg.done();
    });
    ASSERT_TRUE(reader.wait(WaitReason::kIOWait));
    ASSERT_TRUE(writer.wait(WaitReason::kIOWait));
    EXPECT_TRUE(p2.first.close().ok());
    EXPECT_TRUE(w.close().ok());
    wg.wait();
    EXPECT_EQ(rs, closed("read", "|0"));
    EXPECT_EQ(ws, closed("write", "|1"));
    EXPECT_TRUE(gort::os::is_closed_error(rs));
    EXPECT_TRUE(gort::os::is_closed_error(ws));
    EXPECT_EQ(w.close(), closed("close", "|1")) << "closing twice";
    char buf[4];
    EXPECT_EQ(p2.first.read(absl::MakeSpan(buf)).status(), closed("read", "|0"));
    EXPECT_EQ(w.fd(), w.fd());  // still answers after close
    (void)r;
  });
}

// Go's texts on a closed File: os.ErrClosed in a PathError, the call's op
// and the File's name before it, for every call; is_closed_error holds for
// each, and error_text prints it as Go prints err.
TEST_P(OsFile, EveryCallOnAClosedFileSaysFileAlreadyClosed) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    EXPECT_TRUE(r.close().ok());
    EXPECT_TRUE(w.close().ok());
    char buf[4];
    std::vector<std::pair<absl::Status, absl::Status>> cases = {
        {r.read(absl::MakeSpan(buf)).status(), closed("read", "|0")},
        {w.write(absl::MakeConstSpan("x", 1)).status(), closed("write", "|1")},
        {w.write_string("x").status(), closed("write", "|1")},
        {r.set_deadline(absl::Now()), closed("set", "|0")},
        {r.set_read_deadline(absl::InfiniteFuture()), closed("set", "|0")},
        {w.set_write_deadline(std::chrono::steady_clock::now()), closed("set", "|1")},
        {r.close(), closed("close", "|0")},
        {w.close(), closed("close", "|1")},
    };
    for (const auto& [got, want] : cases) {
      EXPECT_EQ(got, want);
      EXPECT_TRUE(gort::os::is_closed_error(got)) << got;
    }
    EXPECT_EQ(gort::error_text(r.read(absl::MakeSpan(buf))), "read |0: file already closed");

    // The name it was given, whatever made it.
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    auto mine = must(gort::os::new_file(fds[0], "my pipe"));
    ::close(fds[1]);
    EXPECT_TRUE(mine.close().ok());
    EXPECT_EQ(mine.read(absl::MakeSpan(buf)).status(), closed("read", "my pipe"));
    EXPECT_EQ(mine.close(), closed("close", "my pipe"));
  });
}

TEST(OsFileErrors, IsClosedErrorTakesBareAndWrappedOnly) {
  EXPECT_TRUE(gort::os::is_closed_error(absl::FailedPreconditionError("file already closed")));
  EXPECT_TRUE(gort::os::is_closed_error(absl::FailedPreconditionError("read |0: file already closed")));
  EXPECT_TRUE(gort::os::is_closed_error(absl::FailedPreconditionError("set /tmp/a b: file already closed")));
  EXPECT_FALSE(gort::os::is_closed_error(absl::InternalError("read |0: file already closed")));
  EXPECT_FALSE(gort::os::is_closed_error(absl::FailedPreconditionError("read |0: not a file already closed?")));
  EXPECT_FALSE(gort::os::is_closed_error(absl::FailedPreconditionError("myfile already closed")));
  EXPECT_FALSE(gort::os::is_closed_error(absl::FailedPreconditionError(": file already closed")));
  EXPECT_FALSE(gort::os::is_closed_error(absl::OkStatus()));
  EXPECT_FALSE(gort::os::is_closed_error(absl::FailedPreconditionError("use of closed network connection")));
}

TEST_P(OsFile, ReadDeadlineTimesOutAndCanBeCleared) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    EXPECT_TRUE(r.set_read_deadline(absl::Now() + absl::Milliseconds(50)).ok());
    char buf[8];
    auto n = r.read(absl::MakeSpan(buf));
    EXPECT_EQ(n.status(), absl::DeadlineExceededError("i/o timeout"));
    EXPECT_TRUE(r.set_read_deadline(absl::InfiniteFuture()).ok());
    EXPECT_TRUE(w.write_string("ok").ok());
    n = r.read(absl::MakeSpan(buf));
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(std::string(buf, *n), "ok");
    // A deadline in the past fails even when data is ready (Go).
    EXPECT_TRUE(w.write_string("late").ok());
    EXPECT_TRUE(r.set_deadline(absl::Now() - absl::Seconds(1)).ok());
    EXPECT_EQ(r.read(absl::MakeSpan(buf)).status(), absl::DeadlineExceededError("i/o timeout"));
  });
}

TEST_P(OsFile, WriteToAPipeWithoutReaderIsEPIPENotSIGPIPE) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    EXPECT_TRUE(r.close().ok());
    auto n = w.write_string("nobody listens");
    EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition) << n.status();
    EXPECT_EQ(msg(n.status()), "write |1: Broken pipe");
    EXPECT_FALSE(sigpipe_pending()) << "the SIGPIPE the write raised was left pending";
  });
}

TEST_P(OsFile, RegularFilesGoThroughBlocking) {
  gort::test::TempDir tmp;
  const std::string& dir = tmp.path();
  run_test([&] {
    std::string path = dir + "/f.txt";
    {
      auto f = must(gort::os::create(path));
      EXPECT_FALSE(f.pollable());
      EXPECT_EQ(f.name(), path);
      EXPECT_EQ(must(f.write_string("hello, file\n")), 12u);
      EXPECT_EQ(f.set_deadline(absl::Now()), absl::InvalidArgumentError("file type does not support deadline"));
    }
    auto f = must(gort::os::open(path));
    EXPECT_EQ(read_all(f), "hello, file\n");
    EXPECT_TRUE(f.close().ok());
    char buf[4];
    EXPECT_EQ(f.read(absl::MakeSpan(buf)).status(), closed("read", path));
    // Closed first, then "no deadlines" (Go's order).
    EXPECT_EQ(f.set_deadline(absl::Now()), closed("set", path));
    // Writing a read-only file: Go's text.
    auto ro = must(gort::os::open(path));
    auto n = ro.write_string("x");
    EXPECT_EQ(msg(n.status()), "write " + path + ": Bad file descriptor");
  });
}

TEST_P(OsFile, OpenReportsGoErrors) {
  run_test([] {
    auto f = gort::os::open("/nonexistent-dir/x");
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(msg(f.status()), "open /nonexistent-dir/x: No such file or directory");
    auto c = gort::os::create("/");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(msg(c.status()), "open /: Is a directory");
  });
}

TEST_P(OsFile, DefaultFileAndBadDescriptorsAreErrorsNotCrashes) {
  run_test([] {
    gort::os::File none;
    char buf[4];
    EXPECT_EQ(none.read(absl::MakeSpan(buf)).status(), absl::InvalidArgumentError("invalid argument"));
    EXPECT_EQ(none.write_string("x").status(), absl::InvalidArgumentError("invalid argument"));
    EXPECT_EQ(none.close(), absl::InvalidArgumentError("invalid argument"));
    EXPECT_EQ(none.fd(), -1);
    EXPECT_FALSE(none.syscall_conn().valid());
    EXPECT_EQ(none.syscall_conn().read([](int) { return true; }), absl::InvalidArgumentError("invalid argument"));
    auto neg = gort::os::new_file(-1, "neg");
    EXPECT_EQ(neg.status(), absl::InvalidArgumentError("newfile neg: bad file descriptor"));
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    ::close(fds[0]);
    ::close(fds[1]);
    auto closed = gort::os::new_file(fds[0], "gone");
    EXPECT_FALSE(closed.ok());
    EXPECT_EQ(msg(closed.status()), "newfile gone: Bad file descriptor");
  });
}

TEST_P(OsFile, NewFilePollsNonBlockingDescriptorsOnly) {
  run_test([] {
    int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_GE(efd, 0);
    auto ev = must(gort::os::new_file(efd, "eventfd"));
    EXPECT_TRUE(ev.pollable());
    Parked reader;
    uint64_t got = 0;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      reader.mark();
      auto n = ev.read(absl::MakeSpan(reinterpret_cast<char*>(&got), sizeof got));
      EXPECT_TRUE(n.ok()) << n.status();
      wg.done();
    });
    ASSERT_TRUE(reader.wait(WaitReason::kIOWait)) << "an eventfd read did not park";
    uint64_t one = 5;
    EXPECT_EQ(must(ev.write(absl::MakeConstSpan(reinterpret_cast<const char*>(&one), sizeof one))), 8u);
    wg.wait();
    EXPECT_EQ(got, 5u);

    int p[2];
    {
      // A blocking pipe as libc makes it (the hooked pipe2 of a goroutine
      // would set O_NONBLOCK underneath: the next test).
      gort::RawLibc raw;
      ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    }
    auto br = must(gort::os::new_file(p[0], "blocking-r"));
    auto bw = must(gort::os::new_file(p[1], "blocking-w"));
    EXPECT_FALSE(br.pollable()) << "a blocking descriptor must stay blocking";
    EXPECT_TRUE(bw.write_string("abc").ok());
    char buf[8];
    auto n = br.read(absl::MakeSpan(buf));
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(std::string(buf, *n), "abc");
  });
}

// A pipe a goroutine made through the libc hooks reads as blocking to the
// program, but has O_NONBLOCK set underneath: new_file polls it, sharing the
// hooks' poll descriptor, and a raw read of the same descriptor by another
// goroutine waits on that descriptor too.
TEST_P(OsFile, NewFileOnAHookedPipeSharesItsPollDescriptor) {
  run_test([] {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    EXPECT_EQ(::fcntl(p[0], F_GETFL) & O_NONBLOCK, 0) << "the program asked for a blocking pipe";
    uintptr_t before = gort::internal::fd_slot_load(p[0]);
    ASSERT_TRUE(gort::internal::slot_is_pd(before)) << "a hooked pipe2 leaves a poll descriptor in the fd table";
    auto r = must(gort::os::new_file(p[0], "hooked-r"));
    EXPECT_TRUE(r.pollable());
    EXPECT_EQ(gort::internal::fd_slot_load(p[0]), before) << "the File shares the table's poll descriptor";
    // Each reader sends what it read; each byte is written once the
    // previous one has been read, so that both readers get one.
    auto got = gort::make_chan<char>(2);
    Parked reader;
    gort::go([&, got] {
      reader.mark();
      char c;
      auto n = r.read(absl::MakeSpan(&c, 1));
      got.send(n.ok() && *n == 1 ? c : '?');
    });
    ASSERT_TRUE(reader.wait(WaitReason::kIOWait));
    Parked raw;
    gort::go([&, got] {
      raw.mark();
      char c;
      ssize_t n = ::read(p[0], &c, 1);  // the hooked read: a second waiter on the descriptor
      got.send(n == 1 ? c : '?');
    });
    ASSERT_TRUE(raw.wait(WaitReason::kIOWait));
    std::string both;
    EXPECT_EQ(::write(p[1], "a", 1), 1);
    both.push_back(got.recv().value());
    EXPECT_EQ(::write(p[1], "b", 1), 1);
    both.push_back(got.recv().value());
    std::sort(both.begin(), both.end());
    EXPECT_EQ(both, "ab");
    EXPECT_EQ(::close(p[1]), 0);
  });
}

TEST_P(OsFile, BorrowedDescriptorStaysOpen) {
  run_test([] {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    {
      auto f = must(gort::os::new_file(sv[0], "lib", gort::os::Own::kBorrow));
      EXPECT_TRUE(f.pollable());
      EXPECT_TRUE(f.write_string("via gort").ok());
      EXPECT_TRUE(f.close().ok());
    }
    EXPECT_EQ(::fcntl(sv[0], F_GETFD), FD_CLOEXEC) << "a borrowed descriptor was closed";
    char buf[16];
    EXPECT_EQ(::read(sv[1], buf, sizeof buf), 8);
    // Registered again after the File let it go.
    auto again = must(gort::os::new_file(sv[0], "lib", gort::os::Own::kBorrow));
    EXPECT_TRUE(again.pollable());
    again = gort::os::File();
    ::close(sv[0]);
    ::close(sv[1]);
  });
}

TEST_P(OsFile, FifoOpensBothEnds) {
  gort::test::TempDir tmp;
  const std::string& dir = tmp.path();
  run_test([&] {
    std::string path = dir + "/fifo";
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      // Waits (in gort::blocking) until the reader opens.
      auto w = must(gort::os::open(path, O_WRONLY));
      EXPECT_TRUE(w.pollable());
      EXPECT_TRUE(w.write_string("through the fifo").ok());
      wg.done();
    });
    auto r = must(gort::os::open(path, O_RDONLY));
    EXPECT_TRUE(r.pollable());
    EXPECT_EQ(read_all(r), "through the fifo");
    wg.wait();
  });
}

TEST_P(OsFile, RawConnReadWaitsForReadinessBetweenAttempts) {
  run_test([] {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    auto a = must(gort::os::new_file(sv[0], "a"));
    auto b = must(gort::os::new_file(sv[1], "b"));
    gort::RawConn rc = a.syscall_conn();
    int seen = -1;
    EXPECT_TRUE(rc.control([&](int fd) { seen = fd; }).ok());
    EXPECT_EQ(seen, a.fd());
    Parked reader;
    int attempts = 0;
    std::string got;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      reader.mark();
      absl::Status s = rc.read([&](int fd) {
        attempts++;
        char buf[64];
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EAGAIN) return false;
        if (n > 0) got.append(buf, static_cast<size_t>(n));
        return got.size() >= 6;  // a "message" of 6 bytes, in two writes
      });
      EXPECT_TRUE(s.ok()) << s;
      wg.done();
    });
    ASSERT_TRUE(reader.wait(WaitReason::kIOWait));
    EXPECT_TRUE(b.write_string("abc").ok());
    gort::sleep(absl::Milliseconds(20));
    EXPECT_TRUE(b.write_string("def").ok());
    wg.wait();
    EXPECT_EQ(got, "abcdef");
    EXPECT_GE(attempts, 3);
    // Write side.
    EXPECT_TRUE(rc.write([&](int fd) { return ::send(fd, "z", 1, 0) == 1; }).ok());
    char c;
    EXPECT_EQ(must(b.read(absl::MakeSpan(&c, 1))), 1u);
    EXPECT_EQ(c, 'z');
    // Closed: the os error, and f is not called.
    EXPECT_TRUE(a.close().ok());
    bool called = false;
    EXPECT_EQ(rc.read([&](int) { return called = true; }), kClosed);
    EXPECT_EQ(rc.control([&](int) { called = true; }), kClosed);
    EXPECT_FALSE(called);
  });
}

TEST_P(OsFile, RawConnHonoursTheReadDeadlineAndClose) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    gort::RawConn rc = r.syscall_conn();
    EXPECT_TRUE(r.set_read_deadline(absl::Now() + absl::Milliseconds(30)).ok());
    auto would_block = [](int fd) {
      char c;
      return ::read(fd, &c, 1) >= 0 || errno != EAGAIN;
    };
    EXPECT_EQ(rc.read(would_block), absl::DeadlineExceededError("i/o timeout"));
    EXPECT_TRUE(r.set_read_deadline(absl::InfiniteFuture()).ok());
    Parked reader;
    absl::Status s;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      reader.mark();
      s = rc.read(would_block);
      wg.done();
    });
    ASSERT_TRUE(reader.wait(WaitReason::kIOWait));
    EXPECT_TRUE(r.close().ok());
    wg.wait();
    EXPECT_EQ(s, kClosed);
    (void)w;
  });
}

TEST_P(OsFile, ConnSyscallConnDrivesASocket) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    auto c = must(gort::net::dial("tcp", ln.addr()));
    auto s = must(ln.accept());
    gort::RawConn rc = s.syscall_conn();
    EXPECT_TRUE(rc.write([](int fd) { return ::send(fd, "ping", 4, MSG_NOSIGNAL) == 4; }).ok());
    auto got = must(gort::test::read_exactly(c, 4));
    EXPECT_EQ(got, "ping");
    gort::go([&c] { (void)gort::test::write_str(c, "pong"); });
    std::string in;
    EXPECT_TRUE(rc.read([&](int fd) {
                    char buf[8];
                    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
                    if (n < 0 && errno == EAGAIN) return false;
                    if (n > 0) in.append(buf, static_cast<size_t>(n));
                    return in.size() >= 4 || n <= 0;
                  }).ok());
    EXPECT_EQ(in, "pong");
    // Mixed with Conn::read afterwards: the raw read left nothing stale.
    gort::go([&c] { (void)gort::test::write_str(c, "after"); });
    EXPECT_EQ(must(gort::test::read_exactly(s, 5)), "after");
    EXPECT_TRUE(s.close().ok());
    EXPECT_EQ(rc.read([](int) { return true; }), absl::FailedPreconditionError("use of closed network connection"));
  });
}

TEST_P(OsFile, ManyPipesInParallel) {
  run_test([] {
    constexpr int kPipes = 32;
    constexpr int kMessages = 200;
    std::atomic<int64_t> total{0};
    gort::WaitGroup wg;
    for (int i = 0; i < kPipes; i++) {
      auto p = gort::os::pipe();
      ASSERT_TRUE(p.ok());
      auto shared = std::make_shared<std::pair<gort::os::File, gort::os::File>>(std::move(*p));
      wg.add(2);
      gort::go([shared, &wg] {
        for (int m = 0; m < kMessages; m++) EXPECT_TRUE(shared->second.write_string("0123456789").ok());
        EXPECT_TRUE(shared->second.close().ok());
        wg.done();
      });
      gort::go([shared, &wg, &total] {
        char buf[7];  // odd size: reads straddle the writes
        for (;;) {
          auto n = shared->first.read(absl::MakeSpan(buf));
          if (!n.ok() || *n == 0) break;
          total += static_cast<int64_t>(*n);
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(total.load(), int64_t{kPipes} * kMessages * 10);
  });
}

TEST_P(OsFile, PlainThreadReadsAPipe) {
  run_test([] {
    auto p = must(gort::os::pipe());
    auto& [r, w] = p;
    std::string got;
    std::thread t([&] { got = read_all(r); });
    gort::sleep(absl::Milliseconds(10));
    EXPECT_TRUE(w.write_string("to a thread").ok());
    EXPECT_TRUE(w.close().ok());
    gort::blocking([&] { t.join(); });
    EXPECT_EQ(got, "to a thread");
  });
}

}  // namespace

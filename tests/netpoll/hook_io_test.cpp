// tests/netpoll/hook_io_test.cpp — libc's reads and writes on goroutines
// (netpoll/hook/io.cpp): they park the goroutine, not the thread, on
// pipes, socket pairs and TCP, with the answers a blocking descriptor
// gives; several goroutines share one descriptor; timeouts, close and
// thread counts.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gort/chan.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/netpoll/hook_helpers.hpp"

namespace {

using gort::test::close_pipe;
using gort::test::hooked_pipe;
using gort::test::ms_created;
using gort::test::Parked;
using gort::test::Pipe;
using gort::test::raw_pipe;
using gort::test::real_nonblock;
using gort::test::WaitReason;

class HookIo : public gort::test::ProcsTest {};
GORT_INSTANTIATE_HOOK_PROCS(HookIo);

// Many goroutines blocked in read(2) at once: each parks with Go's reason
// `IO wait`, and the run makes no thread for them.
TEST_P(HookIo, ManyPipeReadersParkWithoutThreads) {
  run_test([] {
    constexpr int kReaders = 300;
    int ms_before = ms_created();
    std::vector<Pipe> pipes(kReaders);
    for (auto& p : pipes) ASSERT_GE((p = hooked_pipe()).r, 0);
    std::vector<Parked> parked(kReaders);
    std::atomic<int> got{0};
    gort::WaitGroup wg;
    for (int i = 0; i < kReaders; i++) {
      wg.add(1);
      gort::go([&, i] {
        parked[i].mark();
        char c = 0;
        if (::read(pipes[i].r, &c, 1) == 1 && c == static_cast<char>('a' + i % 26)) got++;
        wg.done();
      });
    }
    for (auto& p : parked) ASSERT_TRUE(p.wait(WaitReason::kIOWait)) << "a read(2) did not park";
    for (int i = 0; i < kReaders; i++) {
      char c = static_cast<char>('a' + i % 26);
      ASSERT_EQ(::write(pipes[i].w, &c, 1), 1);
    }
    wg.wait();
    EXPECT_EQ(got.load(), kReaders);
    EXPECT_LE(ms_created() - ms_before, gort::procs()) << "blocked readers made threads";
    for (auto& p : pipes) close_pipe(p);
  });
}

TEST_P(HookIo, ReadOfReadyDataReturnsAtOnce) {
  run_test([] {
    Pipe p = hooked_pipe();
    ASSERT_EQ(::write(p.w, "hello", 5), 5);
    char buf[16];
    EXPECT_EQ(::read(p.r, buf, sizeof buf), 5);
    EXPECT_EQ(std::string(buf, 5), "hello");
    ASSERT_EQ(::close(p.w), 0);
    EXPECT_EQ(::read(p.r, buf, sizeof buf), 0) << "end of file";
    ::close(p.r);
  });
}

// write(2) on a blocking pipe writes everything, however large: a writer
// blocked on a full pipe parks until the reader makes room.
TEST_P(HookIo, WriteOfMoreThanThePipeHoldsWritesEverything) {
  run_test([] {
    Pipe p = hooked_pipe();
    constexpr size_t kLen = 1 << 20;
    std::string out(kLen, 'x');
    for (size_t i = 0; i < kLen; i++) out[i] = static_cast<char>(i * 7);
    std::string in;
    gort::WaitGroup wg;
    wg.add(1);
    Parked writer;
    ssize_t wrote = -1;
    gort::go([&] {
      writer.mark();
      wrote = ::write(p.w, out.data(), out.size());
      wg.done();
    });
    EXPECT_TRUE(writer.wait(WaitReason::kIOWait)) << "a writer to a full pipe did not park";
    char buf[7000];
    while (in.size() < kLen) {
      ssize_t n = ::read(p.r, buf, sizeof buf);
      ASSERT_GT(n, 0);
      in.append(buf, static_cast<size_t>(n));
    }
    wg.wait();
    EXPECT_EQ(wrote, static_cast<ssize_t>(kLen));
    EXPECT_TRUE(in == out) << "bytes lost or reordered";
    close_pipe(p);
  });
}

// The socket calls, scatter-gather included, between goroutines.
TEST_P(HookIo, SocketPairCallsOfEveryKind) {
  run_test([] {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    EXPECT_FALSE(::fcntl(sv[0], F_GETFL) & O_NONBLOCK) << "the program asked for a blocking socket";
    EXPECT_TRUE(real_nonblock(sv[0])) << "a goroutine's socket is non-blocking underneath";
    constexpr size_t kLen = 600000;
    std::string big(kLen, 'y');
    for (size_t i = 0; i < kLen; i++) big[i] = static_cast<char>(i % 251);
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      // send: everything, in one call.
      EXPECT_EQ(::send(sv[1], big.data(), big.size(), 0), static_cast<ssize_t>(kLen));
      // writev and sendmsg: everything too.
      char a[] = "ab", b[] = "cde";
      iovec iov[2] = {{a, 2}, {b, 3}};
      EXPECT_EQ(::writev(sv[1], iov, 2), 5);
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = 2;
      EXPECT_EQ(::sendmsg(sv[1], &m, 0), 5);
      wg.done();
    });
    std::string got;
    char buf[10000];
    while (got.size() < kLen) {
      ssize_t n = ::recv(sv[0], buf, std::min(sizeof buf, kLen - got.size()), 0);
      ASSERT_GT(n, 0);
      got.append(buf, static_cast<size_t>(n));
    }
    EXPECT_TRUE(got == big);
    char x[5];
    iovec riov[1] = {{x, 5}};
    size_t seen = 0;
    while (seen < 5) {
      ssize_t n = ::readv(sv[0], riov, 1);
      ASSERT_GT(n, 0);
      seen += static_cast<size_t>(n);
      riov[0].iov_base = x + seen;
      riov[0].iov_len = 5 - seen;
    }
    EXPECT_EQ(std::string(x, 5), "abcde");
    msghdr rm{};
    iovec rio{x, 5};
    rm.msg_iov = &rio;
    rm.msg_iovlen = 1;
    seen = 0;
    while (seen < 5) {
      rio.iov_base = x + seen;
      rio.iov_len = 5 - seen;
      ssize_t n = ::recvmsg(sv[0], &rm, 0);
      ASSERT_GT(n, 0);
      seen += static_cast<size_t>(n);
    }
    EXPECT_EQ(std::string(x, 5), "abcde");
    wg.wait();
    ::close(sv[0]);
    ::close(sv[1]);
  });
}

// A TCP server and client in blocking style on goroutines: accept parks
// until a client connects, connect until the handshake ends.
TEST_P(HookIo, TcpAcceptConnectAndEcho) {
  run_test([] {
    int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(ls, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(ls, 64), 0);
    socklen_t al = sizeof a;
    ASSERT_EQ(::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &al), 0);
    constexpr int kClients = 20;
    gort::WaitGroup wg;
    Parked acceptor;
    wg.add(1);
    gort::go([&] {
      acceptor.mark();
      for (int i = 0; i < kClients; i++) {
        int c = ::accept(ls, nullptr, nullptr);
        EXPECT_GE(c, 0);
        if (c < 0) break;
        EXPECT_FALSE(::fcntl(c, F_GETFL) & O_NONBLOCK);
        wg.add(1);
        gort::go([&, c] {
          char buf[64];
          ssize_t n;
          while ((n = ::read(c, buf, sizeof buf)) > 0) EXPECT_EQ(::write(c, buf, static_cast<size_t>(n)), n);
          ::close(c);
          wg.done();
        });
      }
      wg.done();
    });
    ASSERT_TRUE(acceptor.wait(WaitReason::kIOWait)) << "accept(2) did not park";
    std::atomic<int> echoed{0};
    for (int i = 0; i < kClients; i++) {
      wg.add(1);
      gort::go([&, i] {
        int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        EXPECT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(gort::test::read_errno());
        std::string msg = "hello " + std::to_string(i);
        EXPECT_EQ(::write(s, msg.data(), msg.size()), static_cast<ssize_t>(msg.size()));
        std::string back;
        char buf[64];
        while (back.size() < msg.size()) {
          ssize_t n = ::read(s, buf, sizeof buf);
          if (n <= 0) break;
          back.append(buf, static_cast<size_t>(n));
        }
        if (back == msg) echoed++;
        ::close(s);
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(echoed.load(), kClients);
    ::close(ls);
  });
}

TEST_P(HookIo, ConnectToAClosedPortFailsAsBlockingConnectDoes) {
  run_test([] {
    int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t al = sizeof a;
    ASSERT_EQ(::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &al), 0);
    ::close(ls);  // bound, never listening: nobody there
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    gort::test::write_errno(0);
    EXPECT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a), -1);
    EXPECT_EQ(gort::test::read_errno(), ECONNREFUSED);
    ::close(s);
  });
}

// Several goroutines read one pipe (a pool of workers on a shared
// descriptor): every byte goes to exactly one of them, none stays parked.
TEST_P(HookIo, SeveralReadersOfOnePipeEachGetOneByte) {
  run_test([] {
    Pipe p = hooked_pipe();
    constexpr int kReaders = 8;
    std::vector<Parked> parked(kReaders);
    auto got = gort::make_chan<char>(kReaders);
    for (int i = 0; i < kReaders; i++) {
      gort::go([&, i, got] {
        parked[i].mark();
        char c = 0;
        ssize_t n = ::read(p.r, &c, 1);
        got.send(n == 1 ? c : '?');
      });
    }
    for (auto& w : parked) ASSERT_TRUE(w.wait(WaitReason::kIOWait));
    std::string all;
    for (int i = 0; i < kReaders; i++) {
      char c = static_cast<char>('a' + i);
      ASSERT_EQ(::write(p.w, &c, 1), 1);
      all.push_back(got.recv().value());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, "abcdefgh");
    close_pipe(p);
  });
}

// What the program made non-blocking stays so: EAGAIN at once, no park.
TEST_P(HookIo, NonBlockingDescriptorsAnswerEagain) {
  run_test([] {
    Pipe p = hooked_pipe(O_CLOEXEC | O_NONBLOCK);
    char c;
    gort::test::write_errno(0);
    EXPECT_EQ(::read(p.r, &c, 1), -1);
    EXPECT_EQ(gort::test::read_errno(), EAGAIN);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    gort::test::write_errno(0);
    EXPECT_EQ(::recv(sv[0], &c, 1, MSG_DONTWAIT), -1) << "MSG_DONTWAIT is a non-blocking call";
    EXPECT_EQ(gort::test::read_errno(), EAGAIN);
    ::close(sv[0]);
    ::close(sv[1]);
    close_pipe(p);
  });
}

// Descriptors the program got from elsewhere (made before the run, by a
// plain thread, inherited): reads still park, and their flags are never
// touched.
TEST_P(HookIo, InheritedDescriptorsParkAndKeepTheirFlags) {
  Pipe p = raw_pipe();
  int sv[2];
  ASSERT_EQ(::syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  run_test([&] {
    Parked pr, sr;
    gort::WaitGroup wg;
    wg.add(2);
    gort::go([&] {
      pr.mark();
      char c = 0;
      EXPECT_EQ(::read(p.r, &c, 1), 1);
      EXPECT_EQ(c, 'p');
      wg.done();
    });
    gort::go([&] {
      sr.mark();
      char c = 0;
      EXPECT_EQ(::read(sv[0], &c, 1), 1);
      EXPECT_EQ(c, 's');
      wg.done();
    });
    ASSERT_TRUE(pr.wait(WaitReason::kIOWait)) << "a read of an inherited pipe did not park";
    ASSERT_TRUE(sr.wait(WaitReason::kIOWait)) << "a read of an inherited socket did not park";
    EXPECT_FALSE(real_nonblock(p.r));
    EXPECT_FALSE(real_nonblock(sv[0]));
    ASSERT_EQ(::write(p.w, "p", 1), 1);
    ASSERT_EQ(::write(sv[1], "s", 1), 1);
    wg.wait();
    EXPECT_FALSE(real_nonblock(p.r));
    EXPECT_FALSE(real_nonblock(sv[0]));
  });
  EXPECT_FALSE(real_nonblock(p.r)) << "the end of the run changed an inherited descriptor";
  close_pipe(p);
  ::close(sv[0]);
  ::close(sv[1]);
}

// SO_RCVTIMEO and SO_SNDTIMEO end a parked call with EAGAIN, as the
// kernel's timeouts do, on descriptors made here and inherited alike.
TEST_P(HookIo, SocketTimeoutsEndWaitsWithEagain) {
  int inherited[2];
  ASSERT_EQ(::syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, inherited), 0);
  run_test([&] {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    timeval tv{0, 100000};
    for (int fd : {sv[0], inherited[0]}) {
      ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
      auto t0 = std::chrono::steady_clock::now();
      char c;
      gort::test::write_errno(0);
      EXPECT_EQ(::recv(fd, &c, 1, 0), -1);
      EXPECT_EQ(gort::test::read_errno(), EAGAIN);
      EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(95));
    }
    // A writer that fills the socket: what went out before the timeout is
    // reported, as the kernel reports a partial send.
    ASSERT_EQ(::setsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
    std::string big(8 << 20, 'z');
    ssize_t n = ::write(sv[1], big.data(), big.size());
    EXPECT_GT(n, 0);
    EXPECT_LT(n, static_cast<ssize_t>(big.size()));
    ::close(sv[0]);
    ::close(sv[1]);
  });
  ::close(inherited[0]);
  ::close(inherited[1]);
}

// A close, from another goroutine or a plain thread, wakes a goroutine
// parked on the descriptor: its call fails with EBADF, as the kernel's
// would once the number is gone.
TEST_P(HookIo, CloseWakesParkedCallsWithEbadf) {
  run_test([] {
    for (bool from_thread : {false, true}) {
      Pipe p = hooked_pipe();
      Parked reader;
      gort::WaitGroup wg;
      wg.add(1);
      ssize_t r = 0;
      int err = 0;
      gort::go([&] {
        reader.mark();
        char c;
        r = ::read(p.r, &c, 1);
        err = gort::test::read_errno();
        wg.done();
      });
      ASSERT_TRUE(reader.wait(WaitReason::kIOWait));
      if (from_thread) {
        std::thread([&] { EXPECT_EQ(::close(p.r), 0); }).join();
      } else {
        EXPECT_EQ(::close(p.r), 0);
      }
      wg.wait();
      EXPECT_EQ(r, -1);
      EXPECT_EQ(err, EBADF);
      ::close(p.w);
    }
    // dup2 over a parked descriptor closes it too.
    Pipe p = hooked_pipe();
    Pipe q = hooked_pipe();
    Parked reader;
    gort::WaitGroup wg;
    wg.add(1);
    int err = 0;
    gort::go([&] {
      reader.mark();
      char c;
      if (::read(p.r, &c, 1) < 0) err = gort::test::read_errno();
      wg.done();
    });
    ASSERT_TRUE(reader.wait(WaitReason::kIOWait));
    ASSERT_EQ(::dup2(q.r, p.r), p.r);
    wg.wait();
    EXPECT_EQ(err, EBADF);
    // p.r is now a copy of q.r: it reads what q gets, blocking as q.r does.
    EXPECT_FALSE(::fcntl(p.r, F_GETFL) & O_NONBLOCK);
    ASSERT_EQ(::write(q.w, "q", 1), 1);
    char c = 0;
    EXPECT_EQ(::read(p.r, &c, 1), 1);
    EXPECT_EQ(c, 'q');
    close_pipe(p);
    close_pipe(q);
  });
}

// A number closed behind the hooks (here a raw close, as glibc's fclose
// makes) and reused by a new descriptor is the new one's: a read of it
// waits for the new pipe's data.
TEST_P(HookIo, ANumberClosedBehindTheHooksAndReusedIsTheNewDescriptors) {
  run_test([] {
    Pipe old = hooked_pipe();
    char c;
    ASSERT_EQ(::write(old.w, "o", 1), 1);
    ASSERT_EQ(::read(old.r, &c, 1), 1);  // the hooks know old.r now
    ::syscall(SYS_close, old.r);
    ::syscall(SYS_close, old.w);
    Pipe fresh = hooked_pipe();
    ASSERT_EQ(fresh.r, old.r) << "the kernel reuses the lowest free number";
    Parked reader;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      reader.mark();
      char d = 0;
      EXPECT_EQ(::read(fresh.r, &d, 1), 1);
      EXPECT_EQ(d, 'n');
      wg.done();
    });
    ASSERT_TRUE(reader.wait(WaitReason::kIOWait));
    ASSERT_EQ(::write(fresh.w, "n", 1), 1);
    wg.wait();
    close_pipe(fresh);
  });
}

// A goroutine parked on a number that is then closed behind the hooks and
// reused by a descriptor they did not see made (glibc's fclose and fopen
// do both): sysmon finds that the number names another file and the wait
// fails with EBADF, within a few seconds, instead of lasting for ever.
TEST(HookIoStale, AWaitOnANumberReusedBehindTheHooksEnds) {
  auto child = [] {
    gort::run(
        [] {
          Pipe p = hooked_pipe();
          Parked reader;
          gort::WaitGroup wg;
          wg.add(1);
          int err = 0;
          gort::go([&] {
            reader.mark();
            char c;
            if (::read(p.r, &c, 1) < 0) err = gort::test::read_errno();
            wg.done();
          });
          ASSERT_TRUE(reader.wait(WaitReason::kIOWait));
          ::syscall(SYS_close, p.r);
          Pipe other = raw_pipe();
          ASSERT_EQ(other.r, p.r) << "the kernel reuses the lowest free number";
          wg.wait();
          EXPECT_EQ(err, EBADF);
          close_pipe(other);
          ::close(p.w);
        },
        gort::test::hook_cfg(2));
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

// A plain thread, and a goroutine inside gort::blocking, read a pipe a
// goroutine made (O_NONBLOCK underneath): they block as the program asked,
// they do not see EAGAIN.
TEST_P(HookIo, ThreadsAndBlockingCallsSeeTheBlockingDescriptorTheyAskedFor) {
  run_test([] {
    Pipe p = hooked_pipe();
    std::atomic<int> thread_got{0};
    std::thread t([&] {
      char c = 0;
      if (::read(p.r, &c, 1) == 1 && c == 't') thread_got = 1;
    });
    gort::sleep(absl::Milliseconds(20));
    ASSERT_EQ(::write(p.w, "t", 1), 1);
    t.join();
    EXPECT_EQ(thread_got.load(), 1);
    gort::go([&] {
      gort::sleep(absl::Milliseconds(20));
      EXPECT_EQ(::write(p.w, "b", 1), 1);
    });
    char c = 0;
    ssize_t n = gort::blocking([&] { return ::read(p.r, &c, 1); });
    EXPECT_EQ(n, 1);
    EXPECT_EQ(c, 'b');
    close_pipe(p);
  });
}

// A goroutine whose thread holds an OS lock (a library's mutex held across
// its I/O) neither deadlocks nor dies: its thread blocks with the P handed
// off, so the other goroutines run meanwhile, even on one P.
TEST_P(HookIo, ReadUnderAnOsLockBlocksTheThreadAndHandsOffTheP) {
  run_test([] {
    Pipe p = hooked_pipe();
    std::mutex lib_mutex;
    std::atomic<bool> other_ran{false};
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      std::lock_guard<std::mutex> hold(lib_mutex);
      char c = 0;
      EXPECT_EQ(::read(p.r, &c, 1), 1);
      EXPECT_EQ(c, 'L');
      wg.done();
    });
    // Another goroutine runs (this one) while the reader's thread waits.
    gort::sleep(absl::Milliseconds(30));
    other_ran = true;
    ASSERT_EQ(::write(p.w, "L", 1), 1);
    wg.wait();
    EXPECT_TRUE(other_ran.load());
    close_pipe(p);
  });
}

// gort::RawLibc: libc's own call, which blocks the thread.
TEST_P(HookIo, RawLibcBlocksTheThread) {
  run_test([] {
    Pipe p = hooked_pipe();
    gort::go([&] {
      gort::sleep(absl::Milliseconds(30));
      EXPECT_EQ(::write(p.w, "r", 1), 1);
    });
    char c = 0;
    ssize_t n;
    {
      gort::RawLibc raw;
      n = ::read(p.r, &c, 1);  // blocks this thread (the descriptor stays blocking to it)
    }
    EXPECT_EQ(n, 1);
    EXPECT_EQ(c, 'r');
    close_pipe(p);
  });
}

// At the end of the run a descriptor the program still holds stays open,
// with the flags it asked for; the next run uses it as an inherited one.
TEST(HookIoRuns, DescriptorsKeptPastTheRunAreTheProgramsAsItMadeThem) {
  Pipe p;
  gort::run([&] { p = hooked_pipe(); }, gort::test::hook_cfg(2));
  ASSERT_GE(p.r, 0);
  EXPECT_FALSE(real_nonblock(p.r)) << "O_NONBLOCK left set underneath after the run";
  EXPECT_FALSE(real_nonblock(p.w));
  ASSERT_EQ(::write(p.w, "k", 1), 1);
  gort::run(
      [&] {
        char c = 0;
        EXPECT_EQ(::read(p.r, &c, 1), 1);
        EXPECT_EQ(c, 'k');
        Parked reader;
        gort::WaitGroup wg;
        wg.add(1);
        gort::go([&] {
          reader.mark();
          char d = 0;
          EXPECT_EQ(::read(p.r, &d, 1), 1);
          wg.done();
        });
        EXPECT_TRUE(reader.wait(WaitReason::kIOWait));
        EXPECT_EQ(::write(p.w, "2", 1), 1);
        wg.wait();
      },
      gort::test::hook_cfg(2));
  close_pipe(p);
}

// Config::hook_libc = false: libc as it is (a goroutine's pipe is blocking
// underneath, and its read blocks the thread).
TEST(HookIoRuns, HooksOffLeaveLibcAlone) {
  gort::run(
      [] {
        Pipe p = hooked_pipe();
        EXPECT_FALSE(real_nonblock(p.r)) << "hooks off, yet O_NONBLOCK was set";
        gort::go([&] {
          gort::sleep(absl::Milliseconds(20));
          EXPECT_EQ(::write(p.w, "x", 1), 1);
        });
        char c = 0;
        EXPECT_EQ(::read(p.r, &c, 1), 1);
        close_pipe(p);
      },
      gort::test::hook_cfg(2, false));
}

TEST(HookIoRuns, GortDebugHooklibcZeroTurnsThemOff) {
  auto child = [] {
    setenv("GORT_DEBUG", "hooklibc=0", 1);
    gort::run([] {
      Pipe p = hooked_pipe();
      EXPECT_FALSE(real_nonblock(p.r));
      close_pipe(p);
    });
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

}  // namespace

// tests/stdlib/net/net_close_test.cpp — closing gort::net sockets under
// blocked callers: wake-ups with the closed error, the descriptor kept
// until the last caller leaves, serialised readers and writers, no fd
// leaks, and accept's backoff when the process is out of descriptors.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gort/net.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::test::make_pair;
using gort::test::must;
using gort::test::NetTest;
using gort::test::Pair;
using gort::test::Parked;
using gort::test::read_exactly;
using gort::test::WaitReason;
using gort::test::write_str;

const absl::Status kClosed = absl::FailedPreconditionError("use of closed network connection");

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST_P(NetTest, CloseWakesBlockedRead) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    Parked parked;
    absl::Status got;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      parked.mark();
      char b[8];
      got = p.client.read(absl::MakeSpan(b)).status();
      wg.done();
    });
    EXPECT_TRUE(parked.wait(WaitReason::kIOWait));
    EXPECT_TRUE(p.client.close().ok());
    wg.wait();
    EXPECT_EQ(got, kClosed);
    EXPECT_TRUE(gort::net::is_closed_error(got));
    char b[8];
    EXPECT_EQ(p.client.read(absl::MakeSpan(b)).status(), kClosed);
  });
}

TEST_P(NetTest, CloseWakesBlockedWrite) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    EXPECT_TRUE(p.client.set_write_buffer(4096).ok());
    Parked parked;
    absl::Status got;
    gort::WaitGroup wg;
    std::string big(16 << 20, 'w');
    wg.add(1);
    gort::go([&] {
      parked.mark();
      got = p.client.write(absl::MakeConstSpan(big.data(), big.size())).status();
      wg.done();
    });
    EXPECT_TRUE(parked.wait(WaitReason::kIOWait));
    EXPECT_TRUE(p.client.close().ok());
    wg.wait();
    EXPECT_EQ(got, kClosed);
  });
}

TEST_P(NetTest, CloseWakesBlockedAccept) {
  run_test([] {
    auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
    Parked parked;
    absl::Status got;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      parked.mark();
      got = ln.accept().status();
      wg.done();
    });
    EXPECT_TRUE(parked.wait(WaitReason::kIOWait));
    EXPECT_TRUE(ln.close().ok());
    wg.wait();
    EXPECT_EQ(got, kClosed);
    // The port is free again.
    auto again = gort::net::listen("tcp", ln.addr());
    EXPECT_TRUE(again.ok()) << again.status();
  });
}

TEST_P(NetTest, CloseWakesEveryQueuedCaller) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    // Three readers: one parks in the poller, the others queue behind it
    // on the read lock (the FdMutex's semaphore: Go's "semacquire").
    constexpr int kReaders = 3;
    std::atomic<int> closed_errors{0};
    gort::WaitGroup wg;
    Parked parked[kReaders];
    for (int i = 0; i < kReaders; i++) {
      wg.add(1);
      gort::go([&, i] {
        parked[i].mark();
        char b[8];
        auto r = p.client.read(absl::MakeSpan(b));
        if (r.status() == kClosed) closed_errors.fetch_add(1);
        wg.done();
      });
    }
    EXPECT_TRUE(gort::test::eventually([&] {
      int io = 0, queued = 0;
      for (auto& pk : parked) {
        io += pk.now(WaitReason::kIOWait);
        queued += pk.now(WaitReason::kSemacquire);
      }
      return io == 1 && queued == kReaders - 1;
    }));
    EXPECT_TRUE(p.client.close().ok());
    wg.wait();
    EXPECT_EQ(closed_errors.load(), kReaders);
  });
}

TEST_P(NetTest, ConcurrentReadersAndWriters) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    // Several goroutines write fixed-size records on one Conn at once; each
    // write is whole (writers are serialised), so records never interleave.
    constexpr int kWriters = 4, kRecords = 200, kSize = 1000;
    gort::WaitGroup wg;
    for (int w = 0; w < kWriters; w++) {
      wg.add(1);
      gort::go([&, w] {
        std::string rec(kSize, static_cast<char>('a' + w));
        for (int i = 0; i < kRecords; i++) EXPECT_TRUE(write_str(p.client, rec).ok());
        wg.done();
      });
    }
    // Several readers share the other end; whole records are checked by
    // one collector, so readers here only count bytes.
    std::atomic<size_t> total{0};
    std::string all;
    gort::Mutex mu;
    for (int r = 0; r < 3; r++) {
      wg.add(1);
      gort::go([&] {
        for (;;) {
          char b[777];
          auto n = p.server.read(absl::MakeSpan(b));
          if (!n.ok() || *n == 0) break;
          {
            std::lock_guard l(mu);
            all.append(b, *n);
          }
          if (total.fetch_add(*n) + *n == size_t{kWriters} * kRecords * kSize) {
            (void)p.server.close();  // wakes the other readers
          }
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(total.load(), size_t{kWriters} * kRecords * kSize);
    // Interleaved reads may split records, but the byte counts per writer
    // are exact.
    int counts[kWriters] = {};
    for (char c : all) {
      if (c >= 'a' && c < 'a' + kWriters) counts[c - 'a']++;
    }
    for (int w = 0; w < kWriters; w++) EXPECT_EQ(counts[w], kRecords * kSize);
  });
}

TEST_P(NetTest, CloseFromPlainThread) {
  run_test([] {
    Pair p = make_pair();
    if (!p.server) return;
    Parked parked;
    absl::Status got;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      parked.mark();
      char b[8];
      got = p.client.read(absl::MakeSpan(b)).status();
      wg.done();
    });
    EXPECT_TRUE(parked.wait(WaitReason::kIOWait));
    std::thread t([&] { EXPECT_TRUE(p.client.close().ok()); });
    t.join();
    wg.wait();
    EXPECT_EQ(got, kClosed);
    // And a plain thread blocked in read is woken by a goroutine's close.
    std::atomic<bool> done{false};
    absl::Status thread_got;
    std::thread reader([&] {
      char b[8];
      thread_got = p.server.read(absl::MakeSpan(b)).status();
      done.store(true);
    });
    gort::sleep(absl::Milliseconds(30));
    EXPECT_TRUE(p.server.close().ok());
    while (!done.load()) gort::sleep(absl::Milliseconds(1));
    reader.join();
    // The client's close may have sent FIN first: end of stream is fine too.
    EXPECT_TRUE(thread_got == kClosed || thread_got.ok()) << thread_got;
  });
}

// With one P, the goroutine that closes keeps running after close()
// readied the blocked reader: the descriptor must still be open then, and
// be closed once the reader has left.
TEST(NetClose, FdNotReusedUnderWaiter) {
  gort::test::run_checked(1, [] {
    Pair p = make_pair();
    if (!p.server) return;
    int fd = p.client.native_handle();
    Parked parked;
    absl::Status got;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      parked.mark();
      char b[8];
      got = p.client.read(absl::MakeSpan(b)).status();
      wg.done();
    });
    EXPECT_TRUE(parked.wait(WaitReason::kIOWait));
    EXPECT_TRUE(p.client.close().ok());
    // The reader is runnable but has not run (one P, and we do not yield).
    EXPECT_TRUE(fd_open(fd)) << "fd closed under a waiter";
    int other = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_NE(other, fd) << "fd number reused under a waiter";
    ::close(other);
    wg.wait();
    EXPECT_EQ(got, kClosed);
    EXPECT_FALSE(fd_open(fd)) << "fd not closed after the last caller left";
  });
}

// Every path that opens sockets, successful or not, gives them back.
TEST_P(NetTest, NoFdLeaks) {
  run_test([] {
    // Settled: the race build's CI once counted one descriptor more here
    // than ever after (10, then 9 for 10 s).
    int before = gort::test::settled_fd_count();
    for (int round = 0; round < 3; round++) {
      Pair p = make_pair();
      EXPECT_TRUE(write_str(p.client, "x").ok());
      EXPECT_EQ(read_exactly(p.server, 1).value_or(""), "x");
      std::string addr = p.ln.addr();
      (void)p.ln.close();
      EXPECT_FALSE(gort::net::dial("tcp", addr).ok());           // refused
      EXPECT_FALSE(gort::net::listen("tcp", p.client.local_addr()).ok());  // in use
      EXPECT_FALSE(gort::net::dial_timeout("tcp", "127.0.0.1:1", absl::Seconds(5)).ok());
      auto u = must(gort::net::listen_packet("udp", "127.0.0.1:0"));
      EXPECT_TRUE(u.write_to(absl::MakeConstSpan("x", 1), u.local_addr()).ok());
      gort::test::TempDir dir;
      auto ul = must(gort::net::listen("unix", dir.path() + "/s"));
      auto uc = must(gort::net::dial("unix", dir.path() + "/s"));
      auto us = must(ul.accept());
      gort::net::Conn moved = std::move(uc);
      moved = must(gort::net::dial("unix", dir.path() + "/s"));  // move-assign closes the old
    }
    // The last reference to a descriptor may be dropped by another thread
    // a moment after its owner closed it (a poller wake-up still holding it).
    int after = 0;
    gort::test::eventually([&] { return (after = gort::test::count_fds()) == before; });
    EXPECT_EQ(after, before);
  });
}

// Takes every free descriptor.
void hog_all(std::vector<int>* hog) {
  for (;;) {
    int f = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (f < 0) break;
    hog->push_back(f);
  }
}

// Frees one descriptor and dials with it, then takes whatever else is
// free. The runtime itself may hold a descriptor for a moment (sysmon reads
// /proc/self/task/TID/stat to tell a thread blocked in the kernel from one
// waiting for a CPU): a dial that meets that gets EMFILE, and is retried.
// (Once it failed, the accept below waited for a connection that never
// came, and the test hung.)
gort::net::Conn dial_with_the_last_descriptor(std::vector<int>* hog, const std::string& addr) {
  ::close(hog->back());
  hog->pop_back();
  absl::StatusOr<gort::net::Conn> c;
  for (int i = 0; i < 1000; i++) {
    c = gort::net::dial("tcp", addr);
    if (c.ok() || !absl::StrContains(c.status().message(), std::strerror(EMFILE))) break;
    gort::sleep(absl::Milliseconds(1));
  }
  hog_all(hog);
  return must(std::move(c), "dial with the last descriptor");
}

// Out of descriptors: accept sleeps and retries (never spins), succeeds
// once a descriptor is free, and close() cuts its sleep short.
TEST(NetClose, AcceptBacksOffWhenOutOfDescriptors) {
  auto child = [] {
    gort::test::run_checked(2, [] {
      auto ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
      rlimit rl;
      ::getrlimit(RLIMIT_NOFILE, &rl);
      rlimit low = rl;
      low.rlim_cur = 256;
      EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
      std::vector<int> hog;
      hog_all(&hog);
      EXPECT_GT(hog.size(), 2u);
      auto c = dial_with_the_last_descriptor(&hog, ln.addr());

      rusage ru0;
      ::getrusage(RUSAGE_SELF, &ru0);
      absl::Time start = absl::Now();
      absl::StatusOr<gort::net::Conn> got;
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&] {
        got = ln.accept();  // EMFILE until a descriptor is freed
        wg.done();
      });
      gort::sleep(absl::Milliseconds(150));
      ::close(hog.back());
      hog.pop_back();
      wg.wait();
      absl::Duration took = absl::Now() - start;
      rusage ru1;
      ::getrusage(RUSAGE_SELF, &ru1);
      EXPECT_TRUE(got.ok()) << got.status();
      EXPECT_GE(took, absl::Milliseconds(140));
      auto cpu = [](const rusage& r) {
        return absl::DurationFromTimeval(r.ru_utime) + absl::DurationFromTimeval(r.ru_stime);
      };
      // Sleeping, not spinning: a small fraction of the wall time on CPU.
      EXPECT_LT(cpu(ru1) - cpu(ru0), took / 3);
      if (got.ok()) {
        EXPECT_TRUE(write_str(c, "hi").ok());
        EXPECT_EQ(read_exactly(*got, 2).value_or(""), "hi");
        (void)got->close();
      }
      (void)c.close();

      // Out of descriptors again, with a long backoff under way: close()
      // wakes accept at once.
      hog_all(&hog);
      auto c2 = dial_with_the_last_descriptor(&hog, ln.addr());
      absl::Status st;
      wg.add(1);
      gort::go([&] {
        st = ln.accept().status();
        wg.done();
      });
      gort::sleep(absl::Milliseconds(1200));  // backoff reaches 640 ms, then 1 s
      absl::Time closing = absl::Now();
      EXPECT_TRUE(ln.close().ok());
      wg.wait();
      EXPECT_EQ(st, kClosed);
      EXPECT_LT(absl::Now() - closing, absl::Milliseconds(300));
      (void)c2.close();
      got = absl::StatusOr<gort::net::Conn>();
      for (int f : hog) ::close(f);
      ::setrlimit(RLIMIT_NOFILE, &rl);
    });
  };
  GORT_EXPECT_SUBPROCESS_OK(60, child);
}

}  // namespace

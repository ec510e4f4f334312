// tests/preempt/nbsyscall_test.cpp — a goroutine whose reads always find
// data never parks, and spends nearly all its time in the kernel or in
// gort's own code, where a preemption signal cannot act. Its non-blocking
// system calls are where it yields (gmp/nbsyscall.hpp): sysmon sets its
// flag without a signal there, and the goroutine honours it as the call
// returns. Before, such a reader held its P for up to a second (a stall
// report) while sysmon's signals, retried every tenth of a slice, kept
// landing in the kernel.
//
// On one P, a plain thread streams into a loopback socket as fast as it
// can, a goroutine reads it, and a second goroutine sleeps 1 ms at a time:
// it runs only when the reader yields.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmp/clock_rand.hpp"
#include "gmp/sched.hpp"
#include "gort/net.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/preempt/helpers.hpp"

namespace {

using namespace std::chrono_literals;
using gort::test::preempt_cfg;
using gort::test::run_cfg;
using gort::test::Watchdog;

// Preemption requests signalled so far, over every M (sysmon's; the slice
// timers' signals are not counted).
uint64_t signals_sent() {
  using namespace gort::internal;
  UniqueLock lock(sched.lock);
  uint64_t n = 0;
  for (M* m : sched.allm) n += m->preemption.sent.load(std::memory_order_relaxed);
  return n;
}

// A plain thread that writes to 127.0.0.1:port until told to stop.
class Streamer {
 public:
  explicit Streamer(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    thread_ = std::thread([this] {
      std::vector<char> chunk(64 << 10, 'x');
      while (connected_ && !stop_.load()) {
        if (::send(fd_, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
      }
    });
  }
  ~Streamer() {
    stop_.store(true);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Outcome {
  int wakes = 0;             // the sleeper's
  int64_t max_gap_ms = 0;    // the longest the sleeper waited for the P
  uint64_t reads = 0;        // the reader's
  uint64_t signals = 0;      // preemption signals sent meanwhile
};

// A connection the goroutine reads, streamed into by a plain thread: a
// gort::net::Conn, or (hooked) a descriptor made with the libc calls, which
// the hooks own and read for the goroutine as a library's blocking socket.
class Source {
 public:
  explicit Source(bool hooked) : hooked_(hooked) {
    int port = 0;
    if (hooked_) {
      lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof sa;
      if (lfd_ < 0 || ::bind(lfd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(lfd_, 1) != 0 ||
          ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
        return;
      }
      port = ntohs(sa.sin_port);
    } else {
      auto ln = gort::net::listen("tcp", "127.0.0.1:0");
      if (!ln.ok()) return;
      ln_ = std::move(*ln);
      std::string addr = ln_.addr();
      port = std::stoi(addr.substr(addr.rfind(':') + 1));
    }
    // The connection completes in the backlog, before the accept.
    streamer_ = std::make_unique<Streamer>(port);
    if (!streamer_->connected()) return;
    if (hooked_) {
      fd_ = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      ok_ = fd_ >= 0;
    } else {
      auto c = ln_.accept();
      if (c.ok()) conn_ = std::move(*c);
      ok_ = c.ok();
    }
  }
  ~Source() {
    streamer_.reset();
    if (fd_ >= 0) ::close(fd_);
    if (lfd_ >= 0) ::close(lfd_);
    (void)conn_.close();
    (void)ln_.close();
  }
  bool ok() const { return ok_; }
  ssize_t read(char* buf, size_t n) {
    if (hooked_) return ::read(fd_, buf, n);
    auto r = conn_.read(absl::MakeSpan(buf, n));
    return r.ok() ? static_cast<ssize_t>(*r) : -1;
  }

 private:
  bool hooked_;
  bool ok_ = false;
  int lfd_ = -1, fd_ = -1;
  gort::net::Listener ln_;
  gort::net::Conn conn_;
  std::unique_ptr<Streamer> streamer_;
};

Outcome stream_beside_a_sleeper(bool hooked) {
  Outcome out;
  std::atomic<bool> running{true};
  Watchdog dog(30s, [&] { running.store(false); });
  run_cfg(preempt_cfg(1), [&] {
    Source src(hooked);
    ASSERT_TRUE(src.ok());
    gort::WaitGroup wg;
    wg.add(1);
    std::atomic<uint64_t> reads{0};
    gort::go([&] {
      char buf[4096];
      while (running.load(std::memory_order_relaxed)) {
        if (src.read(buf, 1) <= 0) break;  // slower than the writer: never drains
        reads.fetch_add(1, std::memory_order_relaxed);
      }
      wg.done();
    });
    uint64_t signals0 = signals_sent();
    int64_t start = gort::internal::nanotime();
    int64_t last = start;
    while (gort::internal::nanotime() - start < 1'000'000'000) {
      gort::sleep(absl::Milliseconds(1));
      int64_t now = gort::internal::nanotime();
      out.max_gap_ms = std::max(out.max_gap_ms, (now - last) / 1'000'000);
      last = now;
      out.wakes++;
    }
    out.signals = signals_sent() - signals0;
    running.store(false);
    wg.wait();
    out.reads = reads.load();
  });
  return out;
}

void expect_fair(const Outcome& o) {
  EXPECT_GT(o.reads, 1000u) << "the reader hardly ran: the test measured nothing";
  // A 10 ms slice lets the sleeper in about every 10 ms, ~100 times in the
  // second; the bounds leave a loaded machine room, and are far from a
  // reader that keeps its P for most of the second.
  EXPECT_GE(o.wakes, 20) << "longest wait for the P: " << o.max_gap_ms << " ms";
  EXPECT_LE(o.max_gap_ms, 300) << o.wakes << " wake-ups";
  // Not one per tenth of a slice (1,000 a second) as when signals landed
  // in the kernel and were retried.
  EXPECT_LE(o.signals, 300u) << "preemption signals in one second";
}

TEST(NbSyscallPreempt, NetConnReaderThatAlwaysFindsDataYields) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  expect_fair(stream_beside_a_sleeper(/*hooked=*/false));
}

// The same through the libc hooks: ::read on a descriptor made with
// ::socket and ::accept4, as a library reads its (blocking) socket.
TEST(NbSyscallPreempt, HookedReadThatAlwaysFindsDataYields) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  expect_fair(stream_beside_a_sleeper(/*hooked=*/true));
}

}  // namespace

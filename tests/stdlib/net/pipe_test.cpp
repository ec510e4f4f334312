// tests/stdlib/net/pipe_test.cpp — gort::net::pipe() (Go's net.Pipe):
// data round trips, a write split across reads, a write that parks until
// read, whole writes under concurrency, close from either side (blocked
// calls included), deadlines (past, future, replaced, cleared, set while
// blocked, std::chrono), the calls a pipe cannot serve, moved-from ends,
// and a stress run. Every test that parks runs in a child process with a
// watchdog (run_watched): a call that never returns fails the test
// instead of hanging the suite.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gort/net.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/net/net_helpers.hpp"

namespace {

using gort::net::Conn;
using gort::test::fnv;
using gort::test::must;
using gort::test::Parked;
using gort::test::read_exactly;
using gort::test::read_to_eof;
using gort::test::write_str;
using gort::test::WaitReason;

const absl::Status kTimeout = absl::DeadlineExceededError("i/o timeout");
const absl::Status kClosed = absl::FailedPreconditionError(std::string(gort::net::kErrClosed));
const absl::Status kClosedPipe = absl::FailedPreconditionError(std::string(gort::net::kErrClosedPipe));
const absl::Status kInvalid = absl::InvalidArgumentError("invalid argument");

// xorshift64: the stress test's reproducible choices.
uint64_t next_random(uint64_t* x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

class NetPipe : public gort::test::NetTest {
 protected:
  // body() under run_checked, in a child process that is killed (and
  // dumps its goroutines) if it has not finished within 60 s.
  template <class F>
  void run_watched(F body) {
    int procs = this->procs();
    auto child = [procs, &body] { gort::test::run_checked(procs, body); };
    GORT_EXPECT_SUBPROCESS_OK(60, child);
  }
};
GORT_INSTANTIATE_STDLIB_PROCS(NetPipe);

// write_str(c, s) on a goroutine of its own; its result arrives on the
// channel once the write has returned (c must live until then).
gort::Chan<absl::Status> write_async(Conn& c, std::string s) {
  auto done = gort::make_chan<absl::Status>(1);
  gort::go([&c, s = std::move(s), done] { done.send(write_str(c, s)); });
  return done;
}

bool sent_ok(const gort::Chan<absl::Status>& done) { return done.recv().value_or(absl::UnknownError("")).ok(); }

// Echoes what c reads until end of stream or an error, with reads of
// `chunk` bytes.
void echo(Conn& c, size_t chunk) {
  std::vector<char> buf(chunk);
  for (;;) {
    auto n = c.read(absl::MakeSpan(buf));
    if (!n.ok() || *n == 0) return;
    if (!c.write(absl::MakeConstSpan(buf.data(), *n)).ok()) return;
  }
}

TEST_P(NetPipe, EchoRoundTrip) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& client = p.first;
    Conn& server = p.second;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      echo(server, 64);
      wg.done();
    });
    for (const std::string& m : {std::string("ping"), std::string("hello, pipe"), std::string(1000, 'z')}) {
      // The write and the read on different goroutines: the server's echo
      // of the first 64 bytes waits for a read while the rest of the
      // 1000-byte write still waits for the server.
      auto sent = write_async(client, m);
      EXPECT_EQ(read_exactly(client, m.size()).value_or("<error>"), m);
      EXPECT_TRUE(sent_ok(sent));
    }
    EXPECT_TRUE(client.close().ok());
    wg.wait();  // the server read end of stream
  });
}

TEST_P(NetPipe, LargeWriteSplitAcrossSmallReads) {
  run_watched([] {
    auto p = gort::net::pipe();
    constexpr size_t kSize = 100 * 1000;
    std::string data(kSize, '\0');
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (char& ch : data) ch = static_cast<char>(next_random(&x));
    absl::StatusOr<size_t> wrote;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      wrote = p.first.write(absl::MakeConstSpan(data));  // one write
      wg.done();
    });
    std::string got;
    int reads = 0;
    char buf[7];
    while (got.size() < kSize) {
      auto n = p.second.read(absl::MakeSpan(buf));
      if (!n.ok() || *n == 0) break;
      EXPECT_LE(*n, sizeof buf);
      got.append(buf, *n);
      reads++;
    }
    wg.wait();
    EXPECT_EQ(wrote.value_or(0), kSize);
    EXPECT_EQ(got.size(), kSize);
    EXPECT_EQ(fnv(got.data(), got.size()), fnv(data.data(), data.size()));
    EXPECT_EQ(reads, static_cast<int>((kSize + sizeof buf - 1) / sizeof buf));  // every read full
  });
}

TEST_P(NetPipe, WriteParksUntilReadsTakeAllOfIt) {
  run_watched([] {
    auto p = gort::net::pipe();
    Parked writer;
    std::atomic<bool> returned{false};
    absl::StatusOr<size_t> wrote;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      writer.mark();
      wrote = p.first.write(absl::MakeConstSpan("hello", 5));
      returned.store(true);
      wg.done();
    });
    // No reader yet: the write waits for one (no buffering).
    EXPECT_TRUE(writer.wait(WaitReason::kSelect));
    EXPECT_FALSE(returned.load());
    char buf[2];
    EXPECT_EQ(p.second.read(absl::MakeSpan(buf)).value_or(0), 2u);
    EXPECT_EQ(std::string(buf, 2), "he");
    // Part of it taken: the writer offers the rest and waits again.
    EXPECT_TRUE(writer.wait(WaitReason::kSelect));
    EXPECT_FALSE(returned.load());
    EXPECT_EQ(read_exactly(p.second, 3).value_or("<error>"), "llo");
    wg.wait();
    EXPECT_EQ(wrote.value_or(0), 5u);
  });
}

// Go's guarantee: each write is delivered whole before the next begins,
// however the reads cut the stream.
TEST_P(NetPipe, ConcurrentWritesDoNotInterleave) {
  run_watched([] {
    auto p = gort::net::pipe();
    constexpr int kWriters = 4;
    constexpr int kWrites = 20;
    constexpr size_t kBlock = 997;
    gort::WaitGroup wg;
    for (int w = 0; w < kWriters; w++) {
      wg.add(1);
      gort::go([&, w] {
        std::string block(kBlock, static_cast<char>('a' + w));
        for (int i = 0; i < kWrites; i++) EXPECT_TRUE(write_str(p.first, block).ok());
        wg.done();
      });
    }
    gort::go([&] {
      wg.wait();
      EXPECT_TRUE(p.first.close().ok());
    });
    std::string got;
    char buf[13];
    for (;;) {
      auto n = p.second.read(absl::MakeSpan(buf));
      if (!n.ok() || *n == 0) {
        EXPECT_TRUE(n.ok()) << n.status();
        break;
      }
      got.append(buf, *n);
    }
    EXPECT_EQ(got.size(), kWriters * kWrites * kBlock);
    if (got.size() != kWriters * kWrites * kBlock) return;  // every goroutine has finished
    // Whole writes only: every kBlock-aligned block is one writer's.
    int per_writer[kWriters] = {};
    for (size_t at = 0; at < got.size(); at += kBlock) {
      char c = got[at];
      auto from = got.begin() + static_cast<ptrdiff_t>(at);
      EXPECT_EQ(std::count(from, from + static_cast<ptrdiff_t>(kBlock), c), static_cast<ptrdiff_t>(kBlock))
          << "a write was cut by another at byte " << at;
      if (c >= 'a' && c < 'a' + kWriters) per_writer[c - 'a']++;
    }
    for (int w = 0; w < kWriters; w++) EXPECT_EQ(per_writer[w], kWrites);
  });
}

TEST_P(NetPipe, CloseSemantics) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    Conn& b = p.second;
    char buf[4];
    EXPECT_TRUE(a.close().ok());
    // The peer: end of stream, and writes to a closed pipe.
    auto r = b.read(absl::MakeSpan(buf));
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.value_or(99), 0u);
    EXPECT_TRUE(b.wait_readable().ok());
    EXPECT_EQ(b.write(absl::MakeConstSpan("x", 1)).status(), kClosedPipe);
    EXPECT_FALSE(gort::net::is_closed_error(kClosedPipe));
    EXPECT_EQ(b.set_deadline(absl::Now() + absl::Seconds(1)), kClosedPipe);
    EXPECT_EQ(b.set_read_deadline(absl::Now() + absl::Seconds(1)), kClosedPipe);
    // The closed end itself: net.ErrClosed, as a closed socket.
    EXPECT_EQ(a.read(absl::MakeSpan(buf)).status(), kClosed);
    EXPECT_TRUE(gort::net::is_closed_error(a.read(absl::MakeSpan(buf)).status()));
    EXPECT_EQ(a.read(absl::Span<char>()).status(), kClosed);
    EXPECT_EQ(a.write(absl::MakeConstSpan("x", 1)).status(), kClosed);
    EXPECT_EQ(a.write(absl::Span<const char>()).status(), kClosed);
    EXPECT_EQ(a.wait_readable(), kClosed);
    EXPECT_EQ(a.set_write_deadline(absl::Now()), kClosed);
    EXPECT_EQ(a.close(), kClosed);  // twice
    EXPECT_TRUE(a.valid());         // closed, but still holds its end
    EXPECT_TRUE(b.close().ok());
    EXPECT_EQ(b.close(), kClosed);
    EXPECT_EQ(b.read(absl::MakeSpan(buf)).status(), kClosed);
  });
}

TEST_P(NetPipe, CloseWakesBlockedCalls) {
  run_watched([] {
    // Which end closes, whether the blocked call reads or writes, and what
    // it returns.
    struct Case {
      bool close_own;
      bool reads;
      absl::Status want;
    };
    for (const Case& c : {Case{false, true, absl::OkStatus()}, Case{false, false, kClosedPipe},
                          Case{true, true, kClosed}, Case{true, false, kClosed}}) {
      auto p = gort::net::pipe();
      Conn& mine = p.first;
      Conn& other = p.second;
      Parked parked;
      absl::Status got = absl::UnknownError("not returned");
      size_t n = 99;
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&] {
        char buf[8];
        parked.mark();
        absl::StatusOr<size_t> r =
            c.reads ? mine.read(absl::MakeSpan(buf)) : mine.write(absl::MakeConstSpan("data", 4));
        got = r.status();
        if (r.ok()) n = *r;
        wg.done();
      });
      EXPECT_TRUE(parked.wait(WaitReason::kSelect));
      EXPECT_TRUE((c.close_own ? mine : other).close().ok());
      wg.wait();
      EXPECT_EQ(got, c.want) << "close_own=" << c.close_own << " reads=" << c.reads;
      if (c.want.ok()) {
        EXPECT_EQ(n, 0u);  // end of stream
      }
    }
  });
}

TEST_P(NetPipe, PastDeadlineFailsAtOnceEvenWithDataReady) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    Conn& b = p.second;
    Parked writer;
    absl::StatusOr<size_t> wrote;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      writer.mark();
      wrote = b.write(absl::MakeConstSpan("ready", 5));
      wg.done();
    });
    EXPECT_TRUE(writer.wait(WaitReason::kSelect));  // a's read would succeed now
    absl::Time start = absl::Now();
    EXPECT_TRUE(a.set_read_deadline(start - absl::Seconds(1)).ok());
    char buf[8];
    EXPECT_EQ(a.read(absl::MakeSpan(buf)).status(), kTimeout);
    EXPECT_TRUE(gort::net::is_timeout_error(a.read(absl::MakeSpan(buf)).status()));
    EXPECT_EQ(a.wait_readable(), kTimeout);
    EXPECT_TRUE(a.set_write_deadline(start - absl::Seconds(1)).ok());
    EXPECT_EQ(a.write(absl::MakeConstSpan("x", 1)).status(), kTimeout);
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
    // Cleared (InfinitePast, Go's zero time): the waiting bytes are read.
    EXPECT_TRUE(a.set_read_deadline(absl::InfinitePast()).ok());
    EXPECT_EQ(read_exactly(a, 5).value_or("<error>"), "ready");
    wg.wait();
    EXPECT_EQ(wrote.value_or(0), 5u);
  });
}

TEST_P(NetPipe, FutureDeadlineWakesBlockedReadAndWrite) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    char buf[8];
    for (bool write_side : {false, true}) {
      absl::Time start = absl::Now();
      absl::Status set = write_side ? a.set_write_deadline(start + absl::Milliseconds(50))
                                    : a.set_read_deadline(start + absl::Milliseconds(50));
      EXPECT_TRUE(set.ok());
      absl::Status got = write_side ? a.write(absl::MakeConstSpan("x", 1)).status()
                                    : a.read(absl::MakeSpan(buf)).status();
      absl::Duration took = absl::Now() - start;
      EXPECT_EQ(got, kTimeout) << "write_side=" << write_side;
      EXPECT_GE(took, absl::Milliseconds(45));
      EXPECT_LT(took, absl::Seconds(10));
      // Still expired: the next call fails at once.
      got = write_side ? a.write(absl::MakeConstSpan("x", 1)).status() : a.read(absl::MakeSpan(buf)).status();
      EXPECT_EQ(got, kTimeout);
    }
    // A later deadline makes the end usable again.
    EXPECT_TRUE(a.set_deadline(absl::Now() + absl::Seconds(30)).ok());
    auto sent = write_async(p.second, "late");
    EXPECT_EQ(read_exactly(a, 4).value_or("<error>"), "late");
    EXPECT_TRUE(sent_ok(sent));
  });
}

TEST_P(NetPipe, DeadlineSetWhileBlocked) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    for (bool past : {false, true}) {
      Parked reader;
      absl::Status got;
      gort::WaitGroup wg;
      wg.add(1);
      gort::go([&] {
        char buf[8];
        reader.mark();
        got = a.read(absl::MakeSpan(buf)).status();
        wg.done();
      });
      EXPECT_TRUE(reader.wait(WaitReason::kSelect));  // blocked with no deadline
      EXPECT_TRUE(a.set_read_deadline(past ? absl::Now() - absl::Seconds(1) : absl::Now() + absl::Milliseconds(30)).ok());
      wg.wait();
      EXPECT_EQ(got, kTimeout) << "past=" << past;
      EXPECT_TRUE(a.set_read_deadline(absl::InfiniteFuture()).ok());
    }
  });
}

TEST_P(NetPipe, DeadlineReplacedByALaterOne) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    absl::Time start = absl::Now();
    EXPECT_TRUE(a.set_read_deadline(start + absl::Milliseconds(50)).ok());
    Parked reader;
    absl::Status got;
    absl::Duration took;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      char buf[8];
      reader.mark();
      got = a.read(absl::MakeSpan(buf)).status();
      took = absl::Now() - start;
      wg.done();
    });
    EXPECT_TRUE(reader.wait(WaitReason::kSelect));
    // Replaced before it fires (on a loaded machine it may have fired: then
    // the reader has timed out already and the check below is vacuous).
    bool in_time = absl::Now() - start < absl::Milliseconds(40);
    EXPECT_TRUE(a.set_read_deadline(start + absl::Milliseconds(300)).ok());
    wg.wait();
    EXPECT_EQ(got, kTimeout);
    if (in_time) {
      EXPECT_GE(took, absl::Milliseconds(290));
    }
  });
}

TEST_P(NetPipe, ClearedDeadlineLetsBlockedReadWait) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    EXPECT_TRUE(a.set_read_deadline(absl::Now() + absl::Milliseconds(100)).ok());
    Parked reader;
    absl::StatusOr<std::string> got;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      reader.mark();
      got = read_exactly(a, 3);
      wg.done();
    });
    EXPECT_TRUE(reader.wait(WaitReason::kSelect));
    EXPECT_TRUE(a.set_read_deadline(absl::InfiniteFuture()).ok());
    gort::sleep(absl::Milliseconds(200));  // past the old deadline
    EXPECT_TRUE(write_str(p.second, "abc").ok());
    wg.wait();
    EXPECT_EQ(got.value_or("<error>"), "abc");
  });
}

TEST_P(NetPipe, ChronoDeadlines) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    char buf[4];
    EXPECT_TRUE(a.set_read_deadline(std::chrono::steady_clock::now() - std::chrono::seconds(1)).ok());
    EXPECT_EQ(a.read(absl::MakeSpan(buf)).status(), kTimeout);
    EXPECT_TRUE(a.set_write_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(20)).ok());
    EXPECT_EQ(a.write(absl::MakeConstSpan("x", 1)).status(), kTimeout);
    EXPECT_TRUE(a.set_deadline(std::chrono::steady_clock::now() + std::chrono::hours(1)).ok());
    auto sent = write_async(p.second, "ok");
    EXPECT_EQ(read_exactly(a, 2).value_or("<error>"), "ok");
    EXPECT_TRUE(sent_ok(sent));
  });
}

// An end destroyed with a deadline pending, or just fired: its timer goes
// with it (run_checked sees no goroutine left behind).
TEST_P(NetPipe, DestroyedWithDeadlines) {
  run_watched([] {
    {
      auto p = gort::net::pipe();
      EXPECT_TRUE(p.first.set_deadline(absl::Now() + absl::Hours(1)).ok());
      EXPECT_TRUE(p.second.set_read_deadline(absl::Now() + absl::Milliseconds(1)).ok());
      gort::sleep(absl::Milliseconds(20));
    }
    auto p = gort::net::pipe();
    Conn a = std::move(p.first);
    EXPECT_TRUE(a.set_deadline(absl::Now() + absl::Hours(1)).ok());
    a = std::move(p.second);  // releases the first end, deadline and all
    EXPECT_EQ(a.network(), "pipe");
    char buf[1];
    EXPECT_EQ(a.read(absl::MakeSpan(buf)).value_or(99), 0u);  // its peer is gone: end of stream
  });
}

TEST_P(NetPipe, WaitReadableConsumesNothing) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    Parked reader;
    auto waited = gort::make_chan<absl::Status>(1);
    gort::go([&a, &reader, waited] {
      reader.mark();
      waited.send(a.wait_readable());
    });
    EXPECT_TRUE(reader.wait(WaitReason::kSelect));
    Parked writer;
    absl::StatusOr<size_t> wrote;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      writer.mark();
      wrote = p.second.write(absl::MakeConstSpan("wake", 4));
      wg.done();
    });
    // wait_readable returns once a write is there, and takes none of it:
    // the writer still waits for a read, and the read gets every byte.
    EXPECT_TRUE(waited.recv().value_or(absl::UnknownError("")).ok());
    EXPECT_TRUE(writer.wait(WaitReason::kSelect));
    EXPECT_EQ(read_exactly(a, 4).value_or("<error>"), "wake");
    wg.wait();
    EXPECT_EQ(wrote.value_or(0), 4u);
    // End of stream counts as readable.
    EXPECT_TRUE(p.second.close().ok());
    EXPECT_TRUE(a.wait_readable().ok());
  });
}

TEST_P(NetPipe, ZeroLengthReadsAndWrites) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    // An empty buffer: 0 at once, with no writer in sight.
    EXPECT_EQ(a.read(absl::Span<char>()).value_or(99), 0u);
    // A 0-byte write waits for a read, as Go's; the read lets it complete
    // and goes on to the next write's bytes (0 would mean end of stream).
    Parked writer;
    std::atomic<bool> first_done{false};
    absl::StatusOr<size_t> first, second;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      writer.mark();
      first = p.second.write(absl::Span<const char>());
      first_done.store(true);
      second = p.second.write(absl::MakeConstSpan("x", 1));
      wg.done();
    });
    EXPECT_TRUE(writer.wait(WaitReason::kSelect));
    EXPECT_FALSE(first_done.load());
    char buf[8];
    auto n = a.read(absl::MakeSpan(buf));
    EXPECT_EQ(n.value_or(0), 1u);
    EXPECT_EQ(buf[0], 'x');
    wg.wait();
    EXPECT_EQ(first.value_or(99), 0u);
    EXPECT_EQ(second.value_or(0), 1u);
  });
}

TEST_P(NetPipe, UnsupportedCallsAndQueries) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn& a = p.first;
    EXPECT_TRUE(a.valid());
    EXPECT_TRUE(static_cast<bool>(a));
    EXPECT_EQ(a.local_addr(), "pipe");
    EXPECT_EQ(a.remote_addr(), "pipe");
    EXPECT_EQ(a.network(), "pipe");
    EXPECT_EQ(a.native_handle(), -1);
    EXPECT_EQ(a.close_write(), absl::UnimplementedError("close_write pipe: unsupported operation"));
    EXPECT_EQ(a.close_read(), absl::UnimplementedError("close_read pipe: unsupported operation"));
    for (const absl::Status& s : {a.set_no_delay(true), a.set_linger(0), a.set_keep_alive(true),
                                  a.set_keep_alive_period(absl::Seconds(5)), a.set_read_buffer(4096),
                                  a.set_write_buffer(4096)}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    }
    bool called = false;
    gort::RawConn rc = a.syscall_conn();
    EXPECT_EQ(rc.control([&](int) { called = true; }),
              absl::UnimplementedError("raw-control pipe: unsupported operation"));
    EXPECT_EQ(rc.read([&](int) { return called = true; }).code(), absl::StatusCode::kUnimplemented);
    EXPECT_EQ(rc.write([&](int) { return called = true; }).code(), absl::StatusCode::kUnimplemented);
    EXPECT_FALSE(called);
    // None of them touched the connection.
    auto sent = write_async(p.second, "still");
    EXPECT_EQ(read_exactly(a, 5).value_or("<error>"), "still");
    EXPECT_TRUE(sent_ok(sent));
  });
}

TEST_P(NetPipe, MovedFromEnd) {
  run_watched([] {
    auto p = gort::net::pipe();
    Conn moved_to = std::move(p.first);
    Conn& a = p.first;
    char buf[4];
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(a.set_deadline(absl::Now()), kInvalid);
    EXPECT_EQ(a.set_read_deadline(std::chrono::steady_clock::now()), kInvalid);
    EXPECT_EQ(a.set_write_deadline(absl::InfiniteFuture()), kInvalid);
    EXPECT_EQ(a.read(absl::MakeSpan(buf)).status(), kInvalid);
    EXPECT_EQ(a.write(absl::MakeConstSpan("x", 1)).status(), kInvalid);
    EXPECT_EQ(a.wait_readable(), kInvalid);
    EXPECT_EQ(a.close(), kInvalid);
    EXPECT_EQ(a.close_write(), kInvalid);
    EXPECT_EQ(a.syscall_conn().control([](int) {}), kInvalid);
    EXPECT_EQ(a.network(), "");
    EXPECT_EQ(a.local_addr(), "");
    EXPECT_EQ(a.native_handle(), -1);
    // The end moved with the handle; self-move keeps it.
    Conn& self = moved_to;
    moved_to = std::move(self);
    EXPECT_TRUE(moved_to.valid());
    auto sent = write_async(moved_to, "ping");
    EXPECT_EQ(read_exactly(p.second, 4).value_or("<error>"), "ping");
    EXPECT_TRUE(sent_ok(sent));
    // Assigning revives the moved-from handle.
    a = std::move(moved_to);
    EXPECT_TRUE(a.valid());
    EXPECT_EQ(a.network(), "pipe");
  });
}

// Many goroutines on several pipes at once: echo pairs with random message
// and read sizes, and one pipe with several writers and readers, its read
// deadline renewed all the while, read to end of stream.
TEST_P(NetPipe, Stress) {
  run_watched([] {
    const int kPairs = 8;
    const int kMessages = gort::test::stress_size(200);
    gort::WaitGroup wg;
    std::vector<std::pair<Conn, Conn>> pipes;
    for (int i = 0; i < kPairs; i++) pipes.push_back(gort::net::pipe());
    for (int i = 0; i < kPairs; i++) {
      wg.add(2);
      gort::go([&, i] {
        echo(pipes[i].second, 7 + static_cast<size_t>(i) * 37);
        wg.done();
      });
      gort::go([&, i] {
        // The messages, written by a goroutine of their own (the echo of
        // one waits for a read while its write goes on) and made again
        // from the same seed to check what comes back.
        const uint64_t seed = 0x1234567ull + static_cast<uint64_t>(i);
        auto message = [](uint64_t* x) {
          std::string msg(1 + next_random(x) % 2000, '\0');
          for (char& ch : msg) ch = static_cast<char>(next_random(x));
          return msg;
        };
        Conn& c = pipes[i].first;
        auto written = gort::make_chan<bool>(1);
        gort::go([&c, &message, seed, kMessages, written] {
          uint64_t x = seed;
          bool ok = true;
          for (int m = 0; m < kMessages && ok; m++) ok = write_str(c, message(&x)).ok();
          written.send(ok);
        });
        uint64_t x = seed;
        for (int m = 0; m < kMessages; m++) {
          std::string msg = message(&x);
          std::string back = read_exactly(c, msg.size()).value_or("<error>");
          EXPECT_EQ(fnv(back.data(), back.size()), fnv(msg.data(), msg.size())) << "pair " << i << " message " << m;
          if (back.size() != msg.size()) break;
        }
        // Every echo read back, so every write has been taken whole: the
        // close cuts none short (and after a failure it frees the writer).
        EXPECT_TRUE(c.close().ok());  // the echo reads end of stream
        EXPECT_TRUE(written.recv().value_or(false));
        wg.done();
      });
    }

    auto shared = gort::net::pipe();
    constexpr int kWriters = 3;
    constexpr int kReaders = 2;
    const size_t kPerWriter = static_cast<size_t>(gort::test::stress_size(200000));
    std::atomic<size_t> read_total{0};
    std::atomic<bool> reading{true};
    gort::WaitGroup writers;
    for (int w = 0; w < kWriters; w++) {
      writers.add(1);
      gort::go([&, w] {
        uint64_t x = 0xabcdefull + static_cast<uint64_t>(w);
        std::vector<char> buf(4096, static_cast<char>('0' + w));
        for (size_t left = kPerWriter; left > 0;) {
          size_t n = std::min<size_t>(left, 1 + next_random(&x) % buf.size());
          auto r = shared.first.write(absl::MakeConstSpan(buf.data(), n));
          EXPECT_EQ(r.value_or(0), n);
          if (!r.ok()) break;
          left -= n;
        }
        writers.done();
      });
    }
    gort::WaitGroup readers;
    for (int r = 0; r < kReaders; r++) {
      readers.add(1);
      gort::go([&, r] {
        std::vector<char> buf(100 + static_cast<size_t>(r) * 900);
        for (;;) {
          auto n = shared.second.read(absl::MakeSpan(buf));
          EXPECT_TRUE(n.ok()) << n.status();
          if (!n.ok() || *n == 0) break;
          read_total.fetch_add(*n);
        }
        readers.done();
      });
    }
    readers.add(1);
    gort::go([&] {  // deadlines that never fire, renewed under the readers
      for (int i = 0; reading.load(); i++) {
        absl::Time t = i % 3 == 2 ? absl::InfiniteFuture() : absl::Now() + absl::Hours(1);
        absl::Status s = shared.second.set_read_deadline(t);
        EXPECT_TRUE(s.ok() || !reading.load()) << s;  // kClosedPipe once the writers' end closes
        gort::sleep(absl::Microseconds(200));
      }
      readers.done();
    });
    writers.wait();
    reading.store(false);
    EXPECT_TRUE(shared.first.close().ok());
    readers.wait();
    EXPECT_EQ(read_total.load(), kWriters * kPerWriter);
    wg.wait();
  });
}

}  // namespace

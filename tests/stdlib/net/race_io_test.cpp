// tests/stdlib/net/race_io_test.cpp — the race detector and I/O (docs/race.md,
// I/O): the bytes a write sends and a read fills are the calling
// goroutine's accesses, as Go's raceReadRange/raceWriteRange make them;
// every write happens before every later read of any descriptor (Go's
// ioSync); and a channel freed by its last holder is ordered after every
// holder. Harness: tests/race_testing.hpp.
#include <atomic>
#include <string>
#include <utility>

#include "gort/gort.hpp"
#include "gort/net.hpp"
#include "gort/os.hpp"
#include "tests/race_testing.hpp"

namespace gort {
namespace {

class RaceIo : public test::RaceTest {};

std::pair<os::File, os::File> must_pipe() {
  auto p = os::pipe();
  if (!p.ok()) {
    std::fprintf(stderr, "pipe: %s\n", std::string(p.status().message()).c_str());
    std::exit(3);
  }
  return std::move(*p);
}

char g_buf[64];

__attribute__((noinline)) void write_buffer(os::File& f) {
  if (!f.write(absl::MakeConstSpan(g_buf, sizeof g_buf)).ok()) std::exit(3);
}
__attribute__((noinline)) void scribble_buffer() { g_buf[10] = 'y'; }

// The bytes a write sends are read by the writer: changing them meanwhile,
// unsynchronised, is a race (Go's raceReadRange in syscall.Write).
TEST_P(RaceIo, BufferChangedDuringAWriteIsReported) {
  auto body = [] {
    auto [r, w] = must_pipe();
    auto hold = make_chan<int>();
    auto written = make_chan<int>(1);
    go([&w, hold, written] {
      write_buffer(w);
      // Nothing the main goroutine does after this send is ordered with
      // the write above: it only receives the value once it has scribbled.
      written.send(1);
      (void)hold.recv();
    });
    for (int i = 0; i < 50; i++) yield();  // usually the write comes first
    scribble_buffer();
    (void)written.recv();
    char sink[64];
    if (!r.read(absl::MakeSpan(sink)).ok()) std::exit(3);
    hold.close();
  };
  // write_buffer makes no access of its own, so TSan records no frame for
  // it: the write's side is named by the library function that read.
  EXPECT_RACE(procs(), body, "NetFD::write|scribble_buffer", "scribble_buffer|NetFD::write");
}

char g_in[64];

__attribute__((noinline)) void read_buffer(os::File& f) {
  if (!f.read(absl::MakeSpan(g_in)).ok()) std::exit(3);
}
__attribute__((noinline)) char peek_buffer() { return g_in[0]; }

// The bytes a read fills are written by the reader (Go's raceWriteRange in
// syscall.Read): looking at them from elsewhere, unsynchronised, is a race.
std::atomic<bool> g_read_done{false};

TEST_P(RaceIo, BufferLookedAtDuringAReadIsReported) {
  auto body = [] {
    auto [r, w] = must_pipe();
    auto hold = make_chan<int>();
    go([&r, hold] {
      read_buffer(r);
      // Relaxed: tells main the read is over without ordering anything
      // (TSan sees no edge in a relaxed store and load).
      g_read_done.store(true, std::memory_order_relaxed);
      (void)hold.recv();
    });
    // The write comes first: everything before it happens before the read,
    // but the peek after it is ordered with nothing the reader does. Wait
    // for the read (when main was preempted at `go`, the reader parked on
    // the empty pipe, and only the poller brings it back).
    if (!w.write(absl::MakeConstSpan("z", 1)).ok()) std::exit(3);
    while (!g_read_done.load(std::memory_order_relaxed)) yield();
    test::g_race_sink = static_cast<size_t>(peek_buffer());
    hold.close();
  };
  EXPECT_RACE(procs(), body, "NetFD::read|peek_buffer", "peek_buffer|NetFD::read");
}

int g_payload = 0;
__attribute__((noinline)) void set_payload() { g_payload = 42; }
__attribute__((noinline)) int get_payload() { return g_payload; }

// What a goroutine did before writing happens before what another does
// after reading what it wrote, although the two ends are two descriptors
// (Go's ioSync): over a pipe and over TCP.
TEST_P(RaceIo, WriteHappensBeforeThePeersRead) {
  auto body = [] {
    auto [r, w] = must_pipe();
    go([&w] {
      set_payload();
      if (!w.write(absl::MakeConstSpan("p", 1)).ok()) std::exit(3);
    });
    char c;
    if (!r.read(absl::MakeSpan(&c, 1)).ok()) std::exit(3);
    if (get_payload() != 42) std::exit(4);

    auto ln = net::listen("tcp", "127.0.0.1:0");
    if (!ln.ok()) std::exit(3);
    auto done = make_chan<int>();
    go([addr = ln->addr(), done] {
      auto c = net::dial("tcp", addr);
      if (!c.ok()) std::exit(3);
      set_payload();
      if (!c->write(absl::MakeConstSpan("q", 1)).ok()) std::exit(3);
      (void)done.recv();  // the connection stays open until the peer has read
    });
    auto s = ln->accept();
    if (!s.ok() || !s->read(absl::MakeSpan(&c, 1)).ok()) std::exit(3);
    if (get_payload() != 42) std::exit(4);
    done.close();
  };
  EXPECT_NO_RACE(procs(), body);
}

// The last holder of a channel destroys the values still buffered in it,
// which their sender built: every holder's drop happens before that.
TEST_P(RaceIo, ChannelFreedByItsLastHolderIsQuiet) {
  auto body = [] {
    for (int round = 0; round < 3; round++) {
      auto ch = make_chan<std::string>(4);
      std::atomic<bool> sent{false};  // relaxed: no edge for the detector
      go([ch, &sent] {
        ch.send(std::string(200, 'x'));
        sent.store(true, std::memory_order_relaxed);
      });
      while (!sent.load(std::memory_order_relaxed)) yield();
      sleep(absl::Milliseconds(10));  // the sender's handle is gone, usually
      ch = Chan<std::string>();       // the last handle: destroys the string
    }
  };
  EXPECT_NO_RACE(procs(), body);
}

GORT_INSTANTIATE_RACE(RaceIo);

}  // namespace
}  // namespace gort

// stdlib/net/pipe.hpp — PipeEnd: one end of net::pipe() (Go's net.Pipe,
// src/net/pipe.go), made of channels, select and timers and nothing else.
//
// Why only those: a synctest bubble (docs/testing.md) counts a goroutine
// blocked on its channels or a select on them as durably blocked, and runs
// timers on its fake clock. A pipe that parked on its own (internal::park,
// a descriptor on the poller) would keep a bubble from ever going idle;
// this one reads its clock with gort::now() (pipe_now() in pipe.cpp). The one Mutex
// per deadline is held for a moment, never across a wait for the peer.
//
// The channels of one direction (the peer's writes, this end's reads):
//
//   writer (peer)                          reader (this end)
//     take the write turn                    take the read turn
//     select: send {p, n} on data,           select: receive {p, n} from data,
//             or done / deadline                     or done / deadline
//     receive k from took (never fails)      copy k = min(n, len) bytes from p
//     p += k, n -= k; again while n > 0      send k on took (never parks)
//
// Invariants:
//   - At most one chunk of a direction is in flight: only the holder of
//     the write turn offers one, and it offers the next only after it has
//     received the count of the last. So `took` (capacity 1) is empty
//     whenever a reader sends on it: the reader never parks there.
//   - A reader that received a chunk always answers on `took`, and the
//     writer that sent it always waits for that answer with a plain
//     receive, which neither close nor a deadline cuts short: the
//     writer's buffer stays valid (and the writer blocked) for as long as
//     a reader may copy from it. The answer may be 0: wait_readable takes
//     nothing (the writer offers the same bytes again), and a 0-byte
//     write is done once answered.
//   - The turns are channels of capacity 1 (full: taken), not Mutexes, so
//     that a goroutine queued behind another read or write waits in the
//     same select as the call itself: close and the deadline wake it too,
//     and in a bubble it is durably blocked, as a Mutex waiter is not.
//   - `done` of an end is closed exactly once, by its close(); the peer
//     holds it as its `remote_done`. Data channels are never closed.
//   - Each end holds its own copies of the channels it shares with the
//     peer, so either end may be freed first.
#pragma once

#include "stdlib/net/room.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gort/chan.hpp"
#include "gort/sync.hpp"
#include "gort/time.hpp"

namespace gort::internal {

using Signal = Chan<std::monostate>;  // closed, never sent on

// One direction's deadline (Go's pipeDeadline): `cancel` is closed once
// the deadline has passed, so every call of that direction can select on
// it. set() may park while a firing timer's goroutine closes `cancel`.
class PipeDeadline {
 public:
  PipeDeadline();
  PipeDeadline(const PipeDeadline&) = delete;
  PipeDeadline& operator=(const PipeDeadline&) = delete;

  // `t` as in Conn::set_deadline. A call already blocked on the channel
  // wait() gave it sees the new deadline: the timer is re-armed to close
  // the same channel, which is replaced only once closed (and then that
  // call is returning with the timeout anyway).
  void set(absl::Time t);
  // The channel to select on (a copy).
  Signal wait();
  // Stops a pending timer, for good (the end is going away). May park as
  // set() does.
  void stop();

 private:
  Mutex mu_;
  Timer timer_ ABSL_GUARDED_BY(mu_);
  bool armed_ ABSL_GUARDED_BY(mu_) = false;  // timer_ may still fire
  Signal cancel_ ABSL_GUARDED_BY(mu_);
};

// What a write hands to a read: the writer's bytes, in place.
struct PipeChunk {
  const char* p;
  size_t n;
};

// Why a pipe call stops early. Also the index of each case in the selects
// of pipe.cpp, which put the operation itself first (kNone: it happened).
enum class PipeStop : uint8_t { kNone, kClosed, kPeerClosed, kTimeout };

class PipeEnd {
 public:
  // Two connected ends, for net::pipe().
  static std::pair<PipeEnd*, PipeEnd*> make_pair();
  // The owner's (net::Conn's) release: closes the end if it is open, stops
  // its deadline timers, frees it. No call may be in progress on it.
  static void release(PipeEnd* p);

  // As net::Conn's (gort/net.hpp, pipe()).
  absl::StatusOr<size_t> read(absl::Span<char> buf);
  absl::Status wait_readable();
  absl::StatusOr<size_t> write(absl::Span<const char> buf);
  // mode 'r', 'w' or 'r' + 'w', as NetFD's.
  absl::Status set_deadline(absl::Time t, int mode);
  absl::Status close();

  // What every call a pipe cannot serve returns:
  // UnimplementedError("<call> pipe: unsupported operation").
  static absl::Status unsupported(std::string_view call);

  PipeEnd(const PipeEnd&) = delete;
  PipeEnd& operator=(const PipeEnd&) = delete;

 private:
  PipeEnd(Chan<PipeChunk> rd_data, Chan<size_t> rd_took, Chan<PipeChunk> wr_data, Chan<size_t> wr_took,
          Signal local_done, Signal remote_done);
  ~PipeEnd() = default;

  // What has already stopped a call, checked in Go's order (this end
  // closed, the peer closed, the deadline passed), without waiting: a
  // select would pick at random among ready cases.
  PipeStop stopped(const Signal& deadline) const;
  // Waits for the read or write turn (then kNone) or for a stop.
  PipeStop take_turn(const Chan<std::monostate>& turn, const Signal& deadline);
  static void give_turn(const Chan<std::monostate>& turn);
  // With the read turn: waits for the peer's next chunk that has bytes in
  // it (a 0-byte write is answered, so that it completes, and skipped).
  PipeStop next_chunk(const Signal& deadline, PipeChunk* c);

  Chan<PipeChunk> rd_data_;           // the peer's writes arrive here
  Chan<size_t> rd_took_;              // how much of each this end's reads took
  Chan<PipeChunk> wr_data_;           // this end's writes go here
  Chan<size_t> wr_took_;              // how much of each the peer's reads took
  Chan<std::monostate> rd_turn_;      // capacity 1; full while a read is served
  Chan<std::monostate> wr_turn_;      // capacity 1; full while a write is served
  Signal local_done_;                 // closed by close()
  Signal remote_done_;                // the peer's local_done_
  std::atomic<bool> closed_{false};   // set by close() before local_done_ closes
  PipeDeadline rd_deadline_;
  PipeDeadline wr_deadline_;
};

}  // namespace gort::internal

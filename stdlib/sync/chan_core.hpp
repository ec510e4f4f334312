// stdlib/sync/chan_core.hpp — the channel's innards, shared by chan.cpp and
// select.cpp (Go's hchan and sudog).
//
// Unbuffered channels are Go's hchan with cap 0: everything under
// ChanCore::lock. Buffered channels keep their values in a lock-free ring
// and use the lock only to park and wake; their protocol is written down at
// the top of stdlib/sync/chan_ring.hpp.
//
// Invariants (Go's chan.go), under ChanCore::lock:
//   - unbuffered: at least one of sendq and recvq is empty, except for a
//     single goroutine blocked in select on both sending and receiving on it;
//   - buffered: recv_waiting == !recvq.empty() and send_waiting ==
//     !sendq.empty() whenever the lock is free (chan_ring.hpp);
//   - once closed, sendq and recvq are empty and stay so.
// Blocked senders and receivers wait in Sudogs (gmp/sudog.hpp) on sendq and
// recvq.
#pragma once

#include "stdlib/sync/room.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gmp/g.hpp"
#include "gmp/lifetime.hpp"
#include "gmp/lock.hpp"
#include "gmp/os/note.hpp"
#include "gmp/sudog.hpp"
#include "gort/detail/chan_ops.hpp"
#include "gort/detail/race.hpp"

#include <cstring>

namespace gort::internal {

constexpr size_t kCacheLine = 64;

// Four cache lines, then the ring. Line 0 is read by every buffered
// operation and written only when a queue goes from empty to not or back;
// line 1 is what the lock protects; head and tail each have a line so that
// producers and consumers do not bounce one line between them.
struct ChanCore {
  // ---- line 0: constant after chan_make, plus the waiting flags ----
  std::atomic<int64_t> refs{1};
  size_t cap = 0;
  const ElemType* et = nullptr;
  char* buf = nullptr;
  uint64_t mark_bit = 0;   // buffered: the closed bit of tail; also lap size / 2
  // The synctest bubble it was made in (gmp/bubble.hpp), or 0: only that
  // bubble's goroutines may use it, and their waits on it are durable.
  uint64_t bubble_id = 0;
  uint32_t slot_size = 0;  // buffered: stamp + element, padded
  uint32_t elem_off = 0;   // buffered: the element's offset in its slot
  // Buffered only: the queues are not empty (see chan_ring.hpp).
  std::atomic<uint32_t> recv_waiting{0};
  std::atomic<uint32_t> send_waiting{0};

  // ---- line 1: under lock ----
  alignas(kCacheLine) WordLock<LockRank::kChan> lock;
  bool closed = false;
  // Constant once shared: a Timer's or Ticker's channel, whose len and cap
  // read 0 as Go 1.23's do (docs/time-and-context.md).
  bool timer = false;
  WaitQ recvq;
  WaitQ sendq;
  // Constant, read only to free the channel: the length of the mapping
  // the core starts (a large ring, chan.cpp), or 0 for operator new.
  size_t mapped_bytes = 0;

  // ---- buffered: the ring's positions (chan_ring.hpp) ----
  alignas(kCacheLine) std::atomic<uint64_t> head{0};
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};

  char* slot(uint64_t i) { return buf + i * slot_size; }
};

// Unbuffered: receives from sender s (already dequeued) into out. Lock held.
void recv_from_sender(ChanCore* c, Sudog* s, void* out);

// Panics `<op> moved-from gort::Chan`, op being "send on", "receive from",
// ...: an operation reached with moved_from_chan() (chan_ops.hpp). Out of
// line and cold: the operations branch here only after their is_chan test
// has failed and the handle is not nil.
[[noreturn]] void panic_moved_from(const char* op);

// Panics `<op> synctest channel from outside bubble` (Go's text) unless the
// caller belongs to c's bubble; for a channel made in a bubble only
// (c->bubble_id != 0), so out of line and cold.
void check_chan_bubble(const ChanCore* c, const char* op);

// The wait reason of a send or receive parked on c: durable on a bubble's.
inline WaitReason chan_wait_reason(const ChanCore* c, bool send) {
  if (c->bubble_id != 0) [[unlikely]] return send ? WaitReason::kSynctestChanSend : WaitReason::kSynctestChanRecv;
  return send ? WaitReason::kChanSend : WaitReason::kChanRecv;
}

// Moves an element (dst is uninitialised). Trivial types are copied here,
// with a fixed-size copy for the common sizes, instead of through the
// type's function pointer.
inline void elem_move(const ElemType* et, void* dst, void* src) {
  if (et->trivial) {
    switch (et->size) {
      case 0: return;
      case 1: std::memcpy(dst, src, 1); return;
      case 2: std::memcpy(dst, src, 2); return;
      case 4: std::memcpy(dst, src, 4); return;
      case 8: std::memcpy(dst, src, 8); return;
      case 16: std::memcpy(dst, src, 16); return;
      default: std::memcpy(dst, src, et->size); return;
    }
  }
  et->move_to(dst, src);
}

inline void elem_destroy(const ElemType* et, void* p) {
  if (!et->trivial) et->destroy(p);
}

// The race detector's view of a channel (docs/race.md). Two sync addresses:
// every send releases `sent` as it starts and every receive acquires it as
// it completes (a send happens before the receive that takes its value; a
// close before a receive that sees it); every receive releases `received`
// as it starts and every send acquires it as it completes (the k-th receive
// before the (k+C)-th send completes; C = 0 is the unbuffered rendezvous).
// Merging makes buffered channels order a little more than Go's per-slot
// edges: a receive that had begun before a send completed is ordered
// before it. Who copies the element's bytes (the sender, the receiver, or a
// third goroutine settling the ring) is not an access of anyone's: the
// channel operations run under RaceIgnore.
inline const void* race_sent(const ChanCore* c) { return c; }
inline const void* race_received(const ChanCore* c) { return reinterpret_cast<const char*>(c) + 1; }

// What a send (or receive) releases as it starts and acquires as it
// completes; select does the same per case.
inline void race_chan_start(const ChanCore* c, bool send) { race_release(send ? race_sent(c) : race_received(c)); }
inline void race_chan_done(const ChanCore* c, bool send) { race_acquire(send ? race_received(c) : race_sent(c)); }

// A send's or receive's edges, for its whole length.
class RaceChanOp {
 public:
  RaceChanOp(const ChanCore* c, bool send) : c_(c), send_(send) { race_chan_start(c, send); }
  ~RaceChanOp() { race_chan_done(c_, send_); }
  RaceChanOp(const RaceChanOp&) = delete;
  RaceChanOp& operator=(const RaceChanOp&) = delete;

 private:
  const ChanCore* c_;
  bool send_;
  RaceIgnore ignore_;
};

}  // namespace gort::internal

// gort/detail/chan_ops.hpp — the type-erased channel core behind Chan<T>.
//
// Not part of the public API: included by <gort/chan.hpp>. The channel
// algorithm (Go's hchan) lives in the library, not in templates: its locks
// must never be held by code that could be asynchronously preempted, and
// library code never is (see docs/preemption.md). Chan<T> supplies the
// element's size and how to move and destroy it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gort/detail/api.hpp"

namespace gort::internal {

struct ChanCore;

struct ElemType {
  size_t size;
  size_t align;
  // Move-constructs *dst (uninitialised storage) from *src; must not throw.
  void (*move_to)(void* dst, void* src);
  void (*destroy)(void* p);
  // Trivially copyable and destructible: the channel copies the bytes
  // itself and skips destroy (no indirect calls on the hot path).
  bool trivial;
};

// What a moved-from handle holds: not a channel, and not the nil channel
// (nullptr), which is Go's and blocks forever. Every operation on it
// panics, `<op> on moved-from gort::Chan` (docs/standard-cpp.md). Both
// values sit below any real ChanCore's address, so one comparison
// (is_chan) tells a channel from either: the operations below make it in
// place of the nil check they need anyway, and branch to the rare cases.
inline ChanCore* moved_from_chan() noexcept { return reinterpret_cast<ChanCore*>(uintptr_t{1}); }
inline bool is_chan(const ChanCore* c) noexcept { return reinterpret_cast<uintptr_t>(c) > 1; }

GORT_API ChanCore* chan_make(const ElemType* type, size_t cap);
GORT_API void chan_retain(ChanCore* c) noexcept;
GORT_API void chan_release(ChanCore* c) noexcept;

// chan_retain and chan_release need a channel (is_chan). All of these
// treat c == nullptr as the nil channel and panic on moved_from_chan().
// Blocks until *elem is handed over (it is moved from). Panics on a closed
// channel; blocks forever on nil.
GORT_API void chan_send(ChanCore* c, void* elem);
// Blocks until a value is moved into *out (uninitialised storage; returns
// true) or the channel is closed and drained (returns false, *out untouched).
GORT_API bool chan_recv(ChanCore* c, void* out);
GORT_API void chan_close(ChanCore* c);
GORT_API size_t chan_len(const ChanCore* c);
GORT_API size_t chan_cap(const ChanCore* c);

struct SelectCase {
  ChanCore* c;       // null: a nil channel, never ready; moved_from_chan(): panics
  void* elem;        // send: the value to move from; recv: storage to move into
  bool is_send;
  bool received;     // recv result: true if a value was stored in *elem
};

// Go's selectgo over n cases. Runs exactly one ready case, chosen uniformly
// at random among the ready ones, and returns its index; with block == false
// returns -1 if none is ready. A select with no non-nil case and block ==
// true blocks forever.
GORT_API int selectgo(SelectCase* cases, int n, bool block);

}  // namespace gort::internal

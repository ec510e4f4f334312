// gmp/m_traceback.hpp — a request for an M's running goroutine's registers
// (M::tb), owned by the diagnostics (gmp/diag/unwind.cpp); the core only
// embeds it in the M.
//
// One asker at a time (under symbolizer_mutex) fills in the fields and
// sends the M the runtime's signal; the M's handler records the goroutine
// it interrupted, copies its stack, and with `freeze` stays in the handler
// for good (a dying process stops its other threads so that the stacks it
// prints hold still). States:
//
//   kIdle   no request; the asker may fill one in.
//   kAsked  filled in and signalled; the handler may take it.
//   kBusy   the handler is answering it, writing into the asker's buffer.
//   kDone   answered; the asker reads the answer and lets it go.
//
// A freeze that finds the M just landed from a switch, before the context
// of the goroutine it left is stored, declines (kBusy -> kAsked) and is
// signalled again (freeze_answered). An asker that gives up takes back a
// request the handler has not taken; one the handler took, it waits for,
// so the handler never writes into a buffer its asker has let go of.
//
// Legal transitions: kTracebackTransitions; unwind.cpp checks every one.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gmp/transition.hpp"

namespace gort::internal {

struct G;

enum class TracebackState : uint32_t { kIdle, kAsked, kBusy, kDone };

inline constexpr const char* kTracebackStateNames[] = {"idle", "asked", "busy", "done"};

inline constexpr Transition<TracebackState> kTracebackTransitions[] = {
    {TracebackState::kIdle, TracebackState::kAsked},  // the asker
    {TracebackState::kAsked, TracebackState::kIdle},  // the asker gives up (CAS)
    {TracebackState::kAsked, TracebackState::kBusy},  // the handler takes it (CAS)
    {TracebackState::kBusy, TracebackState::kAsked},  // the handler declines a freeze
    {TracebackState::kBusy, TracebackState::kDone},   // the handler answered
    {TracebackState::kDone, TracebackState::kIdle},   // the asker read the answer
};

inline constexpr TransitionTable<TracebackState> kTracebackTable{kTracebackTransitions, kTracebackStateNames};

struct TracebackRequest {
  std::atomic<TracebackState> state{TracebackState::kIdle};
  bool freeze = false;
  char* buf = nullptr;  // where to copy the stack (null: no copy)
  size_t cap = 0;
  // The answer: the goroutine the M runs (null if the M was elsewhere: on
  // g0, idle, in the runtime's switch), its registers in DWARF order
  // (unwind.hpp), and the copied bytes [copy_lo, copy_lo+copied). The
  // registers are the interrupted ones, or with g_after_call a caller's
  // state after a call (a saved context): the M was caught inside a switch
  // into g, or, for a freeze only, between making g its current goroutine
  // and landing on g's stack (execute, or next_local's direct switch).
  G* g = nullptr;
  bool g_after_call = false;
  uint64_t regs[17] = {};
  uint32_t regs_known = 0;
  // For a freeze only: the goroutine a switch under way leaves (its status
  // already says parked or runnable, its saved context is not yet
  // written), and where it stands, in the same terms.
  G* leaving = nullptr;
  bool leaving_after_call = false;
  uint64_t leaving_regs[17] = {};
  uint32_t leaving_known = 0;
  uintptr_t copy_lo = 0;
  size_t copied = 0;
};

}  // namespace gort::internal

// gmp/m_preempt.hpp — an M's preemption state (M::preemption), owned by
// preempt/: the asynchronous preemption requests sysmon sends it and its
// slice timer (preempt/signal.cpp, docs/preemption.md). The core only
// embeds it in the M; entersyscall (gmp/syscall.cpp) is the M's side of
// two of its handshakes (`sending`/`queued`: a request queued before the M
// entered blocking() is taken before f runs; `slice_timer_deadline`: a
// timer still to fire is stopped), and nothing else in gmp/ touches it.
//
// The slice timer is made on first use, by whichever of sysmon and the M
// gets there first, and deleted when the run ends:
//
//   kNone    no timer: not made yet, or deleted.
//   kMaking  one party is making it (timer_create); the other gives up
//            this time.
//   kMade    made: slice_timer is valid until the run's end.
//
// Legal transitions: kSliceTimerTransitions; preempt/signal.cpp checks
// every one.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>

#include "gmp/transition.hpp"

namespace gort::internal {

enum class SliceTimerState : uint32_t { kNone, kMaking, kMade };

inline constexpr const char* kSliceTimerStateNames[] = {"none", "making", "made"};

inline constexpr Transition<SliceTimerState> kSliceTimerTransitions[] = {
    {SliceTimerState::kNone, SliceTimerState::kMaking},  // sysmon or the M, first use (CAS)
    {SliceTimerState::kMaking, SliceTimerState::kNone},  // timer_create failed
    {SliceTimerState::kMaking, SliceTimerState::kMade},  // made
    {SliceTimerState::kMade, SliceTimerState::kNone},    // delete_slice_timers (the run's end)
};

inline constexpr TransitionTable<SliceTimerState> kSliceTimerTable{kSliceTimerTransitions, kSliceTimerStateNames};

struct MPreempt {
  // Asynchronous preemption requests: sysmon bumps gen for each new
  // request (its retries resend the same number) and sends it with the
  // signal; the handler acts only on the current one.
  std::atomic<uint32_t> gen{0};
  // Signals sent to this M, and that count as the handler last saw it:
  // while they differ a signal is still pending (SIGURG is not queued),
  // and sending another would only cost a system call.
  std::atomic<uint32_t> sent{0};
  std::atomic<uint32_t> seen{0};
  // sysmon is between its look at in_blocking and the end of its
  // pthread_sigqueue (the other half of a Dekker with entersyscall's store
  // of in_blocking), and how many of its signals have been queued; the M
  // compares the latter with queued_flushed (its own) to know that a
  // signal may be pending that f's first system call would see as EINTR.
  std::atomic<bool> sending{false};
  std::atomic<uint32_t> queued{0};
  uint32_t queued_flushed = 0;
  // Inside a non-blocking system call the runtime makes for the goroutine
  // (gmp/nbsyscall.hpp): it looks at its preempt flag when the call
  // returns, so sysmon sets the flag without a signal and the handler does
  // not retry. Written by this thread only; sysmon's read is a hint (a
  // stale one costs a signal, or a look one tenth of a slice later).
  std::atomic<bool> in_nbsyscall{false};

  // The slice timer: a POSIX timer that delivers the preemption signal to
  // this thread when the slice of the G sysmon saw running ends, so the
  // preemption does not wait for sysmon to get a CPU. Armed for the run
  // with P schedtick slice_timer_tick, by this M when it resumes a G whose
  // last run was preempted; stopped by entersyscall.
  void* slice_timer = nullptr;
  std::atomic<SliceTimerState> slice_timer_state{SliceTimerState::kNone};
  std::atomic<uint32_t> slice_timer_tick{0};
  std::atomic<int64_t> slice_timer_deadline{0};
};

}  // namespace gort::internal

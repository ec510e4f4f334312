// netpoll/netpoll.hpp — parking goroutines on file descriptors.
//
// The contract every platform poller implements (Go's netpoll.go):
//   netpoll_init    create the poller and its wake-up fd; once per run.
//   netpoll_open    register a non-blocking fd, edge-triggered, once.
//   netpoll_close   deregister it.
//   netpoll         wait up to `timeout_ns` (< 0 forever, 0 don't) for
//                   events and return the goroutines they make runnable.
//   netpoll_break   make a blocked netpoll return now.
// This file adds the platform-neutral part: a poll descriptor per fd with
// a read and a write waiter slot and deadlines.
//
// Waiter slot (PollDesc::rg / wg) states:
//   | value    | meaning                                                |
//   |----------|--------------------------------------------------------|
//   | 0        | nothing happened, nobody waits                         |
//   | kReady   | readiness arrived; the next wait consumes it at once   |
//   | kWait    | a goroutine is about to park (not yet committed)       |
//   | G*       | that goroutine is parked waiting                       |
// The parking goroutine moves 0 -> kWait, then parks, and its park unlock
// function moves kWait -> G*; if readiness (or close, or a deadline) came
// in between, that CAS fails and the goroutine resumes at once. A notifier
// swaps in kReady (I/O) or 0 (close, deadline) and readies the G it took.
// The slot holds one goroutine per mode: the net layer serialises readers
// and writers (Go's fdMutex). A goroutine that finds the slot taken (two
// goroutines reading one pipe through the libc hooks), and every wait with
// a timeout of its own or on several descriptors, waits on the
// descriptor's list instead (poll_list.cpp), which every event wakes.
//
// Deadlines are runtime timers; a descriptor's `closing` flag and expired
// deadlines are checked before parking and after waking.
#pragma once

#include <atomic>
#include <cstdint>

#include "gmp/g.hpp"
#include "gmp/timer.hpp"

namespace gort::internal {

struct G;
struct PollDesc;
struct SchedHooks;

enum PollResult : int {
  kPollOk = 0,
  kPollErrClosing = 1,   // the descriptor is being closed
  kPollErrTimeout = 2,   // the deadline passed
};

// Registers fd (already O_NONBLOCK) with the poller. On failure returns
// null and sets errno.
PollDesc* poll_open(int fd);
// Marks pd closing and wakes its waiters (they get kPollErrClosing).
void poll_evict(PollDesc* pd);
// Deregisters and recycles pd. No goroutine may still use it. Returns true
// if the caller still owns the fd and closes it afterwards; false if the
// run it was opened in has ended, which closed the fd (poll_abandon_all).
bool poll_close(PollDesc* pd);
// At the end of a run, once its goroutines are gone: closes the fd of every
// descriptor still open, marks them closing for good and resets the count
// of waiters.
void poll_abandon_all();

// Before an I/O attempt in `mode` ('r' or 'w'): returns an error if the
// descriptor is closing or the deadline passed.
int poll_check(PollDesc* pd, int mode);
// Parks the calling goroutine until pd is ready for `mode`, its deadline
// passes or it is closed. From a plain thread, sleeps the thread.
//
// With `trusted` (mode 'r' only): on kPollOk, *trusted says whether the
// readiness is known to be there now, so that the caller need not ask the
// kernel. It is when the goroutine parked and was woken by a harvest that
// began after it parked: the kernel reported data, an end of stream or an
// error at a time when this reader was no longer reading, and nobody else
// reads the descriptor (the caller's promise). Readiness that was already
// there when the wait began, or that a hint left (poll_wake_reader), may
// be stale: an event harvested before the caller's last read, for data
// that read took. So may an event from a poll that was already blocked in
// the kernel when the goroutine parked (an idle M's): it may have been
// collected before that read. Those answer false.
int poll_wait(PollDesc* pd, int mode, bool* trusted = nullptr);
// Drops a readiness notification for `mode` that has not been consumed, so
// that one present afterwards reports an event that arrived after this
// call. Call it right before an I/O attempt whose result will be trusted
// as the descriptor's state (see NetFD::read's drained stream sockets).
void poll_reset_ready(PollDesc* pd, int mode);
// Whether an event ever reported a hang-up, a peer shutdown, an error or
// urgent data (TCP's or AF_UNIX's MSG_OOB). Such a state is not consumed by
// reading the data before it and brings no new event, and a read stops
// short at an urgent mark with the rest of the stream still queued: after
// a short read, the next read must be tried, not waited for. An event
// harvested after the last poll_reset_ready leaves readiness behind as
// well, so a false answer is safe for the read it follows.
bool poll_exceptional_seen(PollDesc* pd);
// Sets the deadline for mode 'r', 'w' or 'r'+'w' as a nanotime; 0 clears
// it; a time in the past expires it at once (waking a waiter). `now`: the
// caller's current nanotime, or 0 to read the clock here (only a deadline
// in the future needs it).
void poll_set_deadline(PollDesc* pd, int64_t deadline, int mode, int64_t now = 0);
// A deadline that never comes (about 146 years of nanotime).
constexpr int64_t kFarDeadline = int64_t{1} << 62;
// Takes away the `mode` deadline without giving up its timer: a pending one
// moves to kFarDeadline, without the lock (the timer stays armed where it
// is, so that the next deadline at or after it costs no move in the timer
// heap); none pending, or expired: cleared, as poll_set_deadline(pd, 0).
// A server's request that has no read timeout, between idle deadlines.
// Reads no clock; `now` may be 0.
void poll_defer_deadline(PollDesc* pd, int mode, int64_t now);
// Descriptors holding deadline timers now (one pair each, attached while a
// deadline is pending): what an idle connection costs, for the tests.
int64_t poll_deadline_timers_attached();

// The tag of pd's current use: what poll_wake_reader takes. Once pd closes
// (and maybe serves another descriptor) the tag names nothing.
uint64_t poll_tag(PollDesc* pd);
// Does what a readable event would (netpoll_ready) for the descriptor whose
// use `tag` names, without asking the kernel: leaves readiness behind, or
// returns the goroutine parked reading, made runnable (the caller queues
// it). Nothing for a stale tag. A hint, safe whether or not data is there:
// a reader that finds none waits again, for the event the data brings.
G* poll_wake_reader(uint64_t tag);

// As poll_wait, on pd's list, and also until nanotime `deadline` (0:
// none), which ends the wait with kPollErrTimeout: for a second waiter in
// a mode, and for waits with a timeout of their own.
int poll_wait_list(PollDesc* pd, int mode, int64_t deadline);
// Parks the calling goroutine until an event of modes[i] ('r', 'w' or
// 'r' + 'w') on any pds[i], one of them closes, or nanotime `deadline` (0:
// none) passes, with `reason` in dumps. Once it waits on every list it
// calls level(arg), the caller's look at the descriptors' level (poll(2)
// with a zero timeout), and returns kPollOk at once if that finds one
// ready, so that no event is missed. Returns kPollOk (woken: the caller
// looks again), kPollErrTimeout or kPollErrClosing. The caller holds a
// reference to each descriptor (pd_ref) for the call.
int poll_wait_any(PollDesc* const* pds, const int* modes, int n, int64_t deadline, bool (*level)(void*),
                  void* arg, WaitReason reason);

// Goroutines parked in the poller (for the scheduler and checkdead).
int64_t netpoll_waiters();

// Plugs the poller into the scheduler (gmp knows nothing of sockets): sets
// the netpoll hooks of SchedHooks (gmp/sched.hpp). Called by run before
// the runtime starts (stdlib/run_main.cpp), as Go's scheduler calls netpollinit.
void install_netpoll_hooks(SchedHooks* hooks);

}  // namespace gort::internal

// netpoll/hook/hook.hpp — the libc hooks' shared machinery (internal).
// docs/blocking-libraries.md says what users see; this says how.
//
// libgort defines libc's blocking entry points (io.cpp, poll.cpp,
// sleep.cpp, fd.cpp, proc.cpp) and forwards each to the next definition
// (gmp/os/interpose.hpp). What a call does depends on who makes it (Mode):
//
//   | mode    | who                                              | a call that would block           |
//   |---------|--------------------------------------------------|-----------------------------------|
//   | kThread | a plain thread, a runtime thread, g0, a goroutine| blocks the thread, as libc's; on a |
//   |         | inside blocking() or RawLibc, or hooks off       | descriptor with O_NONBLOCK set     |
//   |         |                                                  | underneath, by polling (thread_io) |
//   | kLocked | a goroutine whose thread holds an OS lock        | as kThread, with the P handed to   |
//   |         | (M::oslocks: a library's mutex held across I/O)  | another M first (entersyscallblock)|
//   | kPark   | any other goroutine                              | parks the goroutine on the poller  |
//   |         |                                                  | (or a timer); the thread runs      |
//   |         |                                                  | other goroutines                   |
//
// In kPark mode the descriptor's slot in the fd table (netpoll/fd_table.hpp)
// decides the rest: a regular file goes through the system-call protocol
// (entersyscall); a descriptor the program made non-blocking, or gort's
// own, passes through; any other is waited for: kOwned ones by trying the
// call itself (O_NONBLOCK is set underneath), kInherited ones with
// MSG_DONTWAIT (sockets) or RWF_NOWAIT (pipes), or, where neither exists
// (a terminal), by looking at the level and making the call inside the
// system-call protocol once it says ready.
//
// Signals: a call that waits in the kernel (kThread, kLocked, the
// system-call protocol) may return EINTR because of the runtime's own
// signals (preemption, profiling); those are retried, a program's own are
// returned as libc's would (own_signals counts ours per thread).
#pragma once

#include <errno.h>

#include <atomic>
#include <cstdint>

#include "gmp/clock_rand.hpp"
#include "gmp/nbsyscall.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"
#include "netpoll/fd_table.hpp"
#include "netpoll/netpoll.hpp"
#include "netpoll/poll_desc.hpp"

namespace gort::internal::hook {

// errno, through calls the compiler cannot see into. A goroutine that
// parked may resume on another thread, whose errno is another variable,
// and GCC keeps errno's address (__errno_location is `const`) across the
// calls of a function: every errno access of the hooks goes through these.
int get_errno();
void set_errno(int e);

enum class Mode : uint8_t { kThread, kLocked, kPark };

inline Mode mode() {
  M* m = getm();
  if (m == nullptr) return Mode::kThread;
  G* g = m->curg;
  if (g == nullptr || !g_libc_hooks_on.load(std::memory_order_relaxed) || m->in_blocking.load(std::memory_order_relaxed) ||
      g->rawlibc != 0 || m->locks.load(std::memory_order_relaxed) != 0) {
    return Mode::kThread;
  }
  if (m->oslocks.load(std::memory_order_relaxed) != 0) return Mode::kLocked;
  return Mode::kPark;
}

// A descriptor the hooks meet for the first time: fstat and its flags,
// noted in its slot (a PollDesc for one that can be polled).
uintptr_t classify(int fd);
// What a hooked call on fd is about to meet: its slot, after a look at an
// unknown descriptor (classify, once per descriptor).
inline uintptr_t lookup(int fd) {
  uintptr_t v = fd_slot_load(fd);
  if (v != kSlotEmpty) [[likely]] return v;
  return classify(fd);
}
// A descriptor just made by a hooked call on a goroutine (socket, accept,
// pipe, eventfd, dup): O_NONBLOCK is already set underneath; `user_nonblock`
// is what the program asked for.
void register_owned(int fd, FdType type, bool user_nonblock, bool cloexec);
// fd was made outside the hooks' view of ownership (a plain thread, a
// hook in kThread mode, a dup of an inherited one): whatever the table
// remembers of the number is stale.
inline void forget(int fd) { fd_slot_reset(fd); }

// Waits for `mode` ('r' or 'w') on fd, whose slot value is v, until
// nanotime `deadline` (0: none). Returns 0 (look again), ETIMEDOUT, EBADF
// (closed meanwhile), or kRetry: the slot changed (the descriptor turned
// out not pollable, or was replaced), so the call starts over.
inline constexpr int kRetry = -1;
int wait_fd(int fd, uintptr_t v, int mode, int64_t deadline);

// Whether fd is ready for mode now (poll(2) with a zero timeout).
bool level_ready(int fd, int mode);

// Whether the calling goroutine may park now: not if its thread runs a
// signal handler (the handler's write to a full pipe must not switch
// goroutines under the interrupted code). Asked only before a park: it
// costs a system call (the thread's signal mask against the M's).
bool may_park();

// The deadline of a call starting now on pd in `mode`, from SO_RCVTIMEO /
// SO_SNDTIMEO (0: none).
inline int64_t call_deadline(PollDesc* pd, int mode) {
  int64_t t = (mode == 'r' ? pd->rcvtimeo : pd->sndtimeo).load(std::memory_order_relaxed);
  return t > 0 ? nanotime() + t : 0;
}

// Go's entersyscall / exitsyscall around f. Not in a race build:
// ThreadSanitizer's runtime reads files through libc (so through these
// hooks) while it holds its thread registry's lock, which creating a thread
// takes; a P retaken from such a call and handed to a new M would wait for
// that M forever, and the call's goroutine for the P (found as a hang of
// the race suite under load). There such calls keep their P, as the thread
// mode does.
template <class F>
auto in_syscall(F&& f) {
  if constexpr (kRaceEnabled) return f();
  entersyscall();
  auto r = f();
  int e = get_errno();
  exitsyscall();
  set_errno(e);
  return r;
}
// The same, handing the P off at once (entersyscallblock).
template <class F>
auto in_syscall_block(F&& f) {
  entersyscallblock();
  auto r = f();
  int e = get_errno();
  exitsyscall();
  set_errno(e);
  return r;
}

// Retries f while it fails with EINTR because of one of the runtime's own
// signals; a program's own signal's EINTR is returned.
template <class F>
auto retry_own_eintr(F&& f) {
  for (;;) {
    uint32_t before = gort_own_signals;
    auto r = f();
    if (!(r < 0 && get_errno() == EINTR && gort_own_signals != before)) return r;
  }
}

// kThread mode on fd: the call as libc makes it, except that a descriptor
// with O_NONBLOCK set underneath a program that asked for a blocking one
// is waited for with poll(2), as the kernel would have waited.
bool owned_blocking(int fd, PollDesc** pd);
int thread_wait(int fd, PollDesc* pd, int mode, int64_t deadline);

template <class Call>
ssize_t thread_io(int fd, int mode, Call&& call) {
  PollDesc* pd;
  if (!g_fd_owned_any.load(std::memory_order_relaxed) || !owned_blocking(fd, &pd)) return call();
  int64_t deadline = call_deadline(pd, mode);
  for (;;) {
    ssize_t r = call();
    if (r >= 0 || (get_errno() != EAGAIN && get_errno() != EWOULDBLOCK)) return r;
    int w = thread_wait(fd, pd, mode, deadline);
    if (w != 0) {
      set_errno(w == ETIMEDOUT ? EAGAIN : w);
      return -1;
    }
  }
}

// How a call that would block is made without blocking, on a descriptor
// whose O_NONBLOCK flag is not set underneath (kInherited).
struct Nowait {
  // The call with MSG_DONTWAIT (sockets), or null.
  ssize_t (*dontwait)(void* ctx) = nullptr;
  // The call through preadv2/pwritev2 with RWF_NOWAIT, or null.
  ssize_t (*rwf)(void* ctx) = nullptr;
  void* ctx = nullptr;
};

// One call as a goroutine (kPark) makes it on a descriptor in blocking
// mode: it returns when the call did something, failed, or its timeout
// passed (EAGAIN, as the kernel's). `emulated` says whether the runtime
// waited on the program's behalf (else the call went through as it was:
// the program's non-blocking descriptor, gort's own, not a descriptor).
struct IoOutcome {
  ssize_t r;
  bool emulated;
};
template <class Call>
IoOutcome park_io(int fd, int mode, Call&& call, const Nowait& nw, int64_t* deadline, bool* deadline_set) {
  for (;;) {
    uintptr_t v = lookup(fd);
    if (v == kSlotEmpty || v == kSlotPlain) return {call(), false};
    if (v == kSlotFile) return {in_syscall([&] { return retry_own_eintr(call); }), false};
    PollDesc* pd = slot_pd(v);
    FdOrigin origin = pd->origin.load(std::memory_order_relaxed);
    if (origin == FdOrigin::kRuntime || pd->user_nonblock.load(std::memory_order_relaxed)) return {call(), false};
    if (!*deadline_set) {
      *deadline = call_deadline(pd, mode);
      *deadline_set = true;
    }
    ssize_t r;
    if (origin == FdOrigin::kOwned) {
      NbSyscall sc;  // returns at once: sysmon's request waits for its return
      r = call();
    } else if (pd->type == FdType::kSocket && nw.dontwait != nullptr) {
      NbSyscall sc;
      r = nw.dontwait(nw.ctx);
    } else if (nw.rwf != nullptr && pd->nowait.load(std::memory_order_relaxed) != 2) {
      {
        NbSyscall sc;
        r = nw.rwf(nw.ctx);
      }
      if (r < 0 && get_errno() == EOPNOTSUPP) {
        pd->nowait.store(2, std::memory_order_relaxed);
        continue;
      }
    } else if (level_ready(fd, mode)) {
      // Ready now; a reader that got there first would leave this one
      // blocked in the kernel, with its P handed off meanwhile.
      return {in_syscall([&] { return retry_own_eintr(call); }), true};
    } else {
      r = -1;
      set_errno(EAGAIN);
    }
    if (r >= 0 || (get_errno() != EAGAIN && get_errno() != EWOULDBLOCK)) {
      if (r < 0 && get_errno() == EINTR) continue;  // non-blocking calls: only a signal of ours
      return {r, true};
    }
    int w = may_park() ? wait_fd(fd, v, mode, *deadline) : thread_wait(fd, pd, mode, *deadline);
    if (w == kRetry || w == 0) continue;
    set_errno(w == ETIMEDOUT ? EAGAIN : w);
    return {-1, true};
  }
}

// A hooked call that reads (or, with mode 'w', writes once): its result as
// a program that made the descriptor blocking expects it.
template <class Call>
ssize_t io(int fd, int mode, Call&& call, const Nowait& nw = {}) {
  switch (hook::mode()) {
    case Mode::kThread:
      return thread_io(fd, mode, call);
    case Mode::kLocked: {
      // A call that can be made now is made; one that would block hands
      // the P off first.
      PollDesc* pd;
      if (!owned_blocking(fd, &pd)) {
        // Blocking underneath: made at once if it will not wait, else
        // with the P handed off. Gort's own descriptors and those the
        // program made non-blocking: as they are.
        uintptr_t v = lookup(fd);
        if (!slot_is_pd(v)) return call();
        PollDesc* p = slot_pd(v);
        if (p->origin.load(std::memory_order_relaxed) == FdOrigin::kRuntime ||
            p->user_nonblock.load(std::memory_order_relaxed) || level_ready(fd, mode)) {
          return call();
        }
        return in_syscall_block([&] { return retry_own_eintr(call); });
      }
      ssize_t r = call();
      if (r >= 0 || (get_errno() != EAGAIN && get_errno() != EWOULDBLOCK)) return r;
      return in_syscall_block([&] { return thread_io(fd, mode, call); });
    }
    case Mode::kPark:
      break;
  }
  int64_t deadline = 0;
  bool deadline_set = false;
  return park_io(fd, mode, call, nw, &deadline, &deadline_set).r;
}

// A hooked write: a blocking descriptor takes every byte (or fails, or its
// SO_SNDTIMEO passes: then what was written, as the kernel reports it).
// `done` counts the bytes written so far; call() and nw write what remains
// after it.
template <class Call>
ssize_t write_all(int fd, size_t len, size_t& done, Call&& call, const Nowait& nw) {
  done = 0;
  if (hook::mode() != Mode::kPark) {
    for (;;) {
      ssize_t r = io(fd, 'w', call);
      if (r < 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
      done += static_cast<size_t>(r);
      PollDesc* pd;
      // A short write to a descriptor the kernel blocks for is its answer;
      // one with O_NONBLOCK set underneath goes on, as blocking would.
      if (done >= len || r == 0 || !owned_blocking(fd, &pd)) return static_cast<ssize_t>(done);
    }
  }
  int64_t deadline = 0;
  bool deadline_set = false;
  for (;;) {
    IoOutcome o = park_io(fd, 'w', call, nw, &deadline, &deadline_set);
    if (o.r < 0) return done > 0 ? static_cast<ssize_t>(done) : -1;
    done += static_cast<size_t>(o.r);
    if (!o.emulated || done >= len || o.r == 0) return static_cast<ssize_t>(done);
  }
}

// Parks the calling goroutine until nanotime `when` (a hooked sleep).
void sleep_until(int64_t when);

// Before a child process is made (fork, posix_spawn, system, popen, exec):
// descriptors with O_NONBLOCK set underneath that the child will inherit
// get back the flag the program set, and are kInherited from now on (the
// open file description is shared: the child must see it as the program
// made it). `also` (-1: none) is one the child gets through a dup.
void before_child(int also);

// Names one function of each hook file, so that a program linked with a
// static libgort takes them all (run_main calls it; it does nothing else).
void link_all();

}  // namespace gort::internal::hook

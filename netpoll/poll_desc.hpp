// netpoll/poll_desc.hpp — the poll descriptor (internal to netpoll/): one
// per descriptor the poller knows, whoever uses it. See netpoll.hpp for the
// waiter slots' state table.
//
// Who holds a descriptor (PollDesc::refs counts them; the last to let go
// recycles it):
//   - its opener: a NetFD (poll_open ... poll_close), or the fd table
//     (fd_table.hpp) for a descriptor the libc hooks (netpoll/hook/) met:
//     one made by a hooked call on a goroutine, or an inherited one;
//   - every goroutine waiting on its list (poll_list.cpp) or in a hooked
//     call that may wait, for as long as it may touch it.
// A NetFD that wraps a descriptor the hooks already know (os::new_file on a
// pipe made by a hooked pipe()) shares the table's PollDesc: one epoll
// registration, one set of waiters.
//
// Waiters: the two slots (rg, wg) hold one goroutine per mode, the fast
// path a NetFD uses (its fdMutex lets one reader and one writer wait).
// Everyone else (a second goroutine reading the same pipe, the hooks'
// poll/select/epoll_wait and waits with a timeout) goes on the list, whose
// entries any event of the descriptor wakes, and which looks at the
// descriptor's level (poll(2)) after joining it, so that an event that came
// before it joined is not missed (poll_list.cpp).
#pragma once

#include <atomic>
#include <cstdint>

#include "gmp/g.hpp"
#include "gmp/lock.hpp"
#include "gmp/timer.hpp"

namespace gort::internal {

struct PollWait;
struct ListNode;
struct DeadlineTimers;

// How the libc hooks treat the descriptor (fd_table.hpp).
enum class FdOrigin : uint8_t {
  // A NetFD's (gort's own socket, os::File, signal's eventfd): the hooks
  // pass calls through; gort's code owns its waits.
  kRuntime,
  // Made by a hooked call on a goroutine (socket, accept, pipe, eventfd,
  // dup): O_NONBLOCK is set underneath whatever the program asked for, and
  // `user_nonblock` holds what it asked for.
  kOwned,
  // Met by the hooks, not made by them (inherited, opened before the run or
  // by a plain thread, or shared with a child process): its flags are
  // never changed; calls wait for readiness and use MSG_DONTWAIT or
  // RWF_NOWAIT (or hand off the P) so that the thread never blocks.
  kInherited,
};

// What kind of file is behind it (fstat), which says how a call can be made
// without blocking.
enum class FdType : uint8_t { kSocket, kPipe, kOther };

struct PollDesc {
  PollDesc* link = nullptr;  // free list
  int fd = -1;
  WordLock<LockRank::kPollDesc> lock;
  std::atomic<uintptr_t> rg{0};
  std::atomic<uintptr_t> wg{0};
  std::atomic<bool> closing{false};
  // Its run ended while it was open (poll_desc.cpp).
  std::atomic<bool> abandoned{false};
  // Sticky: an event said hang-up, peer shutdown, error or urgent data
  // (see poll_exceptional_seen).
  std::atomic<bool> exceptional{false};
  // In the epoll set (a NetFD's at once, a hooked descriptor's when a call
  // first has to wait).
  std::atomic<bool> registered{false};
  // A NetFD holds it (gort's socket, os::File): at the end of the run its
  // descriptor is closed, where a program's own is left open.
  std::atomic<bool> netfd{false};
  // The libc hooks' view (fd_table.hpp). Set before the descriptor is in
  // the fd table, then changed only by the hooks' fcntl, ioctl, setsockopt
  // and fork (a program changes its own descriptor's flags from one
  // goroutine at a time; a race between two such calls leaves one of the
  // two answers, as the kernel's own flag would).
  std::atomic<FdOrigin> origin{FdOrigin::kRuntime};
  FdType type = FdType::kOther;
  // O_NONBLOCK as the program set it (the real flag may differ: kOwned).
  std::atomic<bool> user_nonblock{false};
  std::atomic<uint32_t> fdseq{0};
  // Holders (see the top of the file).
  std::atomic<uint32_t> refs{0};
  // Deadlines (nanotime): 0 none, -1 expired. Set under lock, except that
  // a pending deadline may be pushed back without it (push_back); read
  // without it by poll_check. While one is > 0, its timer is armed no later
  // (poll_deadline.cpp, "Deadlines").
  std::atomic<int64_t> rd{0};
  std::atomic<int64_t> wd{0};
  // The two deadline timers, attached from a pool while a deadline is
  // pending (poll_deadline.cpp, "Deadlines"): an idle connection with no
  // deadline set carries none (160 bytes). Attached, stopped, reset and
  // detached under lock only.
  DeadlineTimers* dl ABSL_GUARDED_BY(lock) = nullptr;

  // The list of other waiters (poll_list.cpp), under wl_lock; nwl counts
  // its entries, and an event looks at nwl only (a load) unless it is set.
  WordLock<LockRank::kPollWaitList> wl_lock;
  std::atomic<int32_t> nwl{0};
  ListNode* wl_head ABSL_GUARDED_BY(wl_lock) = nullptr;

  // The libc hooks' view (fd_table.hpp), continued from the three
  // one-byte fields above, which sit with the flags so that the object
  // has no padding (an idle connection pays for every byte).
  std::atomic<bool> cloexec{false};
  // preadv2/pwritev2 accept RWF_NOWAIT on it (kInherited non-sockets):
  // 0 unknown, 1 yes, 2 no.
  std::atomic<uint8_t> nowait{0};
  // A reader's wait that asked whether its wake-up can be trusted
  // (poll_wait's `trusted`): the harvest number current when it parked (0:
  // it did not ask), and the answer, which the harvest that takes its G
  // writes. In the padding after the two flags above.
  std::atomic<bool> rtrusted{false};
  std::atomic<uint32_t> rpark_harvest{0};
  // SO_RCVTIMEO and SO_SNDTIMEO (ns, 0 none): a hooked call's wait ends
  // with EAGAIN after that long, as the kernel's would.
  std::atomic<int64_t> rcvtimeo{0};
  std::atomic<int64_t> sndtimeo{0};
  // sysmon's look for a number closed behind the hooks (poll_sweep_stale):
  // since when it has had waiters (0: none seen), and when to look again.
  // Only sysmon's thread touches them.
  int64_t stale_since = 0;
  int64_t stale_next = 0;
};

// A holder more / one less (see the top). The last unref recycles pd.
void pd_ref(PollDesc* pd);
void pd_unref(PollDesc* pd);
// A reference taken only if pd has a holder still (it was read from the fd
// table without one, and may have been recycled meanwhile): the caller then
// checks that the table still names it.
bool pd_try_ref(PollDesc* pd);
// Removes pd from the epoll set, if it is in it. Only while its number
// still names its file (before the close of that number).
void poll_deregister(PollDesc* pd);

// A fresh descriptor for fd (not yet registered), with one reference: its
// caller's.
PollDesc* pd_alloc(int fd);
// Registers pd with the poller if it is not yet (0 or an errno value:
// EPERM for a regular file).
int pd_register(PollDesc* pd);

// Why unblock empties a slot (Go's ioready): readiness, which leaves kReady
// behind, or a close or deadline, which leaves 0.
enum class Unblock : bool { kCloseOrDeadline = false, kIoReady = true };
// Takes the waiter out of slot `mode`. Returns a parked G to ready, or
// null. poll_desc.cpp. With `woken`, a G it returns is added there instead
// of taken off the waiter count at once: the poller's harvest takes the
// sum off in one atomic operation (netpoll_waiters_done), before it hands
// the Gs on, as Go's netpoll returns its delta (netpollAdjustWaiters).
G* unblock(PollDesc* pd, int mode, Unblock why, int64_t* woken = nullptr);
// Stops pd's deadline timers and returns them to their pool (close, the
// last unref, or neither deadline pending any more). poll_deadline.cpp.
void detach_timers(PollDesc* pd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pd->lock);

// Wakes every goroutine on pd's list whose wait an event of `mode` ('r',
// 'w' or 'r' + 'w') ends; with `out`, makes them runnable onto it (the
// poller's batch), else readies them. poll_list.cpp.
void pd_wake_list(PollDesc* pd, int mode, GQueue* out);
// The same for every entry, because pd is closing.
void pd_wake_list_closing(PollDesc* pd);

}  // namespace gort::internal

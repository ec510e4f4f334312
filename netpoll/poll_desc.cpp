// netpoll/poll_desc.cpp — poll descriptors: their pool, registration and
// close, and the waiter slots. See the state table in netpoll.hpp; the
// deadlines are poll_deadline.cpp's.
//
// Descriptors are never freed, only recycled (as Go's pollCache) when their
// last holder lets go (poll_desc.hpp): an epoll event that refers to a
// recycled descriptor is recognised by a sequence number (fdseq) and
// dropped, and so is a deadline timer's firing that a later stop or reset
// overtook (the timer's own seq, gmp/timer.hpp: close stops both timers,
// every deadline change stops or resets one). The deadline timers are
// recycled the same way, apart from the descriptors (poll_deadline.cpp).
// Each is also in the fd table
// (fd_table.hpp) under its number while it is open, so that the libc hooks
// and gort's own files share it.
//
// The end of a run (poll_abandon_all): a descriptor still open then belongs
// to a socket whose owner was abandoned with its goroutine (a Conn in a
// closure parked in read) or kept past the run, where no poller would ever
// report its events again. Its fd is closed, its waiter forgotten (the G is
// gone) and the descriptor marked abandoned: closing for every later call,
// and never recycled, so that a late poll_close by the owner neither
// closes the fd number again (another file may have it by then) nor frees
// the descriptor twice. The waiter count starts from zero in the next run,
// whose deadlock detector would otherwise wait for the old waiters forever.
// A descriptor the program owns (one the libc hooks met, not a NetFD's) is
// left open instead, its O_NONBLOCK flag as the program set it.
//
// Memory orders. Close and an expiring deadline race a parking waiter in
// a store-buffering (Dekker) pattern: the notifier stores its flag
// (`closing`, or -1 in `rd`/`wd`) and then loads the waiter slot; the
// waiter stores kWait into the slot and then loads the flags. With release
// stores and acquire loads both loads may miss the other side's store
// (allowed by the C++ model, and by ARM and POWER hardware), and the waiter
// parks with nobody left to wake it. Each store and each load of such a
// pair is seq_cst; every one is marked "Dekker with ...".
//
// Lock order: PollDesc::lock, then the descriptors' pool lock (the last
// unref); the deadlines' locks are poll_deadline.cpp's.
#include <poll.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "gmp/diag/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/os/sys.hpp"
#include "gmp/tls.hpp"
#include "netpoll/fd_table.hpp"
#include "netpoll/netpoll.hpp"
#include "netpoll/netpoll_platform.hpp"
#include "netpoll/poll_desc.hpp"

namespace gort::internal {

std::atomic<int64_t> g_netpoll_waiters{0};

namespace {
constexpr uintptr_t kReady = 1;
constexpr uintptr_t kWait = 2;
constexpr int kTagShift = 48;
}  // namespace

namespace {

constexpr int kBlock = 64;

RuntimeMutex<LockRank::kPollCache> g_cache_mu;
PollDesc* g_free ABSL_GUARDED_BY(g_cache_mu) = nullptr;
std::vector<PollDesc*> g_blocks ABSL_GUARDED_BY(g_cache_mu);  // keeps every block reachable

std::atomic<uintptr_t>* slot(PollDesc* pd, int mode) { return mode == 'r' ? &pd->rg : &pd->wg; }

PollDesc* alloc_pd() {
  MutexLock lock(g_cache_mu);
  if (g_free == nullptr) {
    auto* block = new PollDesc[kBlock];
    g_blocks.push_back(block);
    for (int i = 0; i < kBlock; i++) {
      block[i].link = g_free;
      g_free = &block[i];
    }
  }
  PollDesc* pd = g_free;
  g_free = pd->link;
  pd->link = nullptr;
  return pd;
}

void free_pd(PollDesc* pd) {
  MutexLock lock(g_cache_mu);
  pd->link = g_free;
  g_free = pd;
}

uint64_t tag_of(PollDesc* pd) {
  return reinterpret_cast<uint64_t>(pd) |
         (static_cast<uint64_t>(pd->fdseq.load() & 0xFFFF) << kTagShift);
}

// tag_of's inverse, without the sequence check (netpoll_ready makes it).
PollDesc* desc_of(uint64_t tag) { return reinterpret_cast<PollDesc*>(tag & ((uint64_t{1} << kTagShift) - 1)); }

}  // namespace

G* unblock(PollDesc* pd, int mode, Unblock why, int64_t* woken) {
  const bool ioready = why == Unblock::kIoReady;
  auto* gpp = slot(pd, mode);
  for (;;) {
    // Dekker with poll_wait's kWait store, for close and deadlines: after
    // their seq_cst flag store, this load sees kWait, or the waiter's
    // seq_cst flag load sees the flag.
    uintptr_t old = gpp->load(std::memory_order_seq_cst);
    if (old == kReady) return nullptr;
    if (old == 0 && !ioready) return nullptr;
    uintptr_t next = ioready ? kReady : 0;
    if (gpp->compare_exchange_weak(old, next, std::memory_order_acq_rel)) {
      if (old > kWait) {
        // seq_cst: a deadlock check that sees this decrement then sees
        // whoever carries g to a run queue (gmp/diag/fatal.cpp, check_dead_locked).
        // A harvest's decrement comes later, but still before that: the
        // count is only ever high for a moment, never low.
        if (woken != nullptr) {
          ++*woken;
        } else {
          g_netpoll_waiters.fetch_sub(1, std::memory_order_seq_cst);
        }
        return reinterpret_cast<G*>(old);
      }
      return nullptr;  // nobody, or a waiter that has not committed yet
    }
  }
}

namespace {

bool commit_wait(G* g, void* arg) {
  auto* gpp = static_cast<std::atomic<uintptr_t>*>(arg);
  uintptr_t expected = kWait;
  if (gpp->compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(g),
                                   std::memory_order_acq_rel)) {
    g_netpoll_waiters.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return false;  // readiness, close or a deadline came first: resume now
}

void wait_on_thread(PollDesc* pd, int mode) {
  // A plain thread cannot park: wait with poll(2), a slice at a time so
  // that close and deadlines are noticed.
  struct pollfd p{pd->fd, static_cast<short>(mode == 'r' ? POLLIN : POLLOUT), 0};
  sys::poll(&p, 1, 10);
}

}  // namespace

void netpoll_prefetch_desc(uint64_t tag) { __builtin_prefetch(desc_of(tag)); }

void netpoll_prefetch_waiter(uint64_t tag, int mode) {
  // A G in the slot is about to have its status and queue link written.
  // Read without ordering: a stale value only fetches a line for nothing.
  uintptr_t v = slot(desc_of(tag), mode)->load(std::memory_order_relaxed);
  if (v > kWait) __builtin_prefetch(reinterpret_cast<const G*>(v), 1);
}

namespace {
// The harvests begun (odd numbers, see netpoll_harvest_begin).
std::atomic<uint32_t> g_harvest{1};
}  // namespace

uint32_t netpoll_harvest_begin() {
  // seq_cst, and before the kernel is asked: a reader whose load (after its
  // seq_cst kWait store, poll_wait) read an older number had finished its
  // last read before this harvest's epoll_wait began.
  return g_harvest.fetch_add(2, std::memory_order_seq_cst) + 2;
}

void netpoll_ready(uint64_t tag, int mode, bool exceptional, GQueue* out, uint32_t harvest, int64_t* woken) {
  PollDesc* pd = desc_of(tag);
  if ((pd->fdseq.load(std::memory_order_acquire) & 0xFFFF) != (tag >> kTagShift)) return;
  // Before the readiness it comes with. seq_cst, with unblock's load of the
  // slot, poll_reset_ready's CAS and poll_exceptional_seen's load: the slot
  // may already hold kReady, so that no store of unblock's publishes the
  // flag. Then either the reader's reset came first and unblock sees it
  // (and leaves kReady for the reader's next wait), or the reader's load of
  // the flag, after its reset, sees it.
  if (exceptional) pd->exceptional.store(true, std::memory_order_seq_cst);
  if (mode == 'r' || mode == 'r' + 'w') {
    if (G* g = unblock(pd, 'r', Unblock::kIoReady, woken)) {
      // Its park (commit_wait's release) made the number it read visible
      // to unblock's acquire. Trusted if this harvest began after it.
      if (uint32_t parked = pd->rpark_harvest.load(std::memory_order_relaxed); parked != 0 && harvest != 0) {
        pd->rtrusted.store(static_cast<int32_t>(harvest - parked) > 0, std::memory_order_relaxed);
      }
      set_status(g, GStatus::kWaiting, GStatus::kRunnable);
      out->push_back(g);
    }
  }
  if (mode == 'w' || mode == 'r' + 'w') {
    if (G* g = unblock(pd, 'w', Unblock::kIoReady, woken)) {
      set_status(g, GStatus::kWaiting, GStatus::kRunnable);
      out->push_back(g);
    }
  }
  // Dekker with a goroutine joining the list (poll_list.cpp): it counts
  // itself in nwl, then looks at the descriptor's level with a system call;
  // this load comes after the kernel reported the event, so either it sees
  // the joiner or the joiner's look sees the readiness.
  if (pd->nwl.load(std::memory_order_seq_cst) != 0) pd_wake_list(pd, mode, out);
}

uint64_t poll_tag(PollDesc* pd) { return tag_of(pd); }

G* poll_wake_reader(uint64_t tag) {
  GQueue one;
  netpoll_ready(tag, 'r', false, &one, /*harvest=*/0);
  return one.pop();
}

PollDesc* pd_alloc(int fd) {
  PollDesc* pd = alloc_pd();
  pd->fd = fd;
  pd->rg.store(0);
  pd->wg.store(0);
  pd->closing.store(false);
  pd->exceptional.store(false);
  pd->registered.store(false);
  pd->netfd.store(false);
  pd->rd.store(0);
  pd->wd.store(0);
  pd->origin.store(FdOrigin::kRuntime);
  pd->type = FdType::kOther;
  pd->user_nonblock.store(false);
  pd->cloexec.store(false);
  pd->nowait.store(0);
  pd->rcvtimeo.store(0);
  pd->sndtimeo.store(0);
  pd->refs.store(1, std::memory_order_release);
  return pd;
}

int pd_register(PollDesc* pd) {
  if (pd->registered.load(std::memory_order_acquire)) return 0;
  MutexLock lock(pd->lock);
  if (pd->registered.load(std::memory_order_relaxed)) return 0;
  if (pd->closing.load(std::memory_order_relaxed)) return EBADF;
  int err = netpoll_open(pd->fd, pd, tag_of(pd));
  if (err == 0) pd->registered.store(true, std::memory_order_release);
  return err;
}

void pd_ref(PollDesc* pd) { pd->refs.fetch_add(1, std::memory_order_relaxed); }

bool pd_try_ref(PollDesc* pd) {
  uint32_t r = pd->refs.load(std::memory_order_relaxed);
  while (r != 0) {
    if (pd->refs.compare_exchange_weak(r, r + 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void pd_unref(PollDesc* pd) {
  if (pd->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // An abandoned descriptor is never recycled (see the top of the file).
  if (pd->abandoned.load(std::memory_order_acquire)) return;
  {
    // Close detached them; a descriptor recycled without one (an open
    // that failed) has none to give back.
    MutexLock lock(pd->lock);
    detach_timers(pd);
  }
  pd->fdseq.fetch_add(1, std::memory_order_acq_rel);
  pd->fd = -1;
  free_pd(pd);
}

PollDesc* poll_open(int fd) {
  uintptr_t v = fd_slot_load(fd);
  if (slot_is_pd(v)) {
    // A descriptor the libc hooks met first (os::new_file on a pipe that a
    // hooked pipe() made): the NetFD shares its PollDesc. Anything else in
    // the slot is stale (a descriptor closed behind the runtime, whose
    // number the new one has): fd_slot_store below replaces it.
    PollDesc* pd = slot_pd(v);
    if (pd->origin.load() != FdOrigin::kRuntime && !pd->netfd.load() && pd_try_ref(pd)) {
      if (fd_slot_load(fd) == v && !pd->closing.load(std::memory_order_seq_cst) && pd->fd == fd) {
        int err = pd_register(pd);
        if (err != 0) {
          pd_unref(pd);
          errno = err;
          return nullptr;
        }
        pd->netfd.store(true);
        return pd;
      }
      pd_unref(pd);
    }
  }
  PollDesc* pd = pd_alloc(fd);
  pd->netfd.store(true);
  int err = pd_register(pd);
  if (err != 0) {
    pd->fd = -1;  // the caller closes fd; poll_abandon_all must not
    pd_unref(pd);
    errno = err;
    return nullptr;
  }
  // The table's reference: the hooks see the descriptor as gort's.
  pd_ref(pd);
  if (!fd_slot_store(fd, reinterpret_cast<uintptr_t>(pd))) pd_unref(pd);
  return pd;
}

void poll_evict(PollDesc* pd) {
  pd->lock.lock();
  if (pd->closing.load()) {
    pd->lock.unlock();
    return;
  }
  // Dekker with poll_wait: this store, then unblock's slot load below (and
  // with the list's joiners, which look at `closing` under the list lock
  // that pd_wake_list_closing takes after it).
  pd->closing.store(true, std::memory_order_seq_cst);
  detach_timers(pd);
  pd->lock.unlock();
  if (G* g = unblock(pd, 'r', Unblock::kCloseOrDeadline)) ready(g);
  if (G* g = unblock(pd, 'w', Unblock::kCloseOrDeadline)) ready(g);
  pd_wake_list_closing(pd);
}

void poll_deregister(PollDesc* pd) {
  // While fd still names this descriptor's file: by number, epoll would
  // remove whatever file has the number later. And before the file's last
  // close only: a copy of it elsewhere (a dup, a child's) keeps an epoll
  // registration alive after the number is closed.
  if (pd->registered.exchange(false, std::memory_order_acq_rel)) netpoll_close(pd->fd);
}

bool poll_close(PollDesc* pd) {
  if (pd->abandoned.load(std::memory_order_acquire)) return false;
  if (!pd->closing.load()) poll_evict(pd);
  uintptr_t r = pd->rg.load(), w = pd->wg.load();
  if (r > kWait || w > kWait) fatal("poll_close: a goroutine still waits on the descriptor");
  poll_deregister(pd);
  fd_slot_release(pd->fd, pd);
  pd->netfd.store(false);
  // Goroutines of the hooks woken by the eviction may hold it a moment
  // longer; the last of them recycles it.
  pd_unref(pd);
  return true;
}

namespace {

// A descriptor the program owns, which the hooks met (not a NetFD's), at
// the end of the run: it stays open, with the O_NONBLOCK flag the program
// set; only what the runtime knew of it goes.
void release_program_fd(int fd, PollDesc* pd, void*) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (pd->netfd.load() || pd->closing.load() || pd->fd != fd) return;
  if (pd->origin.load() == FdOrigin::kOwned && !pd->user_nonblock.load()) {
    int fl = sys::fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK) != 0) sys::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  }
  pd->closing.store(true);
  pd->rg.store(0);
  pd->wg.store(0);
  pd->wl_head = nullptr;
  pd->nwl.store(0);
  pd->fd = -1;
  pd->abandoned.store(true, std::memory_order_release);
}

}  // namespace

// The run is over (no M runs, no timer fires): pd->lock guards nothing.
void poll_abandon_all() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  fd_table_each(&release_program_fd, nullptr);
  fd_table_clear();
  MutexLock lock(g_cache_mu);
  for (PollDesc* block : g_blocks) {
    for (int i = 0; i < kBlock; i++) {
      PollDesc* pd = &block[i];
      if (pd->fd < 0 || pd->abandoned.load(std::memory_order_relaxed)) continue;
      pd->closing.store(true);
      pd->rg.store(0);
      pd->wg.store(0);
      pd->wl_head = nullptr;
      pd->nwl.store(0);
      // A NetFD's: its owner was abandoned or kept it past the run. (A
      // program's descriptor whose number was closed behind the hooks has
      // no file of ours left to close.) The epoll instance is closed next:
      // no EPOLL_CTL_DEL.
      if (pd->netfd.load()) sys::close(pd->fd);
      pd->fd = -1;
      pd->abandoned.store(true, std::memory_order_release);
    }
  }
  g_netpoll_waiters.store(0);
}

int poll_check(PollDesc* pd, int mode) {
  // Dekker with poll_evict and the deadlines (see poll_wait). On x86 a
  // seq_cst load is the same plain load as an acquire one.
  if (pd->closing.load(std::memory_order_seq_cst)) return kPollErrClosing;
  if (mode == 'r' && pd->rd.load(std::memory_order_seq_cst) < 0) return kPollErrTimeout;
  if (mode == 'w' && pd->wd.load(std::memory_order_seq_cst) < 0) return kPollErrTimeout;
  return kPollOk;
}

int poll_wait(PollDesc* pd, int mode, bool* trusted) {
  preempt_check();
  auto* gpp = slot(pd, mode);
  if (trusted != nullptr) *trusted = false;
  for (;;) {
    int err = poll_check(pd, mode);
    if (err != kPollOk) return err;
    G* self = getg();
    if (self == nullptr) {
      uintptr_t expected = kReady;
      if (gpp->compare_exchange_strong(expected, 0)) return kPollOk;
      runtime.external_ops.fetch_add(1, std::memory_order_acq_rel);
      wait_on_thread(pd, mode);
      runtime.external_ops.fetch_sub(1, std::memory_order_acq_rel);
      return kPollOk;  // the caller retries its I/O (which may block again)
    }
    uintptr_t old = gpp->load(std::memory_order_acquire);
    for (;;) {
      if (old == kReady) {
        gpp->store(0, std::memory_order_release);
        return kPollOk;
      }
      // Another goroutine waits in this mode (the libc hooks let several
      // read one pipe): this one waits on the list instead.
      if (old != 0) return poll_wait_list(pd, mode, 0);
      // Dekker with poll_evict and the deadlines: this store of kWait,
      // then poll_check's flag loads below.
      if (gpp->compare_exchange_weak(old, kWait, std::memory_order_seq_cst)) break;
    }
    // The harvest number, read after the seq_cst kWait store: that store
    // orders this goroutine's last read (its system call) before the load,
    // so a harvest numbered later asked the kernel after that read.
    if (trusted != nullptr) {
      pd->rtrusted.store(false, std::memory_order_relaxed);
      pd->rpark_harvest.store(g_harvest.load(std::memory_order_seq_cst), std::memory_order_relaxed);
    }
    // close() and deadlines store their flag, then look at the slot; we set
    // the slot, then look at the flags: one of us sees the other.
    if (poll_check(pd, mode) == kPollOk) {
      park(&commit_wait, gpp, WaitReason::kIOWait);
    }
    if (trusted != nullptr) pd->rpark_harvest.store(0, std::memory_order_relaxed);
    // Back: unblock replaced this goroutine's G (or its kWait, if it did
    // not park) with kReady or 0, or has not come (close or a deadline).
    // Another reader of the descriptor (the hooks let several goroutines
    // read one pipe) may have taken that kReady meanwhile and be waiting
    // in the slot itself by now: only this goroutine's own marks are
    // cleared, never another's wait.
    old = gpp->load(std::memory_order_acquire);
    for (;;) {
      if (old == reinterpret_cast<uintptr_t>(self)) fatal("poll_wait: woken while still waiting in the descriptor");
      if (old == kReady) {
        if (gpp->compare_exchange_weak(old, 0, std::memory_order_acq_rel)) {
          if (trusted != nullptr) *trusted = pd->rtrusted.load(std::memory_order_relaxed);
          return kPollOk;
        }
        continue;
      }
      if (old != kWait) break;  // 0, or another goroutine's wait
      if (gpp->compare_exchange_weak(old, 0, std::memory_order_acq_rel)) break;
    }
    // Woken by close or a deadline (checked at the top), or spuriously, or
    // another reader took the readiness: wait again.
  }
}

void poll_reset_ready(PollDesc* pd, int mode) {
  // The CAS's acquire keeps the caller's system call after it: a kReady
  // this clears was stored for an event harvested before that call began,
  // whose data the call will see.
  auto* gpp = slot(pd, mode);
  uintptr_t expected = kReady;
  if (gpp->load(std::memory_order_relaxed) == kReady) {
    gpp->compare_exchange_strong(expected, 0, std::memory_order_seq_cst);
  }
}

bool poll_exceptional_seen(PollDesc* pd) { return pd->exceptional.load(std::memory_order_seq_cst); }

int64_t netpoll_waiters() { return g_netpoll_waiters.load(std::memory_order_seq_cst); }

void netpoll_waiters_done(int64_t n) { g_netpoll_waiters.fetch_sub(n, std::memory_order_seq_cst); }

namespace {

void hook_init() {
  g_netpoll_waiters.store(0);
  netpoll_init();
  g_libc_hooks_on.store(sched.cfg.hook_libc, std::memory_order_release);
}

// After teardown: every goroutine is gone, every M joined.
void hook_fini() {
  g_libc_hooks_on.store(false, std::memory_order_release);
  poll_abandon_all();
  netpoll_shutdown();
}

}  // namespace

namespace {

constexpr int64_t kSweepEveryNs = int64_t{1000} * 1000 * 1000;
constexpr int64_t kStaleAfterNs = int64_t{1000} * 1000 * 1000;
constexpr int64_t kStaleAgainNs = int64_t{10} * 1000 * 1000 * 1000;

int64_t g_next_sweep = 0;

struct Sweep {
  int64_t now;
  bool waiting;  // some hooked descriptor has waiters
};

void sweep_one(int fd, PollDesc* pd, void* arg) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  auto* sw = static_cast<Sweep*>(arg);
  const int64_t now = sw->now;
  if (pd->netfd.load(std::memory_order_relaxed) || pd->origin.load(std::memory_order_relaxed) == FdOrigin::kRuntime ||
      !pd->registered.load(std::memory_order_relaxed)) {
    return;
  }
  bool waiting = pd->rg.load(std::memory_order_relaxed) > kWait || pd->wg.load(std::memory_order_relaxed) > kWait ||
                 pd->nwl.load(std::memory_order_relaxed) > 0;
  if (!waiting) {
    pd->stale_since = 0;
    return;
  }
  sw->waiting = true;
  if (pd->stale_since == 0) {
    pd->stale_since = now;
    return;
  }
  if (now - pd->stale_since < kStaleAfterNs || now < pd->stale_next) return;
  pd->stale_next = now + kStaleAgainNs;
  if (!pd_try_ref(pd)) return;
  if (pd->fd == fd && fd_slot_load(fd) == reinterpret_cast<uintptr_t>(pd)) {
    int err = netpoll_modify(fd, tag_of(pd));
    if (err == ENOENT || err == EBADF) {
      // The number names another file now (or none): its waiters would
      // never hear of it again. They fail with EBADF, as a close would
      // have made them.
      pd->registered.store(false, std::memory_order_relaxed);
      fd_slot_reset(fd);
    }
  }
  pd_unref(pd);
}

}  // namespace

// Goroutines that have waited on a hooked descriptor for a second or more
// are checked, once every ten seconds each: does the number still name the
// file the poller has under it? A number closed behind the hooks (glibc's
// own close, in fclose) and reused by a descriptor they did not see made
// (fopen) leaves such waiters with nobody to wake them. One epoll_ctl per
// long waiter per ten seconds; gort's own descriptors (NetFD) are closed
// only through gort and are not looked at.
int64_t poll_sweep_stale(int64_t now) {
  if (now < g_next_sweep) return g_next_sweep;
  if (!g_libc_hooks_on.load(std::memory_order_relaxed)) return -1;
  Sweep sw{now, false};
  fd_table_each(&sweep_one, &sw);
  g_next_sweep = now + kSweepEveryNs;
  return sw.waiting ? g_next_sweep : -1;
}

void install_netpoll_hooks(SchedHooks* hooks) {
  hooks->netpoll_sweep = &poll_sweep_stale;
  hooks->netpoll = &netpoll;
  hooks->netpoll_break = &netpoll_break;
  hooks->netpoll_waiters = &netpoll_waiters;
  hooks->netpoll_init = &hook_init;
  hooks->netpoll_fini = &hook_fini;
}

}  // namespace gort::internal

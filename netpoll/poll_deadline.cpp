// netpoll/poll_deadline.cpp — a poll descriptor's read and write deadlines
// (Go's SetReadDeadline and SetWriteDeadline under net.Conn): the timers
// that expire them, pooled apart from the descriptors, and the lock-free
// push-back that lets a server renew a connection's deadline on every
// request for a CAS.
//
// An expiring deadline races a parking waiter as a close does (Dekker on
// seq_cst stores and loads, see the top of poll_desc.cpp): -1 stored into
// `rd`/`wd`, then the waiter slot loaded (unblock).
//
// Lock order: PollDesc::lock, then a timer heap's lock (timer_reset and
// timer_stop are called with the descriptor locked; a deadline timer's
// callback takes the descriptor lock while holding nothing), then the
// timers' pool lock (attach_timers, detach_timers).
#include <vector>

#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "netpoll/netpoll.hpp"
#include "netpoll/poll_desc.hpp"

namespace gort::internal {

// A descriptor's deadline timers, attached while one of its deadlines is
// pending (see "Deadlines"). Never freed, only recycled, like the
// descriptors: a firing the runner claimed before a detach may still run
// after it, and must find either no descriptor, one whose `dl` is another
// block, or a timer whose seq moved on (the detach stopped it, a re-attach
// reset it).
struct DeadlineTimers {
  Timer rt;
  Timer wt;
  // The descriptor it serves, or null while in the pool. Written under
  // that descriptor's lock; deadline_fired reads it with no lock held.
  std::atomic<PollDesc*> pd{nullptr};
  DeadlineTimers* link = nullptr;  // free list
  // When each timer is armed for (0: idle), under the descriptor's lock:
  // a deadline set at or after it needs no move in the timer heap.
  int64_t r_armed = 0, w_armed = 0;
};

namespace {

constexpr int kBlock = 64;

// The pool's own lock (the descriptors' pool has another of the same rank:
// neither is taken while the other is held).
RuntimeMutex<LockRank::kPollCache> g_dl_mu;
DeadlineTimers* g_free_dl ABSL_GUARDED_BY(g_dl_mu) = nullptr;
int64_t g_dl_attached ABSL_GUARDED_BY(g_dl_mu) = 0;
std::vector<DeadlineTimers*> g_dl_blocks ABSL_GUARDED_BY(g_dl_mu);  // keeps every block reachable

void deadline_fired(Timer* t, int64_t now, uint32_t seq);

Timer* timer_of(DeadlineTimers* dl, int mode) { return mode == 'r' ? &dl->rt : &dl->wt; }
int64_t& armed_of(DeadlineTimers* dl, int mode) { return mode == 'r' ? dl->r_armed : dl->w_armed; }

// pd's timers, attached from the pool if it has none. pd->lock held.
DeadlineTimers* attach_timers(PollDesc* pd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pd->lock) {
  if (pd->dl != nullptr) return pd->dl;
  DeadlineTimers* dl;
  {
    MutexLock lock(g_dl_mu);
    if (g_free_dl == nullptr) {
      auto* block = new DeadlineTimers[kBlock];
      g_dl_blocks.push_back(block);
      for (int i = 0; i < kBlock; i++) {
        block[i].rt.f = block[i].wt.f = &deadline_fired;
        block[i].rt.arg = block[i].wt.arg = &block[i];
        block[i].link = g_free_dl;
        g_free_dl = &block[i];
      }
    }
    dl = g_free_dl;
    g_free_dl = dl->link;
    g_dl_attached++;
  }
  dl->link = nullptr;
  dl->pd.store(pd, std::memory_order_release);
  pd->dl = dl;
  return dl;
}

}  // namespace

void detach_timers(PollDesc* pd) {
  DeadlineTimers* dl = pd->dl;
  if (dl == nullptr) return;
  // Each stop moves the timer's seq on: a firing already claimed is stale
  // wherever the block serves next.
  timer_stop(&dl->rt);
  timer_stop(&dl->wt);
  dl->r_armed = dl->w_armed = 0;
  dl->pd.store(nullptr, std::memory_order_release);
  pd->dl = nullptr;
  MutexLock lock(g_dl_mu);
  dl->link = g_free_dl;
  g_free_dl = dl;
  g_dl_attached--;
}


namespace {

void deadline_fired(Timer* t, int64_t now, uint32_t seq) {
  auto* dl = static_cast<DeadlineTimers*>(t->arg);
  int mode = t == &dl->rt ? 'r' : 'w';
  PollDesc* pd = dl->pd.load(std::memory_order_acquire);
  if (pd == nullptr) return;  // detached since the claim: stale
  pd->lock.lock();
  // Stale if a stop or reset came after the runner claimed this firing:
  // the deadline was changed (pushed back just as it came due, say) or the
  // descriptor closed, and maybe reused, or the block moved to another
  // descriptor. Changes happen under pd->lock, so none can slip in between
  // this check and the store below.
  if (pd->dl != dl || timer_seq(t) != seq || pd->closing.load()) {
    pd->lock.unlock();
    return;
  }
  std::atomic<int64_t>& d = mode == 'r' ? pd->rd : pd->wd;
  int64_t when = d.load(std::memory_order_seq_cst);
  for (;;) {
    // Not reached: whatever leaves a deadline <= 0 also stops its timer,
    // which the seq check above has seen. A guard, not a path.
    if (when <= 0) {
      armed_of(dl, mode) = 0;
      pd->lock.unlock();
      return;
    }
    if (when > now) {
      // Pushed back since the timer was armed: arm it for the new time.
      timer_reset(t, when, 0);
      armed_of(dl, mode) = when;
      pd->lock.unlock();
      return;
    }
    // Dekker with poll_wait: this store, then unblock's slot load. A
    // failed CAS means a push_back moved it (`when` is reloaded).
    if (d.compare_exchange_weak(when, -1, std::memory_order_seq_cst)) break;
  }
  armed_of(dl, mode) = 0;
  // The other deadline not pending either: the timers go back to the pool
  // (t is idle, and nothing below touches it; the runner does not either).
  if ((mode == 'r' ? pd->wd : pd->rd).load(std::memory_order_relaxed) <= 0) detach_timers(pd);
  pd->lock.unlock();
  if (G* g = unblock(pd, mode, Unblock::kCloseOrDeadline)) ready(g);
  if (pd->nwl.load(std::memory_order_seq_cst) != 0) pd_wake_list(pd, mode, nullptr);
}

// Moves a pending deadline later without the descriptor's lock or the
// timer's: a server pushes its connections' deadlines back on every
// request. Fails (the caller takes the locked path) unless `d` holds a
// deadline (> 0) no later than `deadline`, which is in the future.
bool push_back(std::atomic<int64_t>& d, int64_t deadline, int64_t now) {
  int64_t cur = d.load(std::memory_order_acquire);
  if (cur <= 0 || deadline < cur || deadline <= now) return false;
  return d.compare_exchange_strong(cur, deadline, std::memory_order_acq_rel);
}

}  // namespace

// Deadlines. A descriptor's two timers come from a pool (DeadlineTimers)
// when a deadline in the future is set, and go back to it when neither
// deadline is pending any more and at close: most descriptors (an idle
// connection waiting for its next request, a pipe) never hold them.
//
// A deadline > 0 has its timer armed at or before it: the
// locked path arms the timer at the deadline itself; push_back only moves a
// deadline later and leaves the timer where it is; deadline_fired, when the
// timer comes due early, re-arms it for the deadline it finds. So pushing a
// deadline back costs one CAS, and its timer fires once per push-back
// period rather than being moved in its heap on every call (Go moves it:
// pd.lock and modtimer on each SetDeadline).
void poll_set_deadline(PollDesc* pd, int64_t deadline, int mode, int64_t now) {
  bool set_r = mode != 'w', set_w = mode != 'r';
  // Only a deadline in the future is compared with the clock: clearing one
  // (a server's request with no read timeout) reads none.
  if (deadline > 0 && now == 0) now = nanotime();
  if (deadline > 0) {
    // Each side that can be pushed back is done; the rest take the lock.
    if (set_r && push_back(pd->rd, deadline, now)) set_r = false;
    if (set_w && push_back(pd->wd, deadline, now)) set_w = false;
    if (!set_r && !set_w) return;
  } else if (deadline == 0 && (!set_r || pd->rd.load(std::memory_order_acquire) == 0) &&
             (!set_w || pd->wd.load(std::memory_order_acquire) == 0)) {
    // Cleared already: a server clears the read deadline of each request
    // that has none, most often one it never set. (A concurrent set is
    // ordered either way, as if it came after.)
    return;
  }
  bool expire_r = false, expire_w = false;
  pd->lock.lock();
  if (pd->closing.load()) {
    pd->lock.unlock();
    return;
  }
  // Every path stops or resets the timer, which makes a firing already
  // claimed stale (deadline_fired).
  auto apply = [&](int m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pd->lock) -> bool {
    std::atomic<int64_t>& d = m == 'r' ? pd->rd : pd->wd;
    auto disarm = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pd->lock) {
      if (pd->dl == nullptr) return;
      timer_stop(timer_of(pd->dl, m));
      armed_of(pd->dl, m) = 0;
    };
    if (deadline == 0) {
      d.store(0, std::memory_order_release);
      disarm();
      return false;
    }
    if (deadline <= now) {
      // Dekker with poll_wait: this store, then unblock's slot load after
      // the unlock. (A deadline in the future wakes nobody: release.)
      d.store(-1, std::memory_order_seq_cst);
      disarm();
      return true;
    }
    d.store(deadline, std::memory_order_release);
    // Armed at or before the new deadline already (it was moved earlier,
    // but not past the timer: a server's idle deadline after a request
    // that had none, kFarDeadline): the timer stays where it is, and when
    // it comes due deadline_fired arms it for the deadline it finds. A
    // firing claimed meanwhile finds it too (its seq is still current).
    DeadlineTimers* dl = attach_timers(pd);  // pd's own, if it has them
    int64_t& armed = armed_of(dl, m);
    if (armed != 0 && armed <= deadline) return false;
    timer_reset(timer_of(dl, m), deadline, 0);
    armed = deadline;
    return false;
  };
  if (set_r) expire_r = apply('r');
  if (set_w) expire_w = apply('w');
  // With neither deadline pending the timers go back to the pool (no
  // push_back can make one pending again without the lock: it needs one
  // pending already).
  if (pd->dl != nullptr && pd->rd.load(std::memory_order_relaxed) <= 0 &&
      pd->wd.load(std::memory_order_relaxed) <= 0) {
    detach_timers(pd);
  }
  pd->lock.unlock();
  if (expire_r) {
    if (G* g = unblock(pd, 'r', Unblock::kCloseOrDeadline)) ready(g);
    if (pd->nwl.load(std::memory_order_seq_cst) != 0) pd_wake_list(pd, 'r', nullptr);
  }
  if (expire_w) {
    if (G* g = unblock(pd, 'w', Unblock::kCloseOrDeadline)) ready(g);
    if (pd->nwl.load(std::memory_order_seq_cst) != 0) pd_wake_list(pd, 'w', nullptr);
  }
}

void poll_defer_deadline(PollDesc* pd, int mode, int64_t now) {
  if (push_back(mode == 'r' ? pd->rd : pd->wd, kFarDeadline, now)) return;
  poll_set_deadline(pd, 0, mode, now);
}

int64_t poll_deadline_timers_attached() {
  MutexLock lock(g_dl_mu);
  return g_dl_attached;
}

}  // namespace gort::internal

// preempt/retake.cpp — taking the P of an M that the kernel blocked outside
// gort::blocking (Go gets this from entersyscall on every system call; C++
// code makes system calls without telling anyone, so sysmon detects the
// blocked thread instead).
//
// Detection, each sysmon round, for a P whose M runs a goroutine outside the
// runtime: the thread's CPU-time clock has hardly moved for kBlockedNs (1 ms) while the P's schedtick stayed the same, and
// /proc/self/task/TID/stat says the thread sleeps ('S') or waits on I/O
// ('D'), not that it is runnable and merely waiting for a CPU ('R').
//
// The retake is a Dekker between sysmon and the M (M::retake):
//
//   sysmon                               the M (ensurep, at a runtime entry)
//   retake: None -> Deciding             acquirem: locks++ (plain store)
//   membarrier(PRIVATE_EXPEDITED)        signal fence (compiler only)
//   load locks, curg, schedtick          load retake
//
// membarrier makes every other thread of the process execute a full fence,
// so at least one side sees the other's store: either sysmon sees locks > 0
// (the M is in the runtime: sysmon backs off, retake -> None) or the M sees
// Deciding and waits for the verdict. Once sysmon has seen locks == 0 with
// the same G and tick, the M cannot enter the runtime without stopping at
// ensurep, so the P is handed off (handoffp) with the M frozen outside it,
// and retake -> Done tells the M, at its next entry, to get a P back as
// exitsyscall does. The M's fast path stays a plain load: the cost is all on
// sysmon's side, and only when it takes a P.
//
// The goroutine's preempt flag is set too, so that it reaches the
// scheduler (and gets a P) at its next gort call even if that call would
// not need one.
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "preempt/preempt.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {
namespace {

// How long a thread must have slept in the kernel. Go retakes a P from a
// system call after 20 µs, but that call announced itself; an unannounced
// sleep is most often short (a page fault waiting for mmap_lock while
// another thread faults, a brief futex wait), and each retake costs a
// membarrier, a hand-off and a thread wake-up. 1 ms leaves the short ones
// alone and still frees a P that work waits for within about two
// milliseconds (retake_blocked asks sysmon for the looks that takes).
constexpr int64_t kBlockedNs = 1000 * 1000;

bool g_retake_enabled = false;

}  // namespace

std::atomic<bool> retake_blocked_allowed{true};

namespace {

int64_t thread_cpu_ns(clockid_t c) {
  timespec ts;
  if (clock_gettime(c, &ts) != 0) return -1;
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

bool thread_sleeps(int tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  int fd = sys::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  ssize_t n = sys::read(fd, buf, sizeof buf - 1);
  sys::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "tid (comm) S ...": comm may hold spaces and parentheses.
  const char* p = nullptr;
  for (ssize_t i = n - 1; i >= 0; i--) {
    if (buf[i] == ')') {
      p = buf + i;
      break;
    }
  }
  if (p == nullptr || p[1] != ' ') return false;
  return p[2] == 'S' || p[2] == 'D';
}

void retake_init() {
  g_retake_enabled =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

bool retake_blocked(P* p, BlockedWatch* w, int64_t now, int64_t* next_look) {
  if (!g_retake_enabled || !retake_blocked_allowed.load(std::memory_order_relaxed)) return false;
  M* m = relaxed_load(p->m);
  G* g = m != nullptr ? relaxed_load(m->curg) : nullptr;
  int tid = m != nullptr ? m->os_tid.load(std::memory_order_acquire) : 0;
  if (g == nullptr || g->is_g0 || tid == 0 || m->locks.load(std::memory_order_relaxed) != 0 ||
      m->in_blocking.load(std::memory_order_relaxed)) {
    w->m = nullptr;
    return false;
  }
  uint32_t tick = p->schedtick_seen.load(std::memory_order_relaxed);
  if (w->m != m || w->tick != tick) {
    // A new run. Its thread's clock is read from the next look on: reading
    // another thread's CPU clock is a system call that locks that CPU's run
    // queue, and a P that keeps scheduling must not pay it every round (a
    // test waking 100,000 sleepers on 2 Ps slowed down until they stopped
    // overlapping).
    *w = BlockedWatch{m, tick, -1, now};
    return false;
  }
  int64_t cpu = thread_cpu_ns(m->cpuclock);
  // sysmon looks again within kBlockedNs, rather than at its own pace (up to
  // 10 ms while Ps run), only when that could matter: something waits for
  // this P, and the thread may be asleep. A CPU-bound goroutine with nothing
  // queued behind it costs no extra wake-ups (issue: sysmon's wake-ups while
  // Ps are busy); a goroutine that blocks with work queued behind it loses
  // its P within about two milliseconds.
  int64_t t0 = timers_first(p);
  bool waited_for = !p->runq.empty() || sched.runqsize.load(std::memory_order_relaxed) > 0 ||
                    (t0 != 0 && t0 < now + kBlockedNs);
  auto look_at = [&](int64_t when) {
    if (waited_for && when < *next_look) *next_look = when;
  };
  // Asleep since w->since unless it used more than a sixteenth of the time
  // (not "no CPU at all": the preemption signals sysmon keeps sending a run
  // this long are handled, and each costs the sleeper a few µs).
  if (w->cpu < 0 || (cpu - w->cpu) * 16 > now - w->since) {
    // On the CPU for most of the interval: it did not sleep long enough in
    // it to matter, and sysmon's next look at its own pace will tell.
    bool busy = w->cpu >= 0 && (cpu - w->cpu) * 2 >= now - w->since;
    w->cpu = cpu;
    w->since = now;
    if (!busy) look_at(now + kBlockedNs);
    return false;
  }
  if (now - w->since < kBlockedNs) {
    look_at(w->since + kBlockedNs);
    return false;
  }
  if (!thread_sleeps(tid)) {
    w->since = now;  // runnable, waiting for a CPU: not ours to take
    return false;
  }
  if (!cas_retake(m, RetakeState::kNone, RetakeState::kDeciding)) return false;
  syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  if (m->locks.load(std::memory_order_seq_cst) != 0 || relaxed_load(m->curg) != g || relaxed_load(p->m) != m ||
      p->schedtick_seen.load(std::memory_order_relaxed) != tick ||
      !cas_status(p, PStatus::kRunning, PStatus::kIdle)) {
    set_retake(m, RetakeState::kDeciding, RetakeState::kNone, std::memory_order_release);
    return false;
  }
  // The M is frozen outside the runtime (it stops at ensurep): p is ours.
  relaxed_store<M*>(p->m, nullptr);
  g->preempt.store(true, std::memory_order_relaxed);
  set_retake(m, RetakeState::kDeciding, RetakeState::kDone, std::memory_order_release);
  w->m = nullptr;
  // Its slice timer would interrupt the call it sleeps in (EINTR).
  runtime.hooks.slice_timer_stop(m);
  handoffp(p);
  return true;
}

}  // namespace gort::internal

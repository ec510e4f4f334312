// gmp/idle.cpp — idle Ms and Ps, and starting Ms: Go's midle and pidle lists
// (mput/mget, pidleput/pidleget) and everything in proc.go that moves an M or
// a P on or off them: acquirep/releasep, startm/stopm, wakep, handoffp. newm
// and mstart are here because an M is made only when startm finds midle
// empty, or by mprestart straight onto midle (M0 aside: run.cpp). Ms are
// never destroyed before shutdown: an M with nothing to do sleeps on midle.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>

#include "gmp/clock_rand.hpp"
#include "gmp/os/fatal.hpp"
#include "gmp/proc.hpp"
#include "gmp/trace_consume.hpp"
#include "gmp/profiling.hpp"
#include "gmp/race/race.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {

// Sched::lock held.
void pidleput(P* p) {
  if (!p->runq.empty()) fatal("pidleput: P has non-empty run queue");
  if (stop_p_if_waiting_locked(p)) return;
  p->link = sched.pidle;
  sched.pidle = p;
  // seq_cst: Dekker with wake_poller and wakep (they store work, then
  // read npidle).
  sched.npidle.fetch_add(1, std::memory_order_seq_cst);
}

// Sched::lock held.
P* pidleget() {
  P* p = sched.pidle;
  if (p != nullptr) {
    sched.pidle = p->link;
    p->link = nullptr;
    sched.npidle.fetch_sub(1, std::memory_order_seq_cst);
  }
  return p;
}

namespace {

// Sched::lock held.
void mput(M* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  m->link = sched.midle;
  sched.midle = m;
  sched.nmidle++;
}

// Sched::lock held.
M* mget() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched.lock) {
  M* m = sched.midle;
  if (m != nullptr) {
    sched.midle = m->link;
    m->link = nullptr;
    sched.nmidle--;
  }
  return m;
}

// Per-thread set-up of an M, on its own thread.
void minit(M* m) {
  setm(m);
  m->tid = pthread_self();
  // Before os_tid is published: sysmon reads it once it sees the thread.
  pthread_getcpuclockid(m->tid, &m->cpuclock);
  // seq_cst: Dekker with a CPU profile that starts meanwhile (it stores
  // m_start, then reads every M's os_tid): one of them makes this
  // thread's profiling timer.
  m->os_tid.store(static_cast<int>(gettid()), std::memory_order_seq_cst);
  m_thread_state_init(m);
  m_signal_stack_init(m);
  trace_register_m(m);
  if (tracing()) [[unlikely]] trace_m_start(m);
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &m->g0_stack_lo, &m->g0_stack_size);
    pthread_attr_destroy(&attr);
  }
  if (auto* start = profiling.m_start.load(std::memory_order_seq_cst)) [[unlikely]] start(m);
}

void* mstart(void* arg) {
  M* m = static_cast<M*>(arg);
  // Every M gets the signal mask of the thread that called run, whoever
  // started it (sysmon blocks the preemption signal for itself).
  pthread_sigmask(SIG_SETMASK, &sched.m_sigmask, nullptr);
  // A dying process stopped the runtime to print it: no new M joins in.
  while (sched.frozen.load(std::memory_order_acquire)) sys::pause();
  minit(m);
  if (m->started_idle) {
    // On the idle list since before it ran (mprestart): sleep until startm
    // hands it a P, or return at once if it already has.
    m->park.sleep();
    m->park.clear();
  }
  if (m->nextp != nullptr) {
    acquirep(m, m->nextp);
    m->nextp = nullptr;
  }
  // Without a P here only when the runtime stops.
  if (m->p != nullptr) schedule_loop();
  if (m->p != nullptr && m->p->m == m) {
    MutexLock lock(sched.lock);
    P* p = releasep(m);
    p->link = nullptr;
  }
  m->p = nullptr;
  m_signal_stack_free(m);
  setm(nullptr);
  return nullptr;
}

// With p null and not spinning, the M goes on the idle list at once,
// before its thread runs (mprestart).
void newm(P* p, bool spinning) {
  M* m = new_untracked<M>();
  m->id = sched.mnext.fetch_add(1, std::memory_order_relaxed);
  m->g0.is_g0 = true;
  m->g0.status.store(GStatus::kRunning, std::memory_order_relaxed);
  m->nextp = p;
  relaxed_store(m->spinning, spinning);
  m->fastrand_state = static_cast<uint64_t>(nanotime()) ^ (static_cast<uint64_t>(m->id) << 32) ^
                      0x9E3779B97F4A7C15ull;
  // The thread is started under the lock that run()'s join_ms reads allm
  // with: an M it finds there is always joinable (otherwise it could find
  // one whose std::thread was not assigned yet, skip it, and destroy it
  // joinable).
  UniqueLock lock(sched.lock);
  // No new threads once stopping: run() may already have joined them. Read
  // under the lock join_ms reads allm with: sysmon, which join_ms does not
  // wait for, starts Ms too (handoffp, wakep), and one that saw `stopping`
  // clear just before it was set pushed its M after join_ms's last look;
  // teardown then destroyed a joinable std::thread (std::terminate). p is
  // simply dropped: nothing schedules any more, teardown frees it.
  if (sched.stopping.load(std::memory_order_acquire)) {
    lock.unlock();
    delete_untracked(m);
    if (spinning) sched.nmspinning.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
  sched.allm.push_back(m);
  sched.mcount++;
  // Go's checkmcount: goroutines blocked in system calls hold their
  // threads, and past the limit the program is told so.
  if (sched.mcount > sched.cfg.max_threads) {
    lock.unlock();
    // Several Ms can cross the limit at once; only the dying one prints
    // (the others wait in fatal, so their buffers stay alive).
    char preamble[64];
    std::snprintf(preamble, sizeof preamble, "runtime: program exceeds %d-thread limit\n",
                  static_cast<int>(sched.cfg.max_threads));
    fatal_after(preamble, "thread exhaustion");
  }
  if (p == nullptr && !spinning) {
    m->started_idle = true;
    mput(m);
  }
  {
    // Whatever goroutine is current (wakep runs in goroutines too) is not
    // the new thread's past: it must carry no history into MRace::tls.
    RaceIgnoreSync no_history;
    m->thread = std::thread([m] { mstart(m); });
  }
}

}  // namespace

void acquirep(M* m, P* p) {
  if (p->m != nullptr) fatal("acquirep: P is held by an M");
  m->p = p;
  relaxed_store(p->m, m);
  set_status(p, PStatus::kIdle, PStatus::kRunning);
  if (tracing()) [[unlikely]] trace_proc(m, p->id, true);
  // Dekker with sysmon's deep sleep (sysmon.cpp sleep_ns: it stores sysmon_wait, then
  // loads npidle): pidleget's decrement of npidle and this load are both
  // seq_cst, so one side sees the other and sysmon is never left asleep.
  if (sched.sysmon_wait.load(std::memory_order_seq_cst)) runtime.hooks.sysmon_wake();
}

P* releasep(M* m) {
  P* p = m->p;
  if (p == nullptr || p->m != m) fatal("releasep: invalid P state");
  if (tracing()) [[unlikely]] trace_proc(m, p->id, false);
  relaxed_store<M*>(p->m, nullptr);
  set_status(p, PStatus::kRunning, PStatus::kIdle);
  m->p = nullptr;
  return p;
}

void startm(P* p, Spinning spin) {
  const bool spinning = spin == Spinning::kYes;
  UniqueLock lock(sched.lock);
  if (p == nullptr) {
    p = pidleget();
    if (p == nullptr) {
      lock.unlock();
      if (spinning) sched.nmspinning.fetch_sub(1, std::memory_order_acq_rel);
      return;
    }
  }
  M* m = mget();
  if (m == nullptr) {
    lock.unlock();
    newm(p, spinning);
    return;
  }
  lock.unlock();
  relaxed_store(m->spinning, spinning);
  m->nextp = p;
  m->park.wakeup();
}

void mprestart() {
  {
    MutexLock lock(sched.lock);
    if (sched.npidle.load() == 0 || sched.nmidle > 0) return;
  }
  newm(nullptr, false);
}

// Puts the M to sleep until somebody hands it a P (or shutdown).
void stopm(M* m) {
  {
    MutexLock lock(sched.lock);
    // begin_stop wakes the idle Ms under this lock after setting stopping,
    // so an M that gets here later must not go to sleep.
    if (sched.stopping.load(std::memory_order_acquire)) return;
    mput(m);
    check_dead_locked();
  }
  m->park.sleep();
  m->park.clear();
  if (m->nextp != nullptr) {
    acquirep(m, m->nextp);
    m->nextp = nullptr;
  }
}

void wakep() {
  if (sched.npidle.load(std::memory_order_seq_cst) == 0) return;
  // seq_cst: Dekker with an M that stops spinning (find_runnable), which
  // decrements nmspinning and then looks at every run queue again.
  if (sched.nmspinning.load(std::memory_order_seq_cst) != 0) return;
  int32_t zero = 0;
  if (!sched.nmspinning.compare_exchange_strong(zero, 1, std::memory_order_acq_rel)) return;
  startm(nullptr, Spinning::kYes);
}

void handoffp(P* p) {
  // Work to do: start an M for it right away.
  if (!p->runq.empty() || sched.runqsize.load(std::memory_order_acquire) > 0) {
    startm(p, Spinning::kNo);
    return;
  }
  // Nobody spinning or idle: this P may be needed to find work soon.
  if (sched.nmspinning.load() + sched.npidle.load() == 0) {
    int32_t zero = 0;
    if (sched.nmspinning.compare_exchange_strong(zero, 1)) {
      startm(p, Spinning::kYes);
      return;
    }
  }
  UniqueLock lock(sched.lock);
  if (sched.runqsize.load(std::memory_order_relaxed) > 0) {
    lock.unlock();
    startm(p, Spinning::kNo);
    return;
  }
  // Its timers still need someone: the poller or an idle M will serve
  // them (find_runnable runs other Ps' timers and blocks until the next).
  int64_t first = timers_first(p);
  pidleput(p);
  lock.unlock();
  if (first != 0 && sched.npidle.load() == sched.procs()) wakep();
}

// Used by run.cpp for the thread that called gort::run.
void mstart_on_current_thread(M* m) {
  minit(m);
  schedule_loop();
  m_signal_stack_free(m);
}

}  // namespace gort::internal

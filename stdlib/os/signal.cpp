// stdlib/os/signal.cpp — see gort/signal.hpp (Go's os/signal, whose
// signal_unix.go and runtime/sigqueue.go are the model: a handler that only
// marks and wakes, and one receiver that fans out with non-blocking sends).
//
// State (all under g_mu, except what the handler touches):
//   entries   each registered channel and the signals it watches
//   handled   signals whose disposition is our handler
//   ignoring  signals we set to SIG_IGN
//   saved     signals whose disposition before we first touched them is in
//             g_orig (restored by stop, reset and the end of the run)
//   g_pending (atomic) signals caught and not yet relayed
//   g_efd     (atomic) the eventfd the handler writes; -1 between runs
#include "gort/signal.hpp"

#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gmp/sched.hpp"
#include "gort/runtime.hpp"
#include "netpoll/netpoll.hpp"
#include "preempt/preempt.hpp"
#include "gmp/lock.hpp"
#include "gmp/os/sys.hpp"

namespace gort::signal {
namespace {

using internal::LockRank;
using internal::MutexLock;
using internal::PollDesc;
using internal::RuntimeMutex;

constexpr int kMaxSig = 64;

struct Entry {
  SendChan<int> ch;
  uint64_t mask = 0;
};

RuntimeMutex<LockRank::kSignal> g_mu;
std::vector<Entry> g_entries;
uint64_t g_handled = 0, g_ignoring = 0, g_saved = 0;
struct sigaction g_orig[kMaxSig + 1];
bool g_relay_running = false;
PollDesc* g_pd = nullptr;

std::atomic<uint64_t> g_pending{0};
std::atomic<int> g_efd{-1};
std::atomic<int> g_inflight{0};

uint64_t bit(int sig) { return uint64_t{1} << (sig - 1); }

// Why sig cannot be relayed, or null.
const char* unrelayable(int sig) {
  if (sig == SIGKILL || sig == SIGSTOP) return "cannot be caught";
  if (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP) {
    return "reports faults (gort turns them into fatal errors)";
  }
  if (sig == internal::preempt_signal()) return "is the runtime's preemption signal";
  if (sig >= 32 && sig < SIGRTMIN) return "is reserved by the C library";
  return nullptr;
}

// The signals of a call: the list (checked), or every relayable one.
uint64_t mask_of(const char* what, std::initializer_list<int> sigs) {
  uint64_t m = 0;
  if (sigs.size() == 0) {
    for (int s = 1; s <= kMaxSig; s++) {
      if (unrelayable(s) == nullptr) m |= bit(s);
    }
    return m;
  }
  for (int s : sigs) {
    if (s < 1 || s > kMaxSig) {
      throw panic_error(std::string("gort::signal::") + what + ": signal " + std::to_string(s) + " out of range [1, " +
                        std::to_string(kMaxSig) + "]");
    }
    if (const char* why = unrelayable(s)) {
      throw panic_error(std::string("gort::signal::") + what + ": signal " + std::to_string(s) + " (" +
                        sigabbrev_np(s) + ") " + why);
    }
    m |= bit(s);
  }
  return m;
}

void on_signal(int sig, siginfo_t*, void*) {
  int saved_errno = errno;
  g_inflight.fetch_add(1, std::memory_order_seq_cst);
  g_pending.fetch_or(bit(sig), std::memory_order_seq_cst);
  int fd = g_efd.load(std::memory_order_seq_cst);
  if (fd >= 0) {
    uint64_t one = 1;
    ssize_t n = internal::sys::write(fd, &one, sizeof one);
    (void)n;  // EAGAIN: the counter is full, the reader is awake anyway
  }
  g_inflight.fetch_sub(1, std::memory_order_seq_cst);
  errno = saved_errno;
}

// g_mu held. Remembers sig's disposition before the first change.
void save_locked(int sig) {
  if ((g_saved & bit(sig)) != 0) return;
  sigaction(sig, nullptr, &g_orig[sig]);
  g_saved |= bit(sig);
}

void restore_locked(int sig) {
  if ((g_saved & bit(sig)) != 0) sigaction(sig, &g_orig[sig], nullptr);
  g_handled &= ~bit(sig);
  g_ignoring &= ~bit(sig);
}

uint64_t wanted_locked() {
  uint64_t m = 0;
  for (const Entry& e : g_entries) m |= e.mask;
  return m;
}

void add_locked(const SendChan<int>& ch, uint64_t m);

void wake_relay() {
  int fd = g_efd.load(std::memory_order_acquire);
  if (fd >= 0) {
    uint64_t one = 1;
    ssize_t n = internal::sys::write(fd, &one, sizeof one);
    (void)n;
  }
}

void deliver_locked(uint64_t pending) {
  for (int s = 1; s <= kMaxSig; s++) {
    if ((pending & bit(s)) == 0) continue;
    for (const Entry& e : g_entries) {
      if ((e.mask & bit(s)) != 0) gort::select(on_send(e.ch, s), on_default());
    }
  }
}

// The one receiver: drains the eventfd, relays what is pending, and waits
// in the poller. Leaves when no channel is registered.
void relay(int fd, PollDesc* pd) {
  for (;;) {
    uint64_t v;
    while (internal::sys::read(fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v)) {
    }
    uint64_t pending = g_pending.exchange(0, std::memory_order_seq_cst);
    {
      MutexLock lock(g_mu);
      if (g_pd != pd) return;  // the run that started us ended
      deliver_locked(pending);
      if (g_entries.empty()) {
        g_relay_running = false;
        return;
      }
    }
    if (pending == 0 && internal::poll_wait(pd, 'r') != 0) {
      MutexLock lock(g_mu);
      if (g_pd == pd) g_relay_running = false;
      return;
    }
  }
}

// At the end of a run: every disposition back, no eventfd (its poll
// descriptor, still open, is closed with the poller's others).
void on_run_end() {
  MutexLock lock(g_mu);
  for (int s = 1; s <= kMaxSig; s++) {
    if (((g_handled | g_ignoring) & bit(s)) != 0) restore_locked(s);
  }
  g_entries.clear();
  g_relay_running = false;
  g_pd = nullptr;
  g_efd.store(-1, std::memory_order_seq_cst);
  // A handler on a plain thread may be writing right now: the fd is closed
  // only after this returns.
  while (g_inflight.load(std::memory_order_seq_cst) != 0) sched_yield();
  g_pending.store(0, std::memory_order_relaxed);
}

// g_mu held, the runtime running: the eventfd exists; returns whether the
// caller must start the receiver (with gort::go, after unlocking: a spawn
// may yield, and no goroutine may switch while it holds an OS lock).
bool ensure_relay_locked() {
  if (g_pd == nullptr) {
    int fd = internal::sys::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) throw panic_error("gort::signal::notify: eventfd: " + std::string(strerrorname_np(errno)));
    PollDesc* pd = internal::poll_open(fd);
    if (pd == nullptr) {
      int err = errno;
      internal::sys::close(fd);
      throw panic_error("gort::signal::notify: poller: " + std::string(strerrorname_np(err)));
    }
    g_pd = pd;
    g_efd.store(fd, std::memory_order_seq_cst);
    internal::at_run_end(&on_run_end);
  }
  if (g_relay_running) return false;
  g_relay_running = true;
  return true;
}

}  // namespace

void notify(const SendChan<int>& ch, std::initializer_list<int> sigs) {
  if (!internal::runtime.running.load(std::memory_order_acquire)) {
    throw panic_error("gort::signal::notify: the runtime is not running");
  }
  if (!ch) throw panic_error("os/signal: Notify using nil channel");
  uint64_t m = mask_of("notify", sigs);
  bool start = false;
  int fd;
  PollDesc* pd;
  {
    MutexLock lock(g_mu);
    start = ensure_relay_locked();
    fd = g_efd.load(std::memory_order_relaxed);
    pd = g_pd;
    add_locked(ch, m);
  }
  if (start) gort::go([fd, pd] { relay(fd, pd); });
}

namespace {

void add_locked(const SendChan<int>& ch, uint64_t m) {
  Entry* e = nullptr;
  for (Entry& x : g_entries) {
    if (x.ch == ch) e = &x;
  }
  if (e == nullptr) {
    g_entries.push_back(Entry{ch, 0});
    e = &g_entries.back();
  }
  e->mask |= m;
  struct sigaction sa = {};
  sa.sa_sigaction = &on_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigfillset(&sa.sa_mask);
  for (int s = 1; s <= kMaxSig; s++) {
    if ((m & bit(s)) == 0 || (g_handled & bit(s)) != 0) continue;
    save_locked(s);
    sigaction(s, &sa, nullptr);
    g_handled |= bit(s);
    g_ignoring &= ~bit(s);
  }
}

}  // namespace

void stop(const SendChan<int>& ch) {
  MutexLock lock(g_mu);
  for (size_t i = 0; i < g_entries.size(); i++) {
    if (g_entries[i].ch == ch) {
      g_entries.erase(g_entries.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  uint64_t unwatched = g_handled & ~wanted_locked();
  for (int s = 1; s <= kMaxSig; s++) {
    if ((unwatched & bit(s)) != 0) restore_locked(s);
  }
  wake_relay();  // it leaves if nothing is registered
}

void ignore(std::initializer_list<int> sigs) {
  uint64_t m = mask_of("ignore", sigs);
  MutexLock lock(g_mu);
  for (Entry& e : g_entries) e.mask &= ~m;
  struct sigaction sa = {};
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  for (int s = 1; s <= kMaxSig; s++) {
    if ((m & bit(s)) == 0) continue;
    save_locked(s);
    sigaction(s, &sa, nullptr);
    g_handled &= ~bit(s);
    g_ignoring |= bit(s);
  }
}

bool ignored(int sig) {
  if (sig < 1 || sig > kMaxSig) return false;
  struct sigaction cur;
  if (sigaction(sig, nullptr, &cur) != 0) return false;
  return (cur.sa_flags & SA_SIGINFO) == 0 && cur.sa_handler == SIG_IGN;
}

void reset(std::initializer_list<int> sigs) {
  uint64_t m = mask_of("reset", sigs);
  MutexLock lock(g_mu);
  for (Entry& e : g_entries) e.mask &= ~m;
  for (int s = 1; s <= kMaxSig; s++) {
    if ((m & bit(s)) != 0 && ((g_handled | g_ignoring) & bit(s)) != 0) restore_locked(s);
  }
}

}  // namespace gort::signal

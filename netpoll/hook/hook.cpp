// netpoll/hook/hook.cpp — see hook.hpp.
#include "netpoll/hook/hook.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gmp/clock_rand.hpp"
#include "gmp/os/sys.hpp"
#include "gmp/timer.hpp"

namespace gort::internal::hook {
namespace {

int64_t sock_timeout(int fd, int name) {
  timeval tv{};
  socklen_t len = sizeof tv;
  if (sys::getsockopt(fd, SOL_SOCKET, name, &tv, &len) != 0) return 0;
  return int64_t{tv.tv_sec} * 1000000000 + int64_t{tv.tv_usec} * 1000;
}

}  // namespace

uintptr_t classify(int fd) {
  int saved = get_errno();
  struct stat st;
  if (sys::fstat(fd, &st) != 0) {
    set_errno(saved);
    return kSlotEmpty;  // not open: the call itself says so
  }
  FdType type;
  switch (st.st_mode & S_IFMT) {
    case S_IFREG:
    case S_IFBLK:
      set_errno(saved);
      return fd_slot_store(fd, kSlotFile) ? kSlotFile : kSlotEmpty;
    case S_IFDIR:
    case S_IFLNK:
      set_errno(saved);
      return fd_slot_store(fd, kSlotPlain) ? kSlotPlain : kSlotEmpty;
    case S_IFSOCK:
      type = FdType::kSocket;
      break;
    case S_IFIFO:
      type = FdType::kPipe;
      break;
    default:  // a terminal, another device, an eventfd, an epoll instance
      type = FdType::kOther;
      break;
  }
  int fl = sys::fcntl(fd, F_GETFL);
  int fdfl = sys::fcntl(fd, F_GETFD);
  set_errno(saved);
  if (fl < 0 || fdfl < 0) return kSlotEmpty;
  std::atomic<uintptr_t>* s = fd_slot_make(fd);
  if (s == nullptr) return kSlotEmpty;
  PollDesc* pd = pd_alloc(fd);
  pd->origin.store(FdOrigin::kInherited, std::memory_order_relaxed);
  pd->type = type;
  pd->user_nonblock.store((fl & O_NONBLOCK) != 0, std::memory_order_relaxed);
  pd->cloexec.store((fdfl & FD_CLOEXEC) != 0, std::memory_order_relaxed);
  if (type == FdType::kSocket) {
    pd->rcvtimeo.store(sock_timeout(fd, SO_RCVTIMEO), std::memory_order_relaxed);
    pd->sndtimeo.store(sock_timeout(fd, SO_SNDTIMEO), std::memory_order_relaxed);
    set_errno(saved);
  }
  uintptr_t expected = kSlotEmpty;
  if (!s->compare_exchange_strong(expected, reinterpret_cast<uintptr_t>(pd), std::memory_order_acq_rel)) {
    pd_unref(pd);  // another goroutine looked at it first
    return expected;
  }
  return reinterpret_cast<uintptr_t>(pd);
}

namespace {

// The atfork handler of a child process: it has one thread, and nothing of
// the runtime runs in it. That thread is a plain thread from now on.
void after_fork_child() {
  g_libc_hooks_on.store(false, std::memory_order_relaxed);
  setm(nullptr);
}

__attribute__((constructor)) void install_atfork() { pthread_atfork(nullptr, nullptr, &after_fork_child); }

void prepare_child_fd(int fd, PollDesc* pd, void* arg) {
  int also = *static_cast<int*>(arg);
  if (pd->origin.load() != FdOrigin::kOwned) return;
  if (pd->cloexec.load() && fd != also) return;
  if (!pd_try_ref(pd)) return;
  if (fd_slot_load(fd) == reinterpret_cast<uintptr_t>(pd) && !pd->closing.load()) {
    if (!pd->user_nonblock.load()) {
      int fl = sys::fcntl(fd, F_GETFL);
      if (fl >= 0) sys::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    pd->origin.store(FdOrigin::kInherited);
  }
  pd_unref(pd);
}

}  // namespace

__attribute__((noipa)) int get_errno() { return errno; }
__attribute__((noipa)) void set_errno(int e) { errno = e; }

void register_owned(int fd, FdType type, bool user_nonblock, bool cloexec) {
  PollDesc* pd = pd_alloc(fd);
  pd->origin.store(FdOrigin::kOwned, std::memory_order_relaxed);
  pd->type = type;
  pd->user_nonblock.store(user_nonblock, std::memory_order_relaxed);
  pd->cloexec.store(cloexec, std::memory_order_relaxed);
  g_fd_owned_any.store(true, std::memory_order_relaxed);
  if (!fd_slot_store(fd, reinterpret_cast<uintptr_t>(pd))) {
    // Beyond the table: the descriptor is the program's as it asked.
    int saved = get_errno();
    if (!user_nonblock) sys::fcntl(fd, F_SETFL, sys::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    set_errno(saved);
    pd_unref(pd);
  }
}

int wait_fd(int fd, uintptr_t v, int mode, int64_t deadline) {
  PollDesc* pd = slot_pd(v);
  if (!pd_try_ref(pd)) return kRetry;
  if (fd_slot_load(fd) != v) {
    pd_unref(pd);
    return kRetry;
  }
  int saved = get_errno();
  int err = pd_register(pd);
  set_errno(saved);
  if (err == EPERM) {
    // epoll refuses it (a device without poll support): the system-call
    // protocol from now on.
    std::atomic<uintptr_t>* s = fd_slot(fd);
    uintptr_t expected = v;
    if (s != nullptr && s->compare_exchange_strong(expected, kSlotFile, std::memory_order_acq_rel)) pd_unref(pd);
    pd_unref(pd);
    return kRetry;
  }
  if (err != 0) {
    pd_unref(pd);
    return EBADF;
  }
  int r = deadline == 0 ? poll_wait(pd, mode) : poll_wait_list(pd, mode, deadline);
  pd_unref(pd);
  set_errno(saved);
  switch (r) {
    case kPollOk:
      return 0;
    case kPollErrTimeout:
      return ETIMEDOUT;
    default:
      return EBADF;
  }
}

bool level_ready(int fd, int mode) {
  int saved = get_errno();
  pollfd p{fd, static_cast<short>(mode == 'r' ? POLLIN | POLLPRI | POLLRDHUP : POLLOUT), 0};
  bool ready = sys::poll(&p, 1, 0) != 0;
  set_errno(saved);
  return ready;
}

bool may_park() {
  M* m = getm();
  if (m == nullptr) return false;
  int saved = get_errno();
  sigset_t cur;
  bool same = pthread_sigmask(SIG_BLOCK, nullptr, &cur) == 0;
  set_errno(saved);
  uint64_t word = 0;
  static_assert(sizeof(cur) >= sizeof(word));
  __builtin_memcpy(&word, &cur, sizeof word);
  return same && word == m->sigmask;
}

bool owned_blocking(int fd, PollDesc** pd) {
  uintptr_t v = fd_slot_load(fd);
  if (!slot_is_pd(v)) return false;
  PollDesc* p = slot_pd(v);
  if (p->origin.load(std::memory_order_relaxed) != FdOrigin::kOwned ||
      p->user_nonblock.load(std::memory_order_relaxed)) {
    return false;
  }
  *pd = p;
  return true;
}

int thread_wait(int fd, PollDesc*, int mode, int64_t deadline) {
  int saved = get_errno();
  for (;;) {
    int ms = -1;
    if (deadline != 0) {
      int64_t left = deadline - nanotime();
      if (left <= 0) return ETIMEDOUT;
      ms = static_cast<int>(std::min<int64_t>((left + 999999) / 1000000, INT32_MAX));
    }
    pollfd p{fd, static_cast<short>(mode == 'r' ? POLLIN | POLLPRI | POLLRDHUP : POLLOUT), 0};
    uint32_t before = gort_own_signals;
    int r = sys::poll(&p, 1, ms);
    if (r > 0) {
      set_errno(saved);
      return 0;  // ready, or POLLNVAL: the call says EBADF
    }
    if (r == 0) continue;
    if (get_errno() == EINTR && gort_own_signals != before) continue;
    return get_errno();
  }
}

void sleep_until(int64_t when) { timer_sleep(when, WaitReason::kSleep); }

void before_child(int also) {
  if (!g_fd_owned_any.load(std::memory_order_acquire)) return;
  int saved = get_errno();
  fd_table_each(&prepare_child_fd, &also);
  set_errno(saved);
}

void* volatile g_link_sink;

void link_all() {
  g_link_sink = reinterpret_cast<void*>(&::read);                    // io.cpp
  g_link_sink = reinterpret_cast<void*>(&::poll);                    // poll.cpp
  g_link_sink = reinterpret_cast<void*>(&::nanosleep);               // sleep.cpp
  g_link_sink = reinterpret_cast<void*>(&::socket);                  // fd.cpp
  g_link_sink = reinterpret_cast<void*>(&::fork);                    // proc.cpp
  g_link_sink = reinterpret_cast<void*>(&::clock_gettime);           // clock.cpp
  g_link_sink = reinterpret_cast<void*>(&::pthread_cond_timedwait);  // timedwait.cpp
}

}  // namespace gort::internal::hook

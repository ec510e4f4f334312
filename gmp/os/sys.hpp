// gmp/os/sys.hpp — the runtime's own system calls, made without libc's
// wrappers.
//
// Why: libgort interposes libc's blocking entry points (read, write, poll,
// close, ...; netpoll/hook/, docs/blocking-libraries.md) and links with
// -Bsymbolic-functions, so a call to ::read from inside libgort binds to the
// interposer, not to libc. The runtime's own I/O must never be parked or
// rerouted by it: a fatal error's report would park on a full stderr pipe,
// the poller would wait on itself. Every system call the runtime makes on a
// descriptor goes through these instead (syscall(2): no cancellation
// point either, which in a multi-threaded process costs libc's wrappers two
// atomic updates of the thread's cancellation state per call).
//
// Each returns what the system call does and sets errno as libc's wrapper
// would. Async-signal-safe.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace gort::internal::sys {

inline ssize_t read(int fd, void* p, size_t n) { return ::syscall(SYS_read, fd, p, n); }
inline ssize_t write(int fd, const void* p, size_t n) { return ::syscall(SYS_write, fd, p, n); }
inline ssize_t readv(int fd, const iovec* iov, int n) { return ::syscall(SYS_readv, fd, iov, n); }
inline ssize_t writev(int fd, const iovec* iov, int n) { return ::syscall(SYS_writev, fd, iov, n); }
inline ssize_t pread(int fd, void* p, size_t n, off_t off) { return ::syscall(SYS_pread64, fd, p, n, off); }
inline int close(int fd) { return static_cast<int>(::syscall(SYS_close, fd)); }
inline int open(const char* path, int flags, mode_t mode = 0) {
  return static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path, flags, mode));
}
inline int fstat(int fd, struct stat* st) { return static_cast<int>(::syscall(SYS_fstat, fd, st)); }
inline int fcntl(int fd, int cmd, long arg = 0) { return static_cast<int>(::syscall(SYS_fcntl, fd, cmd, arg)); }
inline int ioctl(int fd, unsigned long req, void* arg) { return static_cast<int>(::syscall(SYS_ioctl, fd, req, arg)); }
inline int dup3(int from, int to, int flags) { return static_cast<int>(::syscall(SYS_dup3, from, to, flags)); }
inline int pipe2(int fds[2], int flags) { return static_cast<int>(::syscall(SYS_pipe2, fds, flags)); }
inline int eventfd(unsigned initval, int flags) { return static_cast<int>(::syscall(SYS_eventfd2, initval, flags)); }

inline int socket(int family, int type, int proto) {
  return static_cast<int>(::syscall(SYS_socket, family, type, proto));
}
inline int connect(int fd, const sockaddr* sa, socklen_t len) {
  return static_cast<int>(::syscall(SYS_connect, fd, sa, len));
}
inline int accept4(int fd, sockaddr* sa, socklen_t* len, int flags) {
  return static_cast<int>(::syscall(SYS_accept4, fd, sa, len, flags));
}
inline int setsockopt(int fd, int level, int name, const void* v, socklen_t len) {
  return static_cast<int>(::syscall(SYS_setsockopt, fd, level, name, v, len));
}
inline int getsockopt(int fd, int level, int name, void* v, socklen_t* len) {
  return static_cast<int>(::syscall(SYS_getsockopt, fd, level, name, v, len));
}
inline ssize_t recvmsg(int fd, msghdr* m, int flags) { return ::syscall(SYS_recvmsg, fd, m, flags); }
inline ssize_t sendmsg(int fd, const msghdr* m, int flags) { return ::syscall(SYS_sendmsg, fd, m, flags); }
inline ssize_t recvfrom(int fd, void* p, size_t n, int flags, sockaddr* from, socklen_t* fromlen) {
  return ::syscall(SYS_recvfrom, fd, p, n, flags, from, fromlen);
}
inline ssize_t sendto(int fd, const void* p, size_t n, int flags, const sockaddr* to, socklen_t tolen) {
  return ::syscall(SYS_sendto, fd, p, n, flags, to, tolen);
}
inline ssize_t recv(int fd, void* p, size_t n, int flags) { return recvfrom(fd, p, n, flags, nullptr, nullptr); }
inline ssize_t send(int fd, const void* p, size_t n, int flags) { return sendto(fd, p, n, flags, nullptr, 0); }

// poll(2) with a timeout in milliseconds (< 0: none), through ppoll, which
// every architecture has.
inline int poll(pollfd* fds, nfds_t n, int timeout_ms) {
  timespec ts{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000};
  return static_cast<int>(::syscall(SYS_ppoll, fds, n, timeout_ms < 0 ? nullptr : &ts, nullptr, 0));
}
inline int nanosleep(const timespec* req, timespec* rem) {
  return static_cast<int>(::syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, req, rem));
}
// Sleeps until a signal handler runs (pause(2), which not every
// architecture has as a system call).
inline void pause() { ::syscall(SYS_ppoll, nullptr, 0, nullptr, nullptr, 0); }
inline int epoll_wait(int epfd, epoll_event* ev, int n, int timeout_ms) {
  return static_cast<int>(::syscall(SYS_epoll_pwait, epfd, ev, n, timeout_ms, nullptr, 0));
}
inline int epoll_pwait2(int epfd, epoll_event* ev, int n, const timespec* t) {
  return static_cast<int>(::syscall(SYS_epoll_pwait2, epfd, ev, n, t, nullptr, 0));
}

}  // namespace gort::internal::sys

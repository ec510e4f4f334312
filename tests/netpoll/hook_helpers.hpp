// tests/netpoll/hook_helpers.hpp — what the libc hooks' suites share
// (netpoll/hook/, docs/blocking-libraries.md).
//
//   - real_flags(fd): the O_ flags the kernel holds, past the hooks' view
//     (a raw fcntl through syscall(2)).
//   - raw_pipe(): a pipe made past the hooks, as an inherited or foreign
//     descriptor is (never O_NONBLOCK underneath).
//   - ms_created(): the OS threads that run goroutines (Ms) this run made
//     so far: the run's peak, since an M is never destroyed while it runs.
//   - GORT_INSTANTIATE_HOOK_PROCS(Suite): each TEST_P with 1, 2 and 4 Ps.
//
// errno around a hooked call that may park is read and written through
// read_errno/write_errno (tests/testing.hpp): a goroutine may resume on
// another thread, and GCC keeps errno's address across the calls of a
// function (docs/blocking-libraries.md, "errno").
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "gort/runtime.hpp"
#include "tests/stdlib/helpers.hpp"

#define GORT_INSTANTIATE_HOOK_PROCS(Suite) \
  INSTANTIATE_TEST_SUITE_P(Procs, Suite, ::testing::Values(1, 2, 4), ::gort::test::procs_name)

namespace gort::test {

inline int real_flags(int fd) { return static_cast<int>(::syscall(SYS_fcntl, fd, F_GETFL)); }
inline bool real_nonblock(int fd) { return (real_flags(fd) & O_NONBLOCK) != 0; }

struct Pipe {
  int r = -1;
  int w = -1;
};

inline Pipe raw_pipe(int flags = O_CLOEXEC) {
  int p[2];
  if (::syscall(SYS_pipe2, p, flags) != 0) return {};
  return {p[0], p[1]};
}

inline Pipe hooked_pipe(int flags = O_CLOEXEC) {
  int p[2];
  if (::pipe2(p, flags) != 0) return {};
  return {p[0], p[1]};
}

inline void close_pipe(const Pipe& p) {
  if (p.r >= 0) ::close(p.r);
  if (p.w >= 0) ::close(p.w);
}

inline int ms_created() { return gort::runtime_stats().threads; }

// A gort::Config with `procs` Ps and the libc hooks as asked.
inline gort::Config hook_cfg(int procs, bool hooks = true) {
  gort::Config cfg;
  cfg.procs = procs;
  cfg.hook_libc = hooks;
  return cfg;
}

}  // namespace gort::test

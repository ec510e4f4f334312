// gort/rawconn.hpp — Go's syscall.RawConn: run a C library's own I/O on a
// descriptor gort polls, in blocking style.
//
// A RawConn comes from os::File::syscall_conn or net::Conn::syscall_conn.
// read(f) calls f(fd), which tries the library's non-blocking I/O and
// returns true when done, false when it would block; the goroutine then
// parks until the descriptor is readable (or the deadline passes, or the
// owner is closed) and f is called again. The thread runs other goroutines
// meanwhile:
//
//   gort::RawConn rc = conn.syscall_conn();
//   absl::Status s = rc.read([&](int fd) {
//     ssize_t n = ::recv(fd, buf, sizeof buf, 0);
//     if (n < 0 && errno == EAGAIN) return false;  // park, then call again
//     got = n;
//     return true;
//   });
//
// Thread-safety: copyable; any goroutine may use it while its owner lives.
// read holds the owner's read lock, write its write lock (other reads,
// writes and raw calls of that direction wait their turn). Costs: f's
// calls, plus a park and a wake-up per wait.
#pragma once

#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "gort/detail/api.hpp"

namespace gort {

namespace internal {
class NetFD;
struct NetFDAccess;  // stdlib/net/net_fd.hpp: makes the handles that own a NetFD
}  // namespace internal
namespace net {
class Conn;
}  // namespace net
namespace os {
class File;
}  // namespace os

// Go's syscall.RawConn: raw access to a File's or Conn's descriptor under
// the runtime's rules. Obtained from File::syscall_conn or
// net::Conn::syscall_conn; valid while that object lives (after its close,
// calls return its closed error). One from a net::pipe() end has no
// descriptor: its calls return absl::UnimplementedError("raw-read pipe:
// unsupported operation") and the like, without calling f. Copyable; any
// goroutine may use it.
class GORT_API RawConn {
 public:
  RawConn() = default;

  // Calls f(fd) while the descriptor cannot be closed under it (Go's
  // Control): for setsockopt, ioctl, fstat. f must not block.
  absl::Status control(absl::FunctionRef<void(int fd)> f);
  // Calls f(fd) until it returns true (Go's Read). f attempts the I/O,
  // non-blocking, and returns false when it would block (EAGAIN); read then
  // parks the goroutine until the descriptor is readable, the read deadline
  // passes or the owner is closed, and calls f again. Concurrent reads
  // (through this RawConn, another copy or the owner's read) are served one
  // at a time. For a blocking descriptor f is called inside gort::blocking
  // and may block.
  absl::Status read(absl::FunctionRef<bool(int fd)> f);
  // As read, waiting for writability.
  absl::Status write(absl::FunctionRef<bool(int fd)> f);
  bool valid() const noexcept { return fd_ != nullptr; }

 private:
  friend class net::Conn;
  friend class os::File;
  // `os` picks os's closed error over net's; `pipe`: a net::pipe() end
  // (fd is null).
  RawConn(internal::NetFD* fd, bool os, bool pipe = false) noexcept : fd_(fd), os_(os), pipe_(pipe) {}
  absl::Status result(int err, std::string_view op) const;

  internal::NetFD* fd_ = nullptr;
  bool os_ = false;
  bool pipe_ = false;  // in os_'s padding: the size is unchanged
};

}  // namespace gort

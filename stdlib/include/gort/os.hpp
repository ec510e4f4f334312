// gort/os.hpp — Go's os.File for descriptors: pipes, FIFOs, ttys, eventfds,
// timerfds and library sockets through the netpoller, regular files through
// gort::blocking; and syscall.RawConn, the way to drive a descriptor that a
// C library (hiredis, libpq, c-ares, libcurl's multi interface) owns.
//
// A goroutine that reads an empty pipe or writes a full one is parked on
// the netpoller; its thread runs other goroutines meanwhile. A regular file
// cannot be polled (epoll refuses it): its reads and writes run inside
// gort::blocking, so the P goes on with other goroutines while the thread
// waits for the disk.
//
//   auto p = gort::os::pipe();                  // {read end, write end}
//   if (!p.ok()) return fail(p.status());
//   auto& [r, w] = *p;
//   gort::go([&w] { (void)w.write_string("hello"); (void)w.close(); });
//   char buf[64];
//   auto n = r.read(absl::MakeSpan(buf));       // parks until data or EOF
//
//   // A library's non-blocking socket, driven in blocking style:
//   gort::os::File f = gort::os::new_file(fd, "redis", gort::os::Own::kBorrow);
//   gort::RawConn rc = f.syscall_conn();
//   absl::Status s = rc.read([&](int fd) {
//     return redisBufferRead(ctx) == REDIS_OK && got_reply(ctx);  // false: wait, call again
//   });
//
// Which descriptors poll: new_file registers a descriptor that is in
// non-blocking mode (O_NONBLOCK) with the poller, as Go's os.NewFile does;
// open() and pipe() make pipes, FIFOs, character devices and sockets
// non-blocking and register them. A descriptor the poller refuses (a
// regular file or directory), and one left in blocking mode, is used
// blocking: no deadlines (set_deadline returns Go's "file type does not
// support deadline"), and close does not interrupt a read already blocked
// in the kernel (as in Go).
//
// Errors are absl::Status values with Go's texts: `open /no/such: no such
// file or directory` (NotFound), `write |1: broken pipe` (FailedPrecondition).
// Any call on a closed File, including one that was blocked when another
// goroutine closed it, fails with FailedPrecondition and Go's PathError
// around os.ErrClosed: `read |0: file already closed`, `write |1: ...`,
// `close |1: ...` (closing twice), `set |0: ...` (the set_*deadline
// calls); is_closed_error() tells them from other errors, as Go's
// errors.Is(err, os.ErrClosed) does. A call blocked past its deadline
// returns absl::DeadlineExceededError("i/o timeout") exactly. read returns
// 0 with OK at end of file (Go's io.EOF). Writing to a pipe whose reader is
// gone is the error EPIPE, never SIGPIPE. gort::error_text(status)
// (gort/errors.hpp) is the text to print, as Go prints err.
//
// Thread-safety: as net::Conn. Many goroutines may use a File at once;
// reads are served one at a time, as are writes; close() may be called from
// any goroutine and wakes every blocked call; the descriptor is closed only
// when the last call in progress has left, so its number is never reused
// under a blocked caller.
//
// Costs: a heap object and a poll descriptor per File; a read or write is
// one system call when the descriptor is ready (two more on pipes, for
// SIGPIPE), plus a park and a wake-up when it is not. A blocking file's
// call costs a hand-off of the P (gort::blocking).
//
// The runtime must be running (inside gort::run). A polled descriptor still
// open when run returns is closed by run, as sockets are (even a borrowed
// one: its owner must not outlive the run with it).
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gort/chrono.hpp"
#include "gort/detail/deadlines.hpp"
#include "gort/detail/api.hpp"
#include "gort/errors.hpp"
#include "gort/rawconn.hpp"

namespace gort {
namespace os {

// The text of Go's os.ErrClosed, which ends the error of every call on a
// closed File.
inline constexpr std::string_view kErrClosed = "file already closed";
// Go's os.ErrNoDeadline: set_deadline on a descriptor that is not polled.
inline constexpr std::string_view kErrNoDeadline = "file type does not support deadline";

// True for the closed error: FailedPrecondition with the message
// "file already closed", bare (RawConn) or ending a PathError ("read |0:
// file already closed").
GORT_API bool is_closed_error(const absl::Status& s);

// Whether a File closes the descriptor it was given (new_file).
enum class Own : bool { kClose, kBorrow };

// An open file descriptor. Move-only; closes it on destruction (unless
// borrowed). A default-constructed or moved-from File holds nothing: its
// calls return absl::InvalidArgumentError("invalid argument") at once (Go's
// os.ErrInvalid for a nil *File), fd() is -1, name() "", valid() false
// (docs/standard-cpp.md, "Copying and moving handles").
class GORT_API File : public ::gort::internal::ChronoDeadlines<File> {
 public:
  File() = default;
  File(File&& o) noexcept : fd_(std::exchange(o.fd_, nullptr)), name_(std::exchange(o.name_, {})) {}
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  // Reads up to buf.size() bytes; returns as soon as at least one byte is
  // available. 0 with OK: end of file (every writer of a pipe closed), or
  // buf is empty. May park.
  absl::StatusOr<size_t> read(absl::Span<char> buf);
  // Writes all of buf unless an error occurs (as net::Conn::write: the
  // error is returned, not the count written before it). May park.
  absl::StatusOr<size_t> write(absl::Span<const char> buf);
  // Go's WriteString.
  absl::StatusOr<size_t> write_string(std::string_view s) {
    return write(absl::MakeConstSpan(s.data(), s.size()));
  }

  // Closes the descriptor (borrowed: only leaves the poller) and wakes
  // every blocked call; they and later calls return the closed error.
  // Closing twice returns the closed error.
  absl::Status close();

  // Deadlines as net::Conn's: an absolute time after which blocked and
  // future reads (writes) fail with "i/o timeout"; absl::InfiniteFuture()
  // clears it; a time in the past expires it at once. Polled descriptors
  // only (else kErrNoDeadline, InvalidArgument). Each also takes a
  // std::chrono time point (gort/chrono.hpp).
  absl::Status set_deadline(absl::Time t);
  absl::Status set_read_deadline(absl::Time t);
  absl::Status set_write_deadline(absl::Time t);
  using ChronoDeadlines::set_deadline;
  using ChronoDeadlines::set_read_deadline;
  using ChronoDeadlines::set_write_deadline;

  // Raw access for libraries that do their own I/O on the descriptor.
  RawConn syscall_conn() const { return RawConn(fd_, true); }

  // The descriptor (-1 without one). Valid until close(); prefer
  // syscall_conn, which keeps it from being closed under the caller.
  int fd() const;
  // The name it was opened or created with (Go's File.Name).
  const std::string& name() const { return name_; }
  // Whether reads and writes park on the poller (else they run blocking).
  bool pollable() const;
  bool valid() const { return fd_ != nullptr; }
  explicit operator bool() const { return valid(); }

 private:
  friend struct internal::NetFDAccess;
  File(internal::NetFD* fd, std::string name) noexcept : fd_(fd), name_(std::move(name)) {}

  internal::NetFD* fd_ = nullptr;
  std::string name_;
};

// Go's os.NewFile: a File for descriptor fd named `name`. A descriptor in
// non-blocking mode is registered with the poller (if the poller refuses
// it, it is used blocking). Own::kClose (the default) gives the File the
// descriptor; Own::kBorrow leaves it to its owner (a C library): close and
// the destructor only take it out of the poller, which must happen before
// the owner closes it. A negative fd is InvalidArgument (`newfile name:
// bad file descriptor`); so is a descriptor that is not open (EBADF).
GORT_API absl::StatusOr<File> new_file(int fd, std::string name, Own own = Own::kClose);

// Go's os.OpenFile: opens path with flags (O_RDONLY, O_WRONLY, O_RDWR,
// O_CREAT, O_TRUNC, O_APPEND, O_EXCL, ...; O_CLOEXEC is added) and, for a
// created file, permission bits `perm`. Pipes, FIFOs, character devices and
// sockets are polled; regular files are read and written blocking. The open
// itself runs inside gort::blocking: opening a FIFO for reading waits (the
// thread, not the P) until a writer opens it, and vice versa, as in Go.
// Errors: `open path: <strerror>` with the errno's code.
GORT_API absl::StatusOr<File> open(const std::string& path, int flags = O_RDONLY, mode_t perm = 0);
// Go's os.Create: O_RDWR | O_CREAT | O_TRUNC, 0666.
GORT_API absl::StatusOr<File> create(const std::string& path);

// Go's os.Pipe: a connected pair {read end, write end}, both polled,
// named "|0" and "|1".
GORT_API absl::StatusOr<std::pair<File, File>> pipe();

}  // namespace os
}  // namespace gort

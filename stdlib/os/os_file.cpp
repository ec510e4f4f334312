// stdlib/os/os_file.cpp — gort::os::File (Go's os.File on internal/poll.FD)
// and gort::RawConn (syscall.RawConn). A File is a NetFD of kind kPipe or
// kFile: the same reference counting, locks, poller waits and deadlines as
// sockets (stdlib/net/net_fd.hpp), with write(2) instead of send(2).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "gort/net.hpp"
#include "gort/os.hpp"
#include "gort/runtime.hpp"
#include "stdlib/net/net_error.hpp"
#include "stdlib/net/net_fd.hpp"
#include "stdlib/net/pipe.hpp"
#include "gmp/os/sys.hpp"

namespace gort {

using internal::cat;
using internal::FdKind;
using internal::NetFD;

namespace os {
namespace {

// Go's PathError: "op name: strerror". On a closed File "op name: file
// already closed" (os.ErrClosed inside the PathError, as Go's wrapErr
// makes it); the timeout and ErrNoDeadline exact.
absl::Status path_error(int err, std::string_view op, std::string_view name) {
  if (err == internal::kErrClosing) return absl::FailedPreconditionError(cat(op, " ", name, ": ", kErrClosed));
  if (err == internal::kErrTimeout) return internal::timeout_error();
  if (err == internal::kErrNoDeadline) return absl::InvalidArgumentError(std::string(kErrNoDeadline));
  return absl::Status(internal::errno_code(err), cat(op, " ", name, ": ", internal::errno_text(err)));
}

FdKind kind_of(const struct stat& st) {
  if (S_ISSOCK(st.st_mode)) return FdKind::kSocket;
  if (S_ISFIFO(st.st_mode)) return FdKind::kPipe;
  return FdKind::kFile;
}

// Wraps sysfd (already in its final blocking mode); closes it on failure
// unless borrowed.
absl::StatusOr<File> make_file(int sysfd, std::string name, FdKind kind, bool pollable, Own own,
                               std::string_view op) {
  int err;
  NetFD* fd = NetFD::open_file(sysfd, kind, pollable, &err);
  if (fd == nullptr) {
    if (own == Own::kClose) internal::sys::close(sysfd);
    return path_error(err, op, name);
  }
  if (own == Own::kBorrow) fd->set_borrowed();
  return internal::NetFDAccess::file(fd, std::move(name));
}

// The set_*deadline calls: "set name: file already closed" on a closed
// File (Go's os.File returns internal/poll's bare "use of closed file"
// here; gort keeps the os.ErrClosed text every other call gives, so that
// is_closed_error holds, in the PathError form with net's "set" op).
absl::Status deadline_result(int err, std::string_view name) {
  return err == 0 ? absl::OkStatus() : path_error(err, "set", name);
}

template <class F>
auto with_file(NetFD* fd, F&& call) -> decltype(call(fd)) {
  if (fd == nullptr) return internal::invalid_error();
  return call(fd);
}

}  // namespace

bool is_closed_error(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kFailedPrecondition) return false;
  std::string_view m(s.message().data(), s.message().size());
  // Bare (RawConn), or at the end of a PathError: "op name: file already closed".
  return m == kErrClosed ||
         (m.size() > kErrClosed.size() + 2 && m.substr(m.size() - kErrClosed.size()) == kErrClosed &&
          m.substr(m.size() - kErrClosed.size() - 2, 2) == ": ");
}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    internal::move_fd(fd_, o.fd_);
    name_ = std::exchange(o.name_, {});
  }
  return *this;
}

File::~File() { internal::drop_fd(fd_); }

absl::StatusOr<size_t> File::read(absl::Span<char> buf) {
  return with_file(fd_, [&](NetFD* fd) -> absl::StatusOr<size_t> {
    internal::IoResult r = fd->read(buf.data(), buf.size());
    if (r.err != 0) return path_error(r.err, "read", name_);
    return r.n;
  });
}

absl::StatusOr<size_t> File::write(absl::Span<const char> buf) {
  return with_file(fd_, [&](NetFD* fd) -> absl::StatusOr<size_t> {
    internal::IoResult r = fd->write(buf.data(), buf.size());
    if (r.err != 0) return path_error(r.err, "write", name_);
    return r.n;
  });
}

absl::Status File::close() {
  return with_file(fd_, [&](NetFD* fd) -> absl::Status {
    int err = fd->close();
    return err == 0 ? absl::OkStatus() : path_error(err, "close", name_);
  });
}

absl::Status File::set_deadline(absl::Time t) {
  return with_file(fd_, [&](NetFD* fd) { return deadline_result(fd->set_deadline(t, 'r' + 'w'), name_); });
}

absl::Status File::set_read_deadline(absl::Time t) {
  return with_file(fd_, [&](NetFD* fd) { return deadline_result(fd->set_deadline(t, 'r'), name_); });
}

absl::Status File::set_write_deadline(absl::Time t) {
  return with_file(fd_, [&](NetFD* fd) { return deadline_result(fd->set_deadline(t, 'w'), name_); });
}

int File::fd() const { return fd_ == nullptr ? -1 : fd_->sysfd(); }

bool File::pollable() const { return fd_ != nullptr && fd_->pollable(); }

absl::StatusOr<File> new_file(int fd, std::string name, Own own) {
  if (fd < 0) return absl::InvalidArgumentError(cat("newfile ", name, ": bad file descriptor"));
  int fl = internal::sys::fcntl(fd, F_GETFL);
  struct stat st;
  if (fl < 0 || ::fstat(fd, &st) != 0) {
    int e = errno;
    return absl::Status(internal::errno_code(e), cat("newfile ", name, ": ", internal::errno_text(e)));
  }
  // Go's kindNonBlock: only a descriptor already non-blocking is polled;
  // one in blocking mode stays as its owner set it.
  return make_file(fd, std::move(name), kind_of(st), (fl & O_NONBLOCK) != 0, own, "newfile");
}

absl::StatusOr<File> open(const std::string& path, int flags, mode_t perm) {
  int e = 0;
  int sysfd = gort::blocking([&] {
    int r;
    do {
      r = internal::sys::open(path.c_str(), flags | O_CLOEXEC, perm);
    } while (r < 0 && errno == EINTR);
    e = errno;
    return r;
  });
  if (sysfd < 0) return path_error(e, "open", path);
  struct stat st;
  if (::fstat(sysfd, &st) != 0) {
    e = errno;
    internal::sys::close(sysfd);
    return path_error(e, "open", path);
  }
  FdKind kind = kind_of(st);
  // Go's kindOpenFile: what could block on readiness goes to the poller.
  bool poll = S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode);
  if (poll && (flags & O_NONBLOCK) == 0 && internal::sys::fcntl(sysfd, F_SETFL, internal::sys::fcntl(sysfd, F_GETFL) | O_NONBLOCK) != 0) {
    poll = false;
  }
  return make_file(sysfd, path, kind, poll, Own::kClose, "open");
}

absl::StatusOr<File> create(const std::string& path) { return open(path, O_RDWR | O_CREAT | O_TRUNC, 0666); }

absl::StatusOr<std::pair<File, File>> pipe() {
  int p[2];
  if (internal::sys::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    int e = errno;
    return absl::Status(internal::errno_code(e), cat("pipe2: ", internal::errno_text(e)));
  }
  absl::StatusOr<File> r = make_file(p[0], "|0", FdKind::kPipe, true, Own::kClose, "pipe");
  if (!r.ok()) {
    internal::sys::close(p[1]);
    return r.status();
  }
  absl::StatusOr<File> w = make_file(p[1], "|1", FdKind::kPipe, true, Own::kClose, "pipe");
  if (!w.ok()) return w.status();  // ~File closes the read end
  return std::pair<File, File>(std::move(*r), std::move(*w));
}

}  // namespace os

absl::Status RawConn::result(int err, std::string_view op) const {
  if (err == 0) return absl::OkStatus();
  if (os_) {
    if (err == internal::kErrClosing) return absl::FailedPreconditionError(std::string(os::kErrClosed));
  }
  return internal::io_error(err, op, "");
}

absl::Status RawConn::control(absl::FunctionRef<void(int)> f) {
  if (fd_ == nullptr) return pipe_ ? internal::PipeEnd::unsupported("raw-control") : internal::invalid_error();
  return result(fd_->raw_control(f), "raw-control");
}

absl::Status RawConn::read(absl::FunctionRef<bool(int)> f) {
  if (fd_ == nullptr) return pipe_ ? internal::PipeEnd::unsupported("raw-read") : internal::invalid_error();
  return result(fd_->raw_io('r', f), "raw-read");
}

absl::Status RawConn::write(absl::FunctionRef<bool(int)> f) {
  if (fd_ == nullptr) return pipe_ ? internal::PipeEnd::unsupported("raw-write") : internal::invalid_error();
  return result(fd_->raw_io('w', f), "raw-write");
}

}  // namespace gort

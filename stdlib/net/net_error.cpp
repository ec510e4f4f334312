// stdlib/net/net_error.cpp — error values and messages of gort::net.
#include "stdlib/net/net_error.hpp"

#include <cerrno>
#include <cstring>

#include "gort/net.hpp"

namespace gort::net {

using internal::cat;

bool is_closed_error(const absl::Status& s) {
  return s.code() == absl::StatusCode::kFailedPrecondition &&
         std::string_view(s.message().data(), s.message().size()) == kErrClosed;
}

bool is_timeout_error(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace gort::net

namespace gort::internal {

absl::Status closed_error() { return absl::FailedPreconditionError(std::string(net::kErrClosed)); }

absl::Status timeout_error() { return absl::DeadlineExceededError("i/o timeout"); }

absl::Status invalid_error() { return absl::InvalidArgumentError("invalid argument"); }

std::string op_prefix(std::string_view op, std::string_view net, std::string_view src,
                      std::string_view addr) {
  std::string s(op);
  if (!net.empty()) s += cat(" ", net);
  if (!src.empty() && !addr.empty()) {
    s += cat(" ", src, "->", addr);
  } else if (!src.empty()) {
    s += cat(" ", src);
  } else if (!addr.empty()) {
    s += cat(" ", addr);
  }
  return s;
}

absl::StatusCode errno_code(int err) {
  switch (err) {
    case EADDRINUSE:  // absl: FailedPrecondition; the address is taken
      return absl::StatusCode::kAlreadyExists;
    // absl: AlreadyExists, though nothing exists: bind was given an address
    // this host does not have (yet: an IPv6 address still in DAD), or
    // connect found no free local port. A condition of the host and the
    // network, as ENETUNREACH and EHOSTUNREACH are.
    case EADDRNOTAVAIL:
      return absl::StatusCode::kUnavailable;
    case EALREADY:  // absl: AlreadyExists; a connect already in progress
      return absl::StatusCode::kFailedPrecondition;
    case EMSGSIZE:  // absl: Unknown; a datagram larger than the socket takes
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::ErrnoToStatusCode(err);
  }
}

std::string errno_text(int err) {
  char buf[128];
  // GNU strerror_r: returns a pointer to the text (maybe not into buf).
  return std::string(strerror_r(err, buf, sizeof buf));
}

absl::Status io_error(int err, std::string_view prefix, std::string_view syscall) {
  if (err == kErrClosing) return closed_error();
  if (err == kErrTimeout) return timeout_error();
  std::string msg = syscall.empty() ? cat(prefix, ": ", errno_text(err))
                                    : cat(prefix, ": ", syscall, ": ", errno_text(err));
  return absl::Status(errno_code(err), msg);
}

absl::Status wrap_error(std::string_view prefix, const absl::Status& cause) {
  return absl::Status(cause.code(), cat(prefix, ": ", cause.message()));
}

}  // namespace gort::internal

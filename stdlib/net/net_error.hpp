// stdlib/net/net_error.hpp — how gort::net reports errors (Go's net.OpError,
// os.SyscallError, net.ErrClosed, os.ErrDeadlineExceeded).
//
// NetFD calls return 0, an errno value, or one of the kErr* codes below;
// the public layer turns them into absl::Status with io_error(). A failed
// system call reads `op network local->remote: syscall: strerror`, with the
// status code of its errno; closed and timed-out calls return the two exact
// statuses of net.hpp, unprefixed, so that callers can compare them.
#pragma once

#include "stdlib/net/room.hpp"

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"

namespace gort::internal {

// String concatenation of std::string_view, strings and integers (this
// abseil's absl::string_view is not std::string_view, so absl::StrCat
// does not take ours).
inline void append_piece(std::string* s, std::string_view v) { s->append(v); }
inline void append_piece(std::string* s, const char* v) { s->append(v); }
inline void append_piece(std::string* s, const std::string& v) { s->append(v); }
#ifndef ABSL_USES_STD_STRING_VIEW
inline void append_piece(std::string* s, absl::string_view v) { s->append(v.data(), v.size()); }
#endif
template <class T>
  requires std::is_integral_v<T>
void append_piece(std::string* s, T v) {
  s->append(std::to_string(v));
}
template <class... A>
std::string cat(const A&... a) {
  std::string s;
  (append_piece(&s, a), ...);
  return s;
}

// Not errno values (those are positive).
inline constexpr int kErrClosing = -1;  // the socket is closed (or closing)
inline constexpr int kErrTimeout = -2;  // the deadline passed

absl::Status closed_error();
absl::Status timeout_error();
// Calls on a handle that holds nothing: a default-constructed or moved-from
// net::Conn, Listener, PacketConn, os::File or tls::Conn, a moved-from
// exec::Cmd (Go's nil Conn or *File: syscall.EINVAL, os.ErrInvalid;
// docs/standard-cpp.md, "Copying and moving handles").
absl::Status invalid_error();

// Go's OpError prefix: "op net", then " src->addr", " src" or " addr"
// (whichever are not empty).
std::string op_prefix(std::string_view op, std::string_view net, std::string_view src,
                      std::string_view addr);

// The status code of a kernel error: absl's errno mapping, except
// EADDRINUSE (AlreadyExists), EADDRNOTAVAIL (Unavailable), EALREADY
// (FailedPrecondition) and EMSGSIZE (InvalidArgument), where absl's codes
// say something else happened.
absl::StatusCode errno_code(int err);
// strerror's text, thread-safe.
std::string errno_text(int err);

// err: an errno value or kErr*. "prefix: syscall: strerror" for errno
// values; closed_error() / timeout_error() for the others.
absl::Status io_error(int err, std::string_view prefix, std::string_view syscall);
// "prefix: <cause's message>" with cause's code.
absl::Status wrap_error(std::string_view prefix, const absl::Status& cause);

}  // namespace gort::internal

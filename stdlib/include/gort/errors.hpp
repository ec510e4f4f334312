// gort/errors.hpp — an error's text as Go's err.Error() gives it.
//
// gort's fallible calls return absl::Status with Go's error text as the
// message. absl's own printing (ToString(), operator<<) puts the status
// code in front — `UNAVAILABLE: dial tcp 127.0.0.1:1: connect: Connection
// refused` — which is not what a Go program prints. error_text() gives the
// message alone:
//
//   auto c = gort::net::dial("tcp", addr);
//   if (!c.ok()) {
//     std::fprintf(stderr, "client: %s\n", gort::error_text(c).c_str());
//     // client: dial tcp 127.0.0.1:1: connect: Connection refused
//   }
//
// A std::string, so it goes to printf ("%s" with c_str()), to a stream, or
// into absl::StrCat, with no operator<< of absl's in the way.
// (std::format would take it too; GCC 12 has no <format>, and a
// std::formatter for absl::Status is abseil's to give, not gort's.)
//
// Header-only; thread-safe; never parks.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gort {

// Go's err.Error(): the message of a non-OK status, without its code. A
// non-OK status with an empty message (absl::CancelledError()) reads as its
// code's name ("CANCELLED"), so that no error prints as nothing. An OK
// status reads "<nil>", as Go prints a nil error.
inline std::string error_text(const absl::Status& s) {
  if (s.ok()) return "<nil>";
  if (s.message().empty()) return absl::StatusCodeToString(s.code());
  return std::string(s.message());
}

// The same for a StatusOr's status ("<nil>" when it holds a value).
template <class T>
std::string error_text(const absl::StatusOr<T>& s) {
  return error_text(s.status());
}

}  // namespace gort

// gmp/diag/exception.hpp — what an exception is, in words: its dynamic
// type, demangled, and its text. The one place that formats them for
// reports, so that the unrecovered panic (gmp/diag/panic.cpp) and the
// server's `gort: panic serving` (stdlib/net/server.cpp) name a type the
// same way.
//
//   panic: index 7 past the end [std::out_of_range]   a std::exception
//   panic: 42 [int]                                   a number, a string
//   panic: [acme::Oops]                               any other type
//   panic: send on closed channel                     a gort::panic_error: Go's text
//
// The brackets follow the way Go's runtime annotates a panic's line
// (`[recovered]`); a gort::panic_error is the runtime's own panic, whose
// text is Go's exactly and carries no type, as Go's runtime errors do not.
#pragma once

#include "gmp/diag/room.hpp"

#include <string>
#include <typeinfo>

#include "gort/detail/api.hpp"

namespace gort::internal {

struct ExceptionInfo {
  // Demangled, with libstdc++'s inline namespace dropped and std::string
  // spelled so ("std::out_of_range", "acme::Oops", "const char*"); empty
  // when the runtime cannot tell (a foreign exception).
  std::string type;
  // what() of a std::exception (or a note that what() threw); the value of
  // a thrown string or number; empty for any other type.
  std::string text;
  // Exactly a gort::panic_error: the runtime's (or Go-worded) panic.
  bool go_panic = false;
};

// The exception being handled. Only inside a catch block or a terminate
// handler called with an exception in flight.
ExceptionInfo current_exception_info();

// The value part of `panic: ...` for it: Go's text for a go_panic, else
// "text [type]" (just "[type]" without a text).
std::string panic_value(const ExceptionInfo& e);

// A type's demangled name, cleaned as ExceptionInfo::type is (declared in
// gort/context.hpp too, whose inline code calls it).
GORT_API std::string type_name(const std::type_info& t);

}  // namespace gort::internal

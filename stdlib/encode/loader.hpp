// stdlib/encode/loader.hpp — how libgort finds libgort_encode, the library
// of the protobuf encoders (Perfetto traces, pprof profiles), without
// linking protobuf itself (docs/tracing-and-profiling.md, "Where the
// encoders live").
//
//   std::string err;
//   const gort::encode::Encoders* enc = gort::encode::load_encoders(&err);
//   if (enc == nullptr) return absl::FailedPreconditionError(err);
//   enc->pprof(model, /*gzip=*/true, &bytes, &err);
//
// Compiled into libgort; no protobuf here.
//
// Thread-safety: any thread, any number at once; the first call does the
// work (and may take a dlopen's time, some milliseconds), the others wait
// for it, later calls return its result. Does not park the calling
// goroutine (it blocks its M, as any dlopen does, the first time only).
#pragma once

#include <string>

#include "stdlib/encode/model.hpp"

namespace gort::encode {

// The encoders' table, found in this order:
//   1. in the program itself: the program linked libgort_encode (shared or
//      static), which a weak reference to gort_encoders_v1 finds;
//   2. libgort_encode.so.0 in libgort's own directory (its build tree, or
//      where both were installed);
//   3. libgort_encode.so.0 on the dynamic linker's search path
//      (LD_LIBRARY_PATH, the cache, the default directories).
// Null when none has it, or when what was found has another version; then
// *err (if not null) says what was tried and why each failed. The result,
// table or failure, is kept: the search happens once per process.
const Encoders* load_encoders(std::string* err);

}  // namespace gort::encode

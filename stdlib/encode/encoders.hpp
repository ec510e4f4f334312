// stdlib/encode/encoders.hpp — libgort_encode's encoders, behind the table
// gort_encoders_v1 returns (stdlib/encode/encoders.cpp; the structs are
// stdlib/encode/model.hpp). Inside libgort_encode only: libgort reaches
// them through the table (stdlib/encode/loader.hpp), tests the same way.
//
// Each encoder reads the model and writes one file's bytes to *out. A model
// the format cannot express (a slice that ends before it begins, a location
// id past the end) is refused: false, *err says which item and why, *out is
// left unspecified. Neither throws; both may be called from any thread at
// once (they share nothing). Costs: time and memory linear in the model,
// plus the bytes of the output.
#pragma once

#include <string>

#include "stdlib/encode/model.hpp"

namespace gort::encode {

// Perfetto's protobuf trace: a serialized perfetto.protos.Trace
// (stdlib/encode/perfetto_trace.proto).
bool encode_perfetto(const TraceModel& model, std::string* out, std::string* err);

// pprof's protobuf profile: a serialized perftools.profiles.Profile
// (stdlib/encode/profile.proto), gzipped when gzip is true.
bool encode_pprof(const ProfileModel& model, bool gzip, std::string* out, std::string* err);

}  // namespace gort::encode

// stdlib/pprof/profile_builder.hpp — every profile's last step: records of
// (stack, values, labels) to a symbolized ProfileModel
// (stdlib/encode/model.hpp), and that to pprof's gzipped protobuf through
// libgort_encode.
//
// Each distinct address is symbolized once (gmp/diag/symbolize.hpp, under
// symbolizer_mutex on the M's own stack): a location per address, its
// inlined calls as several lines, innermost first. Mappings come from
// dl_iterate_phdr: each module's executable segments, with its file and
// GNU build id, the main program first, as pprof expects.
#pragma once

#include "stdlib/pprof/room.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gort/pprof.hpp"
#include "stdlib/encode/model.hpp"

namespace gort::internal {

// One sample before symbolization.
struct StackRecord {
  // Leaf first, ready to symbolize (unwind_here.hpp's convention: a
  // return address minus one, an interrupted instruction as it is).
  std::vector<uintptr_t> addrs;
  std::vector<int64_t> values;  // one per sample type
  pprof::LabelSet labels;
  // A sample without a stack (samples lost to a full ring, a goroutine not
  // started yet): one location of this name and no address, as Go's
  // runtime._LostExternalCode.
  const char* pseudo = nullptr;
};

// What kind of profile, as Go's runtime/pprof describes each.
struct ProfileKind {
  std::vector<encode::ValueType> sample_types;
  encode::ValueType period_type;
  int64_t period = 0;
  // Drop each stack's innermost frames while they are the runtime's own
  // (gort::internal, the switch): a blocked goroutine's stack starts
  // where the program called gort (Chan::recv, Mutex::lock, read), not in
  // park. The CPU profile keeps them: time in the scheduler is time.
  bool trim_runtime = false;
  int64_t time_unix_ns = 0;
  int64_t duration_ns = 0;
  std::vector<std::string> comments;
  std::string default_sample_type;
};

struct BuiltProfile {
  // Samples with the same stack and labels merged (values summed).
  encode::ProfileModel model;
  // Per location: its physical function's entry address (0 unknown), for
  // the text forms' "func+0x1f".
  std::vector<uint64_t> entries;
};

// Symbolizes and merges `records`. Blocks the thread while it symbolizes;
// never parks.
BuiltProfile build_profile(const ProfileKind& kind, std::vector<StackRecord> records);

// pprof's gzipped protobuf, through libgort_encode (loaded on first use):
// an error if it cannot be loaded or fails.
absl::StatusOr<std::string> encode_profile(const encode::ProfileModel& model);

// Go's text forms (debug=1) of a built profile (profile_text.cpp). count:
// the goroutine profile ("goroutine profile: total N", then "N @ addrs"
// per stack with its frames). contention: the block profile ("---
// contention:", then "delay count @ addrs" per stack), or with
// mutex_fraction >= 0 the mutex profile ("--- mutex:" and its "sampling
// period"). The largest count, or delay, first.
std::string text_count_profile(const BuiltProfile& p, const std::string& name);
std::string text_contention_profile(const BuiltProfile& p, int64_t mutex_fraction);

// Writes `data` to `path` (created or truncated, mode 0644).
absl::Status write_file(const std::string& path, const std::string& data);

}  // namespace gort::internal

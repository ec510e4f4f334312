// stdlib/pprof/profiles.cpp — the named profiles (Go's pprof.Lookup(name)
// .WriteTo(w, debug)): "goroutine", "block", "mutex", each described as
// Go's runtime/pprof describes it (sample types, period), built by
// profile_builder.hpp and written in pprof's format or Go's text.
#include <string>

#include "absl/time/clock.h"
#include "gmp/profiling.hpp"
#include "gort/pprof.hpp"
#include "gort/runtime.hpp"
#include "stdlib/pprof/events.hpp"
#include "stdlib/pprof/goroutine_profile.hpp"
#include "stdlib/pprof/profile_builder.hpp"

namespace gort::pprof {
namespace {

using internal::BuiltProfile;
using internal::ProfileKind;

absl::StatusOr<std::string> goroutine_profile(int debug) {
  // Go's debug=2: every goroutine's traceback, as a crash prints them.
  if (debug >= 2) return gort::stack(true);
  ProfileKind kind;
  kind.sample_types = {{"goroutine", "count"}};
  kind.period_type = {"goroutine", "count"};
  kind.period = 1;
  kind.trim_runtime = true;
  kind.time_unix_ns = absl::ToUnixNanos(absl::Now());
  BuiltProfile p = internal::build_profile(kind, internal::goroutine_records());
  if (debug == 1) return internal::text_count_profile(p, "goroutine");
  return internal::encode_profile(p.model);
}

// Block and mutex: Go's printCountCycleProfile.
absl::StatusOr<std::string> contention_profile(bool mutex, int debug) {
  ProfileKind kind;
  kind.sample_types = {{"contentions", "count"}, {"delay", "nanoseconds"}};
  kind.period_type = {"contentions", "count"};
  kind.period = 1;
  kind.trim_runtime = true;
  kind.time_unix_ns = absl::ToUnixNanos(absl::Now());
  BuiltProfile p = internal::build_profile(kind, mutex ? internal::mutex_records() : internal::block_records());
  if (debug >= 1) {
    return internal::text_contention_profile(
        p, mutex ? internal::profiling.mutex_rate.load(std::memory_order_relaxed) : -1);
  }
  return internal::encode_profile(p.model);
}

}  // namespace

absl::StatusOr<std::string> profile(std::string_view name, int debug) {
  if (name == "goroutine") return goroutine_profile(debug);
  if (name == "block") return contention_profile(false, debug);
  if (name == "mutex") return contention_profile(true, debug);
  return absl::NotFoundError("pprof: unknown profile \"" + std::string(name) +
                             "\" (gort has goroutine, block and mutex; the CPU profile is start_cpu_profile's)");
}

absl::Status write_profile(std::string_view name, const std::string& path, int debug) {
  absl::StatusOr<std::string> data = profile(name, debug);
  if (!data.ok()) return data.status();
  return internal::write_file(path, *data);
}

}  // namespace gort::pprof

// stdlib/trace/trace_files.hpp — from a raw trace to the file its name asks
// for, and the run-wide tracing the environment turns on (GORT_TRACE,
// GORT_FLIGHTREC; docs/tracing-and-profiling.md).
#pragma once

#include "stdlib/trace/room.hpp"

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "stdlib/trace/trace_decode.hpp"

namespace gort::internal {

enum class TraceFormat { kJson, kPerfetto, kRaw };

// ".json": JSON; ".gtrace": raw; anything else: Perfetto's protobuf.
TraceFormat trace_format_for(std::string_view path);

// Names PCs of this process (gmp/diag/symbolize.hpp).
std::string live_pc_name(uint64_t pc, bool call);
// Names PCs of another process from its /proc/PID/maps (a dump's).
PcNamer offline_pc_namer(const std::string& maps);

// A raw trace in `format`, its PCs named with live_pc_name if this
// process recorded it, else from its maps (a dump converted afterwards).
// The program's name comes from the raw trace itself.
absl::StatusOr<std::string> encode_raw_trace(const std::string& raw, TraceFormat format);
absl::Status write_trace_file(const std::string& path, const std::string& bytes);
// Encodes as the file's name asks and writes.
absl::Status write_raw_trace(const std::string& raw, const std::string& path);

// A trace still running when the run ends is stopped and written. True if
// there was one.
bool trace_stop_at_run_end();

// On the main goroutine, around the program's body (stdlib/run_main.cpp).
void trace_run_begin();
void trace_run_end();

}  // namespace gort::internal

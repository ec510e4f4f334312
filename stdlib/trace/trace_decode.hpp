// stdlib/trace/trace_decode.hpp — a raw trace (gmp/trace_buf.hpp) back into
// events, in time order, and the events into the viewers' model
// (stdlib/encode/model.hpp): tracks, slices, instants and flows.
//
// The decoder trusts nothing: a truncated file, a buffer cut mid-event, an
// unknown kind or a varint past its end stop that buffer's decoding with
// what was read so far (a fatal error's dump may be torn), and the caller
// learns how many buffers were cut short.
#pragma once

#include "stdlib/trace/room.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "gmp/trace.hpp"
#include "gmp/trace_buf.hpp"
#include "stdlib/encode/model.hpp"

namespace gort::internal {

struct TraceEvent {
  int64_t ts = 0;  // ns since the trace's first event
  int64_t m = 0;   // the writer (-1: a thread without an M)
  TraceEv kind = TraceEv::kNone;
  int64_t a[5] = {};
  std::vector<uint64_t> stack;
  std::string s1, s2;
};

struct DecodedTrace {
  RawHeader header{};
  std::vector<TraceEvent> events;  // by time, then in each buffer's order
  std::string maps;                // a dump's /proc/self/maps, if any
  std::string name;                // the program's name, if recorded
  int64_t start_mono_ns = 0;       // nanotime() of ts 0
  int torn_buffers = 0;
};

absl::StatusOr<DecodedTrace> decode_raw_trace(std::string_view raw);

// Names a PC: "function (file:line)"; `call`: a return address (look at
// pc - 1). Empty: unknown.
using PcNamer = std::function<std::string(uint64_t pc, bool call)>;

encode::TraceModel build_trace_model(const DecodedTrace& trace, const PcNamer& namer);

}  // namespace gort::internal

// stdlib/encode/model.hpp — what libgort hands its encoders: a decoded
// execution trace (TraceModel) and a symbolized profile (ProfileModel), as
// plain structs with no protobuf in them.
//
// libgort collects (stdlib/trace/, stdlib/pprof/) and symbolizes; the
// encoders turn these into files: the Trace Event Format's JSON
// (stdlib/trace/trace_json.cpp, in libgort: it needs nothing), and
// Perfetto's protobuf trace and pprof's protobuf profile
// (stdlib/encode/, libgort_encode, the only library that links protobuf).
// libgort loads libgort_encode when it first writes one of those
// (stdlib/encode/loader.cpp; docs/tracing-and-profiling.md): a program that
// never writes a profile does not load protobuf.
//
// The two libraries meet through Encoders, a table of functions looked up
// by the versioned name gort_encoders_v1: a change to any struct here is a
// change of that version.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gort::encode {

using Labels = std::vector<std::pair<std::string, std::string>>;

// ---- execution traces ----

// A track: a timeline in the viewer. The process's track is the root
// (parent 0); goroutines, Ps and Ms are its children, and a goroutine's
// user regions get a child track of their own (regions need not nest with
// its running and blocked slices).
struct TraceTrack {
  uint64_t uuid = 0;         // unique, non-zero
  uint64_t parent_uuid = 0;  // 0: a root track
  std::string name;          // "G12 main.worker (server.cpp:40)", "P0", "M3"
  int64_t sort_index = 0;    // viewers order siblings by it
};

// A slice: something that lasted, on one track. Slices of one track nest
// (a slice that starts inside another ends inside it too).
struct TraceSlice {
  uint64_t track = 0;
  int64_t begin_ns = 0;  // since the trace's start
  int64_t end_ns = 0;
  std::string name;      // "running", "chan receive", a region's name
  std::string category;  // "goroutine", "proc", "region", "task", "syscall"
  Labels args;           // shown beside the slice ("blocked at" -> a frame)
  // Flows: an arrow from the slice or instant that has flow_out == id to
  // the one that has flow_in == id (an unblock to the run it caused).
  uint64_t flow_out = 0;
  uint64_t flow_in = 0;
};

// An instant: something that happened at one time (a log, an unblock, a
// goroutine's creation, an M's start).
struct TraceInstant {
  uint64_t track = 0;
  int64_t ts_ns = 0;
  std::string name;
  std::string category;
  Labels args;
  uint64_t flow_out = 0;
  uint64_t flow_in = 0;
};

struct TraceModel {
  std::string process_name;  // the program's name
  int32_t pid = 0;
  int64_t start_unix_ns = 0;  // wall clock at the trace's time 0
  std::vector<TraceTrack> tracks;
  std::vector<TraceSlice> slices;      // any order
  std::vector<TraceInstant> instants;  // any order
};

// ---- profiles (pprof's profile.proto, flattened) ----

struct ValueType {
  std::string type;  // "samples", "cpu", "contentions", "delay", "goroutine"
  std::string unit;  // "count", "nanoseconds"
};

struct Mapping {
  uint64_t start = 0, limit = 0, offset = 0;
  std::string file;
  std::string build_id;  // hex
};

// One source line of a location: the innermost inlined call first.
struct Line {
  std::string function;  // demangled
  std::string system_name;  // mangled, or the same
  std::string file;
  int64_t line = 0;
};

struct Location {
  uint64_t address = 0;
  uint64_t mapping = 0;  // index + 1 into mappings, 0: none
  std::vector<Line> lines;
};

struct Sample {
  std::vector<uint64_t> locations;  // index + 1 into locations, leaf first
  std::vector<int64_t> values;      // one per sample type
  Labels labels;                    // string labels (pprof.Do's)
};

struct ProfileModel {
  std::vector<ValueType> sample_types;
  std::vector<Sample> samples;
  std::vector<Location> locations;
  std::vector<Mapping> mappings;
  int64_t time_unix_ns = 0;
  int64_t duration_ns = 0;
  ValueType period_type;
  int64_t period = 0;
  std::vector<std::string> comments;
  std::string default_sample_type;
};

// ---- the encoders' table (libgort_encode) ----

struct Encoders {
  uint32_t version = 1;
  // Perfetto's protobuf trace (perfetto.protos.Trace). False and *err on
  // failure.
  bool (*perfetto)(const TraceModel& model, std::string* out, std::string* err) = nullptr;
  // pprof's protobuf profile (perftools.profiles.Profile), gzipped as
  // `go tool pprof` writes it when gzip is true.
  bool (*pprof)(const ProfileModel& model, bool gzip, std::string* out, std::string* err) = nullptr;
};

}  // namespace gort::encode

// Defined by libgort_encode (stdlib/encode/encoders.cpp).
extern "C" const gort::encode::Encoders* gort_encoders_v1();

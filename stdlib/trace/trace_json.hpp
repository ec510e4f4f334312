// stdlib/trace/trace_json.hpp — an execution trace as the Trace Event
// Format's JSON, the file Perfetto UI and chrome://tracing open
// (docs/tracing-and-profiling.md). In libgort itself: unlike the Perfetto
// and pprof files, it needs no library (stdlib/encode/loader.hpp).
//
//   gort::encode::TraceModel model = ...;  // the tracer's
//   std::string json = gort::internal::encode_trace_json(model);
//
// The file, one JSON object:
//   {"traceEvents": [...], "displayTimeUnit": "ns",
//    "otherData": {"producer": "gort", "process_name": ..., "pid": ...,
//                  "start_unix_ns": "<wall clock of time 0, ns>"}}
// - the process is model.pid; every track (the process's own, goroutines,
//   Ps, Ms, region tracks) is one thread of it, tid 1, 2, ... in the
//   model's order (skipping the value of pid, which viewers take for the
//   main thread). "M" events name the process and each thread, and
//   thread_sort_index lists the tracks depth-first, each parent's children
//   by their sort_index, so a goroutine's region track sits under it;
// - a slice is an "X" event, an instant an "i" event with "s": "t";
//   "cat" is the category, "args" the labels;
// - ts and dur are microseconds since the trace's start with the ns as
//   three decimals ("12.345"), which viewers read back exactly;
// - a flow is an "s" event at the source's time on its thread and an "f"
//   event ("bp": "e") at the destination's time on its thread, both named
//   "flow" with the id as a hex string; each follows its slice or instant
//   in the file, so that the viewer binds it to the slice open there (an
//   instant's flow binds to the slice around the instant).
// Strings are escaped for JSON, with control characters as \u00XX and each
// byte of invalid UTF-8 replaced by U+FFFD.
//
// Nothing is refused: a slice that ends before it begins gets duration 0,
// one on an unknown track gets a thread of its own, and slices that
// overlap without nesting are written as they are (Perfetto moves them to
// an overflow track). The protobuf encoder is the strict one.
//
// Thread-safety: none needed (reads the model, returns a new string).
// Costs: O(n log n) in the events, the output built in one string.
#pragma once

#include "stdlib/trace/room.hpp"

#include <string>

#include "stdlib/encode/model.hpp"

namespace gort::internal {

std::string encode_trace_json(const encode::TraceModel& model);

}  // namespace gort::internal

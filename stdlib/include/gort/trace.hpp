// gort/trace.hpp — Go's runtime/trace for gort: record what every goroutine
// did (ran, blocked and why, was woken by whom, made system calls) and
// open it in Perfetto UI; keep the last seconds in memory with a flight
// recorder (docs/tracing-and-profiling.md).
//
//   gort::run([] {
//     if (auto s = gort::trace::start("server.perfetto-trace"); !s.ok()) ...
//     serve_for(absl::Seconds(5));
//     gort::trace::stop();       // writes the file; open it at ui.perfetto.dev
//   });
//
// The format follows the file's name: ".json" writes the Trace Event
// Format (JSON; Perfetto UI and chrome://tracing load it; for small
// traces), ".gtrace" the raw events (gort-trace converts them later),
// anything else Perfetto's protobuf trace, which Perfetto UI opens at any
// size (written by libgort_encode, which libgort loads then). GORT_TRACE=path
// traces a whole gort::run with no code change.
//
// Each goroutine is a track named by its id and creation site, with
// "running", "runnable" and blocked slices (named with Go's wait reason:
// "chan receive", "sync.Mutex.Lock", "IO wait", ...; the blocking call,
// or with Options::stacks the whole stack, in the slice's arguments),
// "syscall" slices for gort::blocking and the hooked blocking libc calls,
// and arrows from whoever woke it (another goroutine, the network poller,
// a timer). Each P is a track showing which goroutine it ran. User
// annotations (Go's tasks, regions and logs) go on their goroutine's
// tracks; a task has a track of its own.
//
// Flight recorder (Go 1.25's FlightRecorder): the tracer runs all the time
// into a ring of at most max_bytes holding at least the last min_age;
// write_to() saves a snapshot on demand. While it runs, a fatal error (a
// stack overflow's, a deadlock's included) and a stall report also write
// its ring raw to `<dump_dir>/gort-flight-<pid>.gtrace` (stalls: at most
// one a minute, numbered), and the report names the file.
//
// Costs: while nothing traces, one load and a predicted branch per
// scheduler event. While tracing, 35–45 ns and 5–8 bytes per event
// (goroutine switches, blocks, wake-ups; bench/trace_bench.cpp), plus an
// unwind of the blocking stack per block with Options::stacks (about
// 2.5 µs). Memory: 64 KiB per M, plus what the trace keeps (capped at
// Options::max_bytes) or the ring's max_bytes.
//
// Thread-safety: every function may be called from any goroutine or
// thread. start/stop and the recorder's start/stop serialise among
// themselves. stop() and write_to() do file I/O on the calling thread
// (they do not park); converting a large trace takes a while.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gort/detail/api.hpp"

namespace gort::trace {

struct Options {
  // Events kept past this many bytes of raw trace are dropped (the file
  // says how many buffers were lost).
  int64_t max_bytes = int64_t{1} << 30;
  // Record the whole stack of each goroutine that blocks: an unwind per
  // block (libgcc's, a few microseconds). Without it a block records its
  // blocking call: where the program called the gort function that
  // blocked (a channel operation, select, a sync type's wait, sleep),
  // for the price of a store.
  bool stacks = false;
};

// Starts tracing to `path` (written by stop()). Go's error if a trace is
// already running: "tracing is already enabled".
GORT_API absl::Status start(const std::string& path, const Options& options = {});
// Stops the trace and writes its file. An error if none runs, or if the
// file cannot be written or encoded.
GORT_API absl::Status stop();
// Go's trace.IsEnabled: a trace or the flight recorder is running.
GORT_API bool is_enabled();

// Converts a raw trace (a ".gtrace": a fatal error's dump, or a trace
// written raw) to `out_path`, whose name picks the format as start's does.
GORT_API absl::Status convert(const std::string& raw_path, const std::string& out_path);

// ---- user annotations (Go's trace.NewTask, StartRegion, Log) ----

// A logical operation that may span goroutines (a request). Ends at end()
// or destruction. Cheap when no trace runs: an id and nothing recorded.
class GORT_API Task {
 public:
  explicit Task(std::string_view name, const Task* parent = nullptr);
  ~Task();
  Task(Task&& other) noexcept : id_(std::exchange(other.id_, 0)) {}
  Task& operator=(Task&&) = delete;
  Task(const Task&) = delete;
  void end();
  uint64_t id() const { return id_; }

 private:
  uint64_t id_;
};

// A span of the calling goroutine's time, until destruction (regions
// nest, as Go's must).
class GORT_API Region {
 public:
  explicit Region(std::string_view name, const Task* task = nullptr);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

 private:
  uint64_t task_;
  std::string name_;
  bool on_;
};

// Go's trace.WithRegion.
template <class F>
decltype(auto) with_region(std::string_view name, F&& f) {
  Region r(name);
  return std::forward<F>(f)();
}

// Go's trace.Log: a message at this point of the calling goroutine.
GORT_API void log(std::string_view category, std::string_view message, const Task* task = nullptr);

// ---- the flight recorder ----

struct FlightRecorderConfig {
  // Keep at least this much of the past (Go's MinAge)...
  absl::Duration min_age = absl::Seconds(10);
  // ...in at most this many bytes (Go's MaxBytes), which wins.
  int64_t max_bytes = 10 << 20;
  // Where a fatal error's or stall's dump goes.
  std::string dump_dir = ".";
  bool stacks = false;
};

// One may run at a time (Go's rule): start() of a second fails.
class GORT_API FlightRecorder {
 public:
  explicit FlightRecorder(FlightRecorderConfig config = {});
  ~FlightRecorder();  // stops it
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  absl::Status start();
  void stop();
  bool enabled() const;
  // Writes what the ring holds now; the format follows the name.
  absl::Status write_to(const std::string& path);
  // The same as bytes: format "json", "perfetto" or "gtrace".
  absl::StatusOr<std::string> snapshot(std::string_view format);

 private:
  FlightRecorderConfig config_;
  bool started_ = false;
};

}  // namespace gort::trace

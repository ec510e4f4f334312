// gort/pprof.hpp — Go's runtime/pprof: profile labels, the CPU profile, and
// the goroutine, block and mutex profiles, written in pprof's format
// (gzipped perftools.profiles.Profile), which `go tool pprof` reads.
//
//   // Samples taken in serve(), and in the goroutines it starts, carry
//   // the label worker=a (Go's pprof.Do).
//   gort::pprof::with_labels({{"worker", "a"}}, [&] { serve(conn); });
//
//   if (absl::Status st = gort::pprof::start_cpu_profile("cpu.pprof"); !st.ok()) ...
//   run_load();
//   absl::Status st = gort::pprof::stop_cpu_profile();  // writes cpu.pprof
//
//   gort::pprof::set_block_profile_rate(1);             // every channel or sync wait
//   gort::pprof::set_mutex_profile_fraction(1);         // every contended lock
//   ...
//   st = gort::pprof::write_profile("block", "block.pprof");
//   absl::StatusOr<std::string> text = gort::pprof::profile("goroutine", 1);
//
// then `go tool pprof -http=: ./prog cpu.pprof`. GORT_CPUPROFILE=path in the
// environment profiles a whole gort::run (written when main returns).
// docs/tracing-and-profiling.md says what each profile records and what it
// leaves out.
//
// Costs. Labels: with_labels makes a new label set (one allocation, the
// strings copied); a goroutine started under labels takes a reference, an
// atomic add, and one that never had any pays a load and a branch. The
// CPU profile: while it runs, a signal per running thread every 1/hz of CPU
// time (10 ms by default), each an unwind of up to 64 frames into a ring;
// a helper thread folds them into a table. Block and mutex profiles: off,
// a load and a branch per park and per contended lock; on, a clock read
// around each such wait and an unwind of the waiter's stack per sampled
// event. Writing a profile symbolizes each distinct address once (the
// first profile loads the debug information, as the first traceback does)
// and loads libgort_encode (protobuf) for the pprof format; Go's text
// forms (debug >= 1) need neither. The goroutine profile walks every
// goroutine's stack under the scheduler's lock, as gort::stack(true) does:
// spawning and the idle threads wait meanwhile.
//
// Thread-safety: every function may be called from any goroutine or plain
// thread, concurrently. cpu_profile(d) parks the calling goroutine (a plain
// thread sleeps) for d; no other call parks: they block the thread for the
// time they take (writing a file, symbolizing, walking stacks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gort/detail/api.hpp"

namespace gort::pprof {

// Key-value pairs (Go's pprof.LabelSet). A key given twice keeps its last
// value.
using LabelSet = std::vector<std::pair<std::string, std::string>>;

}  // namespace gort::pprof

namespace gort::internal {

// with_labels' scope: the calling goroutine's labels are its previous ones
// plus `labels` until the destructor restores the previous set. On a plain
// thread it does nothing.
class GORT_API LabelScope {
 public:
  explicit LabelScope(const pprof::LabelSet& labels);
  ~LabelScope();
  LabelScope(const LabelScope&) = delete;
  LabelScope& operator=(const LabelScope&) = delete;

 private:
  void* g_ = nullptr;     // the goroutine, null on a plain thread
  void* prev_ = nullptr;  // its previous set (the reference it held)
};

}  // namespace gort::internal

namespace gort::pprof {

// ---- labels ----

// Go's pprof.Do: runs f() with the calling goroutine's labels set to its
// current ones plus `labels` (a key it has already takes the new value),
// and restores the previous set when f returns or throws. Goroutines that
// f starts (gort::go) inherit the set, and keep it after f returns. Every
// profile attaches the set to its samples (Go's block and mutex profiles
// do not). On a plain thread it just runs f(): threads have no labels.
// Never parks (f may).
template <class F>
decltype(auto) with_labels(const LabelSet& labels, F&& f) {
  internal::LabelScope scope(labels);
  return std::forward<F>(f)();
}

// The calling goroutine's labels, sorted by key (Go's pprof.ForLabels on
// its context); empty on a plain thread.
GORT_API LabelSet labels();
// The value of one of them (Go's pprof.Label).
GORT_API std::optional<std::string> label(std::string_view key);
// Go's pprof.SetGoroutineLabels: replaces the calling goroutine's labels
// (goroutines it starts from now on inherit them). An enclosing
// with_labels restores its own previous set when it ends. Does nothing on
// a plain thread.
GORT_API void set_goroutine_labels(const LabelSet& labels);

// ---- the CPU profile ----

// Go's pprof.StartCPUProfile: samples every thread that runs goroutines
// (the runtime's Ms), hz times per second of each one's CPU time, until
// stop_cpu_profile, which writes the profile to `path` (gzipped pprof;
// sample types samples/count and cpu/nanoseconds, as Go's). The file is
// created now, so a path that cannot be written fails here. Fails with
// Go's "cpu profiling already in use" while another CPU profile runs.
// Threads that are not Ms (sysmon, the program's own) are not sampled.
GORT_API absl::Status start_cpu_profile(const std::string& path);
// Go's pprof.StopCPUProfile: stops sampling and writes the file. Without
// a profile running it does nothing (OK).
GORT_API absl::Status stop_cpu_profile();
// A CPU profile of the next d (Go's net/http/pprof /debug/pprof/profile):
// parks the calling goroutine for d and returns the gzipped profile.
// Fails as start_cpu_profile does.
GORT_API absl::StatusOr<std::string> cpu_profile(absl::Duration d);
// Go's runtime.SetCPUProfileRate: samples per second of CPU time for the
// profiles started from now on (default 100; <= 0 restores the default;
// at most 10000). A running profile keeps its rate.
GORT_API void set_cpu_profile_rate(int hz);

// ---- goroutine, block and mutex profiles ----

// Go's pprof.Lookup(name).WriteTo(w, debug), as a string: name is
// "goroutine" (every live goroutine's stack and labels, counted by stack),
// "block" (time goroutines waited on channels, select and sync's types)
// or "mutex" (time spent waiting for contended gort::Mutex, RWMutex and
// pthread mutexes: std::mutex and friends). debug 0: gzipped pprof;
// debug 1: Go's text form, symbolized; debug 2 for "goroutine": every
// goroutine's traceback, as gort::stack(true) prints them. Block and
// mutex profiles accumulate from the first event of the process; they are
// empty until set_block_profile_rate / set_mutex_profile_fraction turn
// them on. An unknown name is an error that names the known ones.
GORT_API absl::StatusOr<std::string> profile(std::string_view name, int debug = 0);
// profile(name, debug) written to `path`.
GORT_API absl::Status write_profile(std::string_view name, const std::string& path, int debug = 0);

// Go's runtime.SetBlockProfileRate: 0 turns the block profile off; 1
// records every wait; a larger rate (nanoseconds) records a wait of d >=
// rate always and a shorter one with probability d / rate, scaled when the
// profile is written as Go scales it.
GORT_API void set_block_profile_rate(int64_t rate_ns);
// Go's runtime.SetMutexProfileFraction: records 1 in `rate` contention
// events (0 turns the profile off; a negative rate only asks) and returns
// the previous rate. Contention is charged to the waiter's stack, where Go
// charges the unlocker's (docs/tracing-and-profiling.md).
GORT_API int set_mutex_profile_fraction(int rate);

}  // namespace gort::pprof

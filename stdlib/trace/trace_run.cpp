// stdlib/trace/trace_run.cpp — tracing a whole gort::run from the
// environment, with no code change (docs/tracing-and-profiling.md):
//
//   GORT_TRACE=path      trace::start(path) before main's body, stop() after
//   GORT_FLIGHTREC=dir   a flight recorder for the run, whose fatal and stall
//                        dumps go to dir; SIGUSR2 writes a snapshot there
//                        (gort-flight-<pid>-<n>.perfetto-trace; .gtrace, raw,
//                        where libgort_encode cannot be loaded)
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "gort/chan.hpp"
#include "gort/gort.hpp"
#include "gort/signal.hpp"
#include "gort/trace.hpp"
#include "stdlib/trace/trace_files.hpp"

namespace gort::internal {

namespace {

std::unique_ptr<trace::FlightRecorder> run_recorder;
std::optional<Chan<int>> snapshot_signals;

void serve_snapshots(Chan<int> sigs, std::string dir) {
  int n = 0;
  for (int sig : sigs) {
    (void)sig;
    if (!run_recorder) continue;
    std::string base = dir + "/gort-flight-" + std::to_string(getpid()) + "-" + std::to_string(++n);
    std::string path = base + ".perfetto-trace";
    absl::Status s = run_recorder->write_to(path);
    if (absl::IsFailedPrecondition(s) && run_recorder->enabled()) {
      // No libgort_encode here: the raw events, which gort-trace converts.
      std::fprintf(stderr, "gort: GORT_FLIGHTREC: %s\n", s.ToString().c_str());
      std::remove(path.c_str());
      path = base + ".gtrace";
      s = run_recorder->write_to(path);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "gort: GORT_FLIGHTREC: %s\n", s.ToString().c_str());
    } else {
      std::fprintf(stderr, "gort: flight recorder snapshot written to %s\n", path.c_str());
    }
  }
}

}  // namespace

void trace_run_begin() {
  if (const char* path = std::getenv("GORT_TRACE"); path != nullptr && *path != 0) {
    absl::Status s = trace::start(path);
    if (!s.ok()) std::fprintf(stderr, "gort: GORT_TRACE=%s: %s\n", path, s.ToString().c_str());
  }
  if (const char* dir = std::getenv("GORT_FLIGHTREC"); dir != nullptr && *dir != 0) {
    trace::FlightRecorderConfig cfg;
    cfg.dump_dir = dir;
    run_recorder = std::make_unique<trace::FlightRecorder>(cfg);
    absl::Status s = run_recorder->start();
    if (!s.ok()) {
      std::fprintf(stderr, "gort: GORT_FLIGHTREC=%s: %s\n", dir, s.ToString().c_str());
      run_recorder.reset();
      return;
    }
    snapshot_signals = make_chan<int>(1);
    signal::notify(*snapshot_signals, {SIGUSR2});
    go(&serve_snapshots, *snapshot_signals, std::string(dir));
  }
}

void trace_run_end() {
  trace_stop_at_run_end();
  if (snapshot_signals) {
    signal::stop(*snapshot_signals);
    snapshot_signals->close();
    snapshot_signals.reset();
  }
  run_recorder.reset();
}

}  // namespace gort::internal

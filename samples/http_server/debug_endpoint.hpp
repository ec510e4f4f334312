// debug_endpoint.hpp — the http_server sample's debug endpoint (-debug):
// Go's net/http/pprof over the sample's own server. The CPU, goroutine,
// block and mutex profiles come from gort/pprof.hpp; execution traces and
// the flight recorder's last seconds from gort/trace.hpp.
//
//   GET /debug/pprof/                    an index of these routes (HTML)
//   GET /debug/pprof/profile?seconds=N   a CPU profile of the next N s
//                                        (default 30, 1..300; gzipped pprof)
//   GET /debug/pprof/goroutine?debug=D   every goroutine: D=0 pprof (default),
//                                        1 Go's text, 2 every traceback
//   GET /debug/pprof/block?debug=D       waits on channels, select, sync types
//   GET /debug/pprof/mutex?debug=D       waits for contended locks
//   GET /debug/pprof/cmdline             the command line, NUL-separated
//   GET /debug/trace?seconds=N&format=F  an execution trace of the next N s
//                                        (default 1, 1..60; at most 64 MiB
//                                        of events); F perfetto (default)
//                                        or json
//   GET /debug/flightrecorder?format=F   the flight recorder's last ~10 s
//
// As Go's: `go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=5`
// reads the profiles directly; the traces open in Perfetto UI
// (ui.perfetto.dev). Binary answers (pprof, traces) are
// application/octet-stream with a Content-Disposition file name; text
// answers and errors text/plain. A CPU profile or trace that another
// request (or GORT_CPUPROFILE, GORT_TRACE) already runs is a 500 with Go's
// text ("Could not enable CPU profiling: cpu profiling already in use",
// "Could not enable tracing: tracing is already enabled"); a parameter out
// of range a 400 that says the range.
//
// The endpoint shows the program's stacks, arguments and timing to whoever
// can connect: serve it on a loopback or otherwise private address only
// (Go's advice for net/http/pprof too).
//
// Costs while it is on: the block and mutex profiles record sampled waits
// (DebugOptions), and the flight recorder traces the scheduler all the
// time (gort/trace.hpp: some tens of ns per goroutine switch, up to 10 MiB
// of ring). Off (no -debug), none of this exists.
//
// Thread-safety and parking: serve() runs on many connections' goroutines
// at once. /debug/pprof/profile parks its goroutine for its seconds and
// cannot be cut short (a shutdown waits for it to end); /debug/trace parks
// for its seconds or until the server is closed. The others block their
// thread for the time they take (walking stacks, symbolizing, encoding), as
// Go's handlers do; other requests go on meanwhile on the other threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <gort/context.hpp>
#include <gort/trace.hpp>

#include "absl/status/status.h"
#include "http.hpp"

namespace http_server {

struct DebugOptions {
  // gort::pprof::set_block_profile_rate: a wait of at least this many ns
  // is recorded, a shorter one with probability wait/rate (0: off).
  int64_t block_rate_ns = 10000;
  // gort::pprof::set_mutex_profile_fraction: one contention in this many is
  // recorded (0: off).
  int mutex_fraction = 5;
  // Where the flight recorder writes its ring when the process dies of a
  // fatal error or reports a stall (gort-flight-<pid>.gtrace).
  std::string flight_dir = ".";
};

class DebugEndpoint {
 public:
  explicit DebugEndpoint(const DebugOptions& options);
  // Stops the flight recorder (the profile rates stay as they are).
  ~DebugEndpoint() = default;
  DebugEndpoint(const DebugEndpoint&) = delete;
  DebugEndpoint& operator=(const DebugEndpoint&) = delete;

  // Sets the block profile rate and the mutex profile fraction and starts
  // the flight recorder. Returns the recorder's error if it did not start
  // (one runs already: GORT_FLIGHTREC); the rest works without it, and
  // /debug/flightrecorder answers 500 saying it is not running. Call once,
  // before serving.
  absl::Status start();

  // The answer to req if its path is one of the endpoint's (above; any
  // /debug/pprof/<name>: an unknown name is Go's 404 "Unknown profile"),
  // else nullopt: the application's route. `closed` is the server's
  // context (done when the server is closed): a trace in progress ends
  // then. May park (see the top of the file).
  std::optional<Response> serve(const Request& req, const gort::Context& closed);

  // The endpoint's route that `path` belongs to, for pprof labels and
  // trace regions ("/debug/pprof/goroutine", ...); "" if none. A fixed
  // set: a label's values stay few whatever clients send.
  static std::string_view route_name(std::string_view path);

 private:
  Response cpu_profile(const Request& req);
  Response named_profile(std::string_view name, const Request& req);
  Response trace(const Request& req, const gort::Context& closed);
  Response flight(const Request& req);

  DebugOptions options_;
  gort::trace::FlightRecorder flight_;
};

}  // namespace http_server

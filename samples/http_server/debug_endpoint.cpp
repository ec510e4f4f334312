// debug_endpoint.cpp — the http_server sample's -debug routes: Go's
// net/http/pprof handlers (src/net/http/pprof/pprof.go) on gort::pprof and
// gort::trace (debug_endpoint.hpp says what each route serves).
//
// Where it follows Go and where not:
//   - the headers and texts are Go's: X-Content-Type-Options: nosniff on
//     every answer; errors as Go's serveError (text/plain, X-Go-Pprof: 1,
//     the message and a newline); binary answers with Content-Disposition;
//   - Go takes a bad seconds= as its default and a bad debug= as 0; here
//     they are a 400 that names the range, and seconds= has an upper bound
//     (300 for a profile, 60 for a trace) because the answer is built in
//     memory;
//   - Go's delta profiles (/debug/pprof/block?seconds=N) are not here: a
//     400 says so;
//   - /debug/trace is not Go's /debug/pprof/trace: its file is a Perfetto
//     (or JSON) trace for ui.perfetto.dev, not one for `go tool trace`, so
//     it does not take Go's path;
//   - the index lists the routes rather than Go's live counts per profile.
#include "debug_endpoint.hpp"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <system_error>
#include <utility>

#include <gort/gort.hpp>


namespace http_server {
namespace {

constexpr int kDefaultProfileSeconds = 30;  // Go's
constexpr int kMaxProfileSeconds = 300;
constexpr int kDefaultTraceSeconds = 1;     // Go's
constexpr int kMaxTraceSeconds = 60;
// A trace's raw events are capped (trace::Options::max_bytes; past it
// events are dropped and stderr says how many buffers were lost): the
// answer is built in memory, several times the raw size as JSON.
constexpr int64_t kMaxTraceBytes = int64_t{64} << 20;

constexpr std::string_view kNoSniff = "X-Content-Type-Options: nosniff\r\n";

// Go's serveError.
Response serve_error(int status, std::string_view msg) {
  Response r = text(status, cat(msg, "\n"));
  r.extra_headers = cat(kNoSniff, "X-Go-Pprof: 1\r\n");
  return r;
}

Response plain(std::string body, std::string_view content_type = "text/plain; charset=utf-8") {
  Response r = text(200, std::move(body));
  r.content_type = content_type;
  r.extra_headers = std::string(kNoSniff);
  return r;
}

Response attachment(std::string_view filename, std::string body) {
  Response r;
  r.content_type = "application/octet-stream";
  r.body = std::move(body);
  r.extra_headers = cat(kNoSniff, "Content-Disposition: attachment; filename=\"", filename, "\"\r\n");
  return r;
}

// ?name=N with lo <= N <= hi; absent or empty: def; nullopt for anything
// else.
std::optional<int> int_param(std::string_view query, std::string_view name, int def, int lo, int hi) {
  std::optional<std::string_view> v = query_param(query, name);
  if (!v || v->empty()) return def;
  int n = 0;
  if (!parse_uint(*v, &n, 4) || n < lo || n > hi) return std::nullopt;
  return n;
}

// ?format=perfetto (the default) or json: the name FlightRecorder::snapshot
// takes and the file suffix trace::start takes the format from.
struct TraceFormat {
  std::string_view name, suffix;
};
std::optional<TraceFormat> format_param(std::string_view query) {
  std::optional<std::string_view> v = query_param(query, "format");
  if (!v || v->empty() || *v == "perfetto") return TraceFormat{"perfetto", ".perfetto-trace"};
  if (*v == "json") return TraceFormat{"json", ".json"};
  return std::nullopt;
}

// absl's string_view is not std's in every build of abseil.
std::string message(const absl::Status& st) { return std::string(st.message()); }

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// A whole file (a trace just written, /proc/self/cmdline). Blocks the
// thread for the read, as any small file read does.
absl::StatusOr<std::string> read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rbe");
  if (f == nullptr) return absl::NotFoundError(cat("open ", path, ": ", errno_text(errno)));
  std::string out;
  char buf[64 * 1024];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return absl::DataLossError(cat("read ", path));
  return out;
}

std::string temp_dir() {
  const char* d = std::getenv("TMPDIR");
  return d != nullptr && d[0] != '\0' ? d : "/tmp";
}

std::string index_page(const DebugOptions& o, bool flight_on) {
  return cat(
      "<!DOCTYPE html>\n<html><head><title>/debug/pprof/</title></head><body>\n"
      "<h1>/debug/pprof/</h1>\n"
      "<p>Profiles and traces of this process (gort::pprof, gort::trace), served as Go's "
      "net/http/pprof serves them. ",
      gort::num_goroutine(), " goroutines, ", gort::procs(),
      " Ps. Block profile rate ", o.block_rate_ns, " ns, mutex profile fraction ", o.mutex_fraction,
      flight_on ? "; the flight recorder runs" : "; no flight recorder", ".</p>\n<table>\n"
      "<tr><td><a href=\"/debug/pprof/profile?seconds=30\">profile</a></td>"
      "<td>CPU profile of the next ?seconds=N (default 30, 1..", kMaxProfileSeconds,
      "): go tool pprof reads it</td></tr>\n"
      "<tr><td><a href=\"/debug/pprof/goroutine?debug=1\">goroutine</a></td>"
      "<td>every live goroutine, counted by stack (?debug=1 text, ?debug=2 every traceback, "
      "?debug=0 pprof)</td></tr>\n"
      "<tr><td><a href=\"/debug/pprof/block?debug=1\">block</a></td>"
      "<td>where goroutines waited on channels, select and sync types</td></tr>\n"
      "<tr><td><a href=\"/debug/pprof/mutex?debug=1\">mutex</a></td>"
      "<td>where goroutines waited for contended locks</td></tr>\n"
      "<tr><td><a href=\"/debug/pprof/cmdline\">cmdline</a></td>"
      "<td>the command line</td></tr>\n"
      "<tr><td><a href=\"/debug/trace?seconds=1\">/debug/trace</a></td>"
      "<td>execution trace of the next ?seconds=N (default 1, 1..", kMaxTraceSeconds,
      "), ?format=perfetto (default) or json: open it at https://ui.perfetto.dev</td></tr>\n"
      "<tr><td><a href=\"/debug/flightrecorder\">/debug/flightrecorder</a></td>"
      "<td>the flight recorder's last seconds, ?format=perfetto (default) or json</td></tr>\n"
      "</table>\n"
      "<p>go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=5</p>\n"
      "</body></html>\n");
}

}  // namespace

DebugEndpoint::DebugEndpoint(const DebugOptions& options)
    : options_(options), flight_([&] {
        gort::trace::FlightRecorderConfig c;  // Go's defaults: 10 s, 10 MiB
        c.dump_dir = options.flight_dir;
        return c;
      }()) {}

absl::Status DebugEndpoint::start() {
  gort::pprof::set_block_profile_rate(options_.block_rate_ns);
  gort::pprof::set_mutex_profile_fraction(options_.mutex_fraction);
  return flight_.start();
}

std::string_view DebugEndpoint::route_name(std::string_view path) {
  static constexpr std::string_view kRoutes[] = {
      "/debug/pprof/",       "/debug/pprof/profile", "/debug/pprof/goroutine", "/debug/pprof/block",
      "/debug/pprof/mutex",  "/debug/pprof/cmdline", "/debug/trace",           "/debug/flightrecorder",
  };
  for (std::string_view r : kRoutes) {
    if (path == r) return r;
  }
  // The index answers the rest of /debug/pprof/ (Go's Index does too).
  if (path == "/debug/pprof" || path.starts_with("/debug/pprof/")) return kRoutes[0];
  return {};
}

std::optional<Response> DebugEndpoint::serve(const Request& req, const gort::Context& closed) {
  std::string_view route = route_name(req.path);
  if (route.empty()) return std::nullopt;
  if (auto r = allow(req, "GET, HEAD")) return *r;
  if (route == "/debug/pprof/profile") return cpu_profile(req);
  if (route == "/debug/pprof/cmdline") {
    absl::StatusOr<std::string> cmd = read_file("/proc/self/cmdline");
    if (!cmd.ok()) return serve_error(500, message(cmd.status()));
    if (!cmd->empty() && cmd->back() == '\0') cmd->pop_back();  // Go's: the arguments joined by NULs
    return plain(*std::move(cmd));
  }
  if (route == "/debug/trace") return trace(req, closed);
  if (route == "/debug/flightrecorder") return flight(req);
  if (req.path == "/debug/pprof" || req.path == "/debug/pprof/") {
    return plain(index_page(options_, flight_.enabled()), "text/html; charset=utf-8");
  }
  return named_profile(req.path.substr(std::string_view("/debug/pprof/").size()), req);
}

// Go's Profile handler.
Response DebugEndpoint::cpu_profile(const Request& req) {
  std::optional<int> seconds = int_param(req.query, "seconds", kDefaultProfileSeconds, 1, kMaxProfileSeconds);
  if (!seconds) {
    return serve_error(400, cat("want /debug/pprof/profile?seconds=N with 1 <= N <= ", kMaxProfileSeconds));
  }
  // Parks this goroutine for the profile's length; other requests go on.
  absl::StatusOr<std::string> p = gort::pprof::cpu_profile(absl::Seconds(*seconds));
  if (!p.ok()) {
    // Failing to start (another profile runs) is Go's text; failing at the
    // end (encoding: libgort_encode not found) is not.
    const absl::Status& st = p.status();
    bool at_start = (absl::IsFailedPrecondition(st) && message(st) == "cpu profiling already in use") ||
                    absl::IsResourceExhausted(st);
    return serve_error(
        500, cat(at_start ? "Could not enable CPU profiling: " : "Could not write the CPU profile: ", message(st)));
  }
  return attachment("profile", *std::move(p));
}

// Go's handler for a named profile (pprof.Lookup(name).WriteTo(w, debug)).
Response DebugEndpoint::named_profile(std::string_view name, const Request& req) {
  if (query_param(req.query, "seconds")) {
    return serve_error(400, "delta profiles (?seconds=N) are not supported: take two and compare them with "
                            "go tool pprof -diff_base");
  }
  std::optional<int> debug = int_param(req.query, "debug", 0, 0, 2);
  if (!debug) return serve_error(400, "want ?debug=0 (pprof), 1 (text) or 2 (goroutine: every traceback)");
  absl::StatusOr<std::string> p = gort::pprof::profile(name, *debug);
  if (absl::IsNotFound(p.status())) return serve_error(404, "Unknown profile");
  if (!p.ok()) return serve_error(500, cat("Could not write the ", name, " profile: ", message(p.status())));
  if (*debug != 0) return plain(*std::move(p));
  // name is one of gort's profiles here: a plain word, safe in the header.
  return attachment(name, *std::move(p));
}

// Go's Trace handler, writing a Perfetto or JSON trace instead of Go's.
Response DebugEndpoint::trace(const Request& req, const gort::Context& closed) {
  std::optional<int> seconds = int_param(req.query, "seconds", kDefaultTraceSeconds, 1, kMaxTraceSeconds);
  if (!seconds) {
    return serve_error(400, cat("want /debug/trace?seconds=N with 1 <= N <= ", kMaxTraceSeconds));
  }
  std::optional<TraceFormat> format = format_param(req.query);
  if (!format) return serve_error(400, "want /debug/trace?format=perfetto or json");
  // trace::start writes a file, whose name picks the format: a fresh one
  // (mode 0600) in the temporary directory, removed once read.
  std::string path = cat(temp_dir(), "/gort-debug-trace-XXXXXX", format->suffix);
  int fd = mkstemps(path.data(), static_cast<int>(format->suffix.size()));
  if (fd < 0) return serve_error(500, cat("Could not create a temporary file: ", errno_text(errno)));
  close(fd);
  gort::trace::Options options;
  options.max_bytes = kMaxTraceBytes;
  if (absl::Status st = gort::trace::start(path, options); !st.ok()) {
    unlink(path.c_str());
    return serve_error(500, cat("Could not enable tracing: ", message(st)));
  }
  // The trace's length, or less if the server is closed meanwhile (Go's
  // handler stops at its request's cancellation too).
  gort::select(gort::on_recv(gort::after(absl::Seconds(*seconds))), gort::on_recv(closed.done()));
  absl::Status st = gort::trace::stop();
  absl::StatusOr<std::string> bytes = st.ok() ? read_file(path) : absl::StatusOr<std::string>(st);
  unlink(path.c_str());
  if (!bytes.ok()) return serve_error(500, cat("Could not write the trace: ", message(bytes.status())));
  return attachment(cat("trace", format->suffix), *std::move(bytes));
}

Response DebugEndpoint::flight(const Request& req) {
  std::optional<TraceFormat> format = format_param(req.query);
  if (!format) return serve_error(400, "want /debug/flightrecorder?format=perfetto or json");
  absl::StatusOr<std::string> snap = flight_.snapshot(format->name);
  if (!snap.ok()) return serve_error(500, cat("Could not snapshot the flight recorder: ", message(snap.status())));
  return attachment(cat("flight", format->suffix), *std::move(snap));
}

}  // namespace http_server

// bench/trace_bench.cpp — what the execution tracer (gort/trace.hpp) costs a
// goroutine switch, against Go 1.19's runtime/trace. Twin:
// bench/go/trace_bench/main.go.
//
// The workload is chan_bench's pingpong: the main goroutine sends i on
// unbuffered `ping` and waits for it back on unbuffered `pong`; a partner
// goroutine echoes (range over ping, send on pong). A round trip makes six
// scheduler events, three per goroutine (gmp/trace.cpp): each blocks once in
// a receive (GoBlock), is readied once by the other's send (GoUnblock) and
// starts running once (GoStart). Go 1.19's tracer writes the same six
// (GoBlockRecv, GoUnblock or GoUnblockLocal, GoStart or GoStartLocal).
// Every case is a whole-process workload (see bench_util.hpp), N =
// 1,000,000 round trips:
//
//   pingpong_untraced/procs:1, /procs:2   chan_bench's pingpong as it is:
//                      nothing traces, the tracer only checks its switch.
//                      ns/roundtrip = elapsed / N. "Off costs nothing" is
//                      this row against chan_bench's pingpong of a build
//                      without the tracer (docs/benchmarks.md).
//   pingpong_traced/procs:1, /procs:2   N round trips untraced and N traced
//                      in one process, in 10 slices of N/5 that alternate
//                      untraced, traced, traced, untraced, untraced, ... so
//                      that a drift of this shared host's speed (a factor of
//                      two within seconds) falls on both halves alike. A
//                      traced slice runs between trace::start to a file in
//                      /tmp named ".gtrace" (written raw, so no encoding) and
//                      trace::stop(); the stopwatch covers the round trips
//                      only, not start (a snapshot of the goroutines) nor
//                      stop (collecting the buffers and writing the file).
//                      Options::stacks on: each GoBlock records the blocking
//                      stack (an unwind of up to 16 frames), as Go 1.19
//                      records one with each block and unblock.
//   pingpong_traced_nostacks/procs:1, /procs:2   the same with the default
//                      Options (no stacks; a block records its blocking
//                      call): the per-event cost that gort/trace.hpp
//                      states. gort only (Go 1.19 cannot turn stacks off).
//   pingpong_flightrec/procs:1, /procs:2   the same with a FlightRecorder
//                      running in the traced slices instead of a trace:
//                      default config (10 MiB ring, 10 s, no stacks), its
//                      dump directory /tmp. gort only (Go 1.19 has none).
//                      The snapshot taken after each slice (untimed) must
//                      hold events.
//
// Counters of the traced cases; the untraced slices of the same process
// are the reference:
//
//   ns/roundtrip           traced slices' elapsed / N
//   untraced_ns/roundtrip  untraced slices' elapsed / N
//   overhead_ns/roundtrip  the difference
//   overhead_pct           100 × the difference / untraced
//   ns/event               overhead_ns/roundtrip / 6 (the six events above,
//                          on both sides, so that gort/Go is the ratio per
//                          round trip)
//   bytes/roundtrip        (traces) the trace files' sizes / N: events,
//                          buffer headers, and once per file the program's
//                          maps; Go: the bytes trace.Start's writer received
//   bytes/event            bytes/roundtrip / 6
//   events/roundtrip       (gort traces) the events in the files / N,
//                          counted by walking the raw format: checks the six
//                          (procs:2 adds P starts and stops, each start a
//                          snapshot of the goroutines)
//
// Each case checks the sum of the values received, and the traced ones
// that their trace holds events, so that a fast wrong answer or a tracer
// that recorded nothing fails the run instead of being timed.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>

#include <benchmark/benchmark.h>
#include <gort/gort.hpp>
#include <gort/trace.hpp>

#include "bench_util.hpp"
// The raw trace format, to count the events of a trace (a documented file
// format; nothing of the runtime is called).
#include "gmp/trace.hpp"
#include "gmp/trace_buf.hpp"

namespace {

using gortbench::Stopwatch;

constexpr int64_t kRoundTrips = 1'000'000;
// Slices of a traced case: half untraced, half traced, alternating.
constexpr int kSlices = 10;
// Events per round trip: a block, an unblock and a start per goroutine.
constexpr double kEventsPerRoundTrip = 6;

void check(benchmark::State& state, bool ok, const char* what) {
  if (!ok) state.SkipWithError(what);
}

// Splits n into `parts` shares that differ by at most one.
int64_t share(int64_t n, int parts, int i) { return n / parts + (i < n % parts ? 1 : 0); }

void pingpong_untraced(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(kRoundTrips);
  double seconds = 0;
  int64_t sum = 0;
  gort::run(
      [&] {
        auto ping = gort::make_chan<int64_t>();
        auto pong = gort::make_chan<int64_t>();
        Stopwatch sw;
        gort::go([ping, pong] {
          for (int64_t v : ping) pong.send(v);
        });
        for (int64_t i = 0; i < n; i++) {
          ping.send(i);
          sum += *pong.recv();
        }
        seconds = sw.seconds();
        ping.close();
      },
      gort::Config{.procs = procs});
  check(state, sum == n * (n - 1) / 2, "pingpong_untraced: wrong sum");
  state.SetIterationTime(seconds);
  state.counters["ns/roundtrip"] = seconds * 1e9 / static_cast<double>(n);
}

// ---- counting the events of a raw trace ----

// How many varints follow an event's kind and tick delta, then whether a
// stack (a depth and that many PCs) and how many strings (a length and its
// bytes): the shapes stdlib/trace/trace_decode.cpp decodes.
struct EvShape {
  int nargs;
  int nstrings;
  bool stack;
};

EvShape shape(gort::internal::TraceEv k) {
  using gort::internal::TraceEv;
  switch (k) {
    case TraceEv::kMStart:
    case TraceEv::kProcStart:
    case TraceEv::kProcStop:
    case TraceEv::kGoSched:
    case TraceEv::kGoPreempt:
    case TraceEv::kGoEnd:
    case TraceEv::kGoSyscallBegin:
    case TraceEv::kUserTaskEnd:
    case TraceEv::kGoLost: return {1, 0, false};
    case TraceEv::kGoStart:
    case TraceEv::kGoSyscallEnd: return {2, 0, false};
    case TraceEv::kGoCreate:
    case TraceEv::kGoUnblock: return {3, 0, false};
    case TraceEv::kGoStatus: return {5, 0, false};
    case TraceEv::kGoBlock: return {2, 0, true};
    case TraceEv::kUserTaskBegin:
    case TraceEv::kUserRegionBegin:
    case TraceEv::kUserRegionEnd: return {2, 1, false};
    case TraceEv::kUserLog: return {2, 2, false};
    default: return {-1, 0, false};
  }
}

bool skip_varints(const uint8_t** p, const uint8_t* end, uint64_t n) {
  uint64_t v;
  for (uint64_t i = 0; i < n; i++) {
    if (!gort::internal::get_uvarint(p, end, &v)) return false;
  }
  return true;
}

// The events of one buffer's bytes; -1 if they cannot be walked.
int64_t buffer_events(const uint8_t* p, const uint8_t* end) {
  int64_t n = 0;
  while (p < end) {
    EvShape s = shape(static_cast<gort::internal::TraceEv>(*p++));
    if (s.nargs < 0 || !skip_varints(&p, end, 1 + s.nargs)) return -1;  // the tick delta, the arguments
    uint64_t len;
    if (s.stack && (!gort::internal::get_uvarint(&p, end, &len) || !skip_varints(&p, end, len))) return -1;
    for (int i = 0; i < s.nstrings; i++) {
      if (!gort::internal::get_uvarint(&p, end, &len) || len > static_cast<uint64_t>(end - p)) return -1;
      p += len;
    }
    n++;
  }
  return n;
}

// The events of a raw trace (gmp/trace_buf.hpp); -1 if it is not one or
// cannot be walked. A buffer both retired and copied from its M appears
// twice: as the decoder does, the longer copy counts (by seq).
int64_t raw_trace_events(const std::string& raw) {
  using namespace gort::internal;
  if (raw.size() < sizeof(RawHeader) || std::memcmp(raw.data(), kRawMagic, sizeof kRawMagic) != 0) return -1;
  std::map<uint64_t, int64_t> by_seq;
  size_t off = sizeof(RawHeader);
  while (off + sizeof(RawRecord) <= raw.size()) {
    RawRecord r;
    std::memcpy(&r, raw.data() + off, sizeof r);
    off += sizeof r;
    if (r.tag == RawTag::kEnd) break;
    if (r.len > raw.size() - off) return -1;
    if (r.tag == RawTag::kBuffer) {
      RawBufHeader h;
      if (r.len < sizeof h) return -1;
      std::memcpy(&h, raw.data() + off, sizeof h);
      const auto* p = reinterpret_cast<const uint8_t*>(raw.data() + off + sizeof h);
      int64_t n = buffer_events(p, p + std::min<size_t>(h.len, r.len - sizeof h));
      if (n < 0) return -1;
      int64_t& kept = by_seq[h.seq];
      kept = std::max(kept, n);
    }
    off += r.len;
  }
  int64_t total = 0;
  for (const auto& [seq, n] : by_seq) total += n;
  return total;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// ---- the traced cases ----

enum class Tracer { kTrace, kTraceNoStacks, kFlightRecorder };

void pingpong_traced(benchmark::State& state, int procs, Tracer how) {
  const int64_t n = gortbench::scaled(kRoundTrips);
  const std::string path = "/tmp/gort-trace-bench-" + std::to_string(getpid()) + ".gtrace";
  double untraced_s = 0, traced_s = 0;
  int64_t sum = 0, sent = 0, bytes = 0, events = 0;
  std::string error;
  gort::run(
      [&] {
        auto ping = gort::make_chan<int64_t>();
        auto pong = gort::make_chan<int64_t>();
        gort::go([ping, pong] {
          for (int64_t v : ping) pong.send(v);
        });
        auto round_trips = [&](int64_t k) {
          for (int64_t i = 0; i < k; i++) {
            ping.send(sent);
            sum += *pong.recv();
            sent++;
          }
        };
        // Untimed: the first slice, untraced, would otherwise pay for the
        // partner's first run and the stacks' first pages alone.
        round_trips(std::max<int64_t>(1, n / 100));
        for (int s = 0; s < kSlices && error.empty(); s++) {
          // Pairs alternate which half goes first: U T, T U, U T, ...
          const bool traced = (s % 2 == 1) != ((s / 2) % 2 == 1);
          const int64_t k = share(n, kSlices / 2, s / 2);
          std::optional<gort::trace::FlightRecorder> recorder;
          if (traced) {
            absl::Status st;
            if (how == Tracer::kFlightRecorder) {
              gort::trace::FlightRecorderConfig cfg;
              // The ring's size and age stay the defaults; a dump (a stall's)
              // goes to /tmp, not into the working directory.
              cfg.dump_dir = "/tmp";
              recorder.emplace(cfg);
              st = recorder->start();
            } else {
              gort::trace::Options opts;
              opts.stacks = how == Tracer::kTrace;
              st = gort::trace::start(path, opts);
            }
            if (!st.ok()) {
              error = "starting the tracer: " + st.ToString();
              break;
            }
          }
          Stopwatch sw;
          round_trips(k);
          (traced ? traced_s : untraced_s) += sw.seconds();
          if (!traced) continue;
          std::optional<std::string> raw;
          if (recorder) {
            absl::StatusOr<std::string> snap = recorder->snapshot("gtrace");
            recorder->stop();
            if (!snap.ok()) {
              error = "flight recorder snapshot: " + snap.status().ToString();
              break;
            }
            raw = std::move(*snap);
          } else {
            absl::Status st = gort::trace::stop();
            raw = read_file(path);
            ::unlink(path.c_str());
            if (!st.ok() || !raw) {
              error = "trace::stop: " + (st.ok() ? "cannot read " + path : st.ToString());
              break;
            }
            bytes += static_cast<int64_t>(raw->size());
          }
          int64_t ev = raw_trace_events(*raw);
          if (ev <= 0) {
            error = ev < 0 ? "the raw trace cannot be walked (has gmp/trace_buf.hpp's format changed?)"
                           : "the tracer recorded no events";
            break;
          }
          events += ev;
        }
        ping.close();
      },
      gort::Config{.procs = procs});
  ::unlink(path.c_str());  // a trace left by a failed slice
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  check(state, sum == sent * (sent - 1) / 2, "pingpong_traced: wrong sum");
  const double trips = static_cast<double>(n);
  const double extra_ns = (traced_s - untraced_s) * 1e9 / trips;
  state.SetIterationTime(traced_s);
  state.counters["ns/roundtrip"] = traced_s * 1e9 / trips;
  state.counters["untraced_ns/roundtrip"] = untraced_s * 1e9 / trips;
  state.counters["overhead_ns/roundtrip"] = extra_ns;
  state.counters["overhead_pct"] = 100.0 * (traced_s - untraced_s) / untraced_s;
  state.counters["ns/event"] = extra_ns / kEventsPerRoundTrip;
  if (how != Tracer::kFlightRecorder) {
    state.counters["bytes/roundtrip"] = static_cast<double>(bytes) / trips;
    state.counters["bytes/event"] = static_cast<double>(bytes) / trips / kEventsPerRoundTrip;
    state.counters["events/roundtrip"] = static_cast<double>(events) / trips;
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int procs : {1, 2}) {
    gortbench::register_once("pingpong_untraced", procs, pingpong_untraced);
    gortbench::register_once("pingpong_traced", procs,
                             [](benchmark::State& s, int p) { pingpong_traced(s, p, Tracer::kTrace); });
    gortbench::register_once("pingpong_traced_nostacks", procs,
                             [](benchmark::State& s, int p) { pingpong_traced(s, p, Tracer::kTraceNoStacks); });
    gortbench::register_once("pingpong_flightrec", procs,
                             [](benchmark::State& s, int p) { pingpong_traced(s, p, Tracer::kFlightRecorder); });
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// stdlib/trace/trace.cpp — gort::trace: start/stop, annotations, the flight
// recorder, and writing a raw trace in the format its file name asks for
// (gort/trace.hpp).
#include "gort/trace.hpp"

#include <errno.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "gmp/diag/symbolize.hpp"
#include "gmp/trace.hpp"
#include "gmp/trace_consume.hpp"
#include "stdlib/encode/loader.hpp"
#include "stdlib/trace/trace_decode.hpp"
#include "stdlib/trace/trace_files.hpp"
#include "stdlib/trace/trace_json.hpp"

namespace gort::internal {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string base_name(const std::string& path) {
  size_t i = path.rfind('/');
  return i == std::string::npos ? path : path.substr(i + 1);
}

}  // namespace

TraceFormat trace_format_for(std::string_view path) {
  if (ends_with(path, ".json")) return TraceFormat::kJson;
  if (ends_with(path, ".gtrace")) return TraceFormat::kRaw;
  return TraceFormat::kPerfetto;
}

std::string live_pc_name(uint64_t pc, bool call) {
  std::lock_guard<std::mutex> lock(symbolizer_mutex());
  const SymPC& s = symbolize(call ? pc - 1 : pc);
  // The innermost frame that is the program's; none (gort made it: a
  // server's connection turn, a timer's function), the physical function.
  const SymFrame* f = &s.frames.back();
  for (const SymFrame& fr : s.frames) {
    if (!fr.runtime && !fr.gort) {
      f = &fr;
      break;
    }
  }
  if (f->function.empty()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(pc));
    return buf;
  }
  std::string out = f->function;
  if (!f->file.empty()) out += " (" + base_name(f->file) + ":" + std::to_string(f->line) + ")";
  return out;
}

absl::StatusOr<std::string> encode_raw_trace(const std::string& raw, TraceFormat format) {
  if (format == TraceFormat::kRaw) return raw;
  absl::StatusOr<DecodedTrace> t = decode_raw_trace(raw);
  if (!t.ok()) return t.status();
  // A trace of this process is named from its own symbols; another's (a
  // dump converted afterwards) from the files its maps name.
  PcNamer namer = t->header.pid == getpid() ? PcNamer(&live_pc_name) : offline_pc_namer(t->maps);
  encode::TraceModel model = build_trace_model(*t, namer);
  if (format == TraceFormat::kJson) return encode_trace_json(model);
  std::string err;
  const encode::Encoders* enc = encode::load_encoders(&err);
  if (enc == nullptr) return absl::FailedPreconditionError(err);
  std::string out;
  if (!enc->perfetto(model, &out, &err)) return absl::InternalError("trace: encoding a Perfetto trace: " + err);
  return out;
}

absl::Status write_trace_file(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "we");
  if (f == nullptr) return absl::ErrnoToStatus(errno, "trace: open " + path);
  size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  int werr = n == bytes.size() ? 0 : errno;
  if (std::fclose(f) != 0 && werr == 0) werr = errno;
  if (werr != 0) return absl::ErrnoToStatus(werr, "trace: write " + path);
  return absl::OkStatus();
}

absl::Status write_raw_trace(const std::string& raw, const std::string& path) {
  absl::StatusOr<std::string> out = encode_raw_trace(raw, trace_format_for(path));
  if (!out.ok()) return out.status();
  return write_trace_file(path, *out);
}

namespace {

std::mutex trace_mu;
std::string trace_path;  // trace_mu
std::atomic<uint64_t> task_ids{0};

}  // namespace

bool trace_stop_at_run_end() {
  {
    std::lock_guard<std::mutex> lock(trace_mu);
    if (!tracer_trace_running()) return false;
  }
  absl::Status s = trace::stop();
  if (!s.ok()) std::fprintf(stderr, "gort: writing the trace at the end of run: %s\n", s.ToString().c_str());
  return true;
}

}  // namespace gort::internal

namespace gort::trace {

using namespace gort::internal;

absl::Status start(const std::string& path, const Options& options) {
  std::lock_guard<std::mutex> lock(trace_mu);
  if (path.empty()) return absl::InvalidArgumentError("trace: start: empty path");
  if (tracer_trace_running()) return absl::FailedPreconditionError("tracing is already enabled");
  // The file is made now, so that a path that cannot be written fails
  // here rather than after the traced work.
  if (FILE* f = std::fopen(path.c_str(), "we")) {
    std::fclose(f);
  } else {
    return absl::ErrnoToStatus(errno, "trace: start: cannot create " + path);
  }
  TraceLimits limits;
  limits.max_bytes = options.max_bytes;
  limits.block_stacks = options.stacks;
  if (!tracer_start_trace(limits)) return absl::FailedPreconditionError("tracing is already enabled");
  trace_path = path;
  return absl::OkStatus();
}

absl::Status stop() {
  std::string raw, path;
  int64_t lost = 0;
  {
    std::lock_guard<std::mutex> lock(trace_mu);
    if (!tracer_trace_running()) return absl::FailedPreconditionError("trace: stop: tracing is not enabled");
    tracer_stop_trace(&raw, &lost);
    path = std::move(trace_path);
  }
  if (lost > 0) {
    std::fprintf(stderr, "gort: trace: %lld buffers lost past Options::max_bytes\n", static_cast<long long>(lost));
  }
  return write_raw_trace(raw, path);
}

bool is_enabled() { return tracing(); }

absl::Status convert(const std::string& raw_path, const std::string& out_path) {
  std::ifstream in(raw_path, std::ios::binary);
  if (!in) return absl::NotFoundError("trace: convert: cannot open " + raw_path);
  std::stringstream ss;
  ss << in.rdbuf();
  return write_raw_trace(ss.str(), out_path);
}

Task::Task(std::string_view name, const Task* parent) : id_(task_ids.fetch_add(1, std::memory_order_relaxed) + 1) {
  if (tracing()) trace_user_task(id_, parent != nullptr ? parent->id_ : 0, name, true);
}

Task::~Task() { end(); }

void Task::end() {
  if (id_ != 0 && tracing()) trace_user_task(id_, 0, {}, false);
  id_ = 0;
}

Region::Region(std::string_view name, const Task* task)
    : task_(task != nullptr ? task->id() : 0), name_(name), on_(tracing()) {
  if (on_) trace_user_region(task_, name_, true);
}

Region::~Region() {
  if (on_ && tracing()) trace_user_region(task_, name_, false);
}

void log(std::string_view category, std::string_view message, const Task* task) {
  if (tracing()) trace_user_log(task != nullptr ? task->id() : 0, category, message);
}

FlightRecorder::FlightRecorder(FlightRecorderConfig config) : config_(std::move(config)) {}

FlightRecorder::~FlightRecorder() { stop(); }

absl::Status FlightRecorder::start() {
  if (started_) return absl::FailedPreconditionError("trace: flight recorder already started");
  if (config_.max_bytes <= 0) return absl::InvalidArgumentError("trace: flight recorder: max_bytes must be positive");
  TraceLimits limits;
  limits.max_bytes = config_.max_bytes;
  limits.min_age_ns = absl::ToInt64Nanoseconds(config_.min_age);
  limits.block_stacks = config_.stacks;
  std::string prefix = (config_.dump_dir.empty() ? std::string(".") : config_.dump_dir) + "/gort-flight-" +
                       std::to_string(getpid());
  if (!tracer_start_flight(limits, prefix)) {
    return absl::FailedPreconditionError("trace: another flight recorder is already running");
  }
  started_ = true;
  return absl::OkStatus();
}

void FlightRecorder::stop() {
  if (!started_) return;
  started_ = false;
  tracer_stop_flight();
}

bool FlightRecorder::enabled() const { return started_; }

absl::StatusOr<std::string> FlightRecorder::snapshot(std::string_view format) {
  if (!started_) return absl::FailedPreconditionError("trace: flight recorder is not running");
  TraceFormat f;
  if (format == "json") {
    f = TraceFormat::kJson;
  } else if (format == "perfetto") {
    f = TraceFormat::kPerfetto;
  } else if (format == "gtrace") {
    f = TraceFormat::kRaw;
  } else {
    return absl::InvalidArgumentError("trace: unknown format \"" + std::string(format) +
                                      "\" (json, perfetto or gtrace)");
  }
  std::string raw;
  if (!tracer_flight_snapshot(&raw)) return absl::FailedPreconditionError("trace: flight recorder is not running");
  return encode_raw_trace(raw, f);
}

absl::Status FlightRecorder::write_to(const std::string& path) {
  if (!started_) return absl::FailedPreconditionError("trace: flight recorder is not running");
  std::string raw;
  if (!tracer_flight_snapshot(&raw)) return absl::FailedPreconditionError("trace: flight recorder is not running");
  return write_raw_trace(raw, path);
}

}  // namespace gort::trace

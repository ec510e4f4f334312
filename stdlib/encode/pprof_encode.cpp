// stdlib/encode/pprof_encode.cpp — ProfileModel to pprof's protobuf
// profile (stdlib/encode/profile.proto), the file `go tool pprof` and the
// other pprof readers open (docs/tracing-and-profiling.md).
//
// The model is pprof's profile with the indirections taken out; this file
// puts them back:
//   - every string goes once into string_table (entry 0 is "", which
//     fields that are unset point at);
//   - a Function is made for each distinct (name, system_name, file) among
//     the locations' lines, ids in order of first use from 1;
//   - Location i (0-based) gets id i + 1 and Mapping i id i + 1, the ids the
//     model's samples and locations already use; a mapping says it carries
//     functions, files, lines (and inlined frames) when one of its
//     locations has lines, so that pprof does not symbolize it again;
//   - labels are string labels.
// gzip: the bytes as `go tool pprof` and Go's runtime/pprof write them;
// pprof reads either.
//
// A sample whose value count differs from the sample types', or an id past
// the end of the locations or mappings, is refused with *err naming it.
// Costs: linear in the model (hash lookups per string and per line).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "stdlib/encode/encoders.hpp"
#include "profile.pb.h"

namespace gort::encode {

namespace {

namespace pb = perftools::profiles;

bool fail(std::string* err, const std::string& what) {
  if (err != nullptr) *err = "gort: pprof profile: " + what;
  return false;
}

class StringTable {
 public:
  explicit StringTable(pb::Profile* p) : p_(p) { index(""); }

  int64_t index(const std::string& s) {
    auto [it, added] = ids_.try_emplace(s, static_cast<int64_t>(ids_.size()));
    if (added) p_->add_string_table(s);
    return it->second;
  }

 private:
  pb::Profile* p_;
  std::unordered_map<std::string, int64_t> ids_;
};

void set_value_type(const ValueType& v, StringTable& strings, pb::ValueType* out) {
  out->set_type(strings.index(v.type));
  out->set_unit(strings.index(v.unit));
}

bool build(const ProfileModel& m, pb::Profile* p, std::string* err) {
  StringTable strings(p);
  for (const ValueType& v : m.sample_types) set_value_type(v, strings, p->add_sample_type());

  for (size_t i = 0; i < m.samples.size(); i++) {
    const Sample& s = m.samples[i];
    if (s.values.size() != m.sample_types.size()) {
      return fail(err, "sample " + std::to_string(i) + " has " + std::to_string(s.values.size()) +
                           " values, the profile has " + std::to_string(m.sample_types.size()) + " sample types");
    }
    pb::Sample* out = p->add_sample();
    for (uint64_t loc : s.locations) {
      if (loc == 0 || loc > m.locations.size()) {
        return fail(err, "sample " + std::to_string(i) + " names location " + std::to_string(loc) +
                             ", out of range (ids are 1 to " + std::to_string(m.locations.size()) + ")");
      }
      out->add_location_id(loc);
    }
    for (int64_t v : s.values) out->add_value(v);
    for (const auto& [key, value] : s.labels) {
      pb::Label* l = out->add_label();
      l->set_key(strings.index(key));
      l->set_str(strings.index(value));
    }
  }

  // Functions by (name, system_name, file), ids from 1 in order of use;
  // the views point into the model, which outlives the map.
  std::map<std::tuple<std::string_view, std::string_view, std::string_view>, uint64_t> functions;
  std::vector<bool> has_lines(m.mappings.size()), has_inlined(m.mappings.size());
  for (size_t i = 0; i < m.locations.size(); i++) {
    const Location& loc = m.locations[i];
    if (loc.mapping > m.mappings.size()) {
      return fail(err, "location " + std::to_string(i + 1) + " names mapping " + std::to_string(loc.mapping) +
                           ", out of range (ids are 1 to " + std::to_string(m.mappings.size()) + ")");
    }
    pb::Location* out = p->add_location();
    out->set_id(i + 1);
    out->set_mapping_id(loc.mapping);
    out->set_address(loc.address);
    if (loc.mapping != 0 && !loc.lines.empty()) {
      has_lines[loc.mapping - 1] = true;
      if (loc.lines.size() > 1) has_inlined[loc.mapping - 1] = true;
    }
    for (const Line& line : loc.lines) {
      auto [it, added] = functions.try_emplace({line.function, line.system_name, line.file}, functions.size() + 1);
      if (added) {
        pb::Function* f = p->add_function();
        f->set_id(it->second);
        f->set_name(strings.index(line.function));
        f->set_system_name(strings.index(line.system_name));
        f->set_filename(strings.index(line.file));
      }
      pb::Line* l = out->add_line();
      l->set_function_id(it->second);
      l->set_line(line.line);
    }
  }

  for (size_t i = 0; i < m.mappings.size(); i++) {
    const Mapping& mp = m.mappings[i];
    pb::Mapping* out = p->add_mapping();
    out->set_id(i + 1);
    out->set_memory_start(mp.start);
    out->set_memory_limit(mp.limit);
    out->set_file_offset(mp.offset);
    out->set_filename(strings.index(mp.file));
    out->set_build_id(strings.index(mp.build_id));
    out->set_has_functions(has_lines[i]);
    out->set_has_filenames(has_lines[i]);
    out->set_has_line_numbers(has_lines[i]);
    out->set_has_inline_frames(has_inlined[i]);
  }

  p->set_time_nanos(m.time_unix_ns);
  p->set_duration_nanos(m.duration_ns);
  if (!m.period_type.type.empty() || !m.period_type.unit.empty()) {
    set_value_type(m.period_type, strings, p->mutable_period_type());
  }
  p->set_period(m.period);
  for (const std::string& c : m.comments) p->add_comment(strings.index(c));
  if (!m.default_sample_type.empty()) p->set_default_sample_type(strings.index(m.default_sample_type));
  return true;
}

}  // namespace

bool encode_pprof(const ProfileModel& m, bool gzip, std::string* out, std::string* err) {
  out->clear();
  pb::Profile profile;
  if (!build(m, &profile, err)) return false;
  if (!gzip) {
    if (!profile.SerializeToString(out)) return fail(err, "protobuf could not serialize the profile (over 2 GiB?)");
    return true;
  }
  google::protobuf::io::StringOutputStream raw(out);
  google::protobuf::io::GzipOutputStream::Options options;
  options.format = google::protobuf::io::GzipOutputStream::GZIP;
  google::protobuf::io::GzipOutputStream zipped(&raw, options);
  if (!profile.SerializeToZeroCopyStream(&zipped)) {
    return fail(err, "protobuf could not serialize the profile (over 2 GiB?)");
  }
  if (!zipped.Close()) {
    const char* why = zipped.ZlibErrorMessage();
    return fail(err, std::string("gzip: ") + (why != nullptr ? why : "failed"));
  }
  return true;
}

}  // namespace gort::encode

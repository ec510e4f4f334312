// tests/stdlib/pprof/decode.hpp — what the pprof suites share: a written
// profile decoded with the generated perftools::profiles::Profile
// (stdlib/encode/profile.proto), and questions about its samples.
#pragma once

#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "profile.pb.h"

namespace gort_pprof_test {

using perftools::profiles::Profile;
using perftools::profiles::Sample;

// A gzipped profile, as gort::pprof writes it.
inline bool decode(const std::string& gz, Profile* p) {
  google::protobuf::io::ArrayInputStream raw(gz.data(), static_cast<int>(gz.size()));
  google::protobuf::io::GzipInputStream in(&raw, google::protobuf::io::GzipInputStream::GZIP);
  return p->ParseFromZeroCopyStream(&in);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "type/unit" of each sample type.
inline std::vector<std::string> sample_types(const Profile& p) {
  std::vector<std::string> out;
  for (const auto& t : p.sample_type()) out.push_back(p.string_table(t.type()) + "/" + p.string_table(t.unit()));
  return out;
}

inline std::string period_type(const Profile& p) {
  return p.string_table(p.period_type().type()) + "/" + p.string_table(p.period_type().unit());
}

// The function names of a sample's frames, leaf first (a location's
// inlined calls innermost first).
inline std::vector<std::string> functions(const Profile& p, const Sample& s) {
  std::map<uint64_t, const perftools::profiles::Location*> locs;
  for (const auto& l : p.location()) locs[l.id()] = &l;
  std::map<uint64_t, std::string> fns;
  for (const auto& f : p.function()) fns[f.id()] = p.string_table(f.name());
  std::vector<std::string> out;
  for (uint64_t id : s.location_id()) {
    auto it = locs.find(id);
    if (it == locs.end()) continue;
    for (const auto& line : it->second->line()) out.push_back(fns[line.function_id()]);
  }
  return out;
}

// Whether a sample has a frame whose function name contains `fn`.
inline bool has_function(const Profile& p, const Sample& s, const std::string& fn) {
  for (const std::string& f : functions(p, s)) {
    if (f.find(fn) != std::string::npos) return true;
  }
  return false;
}

// A sample's string label `key` ("" if it has none).
inline std::string label(const Profile& p, const Sample& s, const std::string& key) {
  for (const auto& l : s.label()) {
    if (p.string_table(l.key()) == key) return p.string_table(l.str());
  }
  return "";
}

// values[k] summed over the samples with a frame of `fn`.
inline int64_t sum_with(const Profile& p, const std::string& fn, int k) {
  int64_t sum = 0;
  for (const Sample& s : p.sample()) {
    if (has_function(p, s, fn) && k < s.value_size()) sum += s.value(k);
  }
  return sum;
}

}  // namespace gort_pprof_test

// stdlib/pprof/profile_text.cpp — Go's text forms of a profile (debug=1 in
// runtime/pprof's WriteTo): printCountProfile for the goroutine profile,
// the contention form for block and mutex, each stack's frames as
// printStackRecord prints them:
//
//   goroutine profile: total 102
//   100 @ 0x4a2d29 0x4a2e10 0x41c3f0
//   # labels: {"worker":"a"}
//   #	0x4a2d29	parked_here(gort::Chan<int>)+0x49	/src/app/main.cpp:20
//   ...
//
// The addresses are the profile's (a return address minus one), so that
// `go tool pprof`, which reads this form too, symbolizes them right.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "stdlib/pprof/profile_builder.hpp"

namespace gort::internal {
namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return v == 0 ? "0x0" : buf;
}

// Go's %q, enough for label keys and values.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Go's labelMap.String: {"k":"v", "k2":"v2"}, sorted by key.
void put_labels(std::string& out, const encode::Labels& labels) {
  if (labels.empty()) return;
  out += "# labels: {";
  for (size_t i = 0; i < labels.size(); i++) {
    if (i > 0) out += ", ";
    out += quote(labels[i].first) + ":" + quote(labels[i].second);
  }
  out += "}\n";
}

void put_addrs(std::string& out, const BuiltProfile& p, const encode::Sample& s) {
  out += " @";
  for (uint64_t id : s.locations) out += " " + hex(p.model.locations[id - 1].address);
  out += "\n";
}

// printStackRecord: a line per logical frame, then a blank line.
void put_frames(std::string& out, const BuiltProfile& p, const encode::Sample& s) {
  for (uint64_t id : s.locations) {
    const encode::Location& loc = p.model.locations[id - 1];
    const uint64_t entry = p.entries[id - 1];
    if (loc.lines.empty()) {
      out += "#\t" + hex(loc.address) + "\n";
      continue;
    }
    for (const encode::Line& l : loc.lines) {
      out += "#\t" + hex(loc.address) + "\t" + l.function;
      if (entry != 0 && loc.address >= entry) out += "+" + hex(loc.address - entry);
      out += "\t" + l.file + ":" + std::to_string(l.line) + "\n";
    }
  }
  out += "\n";
}

// Sample indices, the largest values[k] first.
std::vector<size_t> by_value(const encode::ProfileModel& m, size_t k) {
  std::vector<size_t> order(m.samples.size());
  std::iota(order.begin(), order.end(), 0);
  auto v = [&](size_t i) { return k < m.samples[i].values.size() ? m.samples[i].values[k] : 0; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v(a) > v(b); });
  return order;
}

}  // namespace

std::string text_count_profile(const BuiltProfile& p, const std::string& name) {
  const encode::ProfileModel& m = p.model;
  int64_t total = 0;
  for (const encode::Sample& s : m.samples) total += s.values.empty() ? 0 : s.values[0];
  std::string out = name + " profile: total " + std::to_string(total) + "\n";
  for (size_t i : by_value(m, 0)) {
    const encode::Sample& s = m.samples[i];
    out += std::to_string(s.values.empty() ? 0 : s.values[0]);
    put_addrs(out, p, s);
    put_labels(out, s.labels);
    put_frames(out, p, s);
  }
  return out;
}

std::string text_contention_profile(const BuiltProfile& p, int64_t mutex_fraction) {
  const encode::ProfileModel& m = p.model;
  // Delays are kept in nanoseconds: a "cycle" is one.
  std::string out = mutex_fraction >= 0 ? "--- mutex:\n" : "--- contention:\n";
  out += "cycles/second=1000000000\n";
  if (mutex_fraction >= 0) out += "sampling period=" + std::to_string(mutex_fraction) + "\n";
  for (size_t i : by_value(m, 1)) {
    const encode::Sample& s = m.samples[i];
    int64_t count = s.values.size() > 0 ? s.values[0] : 0;
    int64_t delay = s.values.size() > 1 ? s.values[1] : 0;
    out += std::to_string(delay) + " " + std::to_string(count);
    put_addrs(out, p, s);
    put_labels(out, s.labels);
    put_frames(out, p, s);
  }
  return out;
}

}  // namespace gort::internal

// stdlib/trace/trace_json.cpp — TraceModel to the Trace Event Format's JSON
// (the layout and its choices: stdlib/trace/trace_json.hpp).
#include "stdlib/trace/trace_json.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gort::internal {

namespace {

using encode::Labels;
using encode::TraceInstant;
using encode::TraceModel;
using encode::TraceSlice;

template <typename Int>
void append_int(std::string* out, Int v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

// Microseconds with the nanoseconds as three decimals: exact, unlike a
// double, and read back exactly by the viewers.
void append_us(std::string* out, int64_t ns) {
  uint64_t mag = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (ns < 0) out->push_back('-');
  append_int(out, mag / 1000);
  const auto frac = static_cast<unsigned>(mag % 1000);
  out->push_back('.');
  out->push_back(static_cast<char>('0' + frac / 100));
  out->push_back(static_cast<char>('0' + frac / 10 % 10));
  out->push_back(static_cast<char>('0' + frac % 10));
}

// The length of the well-formed UTF-8 sequence at s[i] (Unicode's table
// 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), or 0.
size_t utf8_length(std::string_view s, size_t i) {
  auto at = [&s](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; k++) {
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  }
  return n;
}

void append_string(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_length(s, i);
      if (n == 0) {
        out->append("\xef\xbf\xbd");  // U+FFFD for this byte
        i++;
      } else {
        out->append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    i++;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

class Writer {
 public:
  explicit Writer(const TraceModel& m) : m_(m), out_("{\"traceEvents\":[") {}

  // Every track's thread, named and ordered, tids in the model's order;
  // then a thread for each track that events name but the model does not
  // list.
  void threads() {
    const size_t n = m_.tracks.size();
    std::unordered_map<uint64_t, size_t> index;
    for (size_t i = 0; i < n; i++) index.emplace(m_.tracks[i].uuid, i);
    // Depth-first from the roots, each one's children by sort_index; a
    // track in a cycle of parents (no root above it) comes last.
    std::vector<std::vector<size_t>> kids(n + 1);  // kids[n]: the roots
    for (size_t i = 0; i < n; i++) {
      const auto p = index.find(m_.tracks[i].parent_uuid);
      const bool child = m_.tracks[i].parent_uuid != 0 && p != index.end() && p->second != i;
      kids[child ? p->second : n].push_back(i);
    }
    for (auto& k : kids) {
      std::stable_sort(k.begin(), k.end(),
                       [this](size_t a, size_t b) { return m_.tracks[a].sort_index < m_.tracks[b].sort_index; });
    }
    std::vector<size_t> order, stack(kids[n].rbegin(), kids[n].rend());
    std::vector<bool> seen(n);
    while (!stack.empty()) {
      const size_t i = stack.back();
      stack.pop_back();
      if (seen[i]) continue;
      seen[i] = true;
      order.push_back(i);
      stack.insert(stack.end(), kids[i].rbegin(), kids[i].rend());
    }
    for (size_t i = 0; i < n; i++) {
      if (!seen[i]) order.push_back(i);
    }
    std::vector<int64_t> rank(n);
    for (size_t r = 0; r < order.size(); r++) rank[order[r]] = static_cast<int64_t>(r);

    metadata("process_name", m_.pid, "name", m_.process_name.empty() ? "gort" : m_.process_name);
    for (size_t i = 0; i < n; i++) {
      const auto& t = m_.tracks[i];
      if (tids_.count(t.uuid) != 0) continue;  // a second track with this uuid
      thread(t.uuid, t.name);
      begin_event();
      out_ += "\"name\":\"thread_sort_index\",\"ph\":\"M\"";
      pid_tid(t.uuid);
      out_ += ",\"args\":{\"sort_index\":";
      append_int(&out_, rank[i]);
      out_ += "}}";
    }
    for (const TraceSlice& sl : m_.slices) {
      if (tids_.count(sl.track) == 0) thread(sl.track, "");
    }
    for (const TraceInstant& in : m_.instants) {
      if (tids_.count(in.track) == 0) thread(in.track, "");
    }
  }

  void slice(const TraceSlice& s) {
    begin_event();
    name_cat(s.name, s.category);
    out_ += ",\"ph\":\"X\",\"ts\":";
    append_us(&out_, s.begin_ns);
    out_ += ",\"dur\":";
    append_us(&out_, std::max<int64_t>(0, s.end_ns - s.begin_ns));
    pid_tid(s.track);
    args(s.args);
    out_ += "}";
    flows(s.track, s.begin_ns, s.flow_out, s.flow_in);
  }

  void instant(const TraceInstant& in) {
    begin_event();
    name_cat(in.name, in.category);
    out_ += ",\"ph\":\"i\",\"s\":\"t\",\"ts\":";
    append_us(&out_, in.ts_ns);
    pid_tid(in.track);
    args(in.args);
    out_ += "}";
    flows(in.track, in.ts_ns, in.flow_out, in.flow_in);
  }

  std::string finish() {
    out_ += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"producer\":\"gort\",\"process_name\":";
    append_string(&out_, m_.process_name);
    out_ += ",\"pid\":";
    append_int(&out_, m_.pid);
    // A string: a double would round the ns of a Unix time.
    out_ += ",\"start_unix_ns\":\"";
    append_int(&out_, m_.start_unix_ns);
    out_ += "\"}}\n";
    return std::move(out_);
  }

 private:
  void begin_event() {
    out_ += first_ ? "\n{" : ",\n{";
    first_ = false;
  }

  void metadata(const char* what, int64_t tid, const char* key, const std::string& value) {
    begin_event();
    out_ += "\"name\":\"";
    out_ += what;
    out_ += "\",\"ph\":\"M\",\"pid\":";
    append_int(&out_, m_.pid);
    out_ += ",\"tid\":";
    append_int(&out_, tid);
    out_ += ",\"args\":{\"";
    out_ += key;
    out_ += "\":";
    append_string(&out_, value);
    out_ += "}}";
  }

  // Gives the track a tid and names its thread (viewers refuse an empty
  // name: an unnamed track is named for its uuid).
  void thread(uint64_t uuid, const std::string& name) {
    if (next_tid_ == m_.pid) next_tid_++;
    const int64_t tid = next_tid_++;
    tids_.emplace(uuid, tid);
    metadata("thread_name", tid, "name", name.empty() ? "track " + std::to_string(uuid) : name);
  }

  void pid_tid(uint64_t track) {
    out_ += ",\"pid\":";
    append_int(&out_, m_.pid);
    out_ += ",\"tid\":";
    append_int(&out_, tid(track));
  }

  int64_t tid(uint64_t track) const { return tids_.at(track); }

  void name_cat(const std::string& name, const std::string& cat) {
    out_ += "\"name\":";
    append_string(&out_, name);
    if (!cat.empty()) {
      out_ += ",\"cat\":";
      append_string(&out_, cat);
    }
  }

  void args(const Labels& labels) {
    if (labels.empty()) return;
    out_ += ",\"args\":{";
    for (size_t i = 0; i < labels.size(); i++) {
      if (i != 0) out_ += ",";
      append_string(&out_, labels[i].first);
      out_ += ":";
      append_string(&out_, labels[i].second);
    }
    out_ += "}";
  }

  void flows(uint64_t track, int64_t ts, uint64_t out, uint64_t in) {
    if (out != 0) flow("s", track, ts, out);
    if (in != 0) flow("f", track, ts, in);
  }

  // One end of a flow. Viewers match the ends by (id, cat, name), and
  // read hex ids exactly where a JSON number past 2^53 would round.
  void flow(const char* ph, uint64_t track, int64_t ts, uint64_t id) {
    begin_event();
    out_ += "\"name\":\"flow\",\"cat\":\"flow\",\"ph\":\"";
    out_ += ph;
    out_ += "\",\"id\":\"0x";
    char buf[17];
    auto r = std::to_chars(buf, buf + sizeof buf, id, 16);
    out_.append(buf, r.ptr);
    out_ += "\",\"ts\":";
    append_us(&out_, ts);
    if (ph[0] == 'f') out_ += ",\"bp\":\"e\"";
    pid_tid(track);
    out_ += "}";
  }

  const TraceModel& m_;
  std::string out_;
  bool first_ = true;
  int64_t next_tid_ = 1;
  std::unordered_map<uint64_t, int64_t> tids_;
};

}  // namespace

std::string encode_trace_json(const TraceModel& m) {
  Writer w(m);
  w.threads();
  // Slices and instants by time; at one time the longer slice first (so
  // that it encloses the shorter), then instants.
  struct Item {
    int64_t ts, dur;
    bool instant;
    size_t index;
  };
  std::vector<Item> items;
  items.reserve(m.slices.size() + m.instants.size());
  for (size_t i = 0; i < m.slices.size(); i++) {
    items.push_back({m.slices[i].begin_ns, m.slices[i].end_ns - m.slices[i].begin_ns, false, i});
  }
  for (size_t i = 0; i < m.instants.size(); i++) items.push_back({m.instants[i].ts_ns, 0, true, i});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.instant != b.instant) return b.instant;
    if (a.dur != b.dur) return a.dur > b.dur;
    return a.index < b.index;
  });
  for (const Item& it : items) {
    if (it.instant) {
      w.instant(m.instants[it.index]);
    } else {
      w.slice(m.slices[it.index]);
    }
  }
  return w.finish();
}

}  // namespace gort::internal

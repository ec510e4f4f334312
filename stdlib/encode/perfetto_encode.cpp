// stdlib/encode/perfetto_encode.cpp — TraceModel to Perfetto's protobuf
// trace (stdlib/encode/perfetto_trace.proto), the file Perfetto UI and
// trace_processor open (docs/tracing-and-profiling.md).
//
// What Perfetto needs, and how this file gives it:
//   - one packet sequence (trusted_packet_sequence_id 1), whose first
//     packet says it starts with clean incremental state; nothing is
//     interned, so no later packet depends on that state;
//   - every track described before any event refers to it: the descriptors
//     come first, parents before children. The first root track is the
//     process's track (a ProcessDescriptor with the model's pid and name);
//     the others are plain named tracks, so any number of goroutines, Ps and
//     Ms fits (a thread descriptor would need a tid per track). Children of
//     the process track are shown in the process's group, which Perfetto
//     orders by name; deeper levels honour sort_index (EXPLICIT ordering).
//     No track merges with a same-named sibling (SIBLING_MERGE_BEHAVIOR_NONE);
//   - a slice is a BEGIN and an END event, and the slices of one track must
//     nest: per track, slices are sorted by begin (the longer first on a
//     tie) and replayed against a stack, and a slice that starts inside
//     another but ends after it is refused. Events are written in time
//     order (a stable sort keeps each track's own order at equal times);
//   - flows: flow_ids on the event of the slice or instant with flow_out,
//     terminating_flow_ids on the one with flow_in.
//
// Timestamps are the model's own: ns since the trace's start (time 0 is
// TraceModel::start_unix_ns on the wall clock), on Perfetto's default
// clock. The viewer shows times from the first event either way, and no
// clock snapshot is needed to place them.
//
// Costs: O(n log n) in the events; the output is built packet by packet
// (a Trace's bytes are its packets', each behind its field's tag and
// length), so the trace is never held twice as messages.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "stdlib/encode/encoders.hpp"
#include "perfetto_trace.pb.h"

namespace gort::encode {

namespace {

using perfetto::protos::TrackDescriptor;
using perfetto::protos::TrackEvent;
using perfetto::protos::TracePacket;

constexpr uint32_t kSequenceId = 1;
constexpr uint32_t kNoDepth = UINT32_MAX;

struct Event {
  int64_t ts;
  enum Kind : uint8_t { kBegin, kEnd, kInstant } kind;
  size_t index;  // into model.slices (kBegin, kEnd) or model.instants
};

bool fail(std::string* err, const std::string& what) {
  if (err != nullptr) *err = "gort: perfetto trace: " + what;
  return false;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string slice_name(const TraceSlice& s) {
  return "slice " + quoted(s.name) + " on track " + std::to_string(s.track);
}

// Checks the tracks (non-zero unique uuids, known parents, no cycle) and
// gives each its depth below its root, which orders the descriptors.
bool check_tracks(const TraceModel& m, std::unordered_map<uint64_t, size_t>* index,
                  std::vector<uint32_t>* depth, std::string* err) {
  const size_t n = m.tracks.size();
  for (size_t i = 0; i < n; i++) {
    const TraceTrack& t = m.tracks[i];
    if (t.uuid == 0) return fail(err, "track " + quoted(t.name) + " has uuid 0 (uuids are non-zero)");
    if (!index->emplace(t.uuid, i).second) return fail(err, "two tracks have uuid " + std::to_string(t.uuid));
  }
  for (const TraceTrack& t : m.tracks) {
    if (t.parent_uuid != 0 && index->count(t.parent_uuid) == 0) {
      return fail(err, "track " + std::to_string(t.uuid) + " has parent " + std::to_string(t.parent_uuid) +
                           ", which is not a track");
    }
  }
  // Walks up from each track to a root or a track already placed; each
  // track joins one walk only, so this is linear.
  depth->assign(n, kNoDepth);
  std::vector<size_t> path;
  for (size_t i = 0; i < n; i++) {
    path.clear();
    size_t j = i;
    uint32_t d = 0;
    for (;;) {
      if ((*depth)[j] != kNoDepth) {
        d = (*depth)[j] + 1;
        break;
      }
      path.push_back(j);
      if (path.size() > n) {
        return fail(err, "track " + std::to_string(m.tracks[i].uuid) + " is its own ancestor");
      }
      if (m.tracks[j].parent_uuid == 0) break;
      j = index->at(m.tracks[j].parent_uuid);
    }
    for (auto it = path.rbegin(); it != path.rend(); ++it) (*depth)[*it] = d++;
  }
  return true;
}

// Appends the slices' BEGIN and END events of one track, nested.
bool nest_track(const TraceModel& m, std::vector<size_t>& slices, std::vector<Event>* events,
                std::string* err) {
  std::sort(slices.begin(), slices.end(), [&m](size_t a, size_t b) {
    const TraceSlice& x = m.slices[a];
    const TraceSlice& y = m.slices[b];
    if (x.begin_ns != y.begin_ns) return x.begin_ns < y.begin_ns;
    if (x.end_ns != y.end_ns) return x.end_ns > y.end_ns;
    return a < b;
  });
  std::vector<size_t> open;
  for (size_t s : slices) {
    const TraceSlice& cur = m.slices[s];
    while (!open.empty() && m.slices[open.back()].end_ns <= cur.begin_ns) {
      events->push_back({m.slices[open.back()].end_ns, Event::kEnd, open.back()});
      open.pop_back();
    }
    if (!open.empty() && m.slices[open.back()].end_ns < cur.end_ns) {
      const TraceSlice& outer = m.slices[open.back()];
      return fail(err, slice_name(cur) + " [" + std::to_string(cur.begin_ns) + ", " + std::to_string(cur.end_ns) +
                           "] starts inside " + quoted(outer.name) + " [" + std::to_string(outer.begin_ns) + ", " +
                           std::to_string(outer.end_ns) + "] but ends after it (slices of a track must nest)");
    }
    events->push_back({cur.begin_ns, Event::kBegin, s});
    open.push_back(s);
  }
  while (!open.empty()) {
    events->push_back({m.slices[open.back()].end_ns, Event::kEnd, open.back()});
    open.pop_back();
  }
  return true;
}

void add_args(const Labels& args, TrackEvent* e) {
  for (const auto& [key, value] : args) {
    auto* a = e->add_debug_annotations();
    a->set_name(key);
    a->set_string_value(value);
  }
}

// Writes the packet as one `repeated TracePacket packet = 1` field of a
// Trace: tag, length, bytes.
bool append_packet(const TracePacket& packet, std::string* out, std::string* err) {
  const size_t size = packet.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX)) return fail(err, "a packet of " + std::to_string(size) + " bytes");
  out->push_back(static_cast<char>((1 << 3) | 2));  // field 1, length-delimited
  for (uint64_t v = size; ; v >>= 7) {
    if (v < 0x80) {
      out->push_back(static_cast<char>(v));
      break;
    }
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
  }
  const size_t at = out->size();
  out->resize(at + size);
  packet.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out->data() + at));
  return true;
}

void write_descriptor(const TraceModel& m, size_t i, bool is_process, bool has_children,
                      TrackDescriptor* d) {
  const TraceTrack& t = m.tracks[i];
  d->set_uuid(t.uuid);
  if (is_process) {
    auto* p = d->mutable_process();
    p->set_pid(m.pid);
    p->set_process_name(m.process_name.empty() ? t.name : m.process_name);
  } else {
    if (t.parent_uuid != 0) d->set_parent_uuid(t.parent_uuid);
    d->set_name(t.name);
    d->set_sibling_merge_behavior(TrackDescriptor::SIBLING_MERGE_BEHAVIOR_NONE);
  }
  if (has_children) d->set_child_ordering(TrackDescriptor::EXPLICIT);
  if (t.parent_uuid != 0) {
    d->set_sibling_order_rank(
        static_cast<int32_t>(std::clamp<int64_t>(t.sort_index, INT32_MIN, INT32_MAX)));
  }
}

}  // namespace

bool encode_perfetto(const TraceModel& m, std::string* out, std::string* err) {
  out->clear();
  std::unordered_map<uint64_t, size_t> index;
  std::vector<uint32_t> depth;
  if (!check_tracks(m, &index, &depth, err)) return false;

  // Each track's slices, checked; then their events, nested per track.
  std::vector<std::vector<size_t>> per_track(m.tracks.size());
  for (size_t s = 0; s < m.slices.size(); s++) {
    const TraceSlice& sl = m.slices[s];
    auto it = index.find(sl.track);
    if (it == index.end()) return fail(err, slice_name(sl) + ": no such track");
    if (sl.begin_ns < 0) {
      return fail(err, slice_name(sl) + " begins at " + std::to_string(sl.begin_ns) +
                           " ns, before the trace's start");
    }
    if (sl.end_ns < sl.begin_ns) {
      return fail(err, slice_name(sl) + " ends at " + std::to_string(sl.end_ns) + " ns, before it begins (" +
                           std::to_string(sl.begin_ns) + " ns)");
    }
    per_track[it->second].push_back(s);
  }
  std::vector<Event> events;
  events.reserve(2 * m.slices.size() + m.instants.size());
  for (auto& slices : per_track) {
    if (!nest_track(m, slices, &events, err)) return false;
  }
  for (size_t k = 0; k < m.instants.size(); k++) {
    const TraceInstant& in = m.instants[k];
    const std::string what = "instant " + quoted(in.name) + " on track " + std::to_string(in.track);
    if (index.count(in.track) == 0) return fail(err, what + ": no such track");
    if (in.ts_ns < 0) return fail(err, what + " is at " + std::to_string(in.ts_ns) + " ns, before the trace's start");
    events.push_back({in.ts_ns, Event::kInstant, k});
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ts < b.ts; });

  // The descriptors, parents first; the first root is the process.
  std::vector<size_t> order(m.tracks.size());
  std::vector<bool> has_children(m.tracks.size());
  size_t process_track = m.tracks.size();
  for (size_t i = 0; i < m.tracks.size(); i++) {
    order[i] = i;
    if (m.tracks[i].parent_uuid != 0) has_children[index.at(m.tracks[i].parent_uuid)] = true;
    if (m.tracks[i].parent_uuid == 0 && process_track == m.tracks.size()) process_track = i;
  }
  std::stable_sort(order.begin(), order.end(), [&depth](size_t a, size_t b) { return depth[a] < depth[b]; });

  TracePacket packet;
  bool first = true;
  auto start_packet = [&packet, &first]() {
    packet.Clear();
    packet.set_trusted_packet_sequence_id(kSequenceId);
    if (first) {
      packet.set_sequence_flags(TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
      packet.set_first_packet_on_sequence(true);
      first = false;
    }
  };
  for (size_t i : order) {
    start_packet();
    write_descriptor(m, i, i == process_track, has_children[i], packet.mutable_track_descriptor());
    if (!append_packet(packet, out, err)) return false;
  }
  for (const Event& ev : events) {
    start_packet();
    packet.set_timestamp(static_cast<uint64_t>(ev.ts));
    TrackEvent* e = packet.mutable_track_event();
    if (ev.kind == Event::kInstant) {
      const TraceInstant& in = m.instants[ev.index];
      e->set_type(TrackEvent::TYPE_INSTANT);
      e->set_track_uuid(in.track);
      e->set_name(in.name);
      if (!in.category.empty()) e->add_categories(in.category);
      add_args(in.args, e);
      if (in.flow_out != 0) e->add_flow_ids(in.flow_out);
      if (in.flow_in != 0) e->add_terminating_flow_ids(in.flow_in);
    } else {
      const TraceSlice& sl = m.slices[ev.index];
      e->set_track_uuid(sl.track);
      if (ev.kind == Event::kEnd) {
        e->set_type(TrackEvent::TYPE_SLICE_END);
      } else {
        e->set_type(TrackEvent::TYPE_SLICE_BEGIN);
        e->set_name(sl.name);
        if (!sl.category.empty()) e->add_categories(sl.category);
        add_args(sl.args, e);
        if (sl.flow_out != 0) e->add_flow_ids(sl.flow_out);
        if (sl.flow_in != 0) e->add_terminating_flow_ids(sl.flow_in);
      }
    }
    if (!append_packet(packet, out, err)) return false;
  }
  return true;
}

}  // namespace gort::encode

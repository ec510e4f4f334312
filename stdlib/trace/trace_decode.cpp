// stdlib/trace/trace_decode.cpp — raw trace bytes to time-ordered events.
#include "stdlib/trace/trace_decode.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/status/status.h"

namespace gort::internal {

namespace {

// How many varint arguments each kind has before its strings or stack.
struct EvShape {
  int nargs;
  int nstrings;
  bool stack;  // after the arguments: a depth and that many PCs
};

EvShape shape(TraceEv k) {
  switch (k) {
    case TraceEv::kMStart: return {1, 0, false};
    case TraceEv::kProcStart: return {1, 0, false};
    case TraceEv::kProcStop: return {1, 0, false};
    case TraceEv::kGoCreate: return {3, 0, false};
    case TraceEv::kGoStart: return {2, 0, false};
    case TraceEv::kGoSched: return {1, 0, false};
    case TraceEv::kGoPreempt: return {1, 0, false};
    case TraceEv::kGoBlock: return {2, 0, true};
    case TraceEv::kGoUnblock: return {3, 0, false};
    case TraceEv::kGoEnd: return {1, 0, false};
    case TraceEv::kGoSyscallBegin: return {1, 0, false};
    case TraceEv::kGoSyscallEnd: return {2, 0, false};
    case TraceEv::kGoStatus: return {5, 0, false};
    case TraceEv::kUserTaskBegin: return {2, 1, false};
    case TraceEv::kUserTaskEnd: return {1, 0, false};
    case TraceEv::kUserRegionBegin: return {2, 1, false};
    case TraceEv::kUserRegionEnd: return {2, 1, false};
    case TraceEv::kUserLog: return {2, 2, false};
    case TraceEv::kGoLost: return {1, 0, false};
    default: return {-1, 0, false};
  }
}

struct Buf {
  RawBufHeader h;
  std::string_view data;
};

bool get_string(const uint8_t** p, const uint8_t* end, std::string* s) {
  uint64_t n;
  if (!get_uvarint(p, end, &n) || n > static_cast<uint64_t>(end - *p)) return false;
  s->assign(reinterpret_cast<const char*>(*p), n);
  *p += n;
  return true;
}

// False if the buffer ended mid-event (what came before is kept).
bool decode_buffer(const Buf& b, double ns_per_tick, std::vector<TraceEvent>* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(b.data.data());
  const uint8_t* end = p + b.data.size();
  uint64_t ticks = b.h.start_ticks;
  while (p < end) {
    TraceEvent e;
    e.kind = static_cast<TraceEv>(*p++);
    EvShape s = shape(e.kind);
    if (s.nargs < 0) return false;
    uint64_t delta;
    if (!get_uvarint(&p, end, &delta)) return false;
    ticks += delta;
    e.ts = b.h.start_ns + static_cast<int64_t>(static_cast<double>(ticks - b.h.start_ticks) * ns_per_tick);
    e.m = b.h.m_id;
    for (int i = 0; i < s.nargs; i++) {
      uint64_t v;
      if (!get_uvarint(&p, end, &v)) return false;
      e.a[i] = static_cast<int64_t>(v);
    }
    if (s.stack) {
      uint64_t n;
      if (!get_uvarint(&p, end, &n) || n > 64) return false;
      for (uint64_t i = 0; i < n; i++) {
        uint64_t pc;
        if (!get_uvarint(&p, end, &pc)) return false;
        e.stack.push_back(pc);
      }
    }
    if (s.nstrings >= 1 && !get_string(&p, end, &e.s1)) return false;
    if (s.nstrings >= 2 && !get_string(&p, end, &e.s2)) return false;
    out->push_back(std::move(e));
  }
  return true;
}

}  // namespace

absl::StatusOr<DecodedTrace> decode_raw_trace(std::string_view raw) {
  DecodedTrace t;
  if (raw.size() < sizeof(RawHeader) || std::memcmp(raw.data(), kRawMagic, sizeof kRawMagic) != 0) {
    return absl::InvalidArgumentError("not a gort raw trace (no GORTTRC1 header)");
  }
  std::memcpy(&t.header, raw.data(), sizeof t.header);
  if (t.header.version != 1) {
    return absl::InvalidArgumentError("gort raw trace version " + std::to_string(t.header.version) +
                                      " (this build reads version 1)");
  }
  size_t off = sizeof(RawHeader);
  // By seq: a buffer both retired and copied from its M keeps its longer
  // copy.
  std::map<uint64_t, Buf> bufs;
  while (off + sizeof(RawRecord) <= raw.size()) {
    RawRecord r;
    std::memcpy(&r, raw.data() + off, sizeof r);
    off += sizeof r;
    if (r.tag == RawTag::kEnd) break;
    if (r.len > raw.size() - off) {
      t.torn_buffers++;
      break;
    }
    std::string_view body = raw.substr(off, r.len);
    off += r.len;
    switch (r.tag) {
      case RawTag::kBuffer: {
        if (body.size() < sizeof(RawBufHeader)) {
          t.torn_buffers++;
          break;
        }
        Buf b;
        std::memcpy(&b.h, body.data(), sizeof b.h);
        b.data = body.substr(sizeof b.h, std::min<size_t>(b.h.len, body.size() - sizeof b.h));
        auto [it, fresh] = bufs.emplace(b.h.seq, b);
        if (!fresh && it->second.data.size() < b.data.size()) it->second = b;
        break;
      }
      case RawTag::kMaps: t.maps.assign(body); break;
      case RawTag::kName: t.name.assign(body); break;
      default: break;  // a newer writer's record: skipped
    }
  }
  double rate = t.header.ns_per_tick > 0 ? t.header.ns_per_tick : 1.0;
  for (auto& [seq, b] : bufs) {
    if (!decode_buffer(b, rate, &t.events)) t.torn_buffers++;
  }
  // By time; within a buffer the order written (stable sort keeps it, and
  // buffers were appended oldest first).
  std::stable_sort(t.events.begin(), t.events.end(),
                   [](const TraceEvent& x, const TraceEvent& y) { return x.ts < y.ts; });
  if (!t.events.empty()) {
    t.start_mono_ns = t.events.front().ts;
    for (TraceEvent& e : t.events) e.ts -= t.start_mono_ns;
  }
  return t;
}

}  // namespace gort::internal

// gmp/trace_buf.hpp — the tracer's buffers and its raw format, shared by the
// writer (gmp/trace.cpp), the consumers (gmp/trace_consume.cpp), the
// decoder (stdlib/trace/) and the offline converter (gort-trace).
//
// An event: its kind (one byte, TraceEv), the ticks (rdtsc) since the
// previous event of the same buffer (or since the buffer's start_ticks),
// then its arguments, each an unsigned LEB128 varint; a string is its
// length and its bytes; a stack is its depth and the PCs.
//
// A raw trace (what a snapshot, a stopped trace and a fatal error's dump
// are before decoding; a file of it starts with kRawMagic) is a header and
// records, each a RawRecord then `len` bytes:
//
//   kRawBuffer   a RawBufHeader and the buffer's [0, pos) bytes
//   kRawMaps     /proc/self/maps, for symbolizing outside the process
//   kRawName     the program's name
//   kRawEnd      nothing: the last record
//
// Only plain data: written with write(2) from a signal handler
// (trace_dump_raw), read back on any machine of the same byte order.
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gort::internal {

inline constexpr size_t kTraceBufBytes = 64 * 1024;

struct TraceBuf {
  // Free list, the trace's list, the flight recorder's ring.
  TraceBuf* link = nullptr;
  // Bumped (release) before the buffer is reused: see gmp/trace.hpp.
  std::atomic<uint32_t> version{0};
  // Bytes of data written; published with a release store.
  std::atomic<uint32_t> pos{0};
  // Consumers holding it once retired (the trace, the ring).
  std::atomic<int32_t> refs{0};
  uint32_t pad = 0;
  uint64_t gen = 0;  // the tracer generation its events belong to
  uint64_t seq = 0;  // unique per fill: tells a prefix copy from the whole
  int64_t m_id = 0;  // its writer; -1: threads without an M
  uint64_t start_ticks = 0;
  int64_t start_ns = 0;  // nanotime() when start_ticks was read
  int64_t end_ns = 0;    // nanotime() when it was retired
  uint64_t last_ticks = 0;  // the writer's previous event
  alignas(64) uint8_t data[kTraceBufBytes - 128];
};
static_assert(offsetof(TraceBuf, data) == 128);

inline constexpr char kRawMagic[8] = {'G', 'O', 'R', 'T', 'T', 'R', 'C', '1'};

struct RawHeader {
  char magic[8];
  uint32_t version = 1;
  uint32_t reserved = 0;
  int64_t pid = 0;
  // nanotime() and the wall clock read together: the trace's epoch.
  int64_t mono_ns = 0;
  int64_t unix_ns = 0;
  // The tick rate measured when the tracer was first enabled.
  double ns_per_tick = 0;
};

enum class RawTag : uint32_t { kEnd = 0, kBuffer = 1, kMaps = 2, kName = 3 };

struct RawRecord {
  RawTag tag;
  uint32_t len;  // bytes that follow
};

struct RawBufHeader {
  uint64_t gen;
  uint64_t seq;
  int64_t m_id;
  uint64_t start_ticks;
  int64_t start_ns;
  uint32_t len;
  uint32_t pad;
};

// ---- varints ----

inline uint8_t* put_uvarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// False at the end of [p, end) or on a varint past 10 bytes.
inline bool get_uvarint(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*p == end) return false;
    uint8_t b = *(*p)++;
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = r;
      return true;
    }
  }
  return false;
}

inline constexpr size_t kMaxVarint = 10;

}  // namespace gort::internal

// gmp/trace_consume.hpp — the tracer's consumers: a trace (everything from
// start to stop), the flight recorder (a ring of the last buffers), and the
// raw dump a dying process writes (gmp/trace_consume.cpp).
//
// What happens to a buffer its M retires (full, or of an older generation):
// a running trace keeps it if it was filled since the trace began, up to
// the trace's byte cap (past it the trace counts what it lost); the flight
// recorder's ring keeps it, evicting its oldest buffers past its byte cap
// or age; a buffer nobody keeps goes back to the free list. All of it under
// tracer.lock, a leaf spin lock (taken with any runtime lock held, never
// holding one itself).
//
// Collecting (a trace's stop, a snapshot) copies what is still in the Ms'
// current buffers without stopping them (the prefix protocol in
// gmp/trace.hpp) and produces a raw trace (gmp/trace_buf.hpp).
#pragma once

#include "gmp/room.hpp"

#include <atomic>
#include <cstdint>
#include <string>

#include "gmp/trace_buf.hpp"

namespace gort::internal {

struct M;

inline std::atomic<uint64_t> tracer_gen{1};
inline uint64_t trace_gen() { return tracer_gen.load(std::memory_order_relaxed); }

// For EventWriter (gmp/trace.cpp).
std::atomic<TraceBuf*>* trace_nom_lock();
void trace_nom_unlock();
// Retires *slot's buffer, if any, and installs a fresh one of generation
// gen; null when the trace's cap leaves none (the event is dropped).
TraceBuf* trace_refill(std::atomic<TraceBuf*>* slot, int64_t m_id, uint64_t gen);
bool trace_block_stacks();

// An M's buffer slot joins (minit) and leaves (teardown) the set that
// collections and the fatal dump read.
void trace_register_m(M* m);
void trace_release_m(M* m);

struct TraceLimits {
  int64_t max_bytes = 0;   // the trace's cap, the ring's size
  int64_t min_age_ns = 0;  // the ring: evict what is older than this
  bool block_stacks = true;
};

// False if a trace is already running.
bool tracer_start_trace(const TraceLimits& limits);
// Ends the trace; *raw gets its raw form, *lost the events dropped past
// its cap.
void tracer_stop_trace(std::string* raw, int64_t* lost);
bool tracer_trace_running();

// False if the flight recorder already runs. dump_prefix: where the fatal
// dump goes ("<dir>/gort-flight-<pid>"; ".gtrace" or "-<n>.gtrace" is
// appended).
bool tracer_start_flight(const TraceLimits& limits, const std::string& dump_prefix);
void tracer_stop_flight();
bool tracer_flight_running();
// The ring and the Ms' current buffers, as a raw trace. False if the
// flight recorder is not running.
bool tracer_flight_snapshot(std::string* raw);

// Writes the flight recorder's raw trace to its dump file with nothing but
// open(2), read(2) and write(2) (async-signal-safe: a fatal error's
// report, a stack overflow's included). Returns the file's name (static
// storage), or null if the recorder is off or the file could not be made.
// `stall`: a stall report's dump, at most one a minute, numbered.
const char* tracer_dump_fatal(bool stall);

}  // namespace gort::internal

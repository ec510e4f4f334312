// stdlib/encode/encoders.cpp — libgort_encode's entry point: the table of
// encoders that gort_encoders_v1 returns (stdlib/encode/model.hpp) and
// libgort's loader looks up (stdlib/encode/loader.cpp).
//
// The table is the library's only interface: a constant, so any thread may
// read it at any time, and C linkage under a versioned name, so that a
// libgort built against other structs finds no symbol rather than the
// wrong one. Nothing thrown crosses it: an exception from the encoders
// (std::bad_alloc on a huge model) becomes false and *err.
#include <exception>
#include <string>

#include "stdlib/encode/encoders.hpp"
#include "stdlib/encode/model.hpp"

namespace gort::encode {

namespace {

template <typename F>
bool guarded(std::string* err, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    if (err != nullptr) *err = std::string("gort: encoding failed: ") + e.what();
  } catch (...) {
    if (err != nullptr) *err = "gort: encoding failed: unknown exception";
  }
  return false;
}

bool perfetto(const TraceModel& model, std::string* out, std::string* err) {
  return guarded(err, [&] { return encode_perfetto(model, out, err); });
}

bool pprof(const ProfileModel& model, bool gzip, std::string* out, std::string* err) {
  return guarded(err, [&] { return encode_pprof(model, gzip, out, err); });
}

constexpr Encoders kEncoders{.version = 1, .perfetto = perfetto, .pprof = pprof};

}  // namespace

}  // namespace gort::encode

extern "C" __attribute__((visibility("default"))) const gort::encode::Encoders* gort_encoders_v1() {
  return &gort::encode::kEncoders;
}

// gmp/os/debugvars.cpp — see debugvars.hpp.
#include "gmp/os/debugvars.hpp"

#include <cstdint>
#include <string_view>

namespace gort::internal {

DebugVars debug;

namespace {

struct DebugVar {
  const char* name;
  int32_t DebugVars::*value;
};

// Go's dbgvars: one entry per key.
constexpr DebugVar kDebugVars[] = {
    {"containermaxprocs", &DebugVars::containermaxprocs},
    {"hooklibc", &DebugVars::hooklibc},
    {"parkcheck", &DebugVars::parkcheck},
    {"scheddetail", &DebugVars::scheddetail},
    {"schedtrace", &DebugVars::schedtrace},
    {"stallreport", &DebugVars::stallreport},
    {"updatemaxprocs", &DebugVars::updatemaxprocs},
};

// Go's atoi32: an optional '-', then decimal digits only, within int32.
// As in Go, a lone "-" is 0.
bool atoi32(std::string_view s, int32_t* out) {
  if (s.empty()) return false;
  bool neg = false;
  if (s[0] == '-') {
    neg = true;
    s.remove_prefix(1);
  }
  int64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
    if (n > int64_t{INT32_MAX} + 1) return false;
  }
  if (neg) n = -n;
  if (n < INT32_MIN || n > INT32_MAX) return false;
  *out = static_cast<int32_t>(n);
  return true;
}

}  // namespace

void parse_debugvars(const char* s) {
  debug = DebugVars{};
  if (s == nullptr) return;
  std::string_view rest(s);
  while (!rest.empty()) {
    std::string_view field;
    size_t comma = rest.find(',');
    if (comma == std::string_view::npos) {
      field = rest;
      rest = {};
    } else {
      field = rest.substr(0, comma);
      rest.remove_prefix(comma + 1);
    }
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = field.substr(0, eq);
    std::string_view value = field.substr(eq + 1);
    for (const DebugVar& v : kDebugVars) {
      if (key != v.name) continue;
      int32_t n;
      if (atoi32(value, &n)) debug.*v.value = n;
    }
  }
}

}  // namespace gort::internal

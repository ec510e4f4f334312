// preempt/static_link.cpp — the bounds preempt/gort_text.ld gives an
// executable linked with libgort.a: gort's code, and other static
// archives' code.
//
// Weak, hidden references: an object linked without the script (libgort.so,
// or an executable whose link left it out) gets null for each, and the
// dynamic linker is never asked (hidden), so libgort.so cannot pick up an
// executable's bounds by name.
#include <cstdint>

#include "preempt/preempt.hpp"

extern "C" {
__attribute__((weak, visibility("hidden"))) extern const char __start_gort_text[];
__attribute__((weak, visibility("hidden"))) extern const char __stop_gort_text[];
__attribute__((weak, visibility("hidden"))) extern const char __start_gort_archives_text[];
__attribute__((weak, visibility("hidden"))) extern const char __stop_gort_archives_text[];
}

namespace gort::internal {

StaticLinkText static_link_text() {
  auto at = [](const char* p) { return reinterpret_cast<uintptr_t>(p); };
  StaticLinkText t;
  t.gort_lo = at(__start_gort_text);
  t.gort_hi = at(__stop_gort_text);
  t.archives_lo = at(__start_gort_archives_text);
  t.archives_hi = at(__stop_gort_archives_text);
  return t;
}

}  // namespace gort::internal

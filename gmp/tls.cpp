// gmp/tls.cpp — see tls.hpp.
#include "gmp/tls.hpp"

extern "C" {
__thread gort::internal::M* gort_current_m __attribute__((tls_model("initial-exec"))) = nullptr;
__thread uint32_t gort_own_signals __attribute__((tls_model("initial-exec"))) = 0;
}

namespace gort::internal {

#if !defined(__x86_64__)
__attribute__((noipa)) M* getm() {
  asm volatile("" ::: "memory");
  return gort_current_m;
}
#endif

__attribute__((noipa)) void setm(M* m) {
  asm volatile("" ::: "memory");
  gort_current_m = m;
}

}  // namespace gort::internal

// gmp/tls.cpp — see tls.hpp.
#include "gmp/tls.hpp"

namespace gort::internal {
namespace {
thread_local M* t_m = nullptr;
}

__attribute__((noipa)) M* getm() {
  asm volatile("" ::: "memory");
  return t_m;
}

__attribute__((noipa)) void setm(M* m) {
  asm volatile("" ::: "memory");
  t_m = m;
}

}  // namespace gort::internal

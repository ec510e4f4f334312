// gmp/os/cpu.hpp — tiny CPU helpers.
#pragma once

namespace gort::internal {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace gort::internal

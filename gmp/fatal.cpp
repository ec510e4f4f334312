// gmp/fatal.cpp — see fatal.hpp.
#include "gmp/fatal.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "gmp/sched.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

void write_stderr(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void write_stderr_int(long long v) {
  char buf[32];
  char* e = buf + sizeof buf;
  char* p = e;
  *--p = '\0';
  bool neg = v < 0;
  unsigned long long u = neg ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  do {
    *--p = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (neg) *--p = '-';
  write_stderr(p);
}

void write_stderr_hex(unsigned long long v) {
  char buf[32];
  char* p = buf + sizeof buf;
  *--p = '\0';
  do {
    *--p = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  write_stderr(p);
}

namespace {

void print_goroutine_header(long long id, const char* state) {
  write_stderr("goroutine ");
  write_stderr_int(id);
  write_stderr(" [");
  write_stderr(state);
  write_stderr("]:\n");
}

}  // namespace

void dump_goroutines_locked(G* current) {
  int shown = 0;
  for (G* g = sched.allg; g != nullptr; g = g->allg_next) {
    GStatus s = g->status.load(std::memory_order_relaxed);
    if (g == current || s == GStatus::kDead || s == GStatus::kIdle) continue;
    if (++shown > 64) {
      write_stderr("...additional goroutines elided...\n");
      break;
    }
    write_stderr("\n");
    const char* what = s == GStatus::kWaiting ? wait_reason_string(g->waitreason) : gstatus_string(s);
    print_goroutine_header(g->id, what);
  }
}

void fatal(const char* msg) {
  std::fflush(stdout);
  write_stderr("fatal error: ");
  write_stderr(msg);
  write_stderr("\n");
  G* g = getg();
  if (g != nullptr) {
    write_stderr("\n");
    print_goroutine_header(g->id, "running");
  }
  // Go prints the stacks on a throw; we have no unwinder of goroutine
  // stacks, but the native frames of the failing thread say where.
  write_stderr("\nruntime stack:\n");
  void* frames[48];
  int n = backtrace(frames, 48);
  backtrace_symbols_fd(frames, n, 2);
  _exit(2);
}

void fatal_panic(const char* what, long long goid) {
  std::fflush(stdout);
  write_stderr("panic: ");
  write_stderr(what);
  write_stderr("\n\n");
  print_goroutine_header(goid, "running");
  _exit(2);
}

}  // namespace gort::internal

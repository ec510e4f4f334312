// gmp/transition.cpp — see transition.hpp.
#include "gmp/transition.hpp"

#include <cstring>

#include "gmp/os/fatal.hpp"

namespace gort::internal {
namespace {

// Built on the dying thread's stack, which fatal never returns to: nothing
// allocated (it may be in a signal handler), nothing shared with another
// thread dying at the same time.
struct Message {
  char text[256];
  size_t len = 0;
  void add(const char* s) {
    size_t n = std::strlen(s);
    if (n > sizeof text - 1 - len) n = sizeof text - 1 - len;
    std::memcpy(text + len, s, n);
    len += n;
    text[len] = '\0';
  }
  void add(int64_t v) {
    char digits[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    do {
      digits[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u != 0);
    if (v < 0) digits[n++] = '-';
    char s[24];
    for (size_t i = 0; i < n; i++) s[i] = digits[n - 1 - i];
    s[n] = '\0';
    add(s);
  }
};

}  // namespace

void bad_transition(const char* machine, int64_t id, const char* field, const char* from, const char* to,
                    const char* found) {
  Message m;
  m.add(machine);
  m.add(" ");
  m.add(id);
  m.add(": ");
  if (found == nullptr) m.add("illegal ");
  m.add(field);
  m.add(found == nullptr ? " transition " : " ");
  m.add(from);
  m.add(" -> ");
  m.add(to);
  if (found != nullptr) {
    m.add(" found it ");
    m.add(found);
  }
  fatal(m.text);
}

}  // namespace gort::internal

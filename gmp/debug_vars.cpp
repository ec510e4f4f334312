// gmp/debug_vars.cpp — see debug_vars.hpp.
#include "gmp/debug_vars.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#include "gmp/fatal.hpp"

namespace gort::internal {

int64_t debug_var(const char* name, int64_t def) {
  const char* env = std::getenv("GORT_DEBUG");
  if (env == nullptr) return def;
  int64_t value = def;
  size_t len = std::strlen(name);
  for (const char* p = env; *p != '\0';) {
    const char* end = std::strchr(p, ',');
    if (end == nullptr) end = p + std::strlen(p);
    if (static_cast<size_t>(end - p) > len && std::strncmp(p, name, len) == 0 && p[len] == '=') {
      std::string v(p + len + 1, end);
      char* stop = nullptr;
      long long n = std::strtoll(v.c_str(), &stop, 10);
      if (!v.empty() && *stop == '\0') {
        value = n;
      } else {
        write_stderr("gort: GORT_DEBUG: ");
        write_stderr(name);
        write_stderr("=");
        write_stderr(v.c_str());
        write_stderr(": not an integer; ignored\n");
      }
    }
    p = *end == ',' ? end + 1 : end;
  }
  return value;
}

}  // namespace gort::internal

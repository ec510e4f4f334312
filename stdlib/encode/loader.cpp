// stdlib/encode/loader.cpp — libgort finds libgort_encode's table of
// encoders (stdlib/encode/loader.hpp; docs/tracing-and-profiling.md,
// "Where the encoders live").
//
// Why a separate library: the protobuf encoders need libprotobuf, a large
// library with static constructors and its own global registry, which a
// program that never writes a Perfetto trace or a pprof profile should
// neither link nor load. libgort names the encoders only through a weak
// reference (null unless the program linked them) and dlopen.
//
// The library, once opened, is never closed: the table and its functions
// must stay valid for as long as any caller may hold them. dlopen uses
// RTLD_LOCAL, so protobuf's symbols do not join the program's global
// scope (a program with its own protobuf keeps resolving to it).
//
// Costs: the first call, a dladdr and at most two dlopens (libprotobuf's
// loading and its constructors: milliseconds); then a load of a pointer.
#include "stdlib/encode/loader.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <string>

// Defined by libgort_encode (stdlib/encode/encoders.cpp). Weak: a program
// that did not link that library still links, and the address is null.
extern "C" __attribute__((weak)) const gort::encode::Encoders* gort_encoders_v1();

namespace gort::encode {

namespace {

constexpr const char* kSoname = "libgort_encode.so.0";
constexpr const char* kSymbol = "gort_encoders_v1";
constexpr uint32_t kVersion = 1;

struct Found {
  const Encoders* table = nullptr;
  std::string tried;  // "; "-separated reasons, for the error
};

void note(Found* f, const std::string& why) {
  if (!f->tried.empty()) f->tried += "; ";
  f->tried += why;
}

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown error";
}

// Accepts a table of this version; notes why not otherwise.
bool accept(Found* f, const Encoders* table, const std::string& where) {
  if (table == nullptr) {
    note(f, where + ": " + kSymbol + " returned no table");
    return false;
  }
  if (table->version != kVersion) {
    note(f, where + ": its encoders are version " + std::to_string(table->version) + ", this libgort needs " +
                std::to_string(kVersion));
    return false;
  }
  f->table = table;
  return true;
}

bool open_and_accept(Found* f, const std::string& name, const std::string& where) {
  dlerror();
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    note(f, "tried " + dl_error());
    return false;
  }
  using Get = const Encoders* (*)();
  auto get = reinterpret_cast<Get>(dlsym(lib, kSymbol));
  if (get == nullptr) {
    note(f, "tried " + where + ": " + dl_error());
    return false;
  }
  return accept(f, get(), where);
}

// The directory of the object that holds this function: libgort.so, or
// the program when libgort is linked statically. Empty when unknown.
std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_encoders), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

Found search() {
  Found f;
  // 1. Linked into the program.
  if (&gort_encoders_v1 != nullptr) {
    if (accept(&f, gort_encoders_v1(), "libgort_encode linked into the program")) return f;
  }
  // 2. Beside libgort.
  const std::string dir = own_directory();
  if (dir.empty()) {
    note(&f, "libgort's own directory is unknown (dladdr)");
  } else if (open_and_accept(&f, dir + kSoname, dir + kSoname)) {
    return f;
  }
  // 3. The dynamic linker's search path.
  if (open_and_accept(&f, kSoname, std::string(kSoname) + " on the library path")) return f;
  return f;
}

}  // namespace

const Encoders* load_encoders(std::string* err) {
  // Never destroyed: a goroutine may write a profile while the program exits.
  static std::once_flag once;
  static const Found* found = nullptr;
  std::call_once(once, [] { found = new Found(search()); });
  if (found->table == nullptr && err != nullptr) {
    *err = "gort: writing a protobuf trace or profile needs " + std::string(kSoname) + " (" + found->tried +
           "); write a .json trace instead or install libgort_encode";
  }
  return found->table;
}

}  // namespace gort::encode

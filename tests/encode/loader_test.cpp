// tests/encode/loader_test.cpp — libgort's loader (stdlib/encode/loader.cpp)
// in a program that does not link libgort_encode, as most programs: the
// weak reference is null, and load_encoders() must dlopen
// libgort_encode.so.0 from libgort's own directory (the build root, where
// Meson puts both; tests/encode/meson.build builds it first). The first
// call happens on a goroutine, as the tracer's would.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "gort/testing.hpp"
#include "stdlib/encode/loader.hpp"
#include "stdlib/encode/model.hpp"

namespace gort::encode {
namespace {

constexpr const char* kSoname = "libgort_encode.so.0";

std::string directory_of(const void* p) {
  Dl_info info{};
  if (dladdr(p, &info) == 0 || info.dli_fname == nullptr) return "?";
  const std::string path = info.dli_fname;
  return path.substr(0, path.rfind('/') + 1);
}

bool loaded() {
  void* lib = dlopen(kSoname, RTLD_NOW | RTLD_NOLOAD);
  if (lib != nullptr) dlclose(lib);  // drops only the reference NOLOAD took
  return lib != nullptr;
}

// First: nothing else in this program may have loaded it before.
GORT_TEST(Loader, OpensTheLibraryBesideLibgortOnAGoroutine) {
  ASSERT_FALSE(loaded()) << "this program must not link " << kSoname;
  std::string err;
  const Encoders* e = load_encoders(&err);
  ASSERT_NE(e, nullptr) << err;
  EXPECT_TRUE(loaded());
  EXPECT_EQ(e->version, 1u);
  // Beside libgort, or (the test suites' libgort_testing lives in
  // tests/) on the search path, which the test runner points at the build
  // root.
  std::string dir = directory_of(e);
  EXPECT_TRUE(dir == directory_of(reinterpret_cast<const void*>(&load_encoders)) ||
              dir + "tests/" == directory_of(reinterpret_cast<const void*>(&load_encoders)))
      << "found a libgort_encode in " << dir;
}

TEST(Loader, LaterCallsReturnTheSameTable) {
  std::string err;
  const Encoders* first = load_encoders(&err);
  ASSERT_NE(first, nullptr) << err;
  EXPECT_EQ(load_encoders(nullptr), first);
}

TEST(Loader, TheTableEncodes) {
  const Encoders* e = load_encoders(nullptr);
  ASSERT_NE(e, nullptr);
  ProfileModel p;
  p.sample_types = {{"samples", "count"}};
  p.locations = {{0x1000, 0, {{"f", "f", "f.cpp", 1}}}};
  p.samples = {{{1}, {3}, {}}};
  std::string out, err;
  EXPECT_TRUE(e->pprof(p, true, &out, &err)) << err;
  EXPECT_GT(out.size(), 20u);
  p.samples[0].locations = {2};
  EXPECT_FALSE(e->pprof(p, true, &out, &err));
  EXPECT_NE(err.find("out of range"), std::string::npos) << err;
}

}  // namespace
}  // namespace gort::encode

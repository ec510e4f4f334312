// tests/gmp/symbolize_test.cpp — PCs to functions, files and lines, with
// inlined calls as frames of their own (gmp/symbolize.cpp).
#include <mutex>
#include <string>

#include "gmp/symbolize.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::symbolize;
using internal::symbolizer_mutex;
using internal::SymPC;

// The return address of a call made on line kCallLine of known_caller.
uintptr_t g_ret = 0;

__attribute__((noinline)) void record_return_address() {
  g_ret = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  asm volatile("");
}

constexpr int kCallLine = __LINE__ + 3;
__attribute__((noinline)) void known_caller() {
  asm volatile("");
  record_return_address();
  asm volatile("");
}

constexpr int kInlinedLine = __LINE__ + 3;
__attribute__((always_inline)) inline void inlined_callee() {
  asm volatile("");
  record_return_address();
  asm volatile("");
}

constexpr int kOuterLine = __LINE__ + 3;
__attribute__((noinline)) void calls_inlined_callee() {
  asm volatile("");
  inlined_callee();
  asm volatile("");
}

// Outside gort::run nothing ends the session: each test does, so that the
// suite's descriptor checks around later runs see what they started with.
class Symbolize : public ::testing::Test {
 protected:
  void TearDown() override {
    std::lock_guard<std::mutex> lock(symbolizer_mutex());
    internal::symbolizer_reset();
  }
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST_F(Symbolize, FunctionFileAndLineOfAReturnAddress) {
  known_caller();
  std::lock_guard<std::mutex> lock(symbolizer_mutex());
  const SymPC& s = symbolize(g_ret - 1);
  ASSERT_EQ(s.frames.size(), 1u);
  EXPECT_EQ(s.frames[0].function, "gort::test::(anonymous namespace)::known_caller()");
  EXPECT_TRUE(ends_with(s.frames[0].file, "/tests/gmp/symbolize_test.cpp")) << s.frames[0].file;
  EXPECT_EQ(s.frames[0].file[0], '/');
  EXPECT_EQ(s.frames[0].file.find("/../"), std::string::npos) << s.frames[0].file;
  EXPECT_EQ(s.frames[0].line, kCallLine);
  EXPECT_FALSE(s.frames[0].inlined);
  EXPECT_FALSE(s.frames[0].runtime);
  EXPECT_EQ(s.entry, reinterpret_cast<uintptr_t>(&known_caller));
  EXPECT_NE(s.module.find("gmp_test"), std::string::npos) << s.module;
  // The cache hands back the same answer.
  EXPECT_EQ(&symbolize(g_ret - 1), &s);
}

TEST_F(Symbolize, InlinedCallsAreLogicalFrames) {
  calls_inlined_callee();
  std::lock_guard<std::mutex> lock(symbolizer_mutex());
  const SymPC& s = symbolize(g_ret - 1);
  ASSERT_EQ(s.frames.size(), 2u);
  EXPECT_NE(s.frames[0].function.find("inlined_callee"), std::string::npos) << s.frames[0].function;
  EXPECT_TRUE(s.frames[0].inlined);
  EXPECT_EQ(s.frames[0].line, kInlinedLine);
  EXPECT_EQ(s.frames[1].function, "gort::test::(anonymous namespace)::calls_inlined_callee()");
  EXPECT_FALSE(s.frames[1].inlined);
  EXPECT_EQ(s.frames[1].line, kOuterLine);
}

TEST_F(Symbolize, RuntimeAndLibraryFramesAreMarked) {
  std::lock_guard<std::mutex> lock(symbolizer_mutex());
  const SymPC& y = symbolize(reinterpret_cast<uintptr_t>(&gort::yield));
  EXPECT_TRUE(y.frames.back().runtime);
  EXPECT_EQ(y.frames.back().function, "gort::yield()");
  EXPECT_TRUE(internal::is_runtime_source(y.frames.back().file)) << y.frames.back().file;
  EXPECT_TRUE(internal::is_runtime_source("/usr/local/include/gort/chan.hpp"));
  EXPECT_FALSE(internal::is_runtime_source("/home/me/app/gmp/main.cpp"));
  const SymPC& t = symbolize(reinterpret_cast<uintptr_t>(static_cast<void (*)()>(&std::terminate)));
  EXPECT_TRUE(t.frames.back().stdlib) << t.module;
  EXPECT_FALSE(t.frames.back().runtime);
}

TEST_F(Symbolize, UnknownAddress) {
  std::lock_guard<std::mutex> lock(symbolizer_mutex());
  const SymPC& s = symbolize(0x10);
  ASSERT_EQ(s.frames.size(), 1u);
  EXPECT_EQ(s.frames[0].function, "");
  EXPECT_EQ(s.frames[0].file, "");
  EXPECT_EQ(s.module, "");
}

}  // namespace
}  // namespace gort::test

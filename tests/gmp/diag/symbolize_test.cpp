// tests/gmp/diag/symbolize_test.cpp — PCs to functions, files and lines, with
// inlined calls as frames of their own (gmp/diag/symbolize.cpp).
#include <cxxabi.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "gmp/diag/symbolize.hpp"
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
  EXPECT_TRUE(ends_with(s.frames[0].file, "/tests/gmp/diag/symbolize_test.cpp")) << s.frames[0].file;
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

// gort's internals are the runtime's; its public entry points (gort::yield,
// as Go's time.Sleep) are a library's, shown where their caller is.
TEST_F(Symbolize, RuntimeAndLibraryFramesAreMarked) {
  std::lock_guard<std::mutex> lock(symbolizer_mutex());
  const SymPC& p = symbolize(reinterpret_cast<uintptr_t>(&internal::park));
  EXPECT_TRUE(p.frames.back().runtime) << p.frames.back().function;
  EXPECT_FALSE(p.frames.back().stdlib);
  const SymPC& y = symbolize(reinterpret_cast<uintptr_t>(&gort::yield));
  EXPECT_FALSE(y.frames.back().runtime);
  EXPECT_TRUE(y.frames.back().stdlib);
  EXPECT_EQ(y.frames.back().function, "gort::yield()");
  EXPECT_TRUE(internal::is_runtime_source(y.frames.back().file)) << y.frames.back().file;
  EXPECT_TRUE(internal::is_runtime_source("/usr/local/include/gort/chan.hpp"));
  EXPECT_FALSE(internal::is_runtime_source("/home/me/app/gmp/main.cpp"));
  const SymPC& t = symbolize(reinterpret_cast<uintptr_t>(static_cast<void (*)()>(&std::terminate)));
  EXPECT_TRUE(t.frames.back().stdlib) << t.module;
  EXPECT_FALSE(t.frames.back().runtime);
}

// This executable's PLT as its linker laid it out: the runtime address of
// each stub and the import it was made for. The oracle is the stubs' order
// (stub i serves relocation i of .rela.plt, after the lazy resolver's stub
// in a plain .plt), not what symbolize decodes from their instructions.
struct PltStub {
  uintptr_t addr;
  std::string import;
};
std::vector<PltStub> plt_stubs_of_this_executable() {
  uintptr_t bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<uintptr_t*>(out) = info->dlpi_addr;
        return 1;  // the first object is the executable
      },
      &bias);
  std::vector<PltStub> stubs;
  elf_version(EV_CURRENT);
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return stubs;
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  size_t shstrndx = 0;
  GElf_Shdr plt{}, plt_sec{}, rela{};
  Elf_Scn* rela_scn = nullptr;
  if (elf != nullptr && elf_getshdrstrndx(elf, &shstrndx) == 0) {
    for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
      GElf_Shdr sh;
      gelf_getshdr(scn, &sh);
      std::string name = elf_strptr(elf, shstrndx, sh.sh_name);
      if (name == ".plt") plt = sh;
      if (name == ".plt.sec") plt_sec = sh;
      if (name == ".rela.plt") rela = sh, rela_scn = scn;
    }
  }
  if (rela_scn != nullptr && (plt.sh_size != 0 || plt_sec.sh_size != 0)) {
    Elf_Data* relas = elf_getdata(rela_scn, nullptr);
    Elf_Scn* symscn = elf_getscn(elf, rela.sh_link);
    GElf_Shdr symsh;
    gelf_getshdr(symscn, &symsh);
    Elf_Data* syms = elf_getdata(symscn, nullptr);
    const bool sec = plt_sec.sh_size != 0;
    for (size_t i = 0; i < rela.sh_size / rela.sh_entsize; i++) {
      GElf_Rela r;
      GElf_Sym sym;
      gelf_getrela(relas, static_cast<int>(i), &r);
      if (GELF_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT) continue;
      gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym);
      uintptr_t stub = sec ? plt_sec.sh_addr + 16 * i : plt.sh_addr + 16 * (i + 1);
      stubs.push_back({bias + stub, elf_strptr(elf, symsh.sh_link, sym.st_name)});
    }
  }
  if (elf != nullptr) elf_end(elf);
  close(fd);
  return stubs;
}

TEST_F(Symbolize, PltStubsAreNamedForTheirImport) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "PLT stubs are decoded on x86-64 only";
#endif
  std::vector<PltStub> stubs = plt_stubs_of_this_executable();
  ASSERT_GT(stubs.size(), 10u) << "this test executable calls libraries through a PLT";
  std::lock_guard<std::mutex> lock(symbolizer_mutex());
  size_t named = 0;
  for (const PltStub& s : stubs) {
    // A PC inside the stub (a goroutine stopped after its first instruction).
    const SymPC& pc = symbolize(s.addr + 4);
    if (s.import.find('@') != std::string::npos || s.import.empty()) continue;
    ASSERT_EQ(pc.frames.size(), 1u);
    EXPECT_TRUE(ends_with(pc.frames[0].function, "@plt")) << pc.frames[0].function;
    char* demangled = abi::__cxa_demangle(s.import.c_str(), nullptr, nullptr, nullptr);
    std::string want = (demangled != nullptr ? std::string(demangled) : s.import) + "@plt";
    std::free(demangled);
    EXPECT_EQ(pc.frames[0].function, want);
    named++;
  }
  EXPECT_GT(named, 10u);
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

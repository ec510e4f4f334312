// gmp/diag/symbolize.cpp — see symbolize.hpp.
#include "gmp/diag/symbolize.hpp"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "gort/runtime.hpp"

namespace gort::internal {
namespace {

// Local lookups only: dwfl_standard_find_debuginfo ends with a debuginfod
// query when DEBUGINFOD_URLS is set, which can wait on the network for
// minutes. With the variable set, only the build-id directory is searched
// (where Debian's -dbgsym packages install).
int find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                   const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                   char** debuginfo_file_name) {
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  if (urls == nullptr || urls[0] == '\0') {
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  }
  return dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                      debuglink_crc, debuginfo_file_name);
}

char* g_debuginfo_path = nullptr;
const Dwfl_Callbacks kCallbacks = {
    dwfl_linux_proc_find_elf,
    find_debuginfo,
    nullptr,
    &g_debuginfo_path,
};

struct FuncRange;
using CuIndex = std::vector<FuncRange>;

struct Symbolizer {
  Dwfl* dwfl = nullptr;
  uint64_t generation = 1;
  bool reported = false;
  // Set once the first lookup that missed every module re-read the maps;
  // later misses (JIT code, garbage PCs) do not re-read them again.
  int rereads = 0;
  std::unordered_map<uintptr_t, std::unique_ptr<SymPC>> cache;
  std::unordered_map<const void*, std::unique_ptr<CuIndex>> cus;
  // gort's source tree (from the line of one of its functions); empty if
  // gort has no line information.
  bool root_known = false;
  std::string root;
};

Symbolizer& state() {
  static Symbolizer* s = new Symbolizer;  // never destroyed: dumps may run at exit
  return *s;
}

void report(Symbolizer& s) {
  if (s.dwfl == nullptr) {
    s.dwfl = dwfl_begin(&kCallbacks);
    if (s.dwfl == nullptr) return;
    dwfl_report_begin(s.dwfl);
  } else {
    dwfl_report_begin_add(s.dwfl);
  }
  dwfl_linux_proc_report(s.dwfl, getpid());
  dwfl_report_end(s.dwfl, nullptr, nullptr);
  s.reported = true;
}

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// "a/./b/../c" -> "a/c"; relative paths are joined to `dir` first.
std::string normalise(const char* file, const char* dir) {
  std::string path;
  if (file[0] != '/' && dir != nullptr && dir[0] != '\0') {
    path = dir;
    path += '/';
  }
  path += file;
  std::vector<std::string> parts;
  size_t i = 0;
  bool absolute = !path.empty() && path[0] == '/';
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);
      }
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t k = 0; k < parts.size(); k++) {
    if (k > 0) out += '/';
    out += parts[k];
  }
  return out;
}

std::string demangle(const char* name) {
  std::string n = name;
  // Versioned ELF names: "__libc_start_main@@GLIBC_2.34".
  size_t at = n.find('@');
  if (at != std::string::npos && at > 0) n.resize(at);
  if (!starts_with(n, "_Z")) return n;
  int status = 0;
  char* d = abi::__cxa_demangle(n.c_str(), nullptr, nullptr, &status);
  if (d == nullptr) return n;
  std::string out = d;
  std::free(d);
  return out;
}

// Empty if there is none, or if the demangler does not know it (GCC 12's
// does not know some lambdas with auto parameters): then the DWARF name is
// better than a mangled one.
std::string linkage_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
    if (dwarf_attr_integrate(die, at, &attr) != nullptr) {
      if (const char* s = dwarf_formstring(&attr)) {
        std::string d = demangle(s);
        return starts_with(d, "_Z") ? "" : d;
      }
    }
  }
  return "";
}

const char* plain_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  if (dwarf_attr_integrate(die, DW_AT_name, &attr) == nullptr) return nullptr;
  return dwarf_formstring(&attr);
}

// The DIE that declares die (through DW_AT_abstract_origin and
// DW_AT_specification): its parents are the function's scopes.
Dwarf_Die declaration(Dwarf_Die* die) {
  Dwarf_Die decl = *die;
  for (int i = 0; i < 8; i++) {
    Dwarf_Attribute attr;
    Dwarf_Die next;
    if (dwarf_formref_die(dwarf_attr(&decl, DW_AT_abstract_origin, &attr), &next) == nullptr &&
        dwarf_formref_die(dwarf_attr(&decl, DW_AT_specification, &attr), &next) == nullptr) {
      break;
    }
    decl = next;
  }
  return decl;
}

// The scopes a DIE is declared in, outermost first, as "ns::Class::" (a
// function's scopes too: a lambda or a local class lives in one).
std::string scope_prefix(Dwarf_Die* die, int depth) {
  Dwarf_Die decl = declaration(die);
  Dwarf_Die* scopes = nullptr;
  int n = dwarf_getscopes_die(&decl, &scopes);
  std::string out;
  for (int i = n - 1; i >= 1; i--) {
    Dwarf_Die* sc = &scopes[i];
    std::string part;
    switch (dwarf_tag(sc)) {
      case DW_TAG_namespace: {
        const char* ns = plain_name(sc);
        part = ns != nullptr ? ns : "(anonymous namespace)";
        break;
      }
      case DW_TAG_class_type:
      case DW_TAG_structure_type:
      case DW_TAG_union_type: {
        // GCC leaves a lambda's closure type unnamed.
        const char* c = plain_name(sc);
        part = c != nullptr ? c : "{lambda}";
        break;
      }
      case DW_TAG_subprogram:
        part = linkage_name(sc);
        if (part.empty() && depth < 8) {
          // An out-of-line definition: its declaration's scopes name it.
          if (const char* f = plain_name(sc)) part = scope_prefix(sc, depth + 1) + f;
        }
        break;
      default:
        break;
    }
    if (part.empty()) continue;
    // A scope nested in a function: what came before is already in part.
    if (dwarf_tag(sc) == DW_TAG_subprogram) out.clear();
    out += part;
    out += "::";
  }
  std::free(scopes);
  return out;
}

// The name of a subprogram or inlined-subroutine DIE: its linkage name
// demangled (with the parameter types), or its qualified DWARF name
// followed by "(...)", as Go shows inlined calls.
std::string die_function_name(Dwarf_Die* die) {
  std::string n = linkage_name(die);
  if (!n.empty()) return n;
  if (const char* s = plain_name(die)) return scope_prefix(die, 0) + s + "(...)";
  return "";
}

const char* comp_dir(Dwarf_Die* cudie) {
  Dwarf_Attribute attr;
  if (dwarf_attr(cudie, DW_AT_comp_dir, &attr) == nullptr) return nullptr;
  return dwarf_formstring(&attr);
}

// Where a CU's functions are: every subprogram with code, by address range.
// Built with one walk of the CU the first time a PC falls in it. (libdw's
// dwarf_getscopes prunes its search at scopes that do not contain the PC,
// and GCC nests a lambda's or a local class's member functions inside the
// DIE of the function they are defined in, whose code lies elsewhere: it
// finds nothing for them.)
struct FuncRange {
  Dwarf_Addr lo;
  Dwarf_Addr hi;
  Dwarf_Die die;
};

void index_scope(Dwarf_Die* parent, CuIndex* idx, int depth) {
  Dwarf_Die child;
  if (depth > 64 || dwarf_child(parent, &child) != 0) return;
  do {
    switch (dwarf_tag(&child)) {
      case DW_TAG_subprogram: {
        Dwarf_Addr base, lo, hi;
        for (ptrdiff_t off = 0; (off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0;) {
          if (lo < hi) idx->push_back(FuncRange{lo, hi, child});
        }
        index_scope(&child, idx, depth + 1);
        break;
      }
      case DW_TAG_imported_unit: {
        Dwarf_Attribute attr;
        Dwarf_Die unit;
        if (dwarf_formref_die(dwarf_attr(&child, DW_AT_import, &attr), &unit) != nullptr) {
          index_scope(&unit, idx, depth + 1);
        }
        break;
      }
      case DW_TAG_namespace:
      case DW_TAG_class_type:
      case DW_TAG_structure_type:
      case DW_TAG_union_type:
      case DW_TAG_lexical_block:
      case DW_TAG_inlined_subroutine:
        index_scope(&child, idx, depth + 1);
        break;
      default:
        break;
    }
  } while (dwarf_siblingof(&child, &child) == 0);
}

const CuIndex& cu_index(Dwarf_Die* cudie);

// The subprogram whose code holds `pc` (a DWARF address), then the
// inlined calls nested in it that hold it too: outermost first.
bool scope_chain(Dwarf_Die* cudie, Dwarf_Addr pc, std::vector<Dwarf_Die>* chain) {
  const CuIndex& idx = cu_index(cudie);
  auto it = std::upper_bound(idx.begin(), idx.end(), pc,
                             [](Dwarf_Addr a, const FuncRange& r) { return a < r.lo; });
  if (it == idx.begin()) return false;
  --it;
  if (pc >= it->hi) return false;
  Dwarf_Die cur = it->die;
  chain->push_back(cur);
  for (int depth = 0; depth < 256; depth++) {
    Dwarf_Die child;
    bool found = false;
    if (dwarf_child(&cur, &child) == 0) {
      do {
        int tag = dwarf_tag(&child);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block && tag != DW_TAG_try_block &&
            tag != DW_TAG_catch_block) {
          continue;
        }
        if (dwarf_haspc(&child, pc) == 1) {
          if (tag == DW_TAG_inlined_subroutine) chain->push_back(child);
          cur = child;
          found = true;
          break;
        }
      } while (dwarf_siblingof(&child, &child) == 0);
    }
    if (!found) break;
  }
  return true;
}

// The innermost logical frame's location from the line table; each outer
// frame's from the call site recorded in the inlined subroutine it called.
void inline_frames(Dwfl_Module* mod, uintptr_t addr, SymPC* out) {
  Dwarf_Addr bias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(mod, addr, &bias);
  if (cudie == nullptr) return;
  std::vector<Dwarf_Die> chain;
  if (!scope_chain(cudie, addr - bias, &chain)) return;
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  bool have_files = dwarf_getsrcfiles(cudie, &files, &nfiles) == 0;
  const char* dir = comp_dir(cudie);
  for (size_t i = chain.size(); i-- > 0;) {
    Dwarf_Die* scope = &chain[i];
    SymFrame f;
    f.function = die_function_name(scope);
    f.inlined = i > 0;
    // This frame is where it called the next inner one.
    if (i + 1 < chain.size() && have_files) {
      Dwarf_Die* callee = &chain[i + 1];
      Dwarf_Attribute attr;
      Dwarf_Word file = 0, line = 0;
      if (dwarf_formudata(dwarf_attr(callee, DW_AT_call_file, &attr), &file) == 0) {
        if (const char* src = dwarf_filesrc(files, file, nullptr, nullptr)) f.file = normalise(src, dir);
      }
      if (dwarf_formudata(dwarf_attr(callee, DW_AT_call_line, &attr), &line) == 0) {
        f.line = static_cast<int>(line);
      }
    }
    out->frames.push_back(std::move(f));
  }
}

const CuIndex& cu_index(Dwarf_Die* cudie) {
  Symbolizer& s = state();
  auto& slot = s.cus[cudie->cu];
  if (slot == nullptr) {
    slot = std::make_unique<CuIndex>();
    index_scope(cudie, slot.get(), 0);
    std::sort(slot->begin(), slot->end(), [](const FuncRange& a, const FuncRange& b) { return a.lo < b.lo; });
  }
  return *slot;
}

bool runtime_module(const std::string& module) {
  std::string b = base_name(module);
  return starts_with(b, "libgort.") || starts_with(b, "libboost_context");
}

bool stdlib_module(const std::string& module) {
  std::string b = base_name(module);
  return starts_with(b, "libstdc++") || starts_with(b, "libgcc_s");
}

// Where threads and processes start: below every goroutine and M.
bool thread_start(const std::string& fn) {
  static const char* const kNames[] = {"_start", "__libc_start_main", "__libc_start_call_main",
                                       "start_thread", "clone", "clone3", "__clone", "__clone3",
                                       "execute_native_thread_routine"};
  for (const char* n : kNames) {
    if (fn == n) return true;
  }
  return false;
}

// The qualified name of a demangled function, without the return type a
// template instantiation's name starts with ("void gort::internal::f<T>(...)"
// -> "gort::internal::f<T>(...)"): the first word at template depth 0 that
// reaches a '('.
std::string_view qualified_name(std::string_view fn) {
  int depth = 0;
  size_t word = 0;
  for (size_t i = 0; i < fn.size(); i++) {
    char c = fn[i];
    if (c == '<') depth++;
    if (c == '>' && depth > 0) depth--;
    if (depth == 0 && c == ' ') word = i + 1;
    if (depth == 0 && c == '(') break;
  }
  return fn.substr(word);
}

// Whether a demangled name lies in an anonymous namespace: outside its
// template arguments, so that gort::Chan<(anonymous namespace)::Order> is
// not taken for a file-local helper.
bool anonymous_scope(std::string_view fn) {
  constexpr std::string_view kAnon = "(anonymous namespace)";
  int depth = 0;
  for (size_t i = 0; i < fn.size(); i++) {
    if (fn[i] == '<') depth++;
    if (fn[i] == '>' && depth > 0) depth--;
    if (depth == 0 && fn.compare(i, kAnon.size(), kAnon) == 0) return true;
  }
  return false;
}

// Inside gort's code: the runtime's internals, as opposed to its public
// entry points (gort::sleep, gort::Chan<T>::send, the interposed libc
// functions: names outside gort::internal and the runtime's file-local
// helpers). An unknown name counts as internal, and so does one the
// demangler could not read (GCC 12's does not know lambdas with auto
// parameters, such as the one gort's invoker hands std::apply).
bool internal_function(const std::string& full) {
  std::string_view fn = qualified_name(full);
  auto starts = [&](std::string_view p) { return fn.substr(0, p.size()) == p; };
  return fn.empty() || starts("gort::internal::") || anonymous_scope(fn) || starts("boost::") ||
         starts("gort_") || starts("std::") || starts("_Z") || starts("make_fcontext") ||
         starts("jump_fcontext") || starts("ontop_fcontext");
}

// Where the outermost scope of a name the demangler could not read starts:
// "_ZZN4gort8internal..." -> "4gort8internal...", gort's;
// "_ZSt5apply..." -> "St5apply...", the C++ library's.
std::string_view mangled_scope(std::string_view n) {
  if (n.substr(0, 2) != "_Z") return {};
  size_t i = 2;
  while (i < n.size() && (n[i] == 'Z' || n[i] == 'N' || n[i] == 'K' || n[i] == 'V' || n[i] == 'r')) i++;
  return n.substr(i);
}

// Where a goroutine starts (the first frames of every goroutine's stack).
bool goroutine_start(const std::string& fn) {
  return starts_with(fn, "gort::internal::goroutine_main") ||
         starts_with(fn, "gort::internal::(anonymous namespace)::entry(");
}

// The first template argument of the name at fn[open] == '<'.
std::string_view first_template_arg(std::string_view fn, size_t open) {
  int depth = 0;
  for (size_t i = open + 1; i < fn.size(); i++) {
    char c = fn[i];
    if (c == '<' || c == '(') depth++;
    if ((c == '>' || c == ')') && depth > 0) {
      depth--;
    } else if ((c == ',' || c == '>') && depth == 0) {
      std::string_view arg = fn.substr(open + 1, i - open - 1);
      while (!arg.empty() && arg.back() == ' ') arg.remove_suffix(1);
      return arg;
    }
  }
  return {};
}

// The templates of gort's headers that call a goroutine's callable, and
// are instantiated in the program with the callable's code inlined into
// them: gort::go's invoke_inline<std::tuple<F, Args...>> and
// invoke_heap<...>, and gort::run's body, the lambda taking (void*, int*)
// in gort::run<F> (GCC's "{lambda(void*, int*)#1}", clang's
// "'lambda'(void*, int*)"). Returns F's name, or "" if fn is none of them.
std::string_view invoker_callable(const std::string& full) {
  std::string_view fn = qualified_name(full);
  for (std::string_view p : {"gort::internal::invoke_inline<std::tuple<", "gort::internal::invoke_heap<std::tuple<"}) {
    if (fn.substr(0, p.size()) == p) return first_template_arg(fn, p.size() - 1);
  }
  constexpr std::string_view kRun = "gort::run<";
  if (fn.substr(0, kRun.size()) == kRun && fn.find("lambda") != std::string_view::npos &&
      fn.find("(void*, int*)") != std::string_view::npos) {
    return first_template_arg(fn, kRun.size() - 1);
  }
  return {};
}

// A frame of a module without debug information for it (no file) is
// classified by its name alone: gort::... is an instantiation of gort's
// headers, std::... of the C++ library's.
void classify(SymPC* s) {
  bool rt_module = runtime_module(s->module);
  bool std_module = stdlib_module(s->module);
  for (SymFrame& f : s->frames) {
    std::string_view name = qualified_name(f.function);
    bool named_gort = name.substr(0, 6) == "gort::" || mangled_scope(name).substr(0, 5) == "4gort";
    bool named_std = name.substr(0, 5) == "std::" || name.substr(0, 11) == "__gnu_cxx::" ||
                     mangled_scope(name).substr(0, 2) == "St";
    bool gort_code = rt_module || (f.file.empty() ? named_gort : is_runtime_source(f.file));
    f.gort = gort_code;
    f.start = thread_start(f.function) || (gort_code && goroutine_start(f.function));
    if (gort_code) {
      f.runtime = f.start || internal_function(f.function);
      f.stdlib = !f.runtime;
    } else {
      f.runtime = f.start;
      f.stdlib = std_module || f.file.find("/include/c++/") != std::string::npos || (f.file.empty() && named_std);
    }
  }
  SymFrame& outer = s->frames.back();
  std::string_view callable = invoker_callable(outer.function);
  if (callable.empty()) return;
  if (!rt_module && outer.file.empty() && callable.find("(*)") == std::string_view::npos) {
    // The program's code without debug information: one frame, named by
    // its symbol. A lambda's (or another class's) call operator is usually
    // compiled into the invoker, whose symbol is then the only name the
    // callable's code has: the frame is named for the callable, as Go
    // names a function literal main.main.func1 (traceback.cpp hides it
    // where the callable's code is not in it after all). A function
    // pointer's function has a frame of its own.
    outer.function = std::string(callable) + "::operator()(...)";
    outer.invoker = true;
    outer.gort = outer.runtime = outer.stdlib = false;
    return;
  }
  // The invoker is the runtime's, with what the compiler inlined into it
  // of gort's headers and of the C++ library (std::apply, std::invoke), up
  // to the program's own code; but not gort's code in the sense that hides
  // gort's frames above it: a call in tail position in the callable (`go([]
  // { gort::sleep(d); })`) leaves no frame of the program's own, and the
  // public entry point it called then has these frames right above it.
  for (size_t i = s->frames.size(); i-- > 0;) {
    SymFrame& f = s->frames[i];
    if (!f.gort && !f.stdlib) break;
    f.runtime = true;
    f.gort = f.stdlib = false;
  }
}

// The import a PLT entry jumps to, for addresses that no symbol covers:
// "write@plt", as objdump and gdb name them. A goroutine stopped in a stub
// (preempted on its way into a library) otherwise shows an unnamed frame.
// The entry's `jmp *slot(%rip)` gives its GOT slot, and the relocation of
// that slot its symbol; x86-64 only (the stubs' layout is per
// architecture). "" if addr is not in a PLT or the entry is not decoded
// (PLT0, the lazy resolver's, jumps through a slot with no relocation).
std::string plt_name(Dwfl_Module* mod, uintptr_t addr) {
#if defined(__x86_64__)
  GElf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(mod, &bias);
  if (elf == nullptr) return "";
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return "";
  const GElf_Addr a = addr - bias;
  GElf_Addr slot = 0;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || a < sh.sh_addr || a >= sh.sh_addr + sh.sh_size) continue;
    const char* name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name == nullptr || std::strncmp(name, ".plt", 4) != 0) return "";
    Elf_Data* data = elf_getdata(scn, nullptr);
    const GElf_Xword entsize = sh.sh_entsize != 0 ? sh.sh_entsize : 16;
    const GElf_Addr entry = a - (a - sh.sh_addr) % entsize;
    if (data == nullptr || data->d_buf == nullptr || sh.sh_type != SHT_PROGBITS) return "";
    const auto* code = static_cast<const unsigned char*>(data->d_buf) + (entry - sh.sh_addr);
    // Within the entry: [endbr64] [bnd] jmp *disp32(%rip) = ff 25 disp32.
    for (GElf_Xword i = 0; i + 6 <= entsize && entry - sh.sh_addr + i + 6 <= data->d_size; i++) {
      if (code[i] != 0xff || code[i + 1] != 0x25) continue;
      int32_t disp;
      std::memcpy(&disp, code + i + 2, sizeof disp);
      slot = entry + i + 6 + static_cast<int64_t>(disp);
      break;
    }
    break;  // the one section that holds a
  }
  if (slot == 0) return "";
  // The slot's relocation: JUMP_SLOT in .rela.plt, GLOB_DAT in .rela.dyn
  // for .plt.got's entries.
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_RELA || sh.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    Elf_Scn* symscn = elf_getscn(elf, sh.sh_link);
    GElf_Shdr symsh;
    if (data == nullptr || symscn == nullptr || gelf_getshdr(symscn, &symsh) == nullptr) continue;
    Elf_Data* syms = elf_getdata(symscn, nullptr);
    if (syms == nullptr) continue;
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
      GElf_Rela r;
      if (gelf_getrela(data, static_cast<int>(i), &r) == nullptr || r.r_offset != slot) continue;
      GElf_Sym sym;
      if (GELF_R_SYM(r.r_info) == 0 || gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym) == nullptr) {
        return "";
      }
      const char* n = elf_strptr(elf, symsh.sh_link, sym.st_name);
      return n != nullptr && n[0] != '\0' ? demangle(n) + "@plt" : "";
    }
  }
#else
  (void)mod;
  (void)addr;
#endif
  return "";
}

std::unique_ptr<SymPC> lookup(Symbolizer& s, uintptr_t addr) {
  auto out = std::make_unique<SymPC>();
  Dwfl_Module* mod = s.dwfl != nullptr ? dwfl_addrmodule(s.dwfl, addr) : nullptr;
  if (mod == nullptr && s.dwfl != nullptr && s.rereads == 0) {
    // A library loaded after the session was made.
    s.rereads++;
    report(s);
    mod = dwfl_addrmodule(s.dwfl, addr);
  }
  std::string symname;
  if (mod != nullptr) {
    const char* mainfile = nullptr;
    const char* name = dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &mainfile, nullptr);
    out->module = mainfile != nullptr ? mainfile : (name != nullptr ? name : "");
    GElf_Off off = 0;
    GElf_Sym sym;
    if (const char* n = dwfl_module_addrinfo(mod, addr, &off, &sym, nullptr, nullptr, nullptr)) {
      symname = demangle(n);
      out->entry = addr - off;
    } else {
      symname = plt_name(mod, addr);
    }
    inline_frames(mod, addr, out.get());
    if (Dwfl_Line* line = dwfl_module_getsrc(mod, addr)) {
      int lineno = 0;
      if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
        if (out->frames.empty()) out->frames.emplace_back();
        out->frames.front().file = normalise(file, dwfl_line_comp_dir(line));
        out->frames.front().line = lineno;
      }
    }
  }
  if (out->frames.empty()) out->frames.emplace_back();
  // The ELF symbol names the physical function exactly (clones and cold
  // parts included: "f() [clone .cold]"); DWARF's name only where there is
  // no symbol.
  SymFrame& outer = out->frames.back();
  if (!symname.empty()) outer.function = symname;
  return out;
}

// gort's source tree: gort::yield lives in gmp/newproc.cpp, two levels
// below it.
void find_root(Symbolizer& s) {
  if (s.root_known) return;
  s.root_known = true;
  std::unique_ptr<SymPC> y = lookup(s, reinterpret_cast<uintptr_t>(&gort::yield));
  const std::string& file = y->frames.back().file;
  size_t at = file.rfind("/gmp/");
  if (at != std::string::npos) s.root = file.substr(0, at);
}

}  // namespace

std::mutex& symbolizer_mutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

void symbolizer_reset() {
  Symbolizer& s = state();
  s.cache.clear();
  s.cus.clear();
  if (s.dwfl != nullptr) dwfl_end(s.dwfl);
  s.dwfl = nullptr;
  s.reported = false;
  s.rereads = 0;
  s.root_known = false;
  s.root.clear();
  s.generation++;
}

uint64_t symbolizer_generation() { return state().generation; }

Dwfl* symbolizer_dwfl() {
  Symbolizer& s = state();
  if (!s.reported) report(s);
  return s.dwfl;
}

const SymPC& symbolize(uintptr_t addr) {
  Symbolizer& s = state();
  auto it = s.cache.find(addr);
  if (it != s.cache.end()) return *it->second;
  symbolizer_dwfl();
  find_root(s);
  std::unique_ptr<SymPC> sym = lookup(s, addr);
  classify(sym.get());
  const SymPC& ref = *sym;
  s.cache.emplace(addr, std::move(sym));
  return ref;
}

bool is_runtime_source(const std::string& path) {
  if (path.find("/include/gort/") != std::string::npos) return true;
  Symbolizer& s = state();
  symbolizer_dwfl();
  find_root(s);
  if (s.root.empty() || !starts_with(path, s.root.c_str())) return false;
  static const char* const kDirs[] = {"/gmp/", "/preempt/", "/stdlib/", "/netpoll/"};
  for (const char* d : kDirs) {
    if (path.compare(s.root.size(), std::strlen(d), d) == 0) return true;
  }
  return false;
}

}  // namespace gort::internal

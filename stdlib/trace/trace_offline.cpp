// stdlib/trace/trace_offline.cpp — naming the PCs of a trace recorded by
// another process (a fatal error's dump converted by gort-trace): libdw
// reads the modules from the dump's copy of /proc/PID/maps, and the files
// they name on this machine. A file rebuilt or gone since gives hex PCs.
#include <cxxabi.h>
#include <elfutils/libdwfl.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "stdlib/trace/trace_files.hpp"

namespace gort::internal {

namespace {

const Dwfl_Callbacks kOfflineCallbacks = {
    dwfl_linux_proc_find_elf,
    dwfl_standard_find_debuginfo,
    nullptr,
    nullptr,
};

struct DwflSession {
  Dwfl* dwfl = nullptr;
  ~DwflSession() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
};

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

std::string hex(uint64_t pc) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(pc));
  return buf;
}

}  // namespace

PcNamer offline_pc_namer(const std::string& maps) {
  auto s = std::make_shared<DwflSession>();
  if (!maps.empty()) {
    s->dwfl = dwfl_begin(&kOfflineCallbacks);
    if (s->dwfl != nullptr) {
      FILE* f = fmemopen(const_cast<char*>(maps.data()), maps.size(), "r");
      dwfl_report_begin(s->dwfl);
      if (f != nullptr) {
        dwfl_linux_proc_maps_report(s->dwfl, f);
        std::fclose(f);
      }
      dwfl_report_end(s->dwfl, nullptr, nullptr);
    }
  }
  return [s](uint64_t pc, bool call) -> std::string {
    if (s->dwfl == nullptr) return hex(pc);
    Dwarf_Addr addr = call ? pc - 1 : pc;
    Dwfl_Module* mod = dwfl_addrmodule(s->dwfl, addr);
    if (mod == nullptr) return hex(pc);
    const char* name = dwfl_module_addrname(mod, addr);
    std::string out = name != nullptr ? demangle(name) : hex(pc);
    if (Dwfl_Line* line = dwfl_module_getsrc(mod, addr)) {
      int lineno = 0;
      const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
      if (file != nullptr) {
        std::string f(file);
        size_t slash = f.rfind('/');
        out += " (" + (slash == std::string::npos ? f : f.substr(slash + 1)) + ":" + std::to_string(lineno) + ")";
      }
    }
    return out;
  };
}

}  // namespace gort::internal

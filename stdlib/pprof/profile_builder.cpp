// stdlib/pprof/profile_builder.cpp — see profile_builder.hpp.
#include "stdlib/pprof/profile_builder.hpp"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "gmp/diag/symbolize.hpp"
#include "gmp/switch.hpp"
#include "stdlib/encode/loader.hpp"

namespace gort::internal {
namespace {

// What one address symbolized to, copied out of the symbolizer's cache.
struct Sym {
  std::vector<encode::Line> lines;  // innermost first; empty if unknown
  uint64_t entry = 0;
  bool runtime = false;  // every logical frame is the runtime's
};

struct SymbolizeCall {
  const std::vector<uintptr_t>* addrs;
  std::vector<Sym>* out;
};

// On the M's own stack (libdw's walk of the debug information is deep).
void symbolize_all(void* arg) {
  auto* c = static_cast<SymbolizeCall*>(arg);
  std::lock_guard<std::mutex> lock(symbolizer_mutex());
  c->out->resize(c->addrs->size());
  for (size_t i = 0; i < c->addrs->size(); i++) {
    const SymPC& s = symbolize((*c->addrs)[i]);
    Sym& out = (*c->out)[i];
    out.entry = s.entry;
    out.runtime = true;
    for (const SymFrame& f : s.frames) {
      out.runtime &= f.runtime;
      if (f.function.empty() && f.file.empty()) continue;
      out.lines.push_back(encode::Line{f.function, f.function, f.file, f.line});
    }
  }
}

// ---- mappings ----

std::string hex_bytes(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; i++) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 15];
  }
  return s;
}

std::string build_id(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const unsigned char* name = p + sizeof(ElfW(Nhdr));
      const unsigned char* desc = name + ((nh->n_namesz + 3) & ~3u);
      if (desc + nh->n_descsz > end) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        return hex_bytes(desc, nh->n_descsz);
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return "";
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

struct MappingWalk {
  std::vector<encode::Mapping>* out;
  uintptr_t page;
  bool first = true;
};

int add_module(dl_phdr_info* info, size_t, void* arg) {
  auto* w = static_cast<MappingWalk*>(arg);
  std::string file = info->dlpi_name != nullptr ? info->dlpi_name : "";
  if (file.empty() && w->first) file = self_exe();  // the main program reports ""
  w->first = false;
  std::string id;
  bool id_read = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    if (!id_read) {
      id = build_id(info);
      id_read = true;
    }
    // Page-aligned, as /proc/self/maps shows it: start - offset stays
    // the module's load bias, which is what pprof needs.
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    encode::Mapping m;
    m.start = start & ~(w->page - 1);
    m.limit = (start + ph.p_memsz + w->page - 1) & ~(w->page - 1);
    m.offset = ph.p_offset & ~(w->page - 1);
    m.file = file;
    m.build_id = id;
    w->out->push_back(std::move(m));
  }
  return 0;
}

std::vector<encode::Mapping> mappings() {
  std::vector<encode::Mapping> out;
  MappingWalk w{&out, static_cast<uintptr_t>(sysconf(_SC_PAGESIZE))};
  dl_iterate_phdr(&add_module, &w);
  return out;
}

// The mapping holding addr (index + 1), or 0.
uint64_t mapping_of(const std::vector<encode::Mapping>& ms, uint64_t addr) {
  for (size_t i = 0; i < ms.size(); i++) {
    if (addr >= ms[i].start && addr < ms[i].limit) return i + 1;
  }
  return 0;
}

}  // namespace

BuiltProfile build_profile(const ProfileKind& kind, std::vector<StackRecord> records) {
  // Every distinct address, symbolized once.
  std::vector<uintptr_t> addrs;
  for (const StackRecord& r : records) addrs.insert(addrs.end(), r.addrs.begin(), r.addrs.end());
  std::sort(addrs.begin(), addrs.end());
  addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
  std::vector<Sym> syms;
  SymbolizeCall call{&addrs, &syms};
  systemstack(&symbolize_all, &call);
  auto sym_index = [&](uintptr_t a) {
    return static_cast<size_t>(std::lower_bound(addrs.begin(), addrs.end(), a) - addrs.begin());
  };

  BuiltProfile p;
  encode::ProfileModel& m = p.model;
  m.sample_types = kind.sample_types;
  m.period_type = kind.period_type;
  m.period = kind.period;
  m.time_unix_ns = kind.time_unix_ns;
  m.duration_ns = kind.duration_ns;
  m.comments = kind.comments;
  m.default_sample_type = kind.default_sample_type;
  m.mappings = mappings();

  std::map<uintptr_t, uint64_t> loc_of_addr;
  std::map<std::string, uint64_t> loc_of_pseudo;
  auto location = [&](uintptr_t a) {
    auto [it, fresh] = loc_of_addr.emplace(a, 0);
    if (fresh) {
      const Sym& s = syms[sym_index(a)];
      m.locations.push_back(encode::Location{a, mapping_of(m.mappings, a), s.lines});
      p.entries.push_back(s.entry);
      it->second = m.locations.size();
    }
    return it->second;
  };
  auto pseudo_location = [&](const char* name) {
    auto [it, fresh] = loc_of_pseudo.emplace(name, 0);
    if (fresh) {
      m.locations.push_back(encode::Location{0, 0, {encode::Line{name, name, "", 0}}});
      p.entries.push_back(0);
      it->second = m.locations.size();
    }
    return it->second;
  };

  std::map<std::pair<std::vector<uint64_t>, pprof::LabelSet>, size_t> merged;
  for (StackRecord& r : records) {
    size_t from = 0;
    if (kind.trim_runtime) {
      while (from < r.addrs.size() && syms[sym_index(r.addrs[from])].runtime) from++;
      if (from == r.addrs.size()) from = 0;  // nothing but the runtime: keep it all
    }
    std::vector<uint64_t> locs;
    if (r.pseudo != nullptr) locs.push_back(pseudo_location(r.pseudo));
    for (size_t i = from; i < r.addrs.size(); i++) locs.push_back(location(r.addrs[i]));
    auto [it, fresh] = merged.emplace(std::make_pair(std::move(locs), std::move(r.labels)), m.samples.size());
    if (fresh) {
      m.samples.push_back(encode::Sample{it->first.first, std::move(r.values), it->first.second});
      continue;
    }
    std::vector<int64_t>& v = m.samples[it->second].values;
    for (size_t i = 0; i < v.size() && i < r.values.size(); i++) v[i] += r.values[i];
  }
  return p;
}

absl::StatusOr<std::string> encode_profile(const encode::ProfileModel& model) {
  std::string err;
  const encode::Encoders* enc = encode::load_encoders(&err);
  if (enc == nullptr || enc->pprof == nullptr) {
    return absl::UnavailableError("pprof: cannot load libgort_encode: " + err);
  }
  std::string out;
  if (!enc->pprof(model, /*gzip=*/true, &out, &err)) return absl::InternalError("pprof: encoding the profile: " + err);
  return out;
}

absl::Status write_file(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return absl::ErrnoToStatus(e, "write " + path);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return absl::ErrnoToStatus(errno, "close " + path);
  return absl::OkStatus();
}

}  // namespace gort::internal

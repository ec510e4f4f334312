// gmp/os/cgroup_cpu.cpp — see cgroup_cpu.hpp.
#include "gmp/os/cgroup_cpu.hpp"
#include "gmp/os/sys.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <cstdlib>


namespace gort::internal {
namespace {

// (The system's abseil has its own string_view, so these are std-only.)
std::vector<std::string_view> split(std::string_view s, char sep, bool skip_empty, size_t max_fields = SIZE_MAX) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max_fields) {
    size_t at = s.find(sep);
    if (at == std::string_view::npos) break;
    if (!skip_empty || at > 0) out.push_back(s.substr(0, at));
    s.remove_prefix(at + 1);
  }
  if (!skip_empty || !s.empty()) out.push_back(s);
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool to_int(std::string_view s, int64_t* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_octal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '\\' && s.size() - i >= 4 && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool has_element(std::string_view list, std::string_view want) {
  for (std::string_view e : split(list, ',', false)) {
    if (e == want) return true;
  }
  return false;
}

// The cgroup path of the CPU controller in /proc/self/cgroup: a v1
// hierarchy listing "cpu" wins (a controller is attached to one hierarchy
// only, so then v2 has no CPU limit), else the v2 line "0::PATH".
bool cgroup_path(std::string_view proc_cgroup, int* version, std::string* path) {
  std::string v2;
  bool have_v2 = false;
  for (std::string_view line : split(proc_cgroup, '\n', true)) {
    std::vector<std::string_view> f = split(line, ':', false, 3);
    if (f.size() != 3) continue;
    if (f[0] == "0" && f[1].empty()) {
      v2 = std::string(f[2]);
      have_v2 = true;
    } else if (has_element(f[1], "cpu")) {
      *version = 1;
      *path = std::string(f[2]);
      return true;
    }
  }
  if (!have_v2) return false;
  *version = 2;
  *path = v2;
  return true;
}

// The directory of `path` in a mount of `fstype` (with the "cpu" super
// option for v1), and that mount's point.
bool mounted_dir(std::string_view mountinfo, int version, const std::string& path, std::string* dir,
                 std::string* mountpoint) {
  for (std::string_view line : split(mountinfo, '\n', true)) {
    std::vector<std::string_view> f = split(line, ' ', true);
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 6 || dash == f.end() || f.end() - dash < 4) continue;
    std::string_view fstype = dash[1], super = dash[3];
    if (version == 2 ? fstype != "cgroup2" : (fstype != "cgroup" || !has_element(super, "cpu"))) continue;
    std::string root = unescape_octal(f[3]);
    std::string point = unescape_octal(f[4]);
    std::string rel;
    if (root == "/") {
      rel = path;
    } else if (path.compare(0, root.size(), root) == 0 && (path.size() == root.size() || path[root.size()] == '/')) {
      rel = path.substr(root.size());
    } else {
      continue;  // a mount of another part of the hierarchy
    }
    while (rel.size() > 1 && rel.back() == '/') rel.pop_back();
    *dir = (rel.empty() || rel == "/") ? point : point + rel;
    *mountpoint = point;
    return true;
  }
  return false;
}

// Reads a small file from its start; false on error.
bool read_fd(int fd, std::string* out) {
  char buf[128];
  ssize_t n;
  do {
    n = sys::pread(fd, buf, sizeof buf - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return false;
  out->assign(buf, static_cast<size_t>(n));
  return true;
}

int open_ro(const std::string& path) {
  int fd;
  do {
    fd = sys::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// One level's limit in CPUs; nothing when unlimited or unreadable.
std::optional<double> level_limit(int version, const CgroupCpu::Level& l) {
  std::string q;
  if (!read_fd(l.quota_fd, &q)) return std::nullopt;
  std::string_view text = trim(q);
  int64_t quota = 0, period = 0;
  if (version == 2) {
    // "max 100000" or "50000 100000"
    std::vector<std::string_view> f = split(text, ' ', true);
    if (f.size() != 2 || f[0] == "max") return std::nullopt;
    if (!to_int(f[0], &quota) || !to_int(f[1], &period)) return std::nullopt;
  } else {
    std::string p;
    if (!to_int(text, &quota) || quota < 0 || !read_fd(l.period_fd, &p)) return std::nullopt;
    if (!to_int(trim(p), &period)) return std::nullopt;
  }
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<double>(quota) / static_cast<double>(period);
}

std::string read_file(const std::string& path) {
  std::string out;
  int fd = open_ro(path);
  if (fd < 0) return out;
  char buf[4096];
  for (;;) {
    ssize_t n = sys::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  sys::close(fd);
  return out;
}

}  // namespace

std::vector<std::string> cgroup_cpu_dirs(std::string_view proc_cgroup, std::string_view mountinfo, int* version) {
  std::vector<std::string> dirs;
  *version = 0;
  std::string path, dir, point;
  int v = 0;
  if (!cgroup_path(proc_cgroup, &v, &path) || !mounted_dir(mountinfo, v, path, &dir, &point)) return dirs;
  *version = v;
  // The leaf, then each ancestor up to the mount point.
  for (;;) {
    dirs.push_back(dir);
    if (dir.size() <= point.size()) break;
    size_t slash = dir.rfind('/');
    if (slash == std::string::npos || slash < point.size()) break;
    dir.resize(std::max(slash, point.size()));
  }
  return dirs;
}

void cgroup_cpu_close(CgroupCpu* c) {
  for (CgroupCpu::Level& l : c->levels) {
    if (l.quota_fd >= 0) sys::close(l.quota_fd);
    if (l.period_fd >= 0) sys::close(l.period_fd);
  }
  c->levels.clear();
  c->dirs.clear();
  c->version = 0;
}

void cgroup_cpu_open(CgroupCpu* c, const std::string& proc_self, const std::string& fs_prefix) {
  cgroup_cpu_close(c);
  int version = 0;
  std::vector<std::string> dirs =
      cgroup_cpu_dirs(read_file(proc_self + "/cgroup"), read_file(proc_self + "/mountinfo"), &version);
  for (const std::string& d : dirs) {
    std::string dir = fs_prefix + d;
    CgroupCpu::Level l;
    if (version == 2) {
      l.quota_fd = open_ro(dir + "/cpu.max");
    } else {
      l.quota_fd = open_ro(dir + "/cpu.cfs_quota_us");
      l.period_fd = open_ro(dir + "/cpu.cfs_period_us");
      if (l.period_fd < 0 && l.quota_fd >= 0) {
        sys::close(l.quota_fd);
        l.quota_fd = -1;
      }
    }
    if (l.quota_fd < 0) continue;
    c->levels.push_back(l);
    c->dirs.push_back(dir);
  }
  if (!c->levels.empty()) c->version = version;
}

std::optional<double> cgroup_cpu_limit(const CgroupCpu& c) {
  std::optional<double> tightest;
  for (const CgroupCpu::Level& l : c.levels) {
    std::optional<double> v = level_limit(c.version, l);
    if (v && (!tightest || *v < *tightest)) tightest = v;
  }
  return tightest;
}

int cgroup_adjust_procs(int procs, std::optional<double> limit) {
  if (!limit) return procs;
  double l = std::max(std::ceil(*limit), 2.0);
  return l < procs ? static_cast<int>(l) : procs;
}

int affinity_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace gort::internal

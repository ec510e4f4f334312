// gmp/os/cgroup_cpu.hpp — the CPU bandwidth limit of the cgroup the process
// runs in, for the default number of Ps (Go 1.25's container-aware
// GOMAXPROCS, runtime/cgroup_linux.go). docs/runtime.md, "How many Ps".
//
// The cgroup is found once, from /proc/self/cgroup and
// /proc/self/mountinfo: the cgroup v1 hierarchy that holds the `cpu`
// controller if there is one, else the v2 (unified) hierarchy. Its limit
// files — `cpu.max` (v2), or `cpu.cfs_quota_us` and `cpu.cfs_period_us`
// (v1) — of the process's own cgroup *and of every ancestor up to the
// mount* are opened when a run starts and kept open for the run, so that
// a later read sees a changed limit (even after a chroot). The effective limit is the tightest of
// them (Go reads only the leaf; a parent's tighter limit binds too).
//
// Thread-safety: cgroup_cpu_open() once, before any reader; reads may then
// run on any thread (pread on fds that never change). No allocation after
// open.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gort::internal {

struct CgroupCpu {
  int version = 0;  // 1 or 2; 0: no cgroup CPU controller found
  // Per level, leaf first: v2 {cpu.max, -1}; v1 {cfs_quota_us, cfs_period_us}.
  struct Level {
    int quota_fd = -1;
    int period_fd = -1;
  };
  std::vector<Level> levels;
  // The directories the levels were opened from, leaf first (for tests and
  // messages).
  std::vector<std::string> dirs;
};

// Finds the directories of the process's CPU cgroup and its ancestors
// (leaf first) from the texts of /proc/self/cgroup and
// /proc/self/mountinfo. `*version` is set to 1 or 2; an empty result: none.
std::vector<std::string> cgroup_cpu_dirs(std::string_view proc_cgroup, std::string_view mountinfo, int* version);

// Opens the limit files under the directories cgroup_cpu_dirs finds in
// `proc_self` (normally "/proc/self"); `fs_prefix` is put before every
// directory (tests build a fake tree). Levels whose files are missing or
// unreadable are skipped. Replaces what `c` held.
void cgroup_cpu_open(CgroupCpu* c, const std::string& proc_self = "/proc/self", const std::string& fs_prefix = "");
void cgroup_cpu_close(CgroupCpu* c);

// The limit in CPUs (quota / period, the tightest level), or nothing when
// no level has one ("max", -1) or nothing could be read.
std::optional<double> cgroup_cpu_limit(const CgroupCpu& c);

// Go's adjustCgroupGOMAXPROCS: `procs` lowered to the limit, rounded up,
// but never below 2.
int cgroup_adjust_procs(int procs, std::optional<double> limit);

// The CPUs this process may run on (sched_getaffinity), at least 1.
int affinity_cpus();

}  // namespace gort::internal

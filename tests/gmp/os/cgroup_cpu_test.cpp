// tests/gmp/os/cgroup_cpu_test.cpp — the default number of Ps (Go 1.25's
// container-aware GOMAXPROCS, gmp/os/cgroup_cpu.cpp and procresize.cpp):
// finding the CPU cgroup (v1 and v2, mounts of part of a hierarchy,
// escaped paths, bad lines), reading its limit at every level (the
// tightest wins; "max", -1, garbage and missing files are no limit),
// rounding (up, at least 2, never above the CPUs), and the runtime
// following a changed default once a second unless the program chose the
// number (Config::procs, GORT_MAXPROCS, set_procs) or
// GORT_DEBUG=updatemaxprocs=0 — and set_default_procs bringing it back.
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "gmp/os/cgroup_cpu.hpp"
#include "gmp/sched.hpp"
#include "gort/time.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::cgroup_adjust_procs;
using internal::cgroup_cpu_dirs;
using internal::cgroup_cpu_limit;
using internal::cgroup_cpu_open;
using internal::CgroupCpu;
namespace fs = std::filesystem;

constexpr const char* kV2Mount = "40 30 0:36 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n";
constexpr const char* kV1Mounts =
    "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";

TEST(CgroupCpuDirs, V2LeafThenAncestorsUpToTheMount) {
  int v = -1;
  auto dirs = cgroup_cpu_dirs("0::/kubepods/pod1/c2\n", kV2Mount, &v);
  EXPECT_EQ(v, 2);
  ASSERT_EQ(dirs.size(), 4u);
  EXPECT_EQ(dirs[0], "/sys/fs/cgroup/kubepods/pod1/c2");
  EXPECT_EQ(dirs[1], "/sys/fs/cgroup/kubepods/pod1");
  EXPECT_EQ(dirs[2], "/sys/fs/cgroup/kubepods");
  EXPECT_EQ(dirs[3], "/sys/fs/cgroup");
  // The root cgroup: the mount alone.
  dirs = cgroup_cpu_dirs("0::/\n", kV2Mount, &v);
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(dirs[0], "/sys/fs/cgroup");
}

TEST(CgroupCpuDirs, V1CpuControllerWinsOverTheUnifiedHierarchy) {
  int v = -1;
  std::string cg = "12:memory:/m\n4:cpu,cpuacct:/app/web\n0::/u\n";
  auto dirs = cgroup_cpu_dirs(cg, std::string(kV1Mounts) + kV2Mount, &v);
  EXPECT_EQ(v, 1);
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(dirs[0], "/sys/fs/cgroup/cpu,cpuacct/app/web");
  EXPECT_EQ(dirs[2], "/sys/fs/cgroup/cpu,cpuacct");
  // "cpuacct" or "cpuset" alone is not the cpu controller.
  dirs = cgroup_cpu_dirs("3:cpuset:/x\n2:cpuacct:/y\n0::/u\n", kV2Mount, &v);
  EXPECT_EQ(v, 2);
  ASSERT_FALSE(dirs.empty());
  EXPECT_EQ(dirs[0], "/sys/fs/cgroup/u");
}

TEST(CgroupCpuDirs, MountOfPartOfTheHierarchy) {
  // A container sees its own cgroup mounted at /sys/fs/cgroup.
  int v = -1;
  const char* mi = "50 40 0:36 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
  auto dirs = cgroup_cpu_dirs("0::/docker/abc/inner\n", mi, &v);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], "/sys/fs/cgroup/inner");
  EXPECT_EQ(dirs[1], "/sys/fs/cgroup");
  // A path outside the mounted part, or one that only shares a prefix of
  // a name, is not found there.
  EXPECT_TRUE(cgroup_cpu_dirs("0::/docker/other\n", mi, &v).empty());
  EXPECT_TRUE(cgroup_cpu_dirs("0::/docker/abcd\n", mi, &v).empty());
  EXPECT_EQ(v, 0);
}

TEST(CgroupCpuDirs, EscapedMountPointsAndOptionalFields) {
  int v = -1;
  const char* mi = "40 30 0:36 / /mnt/my\\040cgroups rw,relatime shared:9 master:2 - cgroup2 none rw\n";
  auto dirs = cgroup_cpu_dirs("0::/a\n", mi, &v);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], "/mnt/my cgroups/a");
}

TEST(CgroupCpuDirs, NothingToFindOrGarbage) {
  int v = -1;
  EXPECT_TRUE(cgroup_cpu_dirs("", kV2Mount, &v).empty());
  EXPECT_TRUE(cgroup_cpu_dirs("0::/a\n", "", &v).empty());
  EXPECT_TRUE(cgroup_cpu_dirs("0::/a\n", kV1Mounts, &v).empty());  // no cgroup2 mount
  EXPECT_TRUE(cgroup_cpu_dirs("garbage\n::\n1:cpu\n", "x y z\n- - -\n", &v).empty());
  EXPECT_EQ(v, 0);
}

// A fake /proc/self and cgroup tree under a temporary directory.
class FakeCgroup : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gort-cgroup-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/proc/self");
  }
  void TearDown() override {
    internal::cgroup_cpu_close(&c_);
    fs::remove_all(root_);
  }
  static void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::trunc) << text;
  }
  void v2(const std::string& cgroup_path) {
    write(root_ + "/proc/self/cgroup", "0::" + cgroup_path + "\n");
    write(root_ + "/proc/self/mountinfo", kV2Mount);
  }
  std::string dir(const std::string& rel) { return root_ + "/sys/fs/cgroup" + rel; }
  void open() { cgroup_cpu_open(&c_, root_ + "/proc/self", root_); }

  std::string root_;
  CgroupCpu c_;
};

TEST_F(FakeCgroup, V2LimitsTheTightestLevelWins) {
  v2("/a/b");
  write(dir("/a/b/cpu.max"), "150000 100000\n");
  write(dir("/a/cpu.max"), "max 100000\n");
  write(dir("/cpu.max"), "max\n");  // malformed: no limit
  open();
  EXPECT_EQ(c_.version, 2);
  EXPECT_EQ(c_.levels.size(), 3u);
  ASSERT_TRUE(cgroup_cpu_limit(c_).has_value());
  EXPECT_DOUBLE_EQ(*cgroup_cpu_limit(c_), 1.5);
  // A parent's tighter limit binds (Go reads only the leaf).
  write(dir("/a/cpu.max"), "50000 100000\n");
  EXPECT_DOUBLE_EQ(*cgroup_cpu_limit(c_), 0.5) << "a changed file is read again through the open fd";
  write(dir("/a/cpu.max"), "max 100000\n");
  write(dir("/a/b/cpu.max"), "max 100000\n");
  EXPECT_FALSE(cgroup_cpu_limit(c_).has_value());
  for (const char* bad : {"", "x 100000", "100000 0", "-5 100000", "1 2 3", "100000 y"}) {
    write(dir("/a/b/cpu.max"), bad);
    EXPECT_FALSE(cgroup_cpu_limit(c_).has_value()) << "'" << bad << "'";
  }
}

TEST_F(FakeCgroup, V1QuotaAndPeriod) {
  write(root_ + "/proc/self/cgroup", "4:cpu,cpuacct:/job\n0::/\n");
  write(root_ + "/proc/self/mountinfo", std::string(kV1Mounts) + kV2Mount);
  std::string d = root_ + "/sys/fs/cgroup/cpu,cpuacct";
  write(d + "/job/cpu.cfs_quota_us", "250000\n");
  write(d + "/job/cpu.cfs_period_us", "100000\n");
  write(d + "/cpu.cfs_quota_us", "-1\n");
  write(d + "/cpu.cfs_period_us", "100000\n");
  open();
  EXPECT_EQ(c_.version, 1);
  ASSERT_TRUE(cgroup_cpu_limit(c_).has_value());
  EXPECT_DOUBLE_EQ(*cgroup_cpu_limit(c_), 2.5);
  write(d + "/job/cpu.cfs_quota_us", "-1\n");
  EXPECT_FALSE(cgroup_cpu_limit(c_).has_value());
}

TEST_F(FakeCgroup, MissingFilesAreNoLimitAndLeakNoFd) {
  v2("/gone");
  int before = count_fds();
  open();
  EXPECT_EQ(c_.version, 0);
  EXPECT_TRUE(c_.levels.empty());
  EXPECT_FALSE(cgroup_cpu_limit(c_).has_value());
  write(dir("/gone/cpu.max"), "100000 100000\n");
  open();
  EXPECT_EQ(c_.levels.size(), 1u);
  open();  // reopening closes what it held
  internal::cgroup_cpu_close(&c_);
  EXPECT_EQ(count_fds(), before);
  // No /proc files at all.
  cgroup_cpu_open(&c_, root_ + "/nowhere", root_);
  EXPECT_EQ(c_.version, 0);
}

TEST(CgroupAdjustProcs, RoundedUpAtLeastTwoNeverAboveTheCpus) {
  EXPECT_EQ(cgroup_adjust_procs(8, std::nullopt), 8);
  EXPECT_EQ(cgroup_adjust_procs(8, 1.5), 2);
  EXPECT_EQ(cgroup_adjust_procs(8, 0.1), 2);
  EXPECT_EQ(cgroup_adjust_procs(8, 2.0), 2);
  EXPECT_EQ(cgroup_adjust_procs(8, 2.01), 3);
  EXPECT_EQ(cgroup_adjust_procs(8, 7.5), 8);
  EXPECT_EQ(cgroup_adjust_procs(8, 64), 8);
  EXPECT_EQ(cgroup_adjust_procs(1, 0.5), 1) << "the minimum of 2 never adds Ps beyond the CPUs";
}

// ---- the runtime following the default ----

// Restricts every thread of this process to the first `n` CPUs it may
// run on now.
bool restrict_all_threads(const cpu_set_t& set) {
  bool ok = true;
  for (const auto& e : fs::directory_iterator("/proc/self/task")) {
    pid_t tid = static_cast<pid_t>(std::stol(e.path().filename()));
    if (sched_setaffinity(tid, sizeof set, &set) != 0) ok = false;
  }
  return ok;
}

cpu_set_t first_cpus(const cpu_set_t& from, int n) {
  cpu_set_t out;
  CPU_ZERO(&out);
  for (int c = 0, taken = 0; c < CPU_SETSIZE && taken < n; c++) {
    if (CPU_ISSET(c, &from)) {
      CPU_SET(c, &out);
      taken++;
    }
  }
  return out;
}

// In a child: starts on one CPU, widens the affinity of every thread to
// two while main waits, and returns the number of Ps seen at the end.
// `setup` runs first, inside the runtime.
template <class F>
int widen_and_watch(const char* debug, int cfg_procs, F setup) {
  cpu_set_t all;
  sched_getaffinity(0, sizeof all, &all);
  cpu_set_t one = first_cpus(all, 1), two = first_cpus(all, 2);
  if (debug != nullptr) setenv("GORT_DEBUG", debug, 1);
  sched_setaffinity(0, sizeof one, &one);
  int seen = 0;
  gort::Config cfg;
  cfg.procs = cfg_procs;
  gort::run(
      [&] {
        setup();
        restrict_all_threads(two);
        // sysmon looks once a second; give it three.
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        while (gort::procs() != 2 && std::chrono::steady_clock::now() < end) gort::sleep(absl::Milliseconds(20));
        seen = gort::procs();
      },
      cfg);
  return seen;
}

class DefaultProcs : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu_set_t all;
    sched_getaffinity(0, sizeof all, &all);
    if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "needs two CPUs";
  }
};

TEST_F(DefaultProcs, FollowsAChangedAffinity) {
  auto child = [] {
    ::alarm(30);
    int start = -1;
    int end = widen_and_watch(nullptr, 0, [&] { start = gort::procs(); });
    if (start != 1 || end != 2) {
      std::fprintf(stderr, "started with %d Ps, ended with %d\n", start, end);
      ::_exit(1);
    }
    ::_exit(0);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

TEST_F(DefaultProcs, AChosenNumberIsKept) {
  auto child = [](const char* debug, int cfg_procs, bool call_set_procs) {
    ::alarm(30);
    int end = widen_and_watch(debug, cfg_procs, [&] {
      if (call_set_procs) gort::set_procs(1);
    });
    if (end != 1) {
      std::fprintf(stderr, "ended with %d Ps\n", end);
      ::_exit(1);
    }
    ::_exit(0);
  };
  EXPECT_EXIT(child(nullptr, 1, false), ::testing::ExitedWithCode(0), "") << "Config::procs";
  EXPECT_EXIT(child(nullptr, 0, true), ::testing::ExitedWithCode(0), "") << "set_procs";
  EXPECT_EXIT(child("updatemaxprocs=0", 0, false), ::testing::ExitedWithCode(0), "") << "updatemaxprocs=0";
  EXPECT_EXIT((setenv("GORT_MAXPROCS", "1", 1), child(nullptr, 0, false)), ::testing::ExitedWithCode(0), "")
      << "GORT_MAXPROCS";
}

TEST_F(DefaultProcs, SetDefaultProcsFollowsAgain) {
  auto child = [] {
    ::alarm(30);
    int end = widen_and_watch(nullptr, 1, [] {
      // Config::procs chose 1; back to the default (1 CPU now), and
      // following it from then on.
      if (gort::set_default_procs() != 1 || gort::procs() != 1) ::_exit(2);
    });
    ::_exit(end == 2 ? 0 : 1);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
  EXPECT_THROW(gort::set_default_procs(), gort::panic_error);
}

TEST_F(FakeCgroup, RuntimeDefaultUsesTheCgroupLimit) {
  // On this machine's CPUs: the limit can only lower the count, to 2 at
  // the least; what run chooses is exactly default_procs's formula.
  v2("/lim");
  write(dir("/lim/cpu.max"), "100000 100000\n");  // one CPU: 2 Ps at most
  internal::procs_cgroup_root_for_test(root_ + "/proc/self", root_);
  int got = 0;
  int fds = count_fds();
  gort::run([&] { got = gort::procs(); });
  EXPECT_EQ(got, std::min(internal::affinity_cpus(), 2));
  EXPECT_EQ(count_fds(), fds) << "the run kept the cgroup's files open";
  // containermaxprocs=0: the CPUs alone.
  setenv("GORT_DEBUG", "containermaxprocs=0", 1);
  gort::run([&] { got = gort::procs(); });
  unsetenv("GORT_DEBUG");
  EXPECT_EQ(got, std::min(internal::affinity_cpus(), 1024));
  internal::procs_cgroup_root_for_test("", "");
}

}  // namespace
}  // namespace gort::test

// stdlib/testing/proc_self.cpp — see proc_self.hpp; and the public counts
// of gort/testing.hpp that come from /proc.
#include "stdlib/testing/proc_self.hpp"

#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "gort/runtime.hpp"
#include "gort/testing.hpp"

namespace gort::testing {
namespace detail {
namespace {

// The numeric entries of a /proc directory, in order; of /proc/self/fd
// (`fds`), without the fd of the listing itself.
std::vector<int> numeric_entries(const char* path, bool fds) {
  std::vector<int> out;
  DIR* d = opendir(path);
  if (d == nullptr) return out;
  int own = fds ? dirfd(d) : -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int n = std::atoi(e->d_name);
    if (n != own) out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Entries of a /proc directory (without . and ..; with the listing's own
// fd in /proc/self/fd), or -1.
int count_dir_entries(const char* path) {
  DIR* d = opendir(path);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    n++;
  }
  closedir(d);
  return n;
}

}  // namespace

std::vector<OpenFd> open_fds() {
  std::vector<OpenFd> out;
  for (int fd : numeric_entries("/proc/self/fd", true)) {
    char buf[PATH_MAX];
    std::string link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
    // Closed since the listing: not open.
    if (n < 0) continue;
    out.push_back({fd, std::string(buf, static_cast<size_t>(n))});
  }
  return out;
}

std::vector<int> thread_ids() { return numeric_entries("/proc/self/task", false); }

std::string thread_name(int tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

std::vector<std::string> mapped_files() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    // address perms offset dev inode path
    size_t slash = line.find('/');
    if (slash != std::string::npos) out.push_back(line.substr(slash));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int net_thread_count() { return count_threads() - gort::runtime_threads(); }

int settled(int (*count)(), std::chrono::microseconds gap) {
  int n = count();
  for (int i = 0; i < 50; i++) {
    std::this_thread::sleep_for(gap);
    int again = count();
    if (again == n) return n;
    n = again;
  }
  return n;
}

void prime_threads() {
  static std::once_flag once;
  std::call_once(once, [] { std::thread([] {}).join(); });
}

}  // namespace detail

int count_fds() { return detail::count_dir_entries("/proc/self/fd"); }
int count_threads() { return detail::count_dir_entries("/proc/self/task"); }

// A thread joined a moment ago can still be listed: the kernel wakes
// pthread_join before it reaps the task.
int settled_thread_count() { return detail::settled(&count_threads, std::chrono::microseconds(200)); }

// An fd closed a moment ago may still be held by another thread (under the
// race detector, its own background thread opens files now and then).
int settled_fd_count() { return detail::settled(&count_fds, std::chrono::milliseconds(2)); }

}  // namespace gort::testing

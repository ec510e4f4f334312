// stdlib/testing/proc_self.hpp — what /proc/self says of this process's
// fds and threads, for the leak checks (leak_check.cpp). Linux only, as
// gort is. Every call reads /proc afresh and never parks.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gort::testing::detail {

struct OpenFd {
  int fd;
  std::string target;  // readlink of /proc/self/fd/N: a path, "socket:[123]", ...
};

// The open fds, in order, without the one this listing itself opens.
std::vector<OpenFd> open_fds();

// The ids of this process's threads (/proc/self/task), in order.
std::vector<int> thread_ids();
// A thread's name (/proc/self/task/<tid>/comm), or "" once it is gone.
std::string thread_name(int tid);

// The paths of the files mapped into this process (/proc/self/maps):
// executables, shared libraries, and the debug files a symbolizer read.
std::vector<std::string> mapped_files();

// OS threads net of those the running runtime started
// (count_threads() - gort::runtime_threads()): a count that starting or
// stopping the runtime leaves as it was.
int net_thread_count();

// count() once it reads the same twice, `gap` apart (at most 50 tries).
int settled(int (*count)(), std::chrono::microseconds gap);

// Starts and joins one thread, once per process. ThreadSanitizer starts a
// helper thread of its own with the process's first pthread_create:
// started now, before any snapshot, it is not counted as a test's leak.
void prime_threads();

}  // namespace gort::testing::detail

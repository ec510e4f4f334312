// stdlib/testing/leak_check.cpp — LeakCheck (gort/testing.hpp): a snapshot
// of goroutines, OS threads and fds, and checks that wait for whatever was
// added since to go away before calling it a leak.
//
// Goroutines. Outside a run the snapshot holds none, and the check (made
// in the run, before main returns) wants every goroutine but the caller
// gone: num_goroutine() says so without a traceback, polled as tightly as
// eventually() polls. Only a failure, a snapshot taken inside a run, or
// goroutines to ignore need the tracebacks, which tell which goroutines
// are new; those are polled with pauses (each takes a walk of every stack).
//
// Threads are counted net of the runtime's own (gort::runtime_threads()),
// so that the runtime starting Ms, or a whole run starting and stopping,
// changes nothing. Fds are compared as (number, target) pairs.
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "gort/runtime.hpp"
#include "gort/testing.hpp"
#include "stdlib/testing/poll.hpp"
#include "stdlib/testing/proc_self.hpp"

namespace gort::testing {
namespace {

template <class T>
bool contains(const std::vector<T>& sorted, const T& v) {
  return std::binary_search(sorted.begin(), sorted.end(), v);
}

bool ignored(const Goroutine& g, const std::vector<std::string>& functions) {
  return std::any_of(functions.begin(), functions.end(), [&](const std::string& f) { return g.has_frame(f); });
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

LeakCheck::LeakCheck(LeakOptions options) : options_(std::move(options)) {
  detail::prime_threads();
  // Tracebacks first: the symbolizer's first walk opens the debug files
  // it reads, and keeps them open until the run ends.
  if (options_.goroutines && gort::procs() > 0) {
    for (const Goroutine& g : all_goroutines()) goroutines_.push_back(g.id);
    std::sort(goroutines_.begin(), goroutines_.end());
  }
  if (options_.threads) {
    threads_ = detail::settled(&detail::net_thread_count, std::chrono::microseconds(200));
    tids_ = detail::thread_ids();
  }
  if (options_.fds) {
    for (detail::OpenFd& f : detail::open_fds()) fds_.push_back({f.fd, std::move(f.target)});
  }
}

::testing::AssertionResult LeakCheck::check_goroutines() const {
  if (!options_.goroutines || gort::procs() == 0) return ::testing::AssertionSuccess();
  int64_t self = gort::goroutine_id();
  bool self_known = self == 0 || contains(goroutines_, self);
  // Goroutines not in the snapshot, besides the caller and the ignored.
  auto leftovers = [&] {
    std::vector<Goroutine> left;
    for (Goroutine& g : all_goroutines()) {
      if (g.id == self || contains(goroutines_, g.id) || ignored(g, options_.ignore_functions)) continue;
      left.push_back(std::move(g));
    }
    return left;
  };
  std::vector<Goroutine> left;
  if (goroutines_.empty() && options_.ignore_functions.empty()) {
    // Any goroutine but the caller is a leftover: the counter tells.
    int64_t allowed = self_known ? 0 : 1;
    if (detail::poll_until(
            [](void* arg, std::string*) { return gort::num_goroutine() <= *static_cast<int64_t*>(arg); }, &allowed,
            options_.timeout)) {
      return ::testing::AssertionSuccess();
    }
    left = leftovers();
  } else {
    detail::poll_with_pauses([&] { return (left = leftovers()).empty(); }, options_.timeout);
  }
  if (left.empty()) return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << plural(left.size(), "goroutine", "goroutines") << " leaked (still there "
    << absl::FormatDuration(options_.timeout) << " after the check began):\n";
  for (const Goroutine& g : left) r << "\n" << g.text;
  return r;
}

::testing::AssertionResult LeakCheck::check_threads() const {
  if (!options_.threads) return ::testing::AssertionSuccess();
  int now = 0;
  if (detail::poll_with_pauses([&] { return (now = detail::net_thread_count()) <= threads_; }, options_.timeout)) {
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << plural(static_cast<size_t>(now - threads_), "OS thread", "OS threads") << " leaked: " << now
    << " besides the runtime's own, " << threads_ << " at the snapshot, after waiting "
    << absl::FormatDuration(options_.timeout) << ". Threads started since";
  if (gort::procs() > 0) r << " (the runtime's among them)";
  r << ":";
  for (int tid : detail::thread_ids()) {
    if (!contains(tids_, tid)) r << "\n  thread " << tid << " \"" << detail::thread_name(tid) << "\"";
  }
  return r;
}

::testing::AssertionResult LeakCheck::check_fds() const {
  if (!options_.fds) return ::testing::AssertionSuccess();
  auto opened_since = [&] {
    std::vector<detail::OpenFd> added;
    for (detail::OpenFd& f : detail::open_fds()) {
      bool old = std::any_of(fds_.begin(), fds_.end(),
                             [&](const Fd& o) { return o.fd == f.fd && o.target == f.target; });
      if (!old) added.push_back(std::move(f));
    }
    if (added.empty()) return added;
    // The runtime's symbolizer (libdw) keeps the executables, libraries and
    // debug files it read open until gort::run returns, and maps them: a
    // file that is also mapped is one of those, not the test's.
    std::vector<std::string> mapped = detail::mapped_files();
    std::erase_if(added, [&](const detail::OpenFd& f) { return contains(mapped, f.target); });
    return added;
  };
  std::vector<detail::OpenFd> added;
  if (detail::poll_with_pauses([&] { return (added = opened_since()).empty(); }, options_.timeout)) {
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << plural(added.size(), "fd", "fds") << " leaked (open " << absl::FormatDuration(options_.timeout)
    << " after the check began, not at the snapshot):";
  for (const detail::OpenFd& f : added) r << "\n  fd " << f.fd << " -> " << f.target;
  return r;
}

::testing::AssertionResult LeakCheck::check() const {
  std::string failures;
  for (const ::testing::AssertionResult& r : {check_goroutines(), check_threads(), check_fds()}) {
    if (r) continue;
    if (!failures.empty()) failures += "\n\n";
    failures += r.message();
  }
  if (failures.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failures;
}

}  // namespace gort::testing

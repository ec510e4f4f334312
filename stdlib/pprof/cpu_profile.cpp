// stdlib/pprof/cpu_profile.cpp — a CPU profile from start to stop (Go's
// StartCPUProfile / StopCPUProfile), and GORT_CPUPROFILE.
//
// A session: the label sets its samples point at are held (a flushing
// LabelsHold, labels.hpp) from before the first timer to after the last
// drain; a reader thread folds the rings (cpu_sampler.hpp) every 50 ms
// into a table keyed by (stack, labels), copying each sample's labels, and
// then frees the sets released before that fold began (no sample left
// names them); stop deletes the timers, joins the reader, folds what is
// left and builds the profile. One session at a time, whoever started it:
//
//   kIdle --start--> kStarting --> kRunning --stop--> kStopping --> kIdle
//
// (under g_mu; kStarting and kStopping do their slow part unlocked, and a
// start meanwhile is "already in use"). Who may stop it: its owner
// (start_cpu_profile's stop_cpu_profile, cpu_profile(d) itself, a run with
// GORT_CPUPROFILE), so an HTTP handler's profile and a program's cannot
// end each other's.
#include "stdlib/pprof/cpu_profile.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmp/clock_rand.hpp"
#include "gmp/os/fatal.hpp"
#include "gort/pprof.hpp"
#include "gort/time.hpp"
#include "stdlib/pprof/cpu_sampler.hpp"
#include "stdlib/pprof/labels.hpp"
#include "stdlib/pprof/profile_builder.hpp"

namespace gort::internal {
namespace {

constexpr int kDefaultHz = 100;  // Go's
constexpr int kMaxHz = 10000;
// What the reader's table costs at most: past it, samples of new stacks
// are counted as lost (a runaway of distinct stacks, not a profile).
constexpr size_t kMaxStacks = 1 << 20;

std::atomic<int> g_rate{kDefaultHz};

enum class Owner : uint8_t { kFile, kCall, kEnv };
enum class State : uint8_t { kIdle, kStarting, kRunning, kStopping };

struct Session {
  Owner owner;
  std::string path;  // empty: to memory
  uint32_t gen = 0;
  int hz = 0;
  int64_t start_unix_ns = 0;
  int64_t start_ns = 0;
  std::unique_ptr<LabelsHold> hold;
  // The reader's until it is joined, then stop's.
  std::map<std::pair<std::vector<uintptr_t>, pprof::LabelSet>, int64_t> counts;
  uint64_t lost = 0;
  std::thread reader;
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;  // guarded by mu
};

std::mutex g_mu;
State g_state = State::kIdle;  // guarded by g_mu
Session* g_session = nullptr;  // guarded by g_mu; set while kRunning
uint32_t g_last_gen = 0;       // guarded by g_mu

void fold(Session* s) {
  cpu_sampling_drain(
      [s](const CpuSample& x) {
        auto key = std::make_pair(std::vector<uintptr_t>(x.pc, x.pc + x.n), labels_of(x.labels));
        auto it = s->counts.find(key);
        if (it != s->counts.end()) {
          it->second += x.weight;
        } else if (s->counts.size() < kMaxStacks) {
          s->counts.emplace(std::move(key), x.weight);
        } else {
          s->lost += x.weight;
        }
      },
      &s->lost);
}

// A plain thread: the rings hold about a second; it drains them 20 times
// as often.
void reader_loop(Session* s) {
  std::unique_lock<std::mutex> lock(s->mu);
  while (!s->stop) {
    lock.unlock();
    // Released before this fold: every sample naming one is folded by it.
    std::vector<GLabels*> released = labels_take_released();
    fold(s);
    labels_free(released);
    lock.lock();
    s->wake.wait_for(lock, std::chrono::milliseconds(50), [s] { return s->stop; });
  }
}

void set_state(State st) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_state = st;
}

absl::Status begin(const std::string& path, Owner owner) {
  uint32_t gen;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_state != State::kIdle) return absl::FailedPreconditionError("cpu profiling already in use");
    g_state = State::kStarting;
    g_last_gen = g_last_gen % 0xFFFFFF + 1;  // 24 bits, never 0 (cpu_sampler.cpp)
    gen = g_last_gen;
  }
  // Created now: a path that cannot be written fails at the start.
  if (!path.empty()) {
    if (absl::Status st = write_file(path, ""); !st.ok()) {
      set_state(State::kIdle);
      return st;
    }
  }
  auto s = std::make_unique<Session>();
  s->owner = owner;
  s->path = path;
  s->gen = gen;
  s->hz = g_rate.load(std::memory_order_relaxed);
  s->start_unix_ns = absl::ToUnixNanos(absl::Now());
  s->start_ns = nanotime();
  s->hold = std::make_unique<LabelsHold>(LabelsHold::Kind::kFlushing);  // before the first sample
  try {
    s->reader = std::thread(&reader_loop, s.get());
  } catch (const std::system_error& e) {
    set_state(State::kIdle);
    return absl::ResourceExhaustedError(std::string("pprof: cannot start the profile's reader thread: ") + e.what());
  }
  cpu_sampling_start(gen, s->hz);
  std::lock_guard<std::mutex> lock(g_mu);
  g_session = s.release();
  g_state = State::kRunning;
  return absl::OkStatus();
}

// Stops the owner's session and returns its gzipped profile (written to
// its path too, if it has one); nullopt if none of the owner's runs.
std::optional<absl::StatusOr<std::string>> end(Owner owner) {
  std::unique_ptr<Session> s;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_state != State::kRunning || g_session->owner != owner) return std::nullopt;
    s.reset(g_session);
    g_session = nullptr;
    g_state = State::kStopping;
  }
  cpu_sampling_stop();
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->stop = true;
  }
  s->wake.notify_one();
  s->reader.join();
  fold(s.get());
  const int64_t period = 1000000000 / s->hz;
  std::vector<StackRecord> records;
  records.reserve(s->counts.size() + 1);
  for (const auto& [key, n] : s->counts) {
    StackRecord r;
    r.addrs = key.first;
    r.values = {n, n * period};
    r.labels = key.second;
    records.push_back(std::move(r));
  }
  if (s->lost > 0) {
    const auto n = static_cast<int64_t>(s->lost);
    records.push_back(StackRecord{{}, {n, n * period}, {}, "gort._LostSamples"});
  }
  // Every sample is folded, its labels copied: the sets may go, and the
  // rings with them.
  s->hold.reset();
  cpu_sampling_free();
  set_state(State::kIdle);

  ProfileKind kind;
  kind.sample_types = {{"samples", "count"}, {"cpu", "nanoseconds"}};
  kind.period_type = {"cpu", "nanoseconds"};
  kind.period = period;
  kind.time_unix_ns = s->start_unix_ns;
  kind.duration_ns = nanotime() - s->start_ns;
  absl::StatusOr<std::string> bytes = encode_profile(build_profile(kind, std::move(records)).model);
  if (bytes.ok() && !s->path.empty()) {
    if (absl::Status st = write_file(s->path, *bytes); !st.ok()) return absl::StatusOr<std::string>(st);
  }
  return bytes;
}

}  // namespace

const char* cpu_profile_env() {
  const char* path = std::getenv("GORT_CPUPROFILE");
  return path != nullptr && path[0] != '\0' ? path : nullptr;
}

void cpu_profile_env_begin(const char* path) {
  if (absl::Status st = begin(path, Owner::kEnv); !st.ok()) {
    write_stderr(("gort: GORT_CPUPROFILE: " + st.ToString() + "\n").c_str());
  }
}

void cpu_profile_env_end() {
  auto r = end(Owner::kEnv);
  if (r.has_value() && !r->ok()) {
    write_stderr(("gort: GORT_CPUPROFILE: " + r->status().ToString() + "\n").c_str());
  }
}

}  // namespace gort::internal

namespace gort::pprof {

absl::Status start_cpu_profile(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("pprof: start_cpu_profile: empty path");
  return internal::begin(path, internal::Owner::kFile);
}

absl::Status stop_cpu_profile() {
  auto r = internal::end(internal::Owner::kFile);
  return r.has_value() ? r->status() : absl::OkStatus();
}

absl::StatusOr<std::string> cpu_profile(absl::Duration d) {
  if (absl::Status st = internal::begin("", internal::Owner::kCall); !st.ok()) return st;
  gort::sleep(d);
  // Only this call stops a kCall session.
  auto r = internal::end(internal::Owner::kCall);
  if (!r.has_value()) return absl::InternalError("pprof: cpu_profile's session was not running at its end");
  return *std::move(r);
}

void set_cpu_profile_rate(int hz) {
  if (hz <= 0) hz = internal::kDefaultHz;
  if (hz > internal::kMaxHz) hz = internal::kMaxHz;
  internal::g_rate.store(hz, std::memory_order_relaxed);
}

}  // namespace gort::pprof

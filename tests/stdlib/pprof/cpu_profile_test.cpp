// tests/stdlib/pprof/cpu_profile_test.cpp — the CPU profile
// (stdlib/pprof/cpu_profile.cpp, cpu_sampler.cpp): two labelled CPU burners
// at 1, 2 and 4 Ps, decoded with perftools::profiles::Profile (sample
// types, both labels, the burner's name in the symbolized frames, about as
// many samples as CPU time); cpu_profile(d); a second start is "already in
// use"; a path that cannot be written fails at the start; and
// GORT_CPUPROFILE profiles a whole run in a child process.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "gort/pprof.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"
#include "tests/stdlib/pprof/decode.hpp"

namespace gort_pprof_test {
namespace {

std::atomic<uint64_t> g_sink{0};

// Spins until *stop (or for `d`), yielding every millisecond so that a
// build without asynchronous preemption runs the other burner too.
[[gnu::noinline]] uint64_t pprof_test_burn(const std::atomic<bool>* stop, absl::Duration d) {
  uint64_t x = 1;
  const absl::Time until = absl::Now() + d;
  absl::Time yielded = absl::Now();
  for (;;) {
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    const absl::Time now = absl::Now();
    if ((stop != nullptr && stop->load(std::memory_order_relaxed)) || now >= until) break;
    if (now - yielded >= absl::Milliseconds(1)) {
      gort::yield();
      yielded = now;
    }
  }
  g_sink.fetch_add(x, std::memory_order_relaxed);
  return x;
}

int64_t process_cpu_ns() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) { return int64_t{tv.tv_sec} * 1000000000 + int64_t{tv.tv_usec} * 1000; };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "gort-pprof-" + std::to_string(getpid()) + "-" + name;
}

class CpuProfile : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(CpuProfile);

TEST_P(CpuProfile, LabelledBurners) {
  GORT_SKIP_IN_RACE_BUILD("ThreadSanitizer defers signal handlers: SIGPROF's context is not the interrupted one");
  run_test([this] {
    std::atomic<bool> stop{false};
    gort::WaitGroup wg;
    for (const char* worker : {"a", "b"}) {
      wg.add(1);
      gort::pprof::with_labels({{"worker", worker}}, [&] {
        gort::go([&] {
          pprof_test_burn(&stop, absl::Minutes(1));
          wg.done();
        });
      });
    }
    // The CPU time is read around the sampling only: writing the profile
    // (symbolizing, the first time loading the debug information) is not
    // sampled.
    const std::string path = temp_path("burners-" + std::to_string(GetParam()) + ".pprof");
    absl::Status started = gort::pprof::start_cpu_profile(path);
    const int64_t cpu0 = process_cpu_ns();
    gort::sleep(absl::Milliseconds(600));
    const int64_t cpu = process_cpu_ns() - cpu0;
    absl::Status stopped = gort::pprof::stop_cpu_profile();
    stop.store(true);
    wg.wait();
    if (!started.ok() || !stopped.ok()) {
      ADD_FAILURE() << started << " / " << stopped;
      return;
    }
    Profile p;
    EXPECT_TRUE(decode(read_file(path), &p));
    std::remove(path.c_str());
    EXPECT_EQ(sample_types(p), (std::vector<std::string>{"samples/count", "cpu/nanoseconds"}));
    EXPECT_EQ(period_type(p), "cpu/nanoseconds");
    EXPECT_EQ(p.period(), 10000000);  // 100 Hz
    EXPECT_GT(p.duration_nanos(), 0);
    int64_t samples = 0, a = 0, b = 0, burner = 0;
    for (const Sample& s : p.sample()) {
      EXPECT_EQ(s.value_size(), 2);
      if (s.value_size() != 2) continue;
      EXPECT_EQ(s.value(1), s.value(0) * p.period());
      samples += s.value(0);
      const std::string w = label(p, s, "worker");
      if (w == "a") a += s.value(0);
      if (w == "b") b += s.value(0);
      if (has_function(p, s, "pprof_test_burn")) burner += s.value(0);
    }
    EXPECT_GT(a, 0) << "no sample labelled worker=a";
    EXPECT_GT(b, 0) << "no sample labelled worker=b";
    EXPECT_GT(burner, 0) << "pprof_test_burn is in no symbolized sample";
    // Loose: the samples account for the CPU time the process used
    // meanwhile (its other threads and the profile's own work aside).
    const int64_t sampled = samples * p.period();
    EXPECT_GT(sampled, cpu / 4) << samples << " samples for " << cpu / 1000000 << " ms of CPU";
    EXPECT_LT(sampled, cpu * 2 + 50000000) << samples << " samples for " << cpu / 1000000 << " ms of CPU";
    // Most of them are the burners', labelled.
    EXPECT_GT(a + b, samples / 2);
  });
}

// cpu_profile(d), as an HTTP handler takes it: the calling goroutine parks
// for d, and the bytes come back.
TEST_P(CpuProfile, ForADuration) {
  GORT_SKIP_IN_RACE_BUILD("ThreadSanitizer defers signal handlers: SIGPROF's context is not the interrupted one");
  run_test([] {
    std::atomic<bool> stop{false};
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      pprof_test_burn(&stop, absl::Minutes(1));
      wg.done();
    });
    absl::StatusOr<std::string> gz = gort::pprof::cpu_profile(absl::Milliseconds(300));
    stop.store(true);
    wg.wait();
    if (!gz.ok()) {
      ADD_FAILURE() << gz.status();
      return;
    }
    Profile p;
    EXPECT_TRUE(decode(*gz, &p));
    EXPECT_GT(sum_with(p, "pprof_test_burn", 0), 0);
  });
}

TEST_P(CpuProfile, SecondStartIsAlreadyInUse) {
  run_test([] {
    const std::string path = temp_path("in-use.pprof");
    if (absl::Status st = gort::pprof::start_cpu_profile(path); !st.ok()) {
      ADD_FAILURE() << st;
      return;
    }
    absl::Status again = gort::pprof::start_cpu_profile(temp_path("other.pprof"));
    EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(again.message(), "cpu profiling already in use");
    absl::StatusOr<std::string> call = gort::pprof::cpu_profile(absl::Milliseconds(1));
    EXPECT_EQ(call.status().message(), "cpu profiling already in use");
    pprof_test_burn(nullptr, absl::Milliseconds(50));
    EXPECT_TRUE(gort::pprof::stop_cpu_profile().ok());
    // Stopping again does nothing; starting again works.
    EXPECT_TRUE(gort::pprof::stop_cpu_profile().ok());
    Profile p;
    EXPECT_TRUE(decode(read_file(path), &p));
    EXPECT_EQ(sample_types(p), (std::vector<std::string>{"samples/count", "cpu/nanoseconds"}));
    EXPECT_TRUE(gort::pprof::start_cpu_profile(path).ok());
    EXPECT_TRUE(gort::pprof::stop_cpu_profile().ok());
    std::remove(path.c_str());
  });
}

TEST(CpuProfileFile, UnwritablePathFailsAtStart) {
  absl::Status st = gort::pprof::start_cpu_profile("/nonexistent-dir/cpu.pprof");
  EXPECT_FALSE(st.ok());
  // Nothing was started.
  EXPECT_TRUE(gort::pprof::stop_cpu_profile().ok());
}

// GORT_CPUPROFILE=path: the run is profiled from before main's body to
// after it, and the file is written when main returns.
TEST(CpuProfileEnv, ProfilesTheRun) {
  GORT_SKIP_IN_RACE_BUILD("ThreadSanitizer defers signal handlers: SIGPROF's context is not the interrupted one");
  const std::string path = temp_path("env.pprof");
  auto child = [&] {
    setenv("GORT_CPUPROFILE", path.c_str(), 1);
    gort::Config cfg;
    cfg.procs = 2;
    gort::run([] { pprof_test_burn(nullptr, absl::Milliseconds(300)); }, cfg);
    Profile p;
    EXPECT_TRUE(decode(read_file(path), &p)) << "no decodable profile at " << path;
    EXPECT_EQ(sample_types(p), (std::vector<std::string>{"samples/count", "cpu/nanoseconds"}));
    EXPECT_GT(sum_with(p, "pprof_test_burn", 0), 0);
    std::remove(path.c_str());
  };
  GORT_EXPECT_SUBPROCESS_OK(120, child);
}

}  // namespace
}  // namespace gort_pprof_test

// tests/stdlib/trace/trace_test.cpp — gort::trace end to end: a workload of
// channels, sleeps, a contended mutex, gort::blocking and a preempted CPU
// burner, traced at 1, 2 and 4 Ps, written as JSON, as a Perfetto trace and
// raw, and read back: every goroutine's track, its slices in order and
// never overlapping, the wait reasons, the wake-up arrows, the annotations.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "gort/gort.hpp"
#include "gort/trace.hpp"
#include "perfetto_trace.pb.h"
#include "tests/testing.hpp"

namespace {

using json = nlohmann::json;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "gort-trace-" + std::to_string(getpid()) + "-" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Spins without a call for `ms` milliseconds: only asynchronous preemption
// can take its P.
[[gnu::noinline]] void burn_cpu(int ms) {
  int64_t until = gort::internal::nanotime() + ms * 1'000'000LL;
  volatile uint64_t x = 0;
  while (gort::internal::nanotime() < until) {
    for (int i = 0; i < 1000; i++) x = x + 1;
  }
}

[[gnu::noinline]] void ping_pong_partner(gort::Chan<int> ping, gort::Chan<int> pong) {
  for (;;) {
    std::optional<int> v = ping.recv();
    if (!v) return;
    pong.send(*v);
  }
}

void workload() {
  gort::WaitGroup wg;
  // Channels: 50 round trips.
  auto ping = gort::make_chan<int>();
  auto pong = gort::make_chan<int>();
  wg.add(1);
  gort::go([&] {
    ping_pong_partner(ping, pong);
    wg.done();
  });
  for (int i = 0; i < 50; i++) {
    ping.send(i);
    EXPECT_EQ(pong.recv(), i);
  }
  ping.close();
  // A receive that waits for its sender.
  auto later = gort::make_chan<int>();
  wg.add(1);
  gort::go([&] {
    EXPECT_EQ(later.recv(), 7);
    wg.done();
  });
  gort::sleep(absl::Milliseconds(1));
  later.send(7);
  // A sleep.
  wg.add(1);
  gort::go([&] {
    gort::sleep(absl::Milliseconds(3));
    wg.done();
  });
  // A mutex held across sleeps: the others block on it.
  gort::Mutex mu;
  for (int k = 0; k < 3; k++) {
    wg.add(1);
    gort::go([&] {
      for (int i = 0; i < 5; i++) {
        std::lock_guard<gort::Mutex> lock(mu);
        gort::sleep(absl::Microseconds(300));
      }
      wg.done();
    });
  }
  // A system call outside the scheduler.
  gort::blocking([] { usleep(2000); });
  // A CPU burner beside a ticking goroutine: on one P it is preempted.
  std::atomic<bool> stop{false};
  wg.add(2);
  gort::go([&] {
    burn_cpu(60);
    stop = true;
    wg.done();
  });
  gort::go([&] {
    while (!stop) gort::sleep(absl::Milliseconds(1));
    wg.done();
  });
  // Annotations.
  gort::trace::Task task("request");
  {
    gort::trace::Region outer("handle", &task);
    gort::trace::Region inner("parse", &task);
    gort::trace::log("order", "id=42", &task);
  }
  task.end();
  wg.wait();
}

class TraceTest : public gort::testing::ProcsTest {};

// One goroutine's slices, by time.
struct Slice {
  double ts, dur;
  std::string name;
};

TEST_P(TraceTest, JsonHasEveryGoroutineAndItsStory) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::string path = temp_path("w" + std::to_string(procs()) + ".json");
  run_test([&] {
    ASSERT_TRUE(gort::trace::start(path).ok());
    EXPECT_TRUE(gort::trace::is_enabled());
    workload();
    absl::Status s = gort::trace::stop();
    EXPECT_TRUE(s.ok()) << s;
  });
  json doc = json::parse(read_file(path));
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::map<int, std::string> thread_names;
  std::map<int, std::vector<Slice>> slices;
  std::set<std::string> names, instants;
  bool blocking_call_named = false;
  int flows_out = 0, flows_in = 0;
  for (const json& e : doc["traceEvents"]) {
    std::string ph = e.value("ph", "");
    if (ph == "M" && e.value("name", "") == "thread_name") {
      thread_names[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
    } else if (ph == "X") {
      slices[e["tid"].get<int>()].push_back({e["ts"].get<double>(), e["dur"].get<double>(), e["name"]});
      names.insert(e["name"].get<std::string>());
      // A blocked slice names the program's call that blocked.
      if (e.value("cat", "") == "blocked" && e.contains("args") &&
          e["args"].value("stack", "").find("trace_test.cpp") != std::string::npos) {
        blocking_call_named = true;
      }
    } else if (ph == "i" || ph == "I") {
      instants.insert(e["name"].get<std::string>());
    } else if (ph == "s") {
      flows_out++;
    } else if (ph == "f") {
      flows_in++;
    }
  }
  // A track per goroutine, named by its creation site.
  bool partner_named = false;
  for (auto& [tid, n] : thread_names) partner_named |= n.find("trace_test.cpp") != std::string::npos;
  EXPECT_TRUE(partner_named);
  for (const char* want : {"running", "runnable", "chan receive", "chan send", "sleep", "sync.Mutex.Lock",
                           "syscall", "handle", "parse", "request"}) {
    EXPECT_TRUE(names.count(want)) << "no slice named " << want;
  }
  EXPECT_TRUE(instants.count("order")) << "the log is missing";
  EXPECT_TRUE(blocking_call_named) << "no blocked slice names its blocking call";
  if (procs() == 1) EXPECT_TRUE(instants.count("preempted")) << "the burner was never preempted";
  EXPECT_GT(flows_out, 50);
  EXPECT_EQ(flows_out, flows_in);
  // On a goroutine's track its states follow one another, never overlap
  // (regions and tasks have tracks of their own, where they nest).
  for (auto& [tid, v] : slices) {
    const std::string& tn = thread_names[tid];
    if (tn.empty() || tn[0] != 'G' || tn.find("regions") != std::string::npos) continue;
    std::sort(v.begin(), v.end(), [](const Slice& a, const Slice& b) { return a.ts < b.ts; });
    for (size_t i = 1; i < v.size(); i++) {
      EXPECT_GE(v[i].ts + 1e-3, v[i - 1].ts + v[i - 1].dur) << tn << ": " << v[i - 1].name << " overlaps " << v[i].name;
    }
  }
  unlink(path.c_str());
}

TEST_P(TraceTest, PerfettoTraceDecodes) {
  std::string path = temp_path("w" + std::to_string(procs()) + ".perfetto-trace");
  run_test([&] {
    ASSERT_TRUE(gort::trace::start(path).ok());
    workload();
    absl::Status s = gort::trace::stop();
    EXPECT_TRUE(s.ok()) << s;
  });
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(read_file(path)));
  std::map<uint64_t, std::string> tracks;
  std::map<uint64_t, int> depth;
  std::map<uint64_t, uint64_t> last_ts;
  std::set<std::string> names;
  for (const auto& pkt : trace.packet()) {
    if (pkt.has_track_descriptor()) tracks[pkt.track_descriptor().uuid()] = pkt.track_descriptor().name();
    if (!pkt.has_track_event()) continue;
    const auto& ev = pkt.track_event();
    uint64_t tr = ev.track_uuid();
    EXPECT_TRUE(tracks.count(tr)) << "an event on an undeclared track";
    EXPECT_GE(pkt.timestamp(), last_ts[tr]) << "out of order on " << tracks[tr];
    last_ts[tr] = pkt.timestamp();
    if (ev.type() == perfetto::protos::TrackEvent::TYPE_SLICE_BEGIN) {
      depth[tr]++;
      names.insert(ev.name());
    } else if (ev.type() == perfetto::protos::TrackEvent::TYPE_SLICE_END) {
      EXPECT_GT(depth[tr], 0) << "an end without a begin on " << tracks[tr];
      depth[tr]--;
    }
  }
  for (auto& [tr, d] : depth) EXPECT_EQ(d, 0) << tracks[tr];
  for (const char* want : {"running", "chan receive", "sleep", "sync.Mutex.Lock", "syscall"}) {
    EXPECT_TRUE(names.count(want)) << "no slice named " << want;
  }
  unlink(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Procs, TraceTest, ::testing::Values(1, 2, 4), ::gort::testing::procs_name);

TEST(Trace, RawTraceConvertsLater) {
  std::string raw = temp_path("raw.gtrace"), out = temp_path("raw.json");
  gort::testing::run([&] {
    ASSERT_TRUE(gort::trace::start(raw).ok());
    workload();
    ASSERT_TRUE(gort::trace::stop().ok());
  });
  absl::Status s = gort::trace::convert(raw, out);
  ASSERT_TRUE(s.ok()) << s;
  json doc = json::parse(read_file(out));
  EXPECT_GT(doc["traceEvents"].size(), 100u);
  unlink(raw.c_str());
  unlink(out.c_str());
}

// With Options::stacks a block records its whole stack: the blocking call
// and the program's frames that led to it (the runtime's are left out, as
// Go's traces leave out runtime frames).
TEST(Trace, StacksRecordTheWholeBlockingStack) {
  std::string path = temp_path("stacks.json");
  gort::testing::run([&] {
    gort::trace::Options o;
    o.stacks = true;
    ASSERT_TRUE(gort::trace::start(path, o).ok());
    auto c = gort::make_chan<int>();
    gort::go([c] {
      gort::sleep(absl::Milliseconds(1));
      c.send(1);
    });
    EXPECT_EQ(c.recv(), 1);
    ASSERT_TRUE(gort::trace::stop().ok());
  });
  json doc = json::parse(read_file(path));
  size_t deepest = 0;
  for (const json& e : doc["traceEvents"]) {
    if (e.value("name", "") != "chan receive" || !e.contains("args")) continue;
    std::string st = e["args"].value("stack", "");
    deepest = std::max<size_t>(deepest, std::count(st.begin(), st.end(), '\n') + 1);
    EXPECT_NE(st.find("trace_test.cpp"), std::string::npos) << st;
  }
  EXPECT_GE(deepest, 2u);
  unlink(path.c_str());
}

TEST(Trace, MisuseGetsClearErrors) {
  std::string path = temp_path("misuse.json");
  gort::testing::run([&] {
    EXPECT_EQ(gort::trace::stop().message(), "trace: stop: tracing is not enabled");
    ASSERT_TRUE(gort::trace::start(path).ok());
    absl::Status again = gort::trace::start(path);
    EXPECT_EQ(again.message(), "tracing is already enabled");
    EXPECT_TRUE(gort::trace::stop().ok());
    absl::Status bad = gort::trace::start("/nonexistent-dir/x.json");
    EXPECT_FALSE(bad.ok());
    EXPECT_FALSE(gort::trace::is_enabled());
  });
  EXPECT_FALSE(gort::trace::convert("/nonexistent.gtrace", path).ok());
  std::string junk = temp_path("junk.gtrace");
  { std::ofstream(junk) << "not a trace"; }
  absl::Status s = gort::trace::convert(junk, path);
  EXPECT_NE(s.message().find("not a gort raw trace"), std::string::npos) << s;
  unlink(junk.c_str());
  unlink(path.c_str());
}

// Annotations cost nothing and record nothing while no trace runs.
TEST(Trace, AnnotationsWithoutATrace) {
  gort::testing::run([] {
    gort::trace::Task t("idle");
    gort::trace::Region r("r", &t);
    gort::trace::log("c", "m");
    EXPECT_NE(t.id(), 0u);
    EXPECT_FALSE(gort::trace::is_enabled());
  });
}

// A trace still running when the run ends is written then.
TEST(Trace, RunEndWritesAnUnstoppedTrace) {
  std::string path = temp_path("unstopped.json");
  gort::testing::run([&] {
    ASSERT_TRUE(gort::trace::start(path).ok());
    gort::sleep(absl::Milliseconds(1));
  });
  EXPECT_FALSE(gort::trace::is_enabled());
  json doc = json::parse(read_file(path));
  EXPECT_FALSE(doc["traceEvents"].empty());
  unlink(path.c_str());
}

// GORT_TRACE traces a whole run with no code change.
TEST(Trace, EnvironmentTracesTheRun) {
  // No pid in the name: the death test's child runs this body again.
  std::string path = ::testing::TempDir() + "gort-trace-env.json";
  unlink(path.c_str());
  GORT_EXPECT_SUBPROCESS_OK(60, [&] {
    setenv("GORT_TRACE", path.c_str(), 1);
    gort::run([] {
      auto c = gort::make_chan<int>();
      gort::go([c] { c.send(1); });
      (void)c.recv();
    });
    unsetenv("GORT_TRACE");
  });
  json doc = json::parse(read_file(path));
  bool main_track = false;
  for (const json& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") {
      main_track |= e["args"]["name"].get<std::string>().rfind("G1", 0) == 0;
    }
  }
  EXPECT_TRUE(main_track);
  unlink(path.c_str());
}

}  // namespace

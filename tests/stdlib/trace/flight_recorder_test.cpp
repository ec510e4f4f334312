// tests/stdlib/trace/flight_recorder_test.cpp — the flight recorder: its
// size and age bounds, snapshots, misuse, and the dumps a dying process
// writes by itself (a deadlock's fatal error, a stack overflow from a
// signal handler), converted afterwards by another process.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gort/gort.hpp"
#include "gort/trace.hpp"
#include "tests/testing.hpp"

namespace {

using json = nlohmann::json;

// An empty directory of the test's own. No pid in its name: a death test's
// child runs the test body again, and must find the same directory.
std::string fresh_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "gort-fr-" + name;
  if (DIR* dir = opendir(d.c_str())) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') unlink((d + "/" + e->d_name).c_str());
    }
    closedir(dir);
  }
  mkdir(d.c_str(), 0755);
  return d;
}

// The one file in dir whose name ends in suffix (empty if none or several).
std::string only_file(const std::string& dir, const std::string& suffix) {
  std::string found;
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        found = dir + "/" + name;
        n++;
      }
    }
    closedir(d);
  }
  return n == 1 ? found : "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void ping_pong(int n) {
  auto ping = gort::make_chan<int>();
  auto pong = gort::make_chan<int>();
  gort::go([ping, pong] {
    while (auto v = ping.recv()) pong.send(*v);
  });
  for (int i = 0; i < n; i++) {
    ping.send(i);
    (void)pong.recv();
  }
  ping.close();
}

bool has_log(const json& doc, const std::string& message) {
  for (const json& e : doc["traceEvents"]) {
    if (e.value("cat", "") == "log" && e.contains("args") && e["args"].value("message", "") == message) return true;
  }
  return false;
}

TEST(FlightRecorder, KeepsOnlyTheLatestBytes) {
  gort::testing::run([] {
    gort::trace::FlightRecorderConfig cfg;
    cfg.max_bytes = 256 << 10;
    cfg.min_age = absl::Hours(1);
    gort::trace::FlightRecorder fr(cfg);
    ASSERT_TRUE(fr.start().ok());
    for (int i = 0; i < 40; i++) {
      gort::trace::log("step", "step " + std::to_string(i));
      ping_pong(2000);
    }
    absl::StatusOr<std::string> raw = fr.snapshot("gtrace");
    ASSERT_TRUE(raw.ok()) << raw.status();
    // The ring, what the Ms had not retired yet (64 KiB each at most), and
    // the process's maps.
    size_t maps = read_file("/proc/self/maps").size();
    EXPECT_LE(raw->size(), cfg.max_bytes + 16 * (64 << 10) + maps + 65536);
    absl::StatusOr<std::string> js = fr.snapshot("json");
    ASSERT_TRUE(js.ok()) << js.status();
    json doc = json::parse(*js);
    EXPECT_FALSE(has_log(doc, "step 0")) << "the oldest events were kept";
    EXPECT_TRUE(has_log(doc, "step 39")) << "the newest events were lost";
    fr.stop();
    EXPECT_FALSE(fr.enabled());
  });
}

TEST(FlightRecorder, ForgetsWhatIsOlderThanItsAge) {
  gort::testing::RunOptions o;
  o.config.procs = 1;
  gort::testing::run(
      [] {
        gort::trace::FlightRecorderConfig cfg;
        cfg.min_age = absl::Milliseconds(50);
        gort::trace::FlightRecorder fr(cfg);
        ASSERT_TRUE(fr.start().ok());
        gort::trace::log("age", "old");
        absl::Time until = absl::Now() + absl::Milliseconds(400);
        while (absl::Now() < until) ping_pong(500);
        gort::trace::log("age", "new");
        absl::StatusOr<std::string> js = fr.snapshot("json");
        ASSERT_TRUE(js.ok()) << js.status();
        json doc = json::parse(*js);
        EXPECT_FALSE(has_log(doc, "old"));
        EXPECT_TRUE(has_log(doc, "new"));
      },
      o);
}

TEST(FlightRecorder, WritesSnapshotsInEachFormat) {
  std::string dir = fresh_dir("formats");
  gort::testing::run([&] {
    gort::trace::FlightRecorder fr;
    ASSERT_TRUE(fr.start().ok());
    ping_pong(100);
    for (const char* name : {"/s.json", "/s.perfetto-trace", "/s.gtrace"}) {
      absl::Status s = fr.write_to(dir + name);
      EXPECT_TRUE(s.ok()) << name << ": " << s;
      EXPECT_GT(read_file(dir + name).size(), 100u) << name;
    }
  });
  json doc = json::parse(read_file(dir + "/s.json"));
  EXPECT_FALSE(doc["traceEvents"].empty());
}

TEST(FlightRecorder, MisuseGetsClearErrors) {
  gort::testing::run([] {
    gort::trace::FlightRecorder a, b;
    EXPECT_EQ(a.snapshot("json").status().message(), "trace: flight recorder is not running");
    ASSERT_TRUE(a.start().ok());
    EXPECT_EQ(a.start().message(), "trace: flight recorder already started");
    EXPECT_EQ(b.start().message(), "trace: another flight recorder is already running");
    EXPECT_EQ(a.snapshot("xml").status().message(), "trace: unknown format \"xml\" (json, perfetto or gtrace)");
    gort::trace::FlightRecorderConfig bad;
    bad.max_bytes = 0;
    EXPECT_FALSE(gort::trace::FlightRecorder(bad).start().ok());
    a.stop();
    EXPECT_TRUE(b.start().ok());
  });
}

// GORT_FLIGHTREC runs a recorder for the whole run, and SIGUSR2 writes a
// snapshot into its directory: Perfetto's format, or the raw events where
// libgort_encode cannot be loaded (this test program run by hand, without
// the build root on its library path).
TEST(FlightRecorder, EnvironmentAndSignalWriteASnapshot) {
  std::string dir = fresh_dir("env");
  GORT_EXPECT_SUBPROCESS_OK(60, [&] {
    setenv("GORT_FLIGHTREC", dir.c_str(), 1);
    gort::run([&] {
      ping_pong(100);
      raise(SIGUSR2);
      for (int i = 0; i < 500 && only_file(dir, "-1.perfetto-trace").empty() && only_file(dir, "-1.gtrace").empty();
           i++) {
        gort::sleep(absl::Milliseconds(10));
      }
    });
    unsetenv("GORT_FLIGHTREC");
  });
  std::string snap = only_file(dir, "-1.perfetto-trace");
  if (snap.empty()) snap = only_file(dir, "-1.gtrace");
  ASSERT_FALSE(snap.empty()) << "no snapshot in " << dir;
  EXPECT_GT(read_file(snap).size(), 100u);
}

// In a death test's child: a flight recorder that runs until the process
// dies, dumping into dir.
void record_until_death(const std::string& dir) {
  gort::trace::FlightRecorderConfig cfg;
  cfg.dump_dir = dir;
  static gort::trace::FlightRecorder fr(cfg);
  if (!fr.start().ok()) _exit(3);
}

// A deadlock is a fatal error: the recorder's ring goes to a file the
// report names, and another process converts it.
TEST(FlightRecorderDeathTest, DeadlockDumpsTheRing) {
  std::string dir = fresh_dir("deadlock");
  EXPECT_EXIT(
      {
        gort::run([&] {
          record_until_death(dir);
          ping_pong(100);
          auto never = gort::make_chan<int>();
          (void)never.recv();
        });
      },
      ::testing::ExitedWithCode(2),
      "all goroutines are asleep - deadlock!\nflight recorder: the last events before this were written to "
      ".*gort-flight-[0-9]+\\.gtrace");
  std::string dump = only_file(dir, ".gtrace");
  ASSERT_FALSE(dump.empty()) << "no dump in " << dir;
  absl::Status s = gort::trace::convert(dump, dir + "/out.json");
  ASSERT_TRUE(s.ok()) << s;
  json doc = json::parse(read_file(dir + "/out.json"));
  bool main_blocked = false;
  std::map<int, std::string> tracks;
  for (const json& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") tracks[e["tid"]] = e["args"]["name"];
  }
  for (const json& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.value("name", "") == "chan receive" &&
        tracks[e["tid"]].rfind("G1", 0) == 0) {
      main_blocked = true;
    }
  }
  EXPECT_TRUE(main_blocked) << "main's last wait is not in the dump";
}

[[gnu::noinline]] int recurse(int n) {
  volatile char pad[512];
  pad[0] = static_cast<char>(n);
  return recurse(n + 1) + pad[0];
}

// A stack overflow's report comes from a signal handler: the ring is
// written raw there, with nothing allocated.
TEST(FlightRecorderDeathTest, StackOverflowDumpsTheRing) {
  std::string dir = fresh_dir("overflow");
  EXPECT_EXIT(
      {
        gort::run([&] {
          record_until_death(dir);
          ping_pong(100);
          gort::WaitGroup wg;
          wg.add(1);
          gort::go([&] {
            recurse(0);
            wg.done();
          });
          wg.wait();
        });
      },
      ::testing::ExitedWithCode(2), "flight recorder: the last events before this were written to ");
  std::string dump = only_file(dir, ".gtrace");
  ASSERT_FALSE(dump.empty()) << "no dump in " << dir;
  absl::Status s = gort::trace::convert(dump, dir + "/out.perfetto-trace");
  EXPECT_TRUE(s.ok()) << s;
  s = gort::trace::convert(dump, dir + "/out.json");
  ASSERT_TRUE(s.ok()) << s;
  json doc = json::parse(read_file(dir + "/out.json"));
  EXPECT_GT(doc["traceEvents"].size(), 50u);
}

}  // namespace

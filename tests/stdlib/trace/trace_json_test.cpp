// tests/stdlib/trace/trace_json_test.cpp — the Trace Event Format writer
// (stdlib/trace/trace_json.cpp): its output parsed back with nlohmann/json
// (which refuses malformed JSON and invalid UTF-8), then checked event by
// event: threads per track, phases, times, flows, escaping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "stdlib/encode/model.hpp"
#include "stdlib/trace/trace_json.hpp"

namespace gort::internal {
namespace {

using encode::TraceModel;
using nlohmann::json;

// A process track, two goroutines and a region track under the second
// (listed before its goroutine, with sort indexes that put G2 after G1).
// G1 runs [100, 1000] with a send [200, 300] and an unblock at 250 in it;
// G2 runs [500, 900], caused by G1's run (flow 7).
TraceModel sample_trace() {
  TraceModel m;
  m.process_name = "server";
  m.pid = 2;
  m.start_unix_ns = 1'700'000'000'123'456'789;
  m.tracks = {{1, 0, "server", 0}, {4, 3, "G2 regions", 0}, {3, 1, "G2 worker", 2}, {2, 1, "G1 main", 1}};
  m.slices = {
      {2, 200, 300, "chan send", "goroutine", {{"chan", "0xc000"}}},
      {3, 500, 900, "running", "goroutine", {}, 0, 7},
      {2, 100, 1000, "running", "goroutine", {{"P", "0"}}, 7, 0},
      {4, 12'345, 12'346, "region", "region"},
  };
  m.instants = {{2, 250, "unblock", "goroutine", {{"target", "G2"}}}};
  return m;
}

struct Parsed {
  json doc;
  std::map<uint64_t, int64_t> tid;  // by track uuid, from thread_name
  std::vector<json> events;         // not metadata
};

Parsed parse(const TraceModel& m) {
  Parsed p;
  const std::string text = encode_trace_json(m);
  p.doc = json::parse(text);  // throws (a test failure) on malformed JSON
  std::map<std::string, uint64_t> uuid_of_name;
  for (const auto& t : m.tracks) uuid_of_name[t.name] = t.uuid;
  for (const json& e : p.doc.at("traceEvents")) {
    if (e.at("ph") == "M") {
      if (e.at("name") == "thread_name") {
        const auto name = e.at("args").at("name").get<std::string>();
        const uint64_t uuid = uuid_of_name.count(name) ? uuid_of_name[name] : std::stoull(name.substr(6));
        p.tid[uuid] = e.at("tid").get<int64_t>();
      }
    } else {
      p.events.push_back(e);
    }
  }
  return p;
}

TEST(TraceJson, ObjectFormWithProcessAndOneThreadPerTrack) {
  const TraceModel m = sample_trace();
  Parsed p = parse(m);
  EXPECT_EQ(p.doc.at("displayTimeUnit"), "ns");
  EXPECT_EQ(p.doc.at("otherData").at("start_unix_ns"), "1700000000123456789");
  EXPECT_EQ(p.doc.at("otherData").at("process_name"), "server");

  ASSERT_EQ(p.tid.size(), 4u);
  std::set<int64_t> tids;
  for (const auto& [uuid, tid] : p.tid) {
    tids.insert(tid);
    EXPECT_NE(tid, m.pid) << "the pid's tid is the main thread's";
  }
  EXPECT_EQ(tids.size(), 4u) << "one tid per track";

  std::map<int64_t, int64_t> sort_index;  // by tid
  bool named = false;
  for (const json& e : p.doc.at("traceEvents")) {
    EXPECT_EQ(e.at("pid"), m.pid);
    if (e.at("ph") != "M") continue;
    if (e.at("name") == "process_name") {
      named = true;
      EXPECT_EQ(e.at("args").at("name"), "server");
    }
    if (e.at("name") == "thread_sort_index") {
      sort_index[e.at("tid").get<int64_t>()] = e.at("args").at("sort_index").get<int64_t>();
    }
  }
  EXPECT_TRUE(named);
  // Depth-first: the process, G1, G2, then G2's regions under it.
  ASSERT_EQ(sort_index.size(), 4u);
  EXPECT_LT(sort_index[p.tid[1]], sort_index[p.tid[2]]);
  EXPECT_LT(sort_index[p.tid[2]], sort_index[p.tid[3]]);
  EXPECT_LT(sort_index[p.tid[3]], sort_index[p.tid[4]]);
}

TEST(TraceJson, SlicesAreCompleteEventsInMicroseconds) {
  const TraceModel m = sample_trace();
  const std::string text = encode_trace_json(m);
  // ns as three decimals of a microsecond, exactly.
  EXPECT_NE(text.find("\"ts\":12.345,\"dur\":0.001"), std::string::npos) << text;
  EXPECT_NE(text.find("\"ts\":0.100,\"dur\":0.900"), std::string::npos) << text;

  Parsed p = parse(m);
  std::set<std::tuple<int64_t, std::string, int64_t, int64_t>> slices;  // tid, name, ts, dur (ns)
  double last_ts = -1;
  for (const json& e : p.events) {
    if (e.at("ph") == "s" || e.at("ph") == "f") continue;
    const double ts = e.at("ts").get<double>();
    EXPECT_GE(ts, last_ts) << "slices and instants in time order";
    last_ts = ts;
    if (e.at("ph") != "X") continue;
    slices.emplace(e.at("tid").get<int64_t>(), e.at("name").get<std::string>(), std::llround(ts * 1000),
                   std::llround(e.at("dur").get<double>() * 1000));
    if (e.at("name") == "chan send") {
      EXPECT_EQ(e.at("cat"), "goroutine");
      EXPECT_EQ(e.at("args"), json({{"chan", "0xc000"}}));
    }
  }
  const std::set<std::tuple<int64_t, std::string, int64_t, int64_t>> want = {
      {p.tid[2], "running", 100, 900}, {p.tid[2], "chan send", 200, 100},
      {p.tid[3], "running", 500, 400}, {p.tid[4], "region", 12'345, 1},
  };
  EXPECT_EQ(slices, want);
}

TEST(TraceJson, InstantsAreThreadScoped) {
  Parsed p = parse(sample_trace());
  int n = 0;
  for (const json& e : p.events) {
    if (e.at("ph") != "i") continue;
    n++;
    EXPECT_EQ(e.at("s"), "t");
    EXPECT_EQ(e.at("name"), "unblock");
    EXPECT_EQ(e.at("tid"), p.tid[2]);
    EXPECT_EQ(e.at("ts"), 0.25);
    EXPECT_EQ(e.at("args").at("target"), "G2");
  }
  EXPECT_EQ(n, 1);
}

TEST(TraceJson, FlowsStartAtTheSourceAndEndAtTheDestination) {
  Parsed p = parse(sample_trace());
  std::vector<json> starts, ends;
  for (size_t i = 0; i < p.events.size(); i++) {
    const json& e = p.events[i];
    if (e.at("ph") != "s" && e.at("ph") != "f") continue;
    (e.at("ph") == "s" ? starts : ends).push_back(e);
    // Right after its slice, so that the viewer binds it to that slice.
    ASSERT_GT(i, 0u);
    EXPECT_EQ(p.events[i - 1].at("ph"), "X");
    EXPECT_EQ(p.events[i - 1].at("tid"), e.at("tid"));
    EXPECT_EQ(p.events[i - 1].at("ts"), e.at("ts"));
  }
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(starts[0].at("id"), "0x7");
  EXPECT_EQ(ends[0].at("id"), "0x7");
  EXPECT_EQ(starts[0].at("tid"), p.tid[2]);
  EXPECT_EQ(starts[0].at("ts"), 0.1);
  EXPECT_EQ(ends[0].at("tid"), p.tid[3]);
  EXPECT_EQ(ends[0].at("ts"), 0.5);
  EXPECT_EQ(ends[0].at("bp"), "e");
  EXPECT_FALSE(starts[0].contains("bp"));
  EXPECT_EQ(starts[0].at("name"), ends[0].at("name"));
  EXPECT_EQ(starts[0].at("cat"), ends[0].at("cat"));
}

TEST(TraceJson, EscapesStringsAndReplacesInvalidUtf8) {
  TraceModel m = sample_trace();
  // Quotes, a backslash, a newline, a control character, valid UTF-8 (é,
  // €, 😀), then invalid: a lone continuation byte, an overlong '/', a
  // surrogate, a sequence cut short at the end.
  m.slices[0].name = "say \"hi\"\\\nbye\x01 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \x80|\xc0\xaf|\xed\xa0\x80|\xe2\x82";
  m.slices[0].args = {{"k\"ey", "v\talue"}};
  const std::string text = encode_trace_json(m);
  EXPECT_NE(text.find("say \\\"hi\\\"\\\\\\nbye\\u0001 "), std::string::npos) << text;
  Parsed p = parse(m);
  const std::string r = "\xef\xbf\xbd";  // U+FFFD
  bool found = false;
  for (const json& e : p.events) {
    if (e.at("ph") != "X" || e.at("tid") != p.tid[2] || e.at("ts") != 0.2) continue;
    found = true;
    EXPECT_EQ(e.at("name").get<std::string>(),
              "say \"hi\"\\\nbye\x01 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 " + r + "|" + r + r + "|" + r + r + r + "|" +
                  r + r);
    EXPECT_EQ(e.at("args").at("k\"ey"), "v\talue");
  }
  EXPECT_TRUE(found);
}

TEST(TraceJson, ToleratesWhatTheProtobufEncoderRefuses) {
  TraceModel m = sample_trace();
  m.slices[0].end_ns = 150;  // ends before it begins: duration 0
  m.instants.push_back({99, 10, "stray"});  // an unlisted track: a thread of its own
  Parsed p = parse(m);
  ASSERT_EQ(p.tid.count(99), 1u);
  bool stray = false, clamped = false;
  for (const json& e : p.events) {
    if (e.at("name") == "stray") stray = e.at("tid") == p.tid[99];
    if (e.at("name") == "chan send") clamped = e.at("dur") == 0.0;
  }
  EXPECT_TRUE(stray);
  EXPECT_TRUE(clamped);
}

TEST(TraceJson, EmptyModelIsAValidTrace) {
  json doc = json::parse(encode_trace_json(TraceModel{}));
  ASSERT_EQ(doc.at("traceEvents").size(), 1u);  // the process's name
  EXPECT_EQ(doc.at("traceEvents")[0].at("name"), "process_name");
}

}  // namespace
}  // namespace gort::internal

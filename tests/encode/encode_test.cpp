// tests/encode/encode_test.cpp — libgort_encode's encoders
// (stdlib/encode/perfetto_encode.cpp, pprof_encode.cpp), reached as libgort
// reaches them (load_encoders: this program links the library, so the weak
// reference finds it), their output decoded back with the classes protoc
// generated from the same schemas, and what each refuses.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "stdlib/encode/loader.hpp"
#include "stdlib/encode/model.hpp"
#include "perfetto_trace.pb.h"
#include "profile.pb.h"

namespace gort::encode {
namespace {

namespace pp = perfetto::protos;
namespace pb = perftools::profiles;

// The table; without one, a failure and a table that refuses everything.
const Encoders& encoders() {
  static const Encoders missing{
      .version = 1,
      .perfetto = [](const TraceModel&, std::string*, std::string* err) { return (*err = "no encoders", false); },
      .pprof = [](const ProfileModel&, bool, std::string*, std::string* err) { return (*err = "no encoders", false); },
  };
  std::string err;
  const Encoders* e = load_encoders(&err);
  if (e == nullptr) ADD_FAILURE() << err;
  return e != nullptr ? *e : missing;
}

TEST(Encoders, LinkedLibraryIsFoundThroughTheWeakReference) {
  std::string err;
  const Encoders* e = load_encoders(&err);
  ASSERT_NE(e, nullptr) << err;
  EXPECT_EQ(e, gort_encoders_v1());
  EXPECT_EQ(e->version, 1u);
  EXPECT_NE(e->perfetto, nullptr);
  EXPECT_NE(e->pprof, nullptr);
}

// ---- Perfetto ----

// A process track and two goroutines. G1 runs [100, 1000] with a channel
// send [200, 300] in it and an unblock at 250 (an instant); G2 runs
// [500, 900], caused by G1's run (flow 7), with two regions in it, the first
// beginning with the run and the second ending with it. Listed out of
// order: the encoder sorts.
TraceModel sample_trace() {
  TraceModel m;
  m.process_name = "server";
  m.pid = 4242;
  m.start_unix_ns = 1'700'000'000'000'000'000;
  m.tracks = {{1, 0, "server", 0}, {3, 1, "G2 worker", 2}, {2, 1, "G1 main", 1}};
  m.slices = {
      {3, 600, 900, "region b", "region"},
      {2, 200, 300, "chan send", "goroutine", {{"chan", "0xc000"}}},
      {3, 500, 900, "running", "goroutine", {}, 0, 7},
      {2, 100, 1000, "running", "goroutine", {{"P", "0"}}, 7, 0},
      {3, 500, 600, "region a", "region"},
  };
  m.instants = {{2, 250, "unblock", "goroutine", {{"target", "G2"}}}, {1, 0, "trace start", "proc"}};
  return m;
}

pp::Trace encode_trace(const TraceModel& m) {
  std::string out, err;
  EXPECT_TRUE(encoders().perfetto(m, &out, &err)) << err;
  pp::Trace t;
  EXPECT_TRUE(t.ParseFromString(out));
  return t;
}

TEST(Perfetto, TracksComeFirstWithTheProcessAsTheirParent) {
  pp::Trace t = encode_trace(sample_trace());
  ASSERT_GE(t.packet_size(), 3);
  EXPECT_EQ(t.packet(0).sequence_flags() & pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED,
            pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
  std::map<uint64_t, pp::TrackDescriptor> tracks;
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(t.packet(i).has_track_descriptor()) << i;
    tracks[t.packet(i).track_descriptor().uuid()] = t.packet(i).track_descriptor();
  }
  ASSERT_EQ(tracks.size(), 3u);
  EXPECT_EQ(t.packet(0).track_descriptor().uuid(), 1u);  // the parent first
  const pp::TrackDescriptor& root = tracks[1];
  EXPECT_TRUE(root.has_process());
  EXPECT_EQ(root.process().pid(), 4242);
  EXPECT_EQ(root.process().process_name(), "server");
  EXPECT_FALSE(root.has_parent_uuid());
  EXPECT_EQ(root.child_ordering(), pp::TrackDescriptor::EXPLICIT);
  EXPECT_EQ(tracks[2].parent_uuid(), 1u);
  EXPECT_EQ(tracks[2].name(), "G1 main");
  EXPECT_EQ(tracks[2].sibling_order_rank(), 1);
  EXPECT_EQ(tracks[3].parent_uuid(), 1u);
  EXPECT_EQ(tracks[3].name(), "G2 worker");
  EXPECT_EQ(tracks[3].sibling_order_rank(), 2);
  EXPECT_EQ(tracks[3].sibling_merge_behavior(), pp::TrackDescriptor::SIBLING_MERGE_BEHAVIOR_NONE);
  EXPECT_FALSE(tracks[3].has_process());
  for (const auto& p : t.packet()) {
    EXPECT_EQ(p.trusted_packet_sequence_id(), 1u);
  }
}

TEST(Perfetto, SlicesNestPerTrackInTimeOrder) {
  pp::Trace t = encode_trace(sample_trace());
  // Replays each track's BEGIN/END events against a stack, as Perfetto does.
  std::map<uint64_t, std::vector<std::pair<std::string, uint64_t>>> open;
  std::set<std::tuple<uint64_t, std::string, uint64_t, uint64_t, size_t>> slices;  // track, name, begin, end, depth
  uint64_t last_ts = 0;
  for (const auto& p : t.packet()) {
    if (!p.has_track_event()) continue;
    EXPECT_GE(p.timestamp(), last_ts);
    last_ts = p.timestamp();
    const pp::TrackEvent& e = p.track_event();
    auto& stack = open[e.track_uuid()];
    if (e.type() == pp::TrackEvent::TYPE_SLICE_BEGIN) {
      stack.emplace_back(e.name(), p.timestamp());
    } else if (e.type() == pp::TrackEvent::TYPE_SLICE_END) {
      ASSERT_FALSE(stack.empty()) << "END without BEGIN on track " << e.track_uuid();
      slices.emplace(e.track_uuid(), stack.back().first, stack.back().second, p.timestamp(), stack.size() - 1);
      stack.pop_back();
    }
  }
  for (const auto& [track, stack] : open) EXPECT_TRUE(stack.empty()) << "track " << track;
  const std::set<std::tuple<uint64_t, std::string, uint64_t, uint64_t, size_t>> want = {
      {2, "running", 100, 1000, 0}, {2, "chan send", 200, 300, 1}, {3, "running", 500, 900, 0},
      {3, "region a", 500, 600, 1}, {3, "region b", 600, 900, 1},
  };
  EXPECT_EQ(slices, want);
}

TEST(Perfetto, FlowsInstantsCategoriesAndArgs) {
  pp::Trace t = encode_trace(sample_trace());
  int flows_out = 0, flows_in = 0, instants = 0;
  for (const auto& p : t.packet()) {
    if (!p.has_track_event()) continue;
    const pp::TrackEvent& e = p.track_event();
    if (e.flow_ids_size() > 0) {
      flows_out++;
      EXPECT_EQ(e.flow_ids(0), 7u);
      EXPECT_EQ(e.track_uuid(), 2u);
      EXPECT_EQ(e.type(), pp::TrackEvent::TYPE_SLICE_BEGIN);
      EXPECT_EQ(p.timestamp(), 100u);
      ASSERT_EQ(e.debug_annotations_size(), 1);
      EXPECT_EQ(e.debug_annotations(0).name(), "P");
      EXPECT_EQ(e.debug_annotations(0).string_value(), "0");
    }
    if (e.terminating_flow_ids_size() > 0) {
      flows_in++;
      EXPECT_EQ(e.terminating_flow_ids(0), 7u);
      EXPECT_EQ(e.track_uuid(), 3u);
      EXPECT_EQ(e.name(), "running");
      EXPECT_EQ(p.timestamp(), 500u);
    }
    if (e.type() == pp::TrackEvent::TYPE_INSTANT) {
      instants++;
      if (e.name() == "unblock") {
        EXPECT_EQ(e.track_uuid(), 2u);
        EXPECT_EQ(p.timestamp(), 250u);
        ASSERT_EQ(e.categories_size(), 1);
        EXPECT_EQ(e.categories(0), "goroutine");
        ASSERT_EQ(e.debug_annotations_size(), 1);
        EXPECT_EQ(e.debug_annotations(0).name(), "target");
        EXPECT_EQ(e.debug_annotations(0).string_value(), "G2");
      } else {
        EXPECT_EQ(e.name(), "trace start");
        EXPECT_EQ(e.track_uuid(), 1u);
      }
    }
    if (e.type() == pp::TrackEvent::TYPE_SLICE_BEGIN && e.name() == "region a") {
      ASSERT_EQ(e.categories_size(), 1);
      EXPECT_EQ(e.categories(0), "region");
    }
  }
  EXPECT_EQ(flows_out, 1);
  EXPECT_EQ(flows_in, 1);
  EXPECT_EQ(instants, 2);
}

TEST(Perfetto, EmptyModelIsAnEmptyTrace) {
  std::string out = "junk", err;
  EXPECT_TRUE(encoders().perfetto(TraceModel{}, &out, &err)) << err;
  EXPECT_TRUE(out.empty());
}

std::string refused(const TraceModel& m) {
  std::string out, err;
  EXPECT_FALSE(encoders().perfetto(m, &out, &err));
  return err;
}

TEST(Perfetto, RefusesWhatItCannotDraw) {
  TraceModel m = sample_trace();
  m.slices[1].end_ns = 150;  // "chan send" [200, 150]
  EXPECT_NE(refused(m).find("slice \"chan send\" on track 2 ends at 150 ns, before it begins (200 ns)"),
            std::string::npos)
      << refused(m);

  m = sample_trace();
  m.slices[1].end_ns = 1500;  // starts inside "running" [100, 1000], ends after it
  EXPECT_NE(refused(m).find("must nest"), std::string::npos) << refused(m);

  m = sample_trace();
  m.slices[0].track = 99;
  EXPECT_NE(refused(m).find("on track 99: no such track"), std::string::npos) << refused(m);

  m = sample_trace();
  m.instants[0].track = 99;
  EXPECT_NE(refused(m).find("no such track"), std::string::npos) << refused(m);

  m = sample_trace();
  m.tracks[2].uuid = 3;
  EXPECT_NE(refused(m).find("two tracks have uuid 3"), std::string::npos) << refused(m);

  m = sample_trace();
  m.tracks[1].parent_uuid = 8;
  EXPECT_NE(refused(m).find("parent 8"), std::string::npos) << refused(m);

  m = sample_trace();
  m.tracks.push_back({10, 11, "a", 0});
  m.tracks.push_back({11, 10, "b", 0});
  EXPECT_NE(refused(m).find("its own ancestor"), std::string::npos) << refused(m);

  m = sample_trace();
  m.instants[0].ts_ns = -1;
  EXPECT_NE(refused(m).find("before the trace's start"), std::string::npos) << refused(m);
}

// ---- pprof ----

// Two samples over three locations: the first location has an inlined
// call (leaf inlined into caller), the second is in the same caller (one
// Function for both), the third has no mapping.
ProfileModel sample_profile() {
  ProfileModel p;
  p.sample_types = {{"contentions", "count"}, {"delay", "nanoseconds"}};
  p.mappings = {{0x400000, 0x500000, 0x1000, "/usr/bin/server", "abc123"}};
  p.locations = {
      {0x401000, 1, {{"leaf()", "_Z4leafv", "a.cpp", 10}, {"caller()", "_Z6callerv", "a.cpp", 20}}},
      {0x402000, 1, {{"caller()", "_Z6callerv", "a.cpp", 25}}},
      {0x7f0000, 0, {{"main", "main", "main.cpp", 5}}},
  };
  p.samples = {
      {{1, 3}, {1, 100}, {{"request", "GET /"}, {"user", "ann"}}},
      {{2, 3}, {2, 300}, {}},
  };
  p.time_unix_ns = 1'700'000'000'000'000'000;
  p.duration_ns = 5'000'000'000;
  p.period_type = {"contentions", "count"};
  p.period = 1;
  p.comments = {"gort test"};
  p.default_sample_type = "delay";
  return p;
}

class Pprof : public ::testing::TestWithParam<bool> {
 protected:
  pb::Profile encode(const ProfileModel& m) {
    std::string out, err;
    EXPECT_TRUE(encoders().pprof(m, GetParam(), &out, &err)) << err;
    pb::Profile p;
    if (GetParam()) {
      EXPECT_TRUE(out.size() > 2 && out[0] == '\x1f' && out[1] == '\x8b') << "not gzip";
      google::protobuf::io::ArrayInputStream raw(out.data(), static_cast<int>(out.size()));
      google::protobuf::io::GzipInputStream unzipped(&raw);
      EXPECT_TRUE(p.ParseFromZeroCopyStream(&unzipped));
    } else {
      EXPECT_TRUE(p.ParseFromString(out));
    }
    return p;
  }
};

INSTANTIATE_TEST_SUITE_P(Gzip, Pprof, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Gzipped" : "Plain"; });

TEST_P(Pprof, StringsSamplesAndLabelsResolve) {
  pb::Profile p = encode(sample_profile());
  auto str = [&p](int64_t i) {
    EXPECT_GE(i, 0);
    EXPECT_LT(i, p.string_table_size());
    return p.string_table(static_cast<int>(i));
  };
  ASSERT_GT(p.string_table_size(), 0);
  EXPECT_EQ(p.string_table(0), "");
  std::set<std::string> distinct(p.string_table().begin(), p.string_table().end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(p.string_table_size())) << "a string stored twice";

  ASSERT_EQ(p.sample_type_size(), 2);
  EXPECT_EQ(str(p.sample_type(0).type()), "contentions");
  EXPECT_EQ(str(p.sample_type(1).unit()), "nanoseconds");
  ASSERT_EQ(p.sample_size(), 2);
  EXPECT_EQ(std::vector<uint64_t>(p.sample(0).location_id().begin(), p.sample(0).location_id().end()),
            (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(std::vector<int64_t>(p.sample(1).value().begin(), p.sample(1).value().end()),
            (std::vector<int64_t>{2, 300}));
  ASSERT_EQ(p.sample(0).label_size(), 2);
  EXPECT_EQ(str(p.sample(0).label(0).key()), "request");
  EXPECT_EQ(str(p.sample(0).label(0).str()), "GET /");
  EXPECT_EQ(str(p.sample(0).label(1).key()), "user");
  EXPECT_EQ(str(p.sample(0).label(1).str()), "ann");
  EXPECT_EQ(p.sample(1).label_size(), 0);

  EXPECT_EQ(p.time_nanos(), 1'700'000'000'000'000'000);
  EXPECT_EQ(p.duration_nanos(), 5'000'000'000);
  EXPECT_EQ(str(p.period_type().type()), "contentions");
  EXPECT_EQ(p.period(), 1);
  ASSERT_EQ(p.comment_size(), 1);
  EXPECT_EQ(str(p.comment(0)), "gort test");
  EXPECT_EQ(str(p.default_sample_type()), "delay");
}

TEST_P(Pprof, LocationsFunctionsAndMappings) {
  pb::Profile p = encode(sample_profile());
  auto str = [&p](int64_t i) { return p.string_table(static_cast<int>(i)); };
  std::map<uint64_t, pb::Function> functions;
  for (const auto& f : p.function()) {
    EXPECT_NE(f.id(), 0u);
    EXPECT_TRUE(functions.emplace(f.id(), f).second) << "two functions with id " << f.id();
  }
  EXPECT_EQ(functions.size(), 3u) << "leaf, caller (once), main";
  auto function_of = [&](const pb::Line& l) { return functions.at(l.function_id()); };

  ASSERT_EQ(p.location_size(), 3);
  const pb::Location& inlined = p.location(0);
  EXPECT_EQ(inlined.id(), 1u);
  EXPECT_EQ(inlined.mapping_id(), 1u);
  EXPECT_EQ(inlined.address(), 0x401000u);
  ASSERT_EQ(inlined.line_size(), 2);
  EXPECT_EQ(str(function_of(inlined.line(0)).name()), "leaf()");  // innermost first
  EXPECT_EQ(str(function_of(inlined.line(0)).system_name()), "_Z4leafv");
  EXPECT_EQ(str(function_of(inlined.line(0)).filename()), "a.cpp");
  EXPECT_EQ(inlined.line(0).line(), 10);
  EXPECT_EQ(str(function_of(inlined.line(1)).name()), "caller()");
  EXPECT_EQ(p.location(1).id(), 2u);
  EXPECT_EQ(p.location(1).line(0).function_id(), inlined.line(1).function_id());
  EXPECT_EQ(p.location(1).line(0).line(), 25);
  EXPECT_EQ(p.location(2).id(), 3u);
  EXPECT_EQ(p.location(2).mapping_id(), 0u);
  EXPECT_EQ(str(function_of(p.location(2).line(0)).name()), "main");

  ASSERT_EQ(p.mapping_size(), 1);
  const pb::Mapping& m = p.mapping(0);
  EXPECT_EQ(m.id(), 1u);
  EXPECT_EQ(m.memory_start(), 0x400000u);
  EXPECT_EQ(m.memory_limit(), 0x500000u);
  EXPECT_EQ(m.file_offset(), 0x1000u);
  EXPECT_EQ(str(m.filename()), "/usr/bin/server");
  EXPECT_EQ(str(m.build_id()), "abc123");
  EXPECT_TRUE(m.has_functions());
  EXPECT_TRUE(m.has_line_numbers());
  EXPECT_TRUE(m.has_inline_frames());
}

TEST_P(Pprof, RefusesIdsOutOfRange) {
  auto refused = [](const ProfileModel& m) {
    std::string out, err;
    EXPECT_FALSE(encoders().pprof(m, GetParam(), &out, &err));
    return err;
  };
  ProfileModel m = sample_profile();
  m.samples[1].locations = {2, 4};
  EXPECT_NE(refused(m).find("sample 1 names location 4, out of range (ids are 1 to 3)"), std::string::npos)
      << refused(m);
  m.samples[1].locations = {0};
  EXPECT_NE(refused(m).find("location 0, out of range"), std::string::npos) << refused(m);

  m = sample_profile();
  m.locations[2].mapping = 2;
  EXPECT_NE(refused(m).find("location 3 names mapping 2, out of range"), std::string::npos) << refused(m);

  m = sample_profile();
  m.samples[0].values = {1};
  EXPECT_NE(refused(m).find("sample 0 has 1 values, the profile has 2 sample types"), std::string::npos)
      << refused(m);
}

}  // namespace
}  // namespace gort::encode

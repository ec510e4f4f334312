// stdlib/trace/trace_build.cpp — events to tracks, slices and flows.
//
// Each goroutine's track is a sequence of slices that never overlap:
// "runnable" (created or woken, waiting for a P), "running" (on a P),
// blocked (named by its wait reason) and "syscall". A goroutine whose
// first event is not its creation (it existed before the trace, or before
// the flight recorder's window) starts in the state its first event
// implies, or the one a kGoStatus event gives. An unblock draws an arrow
// from the waker (a goroutine, the poller, a timer) to the run it caused;
// a creation, one from the creator to the first run.
#include <map>

#include "gmp/g.hpp"
#include "stdlib/trace/trace_decode.hpp"

namespace gort::internal {

namespace {

using encode::Labels;
using encode::TraceInstant;
using encode::TraceModel;
using encode::TraceSlice;
using encode::TraceTrack;

constexpr uint64_t kRoot = 1;
constexpr uint64_t kGoTrack = uint64_t{1} << 40;
constexpr uint64_t kRegionTrack = uint64_t{2} << 40;
constexpr uint64_t kProcTrack = uint64_t{3} << 40;
constexpr uint64_t kMTrack = uint64_t{4} << 40;
constexpr uint64_t kTaskTrack = uint64_t{5} << 40;
constexpr uint64_t kNoM = 0xffffff;

enum class St { kUnknown, kRunnable, kRunning, kBlocked, kSyscall, kDead };

struct Gor {
  St st = St::kUnknown;
  int64_t since = 0;
  std::string blocked;  // the open blocked slice's name
  Labels blocked_args;
  int64_t p = -1;
  uint64_t flow_in = 0;  // for the next running slice
  uint64_t gopc = 0;
  int64_t parent = 0;
  bool named = false;
  std::vector<std::pair<std::string, int64_t>> regions;  // open, innermost last
};

const char* wait_reason_name(int64_t r) {
  if (r < 0 || r >= static_cast<int64_t>(WaitReason::kNumWaitReasons)) return "blocked";
  const char* s = kWaitReasonStrings[r];
  return s != nullptr && *s != 0 ? s : "blocked";
}

class Builder {
 public:
  Builder(const DecodedTrace& t, const PcNamer& namer) : t_(t), namer_(namer) {}

  TraceModel build() {
    m_.process_name = t_.name.empty() ? "gort" : t_.name;
    m_.pid = static_cast<int32_t>(t_.header.pid);
    m_.start_unix_ns = t_.header.unix_ns - (t_.header.mono_ns - t_.start_mono_ns);
    m_.tracks.push_back({kRoot, 0, m_.process_name, 0});
    for (const TraceEvent& e : t_.events) {
      end_ = e.ts;
      event(e);
    }
    finish();
    return std::move(m_);
  }

 private:
  Gor& g(int64_t id) {
    auto [it, fresh] = gs_.try_emplace(id);
    if (fresh) track(kGoTrack | static_cast<uint64_t>(id), "G" + std::to_string(id), id);
    return it->second;
  }

  void track(uint64_t uuid, std::string name, int64_t sort, uint64_t parent = kRoot) {
    if (!tracks_.emplace(uuid, m_.tracks.size()).second) return;
    m_.tracks.push_back({uuid, parent, std::move(name), sort});
  }

  uint64_t m_track(int64_t m) {
    uint64_t uuid = kMTrack | (m < 0 ? kNoM : static_cast<uint64_t>(m));
    track(uuid, m < 0 ? "threads without an M" : "M" + std::to_string(m), 2'000'000'000 + (m < 0 ? 0 : m));
    return uuid;
  }

  uint64_t p_track(int64_t p) {
    uint64_t uuid = kProcTrack | static_cast<uint64_t>(p);
    track(uuid, "P" + std::to_string(p), 1'000'000'000 + p);
    return uuid;
  }

  void name(int64_t id, Gor& gr) {
    if (gr.named || gr.gopc == 0) return;
    gr.named = true;
    std::string n = "G" + std::to_string(id);
    if (id == 1 && gr.parent == 0) {
      n += " (main)";  // made by gort::run for its body
    } else if (std::string site = namer_ ? namer_(gr.gopc, true) : ""; !site.empty()) {
      n += " " + site;
    }
    m_.tracks[tracks_[kGoTrack | static_cast<uint64_t>(id)]].name = n;
  }

  void slice(uint64_t track, int64_t b, int64_t e, std::string name, const char* cat, Labels args = {},
             uint64_t flow_in = 0) {
    if (e < b) e = b;
    TraceSlice s;
    s.track = track;
    s.begin_ns = b;
    s.end_ns = e;
    s.name = std::move(name);
    s.category = cat;
    s.args = std::move(args);
    s.flow_in = flow_in;
    m_.slices.push_back(std::move(s));
  }

  void instant(uint64_t track, int64_t ts, std::string name, const char* cat, Labels args = {},
               uint64_t flow_out = 0) {
    TraceInstant i;
    i.track = track;
    i.ts_ns = ts;
    i.name = std::move(name);
    i.category = cat;
    i.args = std::move(args);
    i.flow_out = flow_out;
    m_.instants.push_back(std::move(i));
  }

  // Ends whatever slice the goroutine is in at ts.
  void close(int64_t id, Gor& gr, int64_t ts) {
    uint64_t tr = kGoTrack | static_cast<uint64_t>(id);
    switch (gr.st) {
      case St::kRunnable: slice(tr, gr.since, ts, "runnable", "goroutine"); break;
      case St::kRunning: {
        Labels args;
        if (gr.p >= 0) args.emplace_back("P", std::to_string(gr.p));
        slice(tr, gr.since, ts, "running", "goroutine", std::move(args), std::exchange(gr.flow_in, 0));
        if (gr.p >= 0) {
          slice(p_track(gr.p), gr.since, ts, "G" + std::to_string(id), "proc");
          if (running_on_[gr.p] == id) running_on_.erase(gr.p);
        }
        break;
      }
      case St::kBlocked: slice(tr, gr.since, ts, gr.blocked, "blocked", std::move(gr.blocked_args)); break;
      case St::kSyscall: slice(tr, gr.since, ts, "syscall", "syscall"); break;
      default: break;
    }
    gr.blocked_args.clear();
    gr.since = ts;
  }

  void run(int64_t id, Gor& gr, int64_t ts, int64_t p) {
    close(id, gr, ts);
    if (p >= 0) {
      // A P runs one goroutine: one still open there lost its stop.
      auto it = running_on_.find(p);
      if (it != running_on_.end() && it->second != id) {
        Gor& other = g(it->second);
        close(it->second, other, ts);
        other.st = St::kUnknown;
      }
      running_on_[p] = id;
    }
    gr.st = St::kRunning;
    gr.p = p;
  }

  Labels stack_args(const std::vector<uint64_t>& stack) {
    Labels args;
    if (!namer_) return args;
    std::string frames;
    bool first = true;
    for (uint64_t pc : stack) {
      std::string f = namer_(pc, true);
      if (f.empty()) continue;
      if (!first) frames += "\n";
      frames += f;
      first = false;
    }
    if (!frames.empty()) args.emplace_back("stack", frames);
    return args;
  }

  void event(const TraceEvent& e) {
    switch (e.kind) {
      case TraceEv::kMStart:
        instant(m_track(e.m), e.ts, "M start", "machine", {{"tid", std::to_string(e.a[0])}});
        break;
      case TraceEv::kProcStart:
      case TraceEv::kProcStop:
        instant(p_track(e.a[0]), e.ts, e.kind == TraceEv::kProcStart ? "P start" : "P stop", "proc",
                {{"M", std::to_string(e.m)}});
        break;
      case TraceEv::kGoCreate: {
        Gor& gr = g(e.a[0]);
        gr.gopc = static_cast<uint64_t>(e.a[2]);
        gr.parent = e.a[1];
        name(e.a[0], gr);
        gr.st = St::kRunnable;
        gr.since = e.ts;
        gr.regions.clear();
        uint64_t flow = ++flows_;
        uint64_t from = e.a[1] != 0 ? (g(e.a[1]), kGoTrack | static_cast<uint64_t>(e.a[1])) : m_track(e.m);
        instant(from, e.ts, "go G" + std::to_string(e.a[0]), "goroutine", {}, flow);
        gr.flow_in = flow;
        break;
      }
      case TraceEv::kGoStatus: {
        Gor& gr = g(e.a[0]);
        if (gr.gopc == 0) gr.gopc = static_cast<uint64_t>(e.a[2]);
        if (gr.parent == 0) gr.parent = e.a[3];
        name(e.a[0], gr);
        if (gr.st != St::kUnknown) break;  // the end of a window: names only
        gr.since = e.ts;
        switch (static_cast<GStatus>(e.a[1])) {
          case GStatus::kRunnable: gr.st = St::kRunnable; break;
          case GStatus::kRunning: gr.st = St::kRunning; break;
          case GStatus::kWaiting:
            gr.st = St::kBlocked;
            gr.blocked = wait_reason_name(e.a[4]);
            break;
          default: break;
        }
        break;
      }
      case TraceEv::kGoStart: {
        Gor& gr = g(e.a[0]);
        run(e.a[0], gr, e.ts, e.a[1]);
        break;
      }
      case TraceEv::kGoSched:
      case TraceEv::kGoPreempt: {
        Gor& gr = g(e.a[0]);
        close(e.a[0], gr, e.ts);
        if (e.kind == TraceEv::kGoPreempt) {
          instant(kGoTrack | static_cast<uint64_t>(e.a[0]), e.ts, "preempted", "goroutine");
        }
        gr.st = St::kRunnable;
        break;
      }
      case TraceEv::kGoBlock: {
        Gor& gr = g(e.a[0]);
        close(e.a[0], gr, e.ts);
        gr.st = St::kBlocked;
        gr.blocked = wait_reason_name(e.a[1]);
        gr.blocked_args = stack_args(e.stack);
        break;
      }
      case TraceEv::kGoUnblock: {
        Gor& gr = g(e.a[0]);
        close(e.a[0], gr, e.ts);
        gr.st = St::kRunnable;
        uint64_t flow = ++flows_;
        gr.flow_in = flow;
        auto src = static_cast<TraceSource>(e.a[1]);
        std::string what = "unblock G" + std::to_string(e.a[0]);
        if (src == TraceSource::kGoroutine && e.a[2] != 0) {
          g(e.a[2]);
          instant(kGoTrack | static_cast<uint64_t>(e.a[2]), e.ts, what, "goroutine", {}, flow);
        } else {
          const char* who = src == TraceSource::kNetpoll ? "netpoll: " : src == TraceSource::kTimer ? "timer: " : "";
          instant(m_track(e.m), e.ts, who + what, src == TraceSource::kNetpoll ? "netpoll" : "timer", {}, flow);
        }
        break;
      }
      case TraceEv::kGoEnd: {
        Gor& gr = g(e.a[0]);
        close(e.a[0], gr, e.ts);
        gr.st = St::kDead;
        end_regions(e.a[0], gr, e.ts);
        break;
      }
      case TraceEv::kGoSyscallBegin: {
        Gor& gr = g(e.a[0]);
        close(e.a[0], gr, e.ts);
        gr.st = St::kSyscall;
        break;
      }
      case TraceEv::kGoSyscallEnd: {
        Gor& gr = g(e.a[0]);
        if (gr.st != St::kSyscall) break;
        close(e.a[0], gr, e.ts);
        gr.st = St::kRunning;  // on its P again, or about to queue (lost it)
        if (e.a[1] != 0) {
          // sysmon handed its P to another M while it was in the call.
          instant(kGoTrack | static_cast<uint64_t>(e.a[0]), e.ts, "lost its P", "syscall");
          gr.p = -1;
        }
        break;
      }
      case TraceEv::kUserTaskBegin: {
        auto& task = tasks_[static_cast<uint64_t>(e.a[0])];
        task = {e.ts, e.s1, static_cast<uint64_t>(e.a[1])};
        track(kTaskTrack | static_cast<uint64_t>(e.a[0]), "task " + std::to_string(e.a[0]) + ": " + e.s1,
              3'000'000'000 + e.a[0]);
        break;
      }
      case TraceEv::kUserTaskEnd: {
        auto it = tasks_.find(static_cast<uint64_t>(e.a[0]));
        if (it == tasks_.end()) break;
        end_task(it->first, it->second, e.ts);
        tasks_.erase(it);
        break;
      }
      case TraceEv::kUserRegionBegin: {
        Gor& gr = g(e.a[0]);
        track(kRegionTrack | static_cast<uint64_t>(e.a[0]), "G" + std::to_string(e.a[0]) + " regions", e.a[0],
              kGoTrack | static_cast<uint64_t>(e.a[0]));
        gr.regions.emplace_back(e.s1, e.ts);
        break;
      }
      case TraceEv::kUserRegionEnd: {
        Gor& gr = g(e.a[0]);
        // Go's regions nest: close back to the innermost of that name.
        for (size_t i = gr.regions.size(); i-- > 0;) {
          if (gr.regions[i].first != e.s1) continue;
          while (gr.regions.size() > i) {
            auto [n, b] = gr.regions.back();
            slice(kRegionTrack | static_cast<uint64_t>(e.a[0]), b, e.ts, n, "region",
                  {{"task", std::to_string(e.a[1])}});
            gr.regions.pop_back();
          }
          break;
        }
        break;
      }
      case TraceEv::kUserLog: {
        g(e.a[0]);
        instant(kGoTrack | static_cast<uint64_t>(e.a[0]), e.ts, e.s1.empty() ? "log" : e.s1, "log",
                {{"message", e.s2}, {"task", std::to_string(e.a[1])}});
        break;
      }
      default: break;
    }
  }

  struct TaskState {
    int64_t begin;
    std::string name;
    uint64_t parent;
  };

  void end_task(uint64_t id, const TaskState& t, int64_t ts) {
    Labels args;
    if (t.parent != 0) args.emplace_back("parent task", std::to_string(t.parent));
    slice(kTaskTrack | id, t.begin, ts, t.name, "task", std::move(args));
  }

  void end_regions(int64_t id, Gor& gr, int64_t ts) {
    while (!gr.regions.empty()) {
      auto [n, b] = gr.regions.back();
      slice(kRegionTrack | static_cast<uint64_t>(id), b, ts, n, "region");
      gr.regions.pop_back();
    }
  }

  void finish() {
    for (auto& [id, gr] : gs_) {
      close(id, gr, end_);
      end_regions(id, gr, end_);
    }
    for (auto& [id, t] : tasks_) end_task(id, t, end_);
  }

  const DecodedTrace& t_;
  const PcNamer& namer_;
  TraceModel m_;
  std::map<int64_t, Gor> gs_;
  std::map<uint64_t, size_t> tracks_;
  std::map<int64_t, int64_t> running_on_;  // P -> goroutine
  std::map<uint64_t, TaskState> tasks_;
  uint64_t flows_ = 0;
  int64_t end_ = 0;
};

}  // namespace

encode::TraceModel build_trace_model(const DecodedTrace& trace, const PcNamer& namer) {
  return Builder(trace, namer).build();
}

}  // namespace gort::internal

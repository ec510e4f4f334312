// gmp/diag/traceback.cpp — see traceback.hpp. Go's traceback.go is the model:
// goroutineheader, traceback2's inner/outer frame limits, showframe's
// hiding of runtime frames, printcreatedby.
#include "gmp/diag/traceback.hpp"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "gmp/bubble.hpp"
#include "gmp/clock_rand.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/switch.hpp"
#include "gmp/diag/symbolize.hpp"
#include "gmp/tls.hpp"
#include "gmp/os/sys.hpp"

namespace gort::internal {

// ---- GORT_TRACEBACK ----

namespace {

std::atomic<uint32_t> g_settings{0};  // level << 2 | all << 1 | crash

constexpr uint32_t encode(TracebackSettings s) {
  return static_cast<uint32_t>(s.level) << 2 | (s.all ? 2u : 0u) | (s.crash ? 1u : 0u);
}

constexpr uint32_t kDefaultSettings = encode({.level = 1});

}  // namespace

void traceback_init() {
  const char* v = std::getenv("GORT_TRACEBACK");
  uint32_t t = kDefaultSettings;
  if (v == nullptr || v[0] == '\0' || std::strcmp(v, "single") == 0) {
    t = kDefaultSettings;
  } else if (std::strcmp(v, "none") == 0) {
    t = encode({.level = 0});
  } else if (std::strcmp(v, "all") == 0) {
    t = encode({.level = 1, .all = true});
  } else if (std::strcmp(v, "system") == 0) {
    t = encode({.level = 2, .all = true});
  } else if (std::strcmp(v, "crash") == 0) {
    t = encode({.level = 2, .all = true, .crash = true});
  } else {
    // Go's numeric form: GOTRACEBACK=N is level N with every goroutine.
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n >= 0 && n <= 2) {
      t = encode({.level = static_cast<int>(n), .all = true});
    } else {
      // Go makes an unknown word level 0, which silently drops every
      // traceback; say so and keep the default instead.
      write_stderr("gort: GORT_TRACEBACK=");
      write_stderr(v);
      write_stderr(": unknown value (want none, single, all, system, crash or 0-2); using single\n");
    }
  }
  g_settings.store(t, std::memory_order_relaxed);
}

TracebackSettings traceback_settings() {
  uint32_t t = g_settings.load(std::memory_order_relaxed);
  if (t == 0 && std::getenv("GORT_TRACEBACK") == nullptr) t = kDefaultSettings;
  TracebackSettings s;
  s.level = static_cast<int>(t >> 2);
  s.all = (t & 2) != 0;
  s.crash = (t & 1) != 0;
  return s;
}

// ---- TraceWriter ----

void TraceWriter::put_bytes(const char* s, size_t n) {
  if (out_ != nullptr) {
    out_->append(s, n);
    return;
  }
  while (n > 0) {
    if (n_ == sizeof buf_) flush();
    size_t k = sizeof buf_ - n_ < n ? sizeof buf_ - n_ : n;
    std::memcpy(buf_ + n_, s, k);
    n_ += k;
    s += k;
    n -= k;
  }
}

void TraceWriter::put(const char* s) { put_bytes(s, std::strlen(s)); }

void TraceWriter::put_int(int64_t v) {
  char buf[24];
  char* p = buf + sizeof buf;
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  do {
    *--p = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) *--p = '-';
  put_bytes(p, static_cast<size_t>(buf + sizeof buf - p));
}

void TraceWriter::put_hex(uint64_t v) {
  char buf[24];
  char* p = buf + sizeof buf;
  do {
    *--p = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  put_bytes(p, static_cast<size_t>(buf + sizeof buf - p));
}

void TraceWriter::flush() {
  const char* p = buf_;
  while (n_ > 0) {
    ssize_t w = sys::write(fd_, p, n_);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      break;
    }
    p += w;
    n_ -= static_cast<size_t>(w);
  }
  n_ = 0;
  if (watchdog_ != 0) alarm(watchdog_);
}

// ---- frames ----

namespace {

struct Logical {
  const SymFrame* f;
  const SymPC* sym;
  PcEntry pc;
  bool physical;  // the outermost logical frame of its PC
  bool shown = false;
};

bool throws(const std::string& fn) {
  return fn.find("__cxa_throw") != std::string::npos || fn.find("__cxa_rethrow") != std::string::npos ||
         fn.rfind("std::rethrow_exception", 0) == 0 || fn == "_Unwind_RaiseException" ||
         fn == "_Unwind_Resume_or_Rethrow";
}

// Expands the walk into logical frames, innermost first; *gap: where the
// elided frames were (-1: none).
void expand(const GoroutineFrames& fr, std::vector<Logical>* out, int64_t* gap) {
  *gap = -1;
  const PcList& pcs = fr.pcs;
  for (int64_t i = 0; i < pcs.kept(); i++) {
    if (pcs.elided() > 0 && i == PcList::kInner) *gap = static_cast<int64_t>(out->size());
    if (i < fr.skip) continue;
    PcEntry e = pcs.at(i);
    const SymPC& sym = symbolize(e.exact ? e.pc : e.pc - 1);
    for (size_t j = 0; j < sym.frames.size(); j++) {
      out->push_back(Logical{&sym.frames[j], &sym, e, j + 1 == sym.frames.size()});
    }
  }
  if (!fr.cut_at_throw) return;
  size_t limit = out->size() < 64 ? out->size() : 64;
  for (size_t k = limit; k-- > 0;) {
    if (!throws((*out)[k].f->function)) continue;
    out->erase(out->begin(), out->begin() + static_cast<long>(k + 1));
    if (*gap >= 0) *gap = *gap > static_cast<int64_t>(k + 1) ? *gap - static_cast<int64_t>(k + 1) : 0;
    break;
  }
}

// Marks the frames shown, outermost first; at `entry` (if any) as if the
// program had called that frame. Whether any is shown.
bool mark(std::vector<Logical>* frames, int level, size_t entry) {
  bool any = false;
  bool outer_hidden = false;
  bool outer_gort = false;
  for (size_t i = frames->size(); i-- > 0;) {
    Logical& l = (*frames)[i];
    if (i == entry) outer_hidden = outer_gort = false;
    bool hidden = level < 2 && (l.f->runtime || (l.f->stdlib && !l.f->gort && outer_hidden) ||
                                (l.f->gort && outer_gort));
    // An invoker named for the callable (a program without debug
    // information) that calls the callable's own frame, or the C++
    // library's std::invoke towards it (at -O0): the callable's code is
    // not in it, it is the runtime's.
    if (l.f->invoker && i > 0 && level < 2) {
      const SymFrame& callee = *(*frames)[i - 1].f;
      const std::string& fn = l.f->function;  // "F::operator()(...)"
      hidden |= (callee.stdlib && !callee.gort) || callee.function.compare(0, fn.size() - 5, fn, 0, fn.size() - 5) == 0;
    }
    l.shown = !hidden;
    if (!l.f->start) {
      outer_hidden = hidden;
      outer_gort = l.f->gort;
    }
    any |= l.shown;
  }
  return any;
}

// Go's showframe: the runtime's frames only at level 2; the C++ library's
// where its caller is shown, or where a goroutine starts in it; of gort's
// own frames only the outermost of a run, the public entry point the
// program called (gort::sleep, as Go shows time.Sleep), also where the
// runtime called it (`go time.Sleep(d)`, or a callable that jumped to it).
// If that leaves none, the outermost of gort's public entry points, as if
// the program had called it, or none: Go shows every frame then, which in
// gort is a screen of its internals for nothing (GORT_TRACEBACK=system
// shows them).
void choose(std::vector<Logical>* frames, int level) {
  if (mark(frames, level, frames->size())) return;
  for (size_t i = frames->size(); i-- > 0;) {
    const SymFrame* f = (*frames)[i].f;
    if (f->gort && !f->runtime) {
      mark(frames, level, i);
      return;
    }
  }
}

void put_function(TraceWriter& w, const std::string& fn) {
  if (fn.empty()) {
    w.put("?" "?()");
    return;
  }
  w.put(fn);
  // C++ names carry their parameter list; C names and unknown ones do not.
  if (fn.find('(') == std::string::npos) w.put("()");
}

void put_location(TraceWriter& w, const SymFrame& f, const SymPC& sym) {
  if (!f.file.empty()) {
    w.put(f.file);
    w.put(":");
    w.put_int(f.line);
  } else {
    w.put(sym.module.empty() ? "?" : sym.module.c_str());
    w.put(":0");
  }
}

}  // namespace

void print_frames(TraceWriter& w, const GoroutineFrames& fr, int level) {
  if (fr.kind == GoroutineFrames::kUnavailable) {
    w.put("\tgoroutine running on other thread; stack unavailable\n");
    return;
  }
  if (fr.kind != GoroutineFrames::kWalked) return;
  std::vector<Logical> frames;
  int64_t gap;
  expand(fr, &frames, &gap);
  choose(&frames, level);
  for (size_t i = 0; i < frames.size(); i++) {
    if (static_cast<int64_t>(i) == gap) {
      w.put("...");
      w.put_int(fr.pcs.elided());
      w.put(" frames elided...\n");
    }
    const Logical& l = frames[i];
    if (!l.shown) continue;
    put_function(w, l.f->function);
    w.put("\n\t");
    put_location(w, *l.f, *l.sym);
    if (l.physical && l.sym->entry != 0 && l.pc.pc >= l.sym->entry) {
      w.put(" +");
      w.put_hex(l.pc.pc - l.sym->entry);
    }
    if (level >= 2) {
      w.put(" pc=");
      w.put_hex(l.pc.pc);
    }
    w.put("\n");
  }
}

namespace {

void print_created_by(TraceWriter& w, const G* g) {
  // Go shows no creator for the main goroutine.
  if (g->gopc == 0 || g->id == 1) return;
  const SymPC& sym = symbolize(g->gopc - 1);
  // The innermost frame that is the caller's own, at every level: Go
  // names the function with the go statement. gort::go itself, and
  // whatever else of gort's headers, is inlined into it.
  size_t pick = 0;
  for (size_t i = 0; i < sym.frames.size(); i++) {
    if (!(sym.frames[i].gort && sym.frames[i].inlined)) {
      pick = i;
      break;
    }
  }
  const SymFrame& f = sym.frames[pick];
  w.put("created by ");
  w.put(f.function.empty() ? "??" : f.function.c_str());
  if (g->parent_goid != 0) {
    w.put(" in goroutine ");
    w.put_int(g->parent_goid);
  }
  w.put("\n\t");
  put_location(w, f, sym);
  if (pick + 1 == sym.frames.size() && sym.entry != 0 && g->gopc >= sym.entry) {
    w.put(" +");
    w.put_hex(g->gopc - sym.entry);
  }
  w.put("\n");
}

const char* state_of(const G* g) {
  GStatus s = g->status.load(std::memory_order_acquire);
  switch (s) {
    case GStatus::kWaiting:
      return g->waitreason == WaitReason::kNone ? "waiting" : wait_reason_string(g->waitreason);
    case GStatus::kRunning: {
      M* m = g->m;
      return m != nullptr && m->in_blocking.load(std::memory_order_relaxed) ? "syscall" : "running";
    }
    default:
      return gstatus_string(s);
  }
}

}  // namespace

void print_goroutine(TraceWriter& w, G* g, const char* state, const GoroutineFrames& f, int level) {
  w.put("goroutine ");
  w.put_int(g->id);
  if (level >= 2) {
    w.put(" gp=");
    w.put_hex(reinterpret_cast<uintptr_t>(g));
    M* m = g->m;
    if (m != nullptr) {
      w.put(" m=");
      w.put_int(m->id);
    } else {
      w.put(" m=nil");
    }
  }
  w.put(" [");
  w.put(state != nullptr ? state : state_of(g));
  if (g->status.load(std::memory_order_relaxed) == GStatus::kWaiting && g->waitsince != 0) {
    int64_t minutes = (nanotime() - g->waitsince) / (60 * int64_t{1000000000});
    if (minutes >= 1) {
      w.put(", ");
      w.put_int(minutes);
      w.put(minutes == 1 ? " minute" : " minutes");
    }
  }
  if (const Bubble* b = g->bubble) {  // Go 1.25's mark
    w.put(", synctest bubble ");
    w.put_int(static_cast<int64_t>(b->id));
  }
  w.put("]:\n");
  print_frames(w, f, level);
  print_created_by(w, g);
}

void goroutine_frames(G* g, bool may_ask, char* buf, size_t cap, GoroutineFrames* out) {
  out->kind = GoroutineFrames::kUnavailable;
  out->pcs.total = 0;
  // A goroutine that moves while it is walked (resumed, parked elsewhere)
  // is walked again; its saved context and status tell. One caught in a
  // switch (its status already says it is not running, but its context is
  // not saved yet: none, switch.cpp) is looked at again a moment later.
  // Each look is a fresh chance: a goroutine that switches all the time
  // spends a good part of it in switches and between its M's answers, so
  // the looks are many, bounded in time.
  int64_t give_up = nanotime() + 200 * 1000 * 1000;
  for (int attempt = 0; attempt < 64 && nanotime() < give_up; attempt++) {
    GStatus s = g->status.load(std::memory_order_acquire);
    if (s == GStatus::kRunning) {
      M* m = relaxed_load(g->m);
      if (m == nullptr) continue;  // it left its M since the status was read
      if (!may_ask || m->in_blocking.load(std::memory_order_acquire)) return;
      RunningRegs rr;
      if (ask_running_m(m, g, buf, cap, 100 * 1000 * 1000, &rr)) {
        unwind(rr.regs, rr.view, rr.first_pc(), &out->pcs);
        out->kind = GoroutineFrames::kWalked;
        return;
      }
      continue;  // parked meanwhile, or no answer: look again
    }
    if (s != GStatus::kWaiting && s != GStatus::kRunnable) return;
    if (!g->started) {
      out->kind = GoroutineFrames::kNotStarted;
      return;
    }
    uint32_t resumes = g->resumes.load(std::memory_order_acquire);
    void* ctx = __atomic_load_n(&g->ctx, __ATOMIC_ACQUIRE);
    if (ctx == nullptr) {
      if (!may_ask) return;  // a frozen world: it stays in that switch
      sched_yield();
      continue;
    }
    // Whether g stayed where it was since the reads above (the fence keeps
    // the reads of its stack before the checks).
    auto unchanged = [&] {
      std::atomic_thread_fence(std::memory_order_acquire);
      return g->resumes.load(std::memory_order_relaxed) == resumes &&
             __atomic_load_n(&g->ctx, __ATOMIC_ACQUIRE) == ctx && g->status.load(std::memory_order_acquire) == s;
    };
    // A live goroutine's stack is copied first and checked (it did not
    // resume meanwhile), then walked from the copy: one that switches all
    // the time resumes within any walk, but rarely within a copy. Without
    // a buffer the live stack is walked and checked afterwards.
    UnwindRegs regs;
    StackView view = goroutine_stack(g);
    bool copied = buf != nullptr && cap > 0;
    if (copied) {
      view = copy_parked_stack(g, ctx, buf, cap, &regs);
      if (!unchanged()) continue;
    } else {
      context_regs(ctx, &regs);
    }
    unwind(regs, view, FirstPc::kReturnAddress, &out->pcs);
    out->kind = GoroutineFrames::kWalked;
    if (copied || unchanged()) return;
  }
  out->kind = GoroutineFrames::kUnavailable;
  out->pcs.total = 0;
}

namespace {

// A G pointer read without Sched::lock (a dying process) is used only if
// it is the G at the top of a stack slot of the pool.
bool plausible(const G* g) {
  return goroutine_on_stack(reinterpret_cast<uintptr_t>(g)) == g;
}

}  // namespace

// Sched::lock is held, or not takable (frozen): the analysis cannot tell.
void print_all(TraceWriter& w, G* skip, int level, Frozen world, const Bubble* only) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const bool frozen = world == Frozen::kYes;
  std::vector<char> buf;
  if (!frozen) {
    buf.resize(stack_copy_cap());
  }
  int64_t limit = sched.nallg + 1024;
  for (G* g = sched.allg; g != nullptr && limit-- > 0; g = g->allg_next) {
    if (frozen && !plausible(g)) break;
    GStatus s = g->status.load(std::memory_order_acquire);
    if (g == skip || g->is_g0 || s == GStatus::kDead || s == GStatus::kIdle) continue;
    if (only != nullptr && g->bubble != only) continue;
    GoroutineFrames f;
    // A frozen M's word first: the status may be a step ahead of the
    // switch that goes with it (marked runnable but still on its stack).
    if (RunningRegs rr; frozen && frozen_regs_of(g, &rr)) {
      unwind(rr.regs, rr.view, rr.first_pc(), &f.pcs);
      f.kind = GoroutineFrames::kWalked;
    } else if (!frozen || s != GStatus::kRunning) {
      goroutine_frames(g, !frozen, buf.data(), buf.size(), &f);
    }
    w.put("\n");
    print_goroutine(w, g, nullptr, f, level);
  }
}

// Reads allm without Sched::lock when a stopped thread holds it.
void freeze_world(int64_t timeout_ns, bool sched_locked) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  sched.frozen.store(true, std::memory_order_seq_cst);
  M* self = getm();
  // Stopped threads may hold Sched::lock: read allm without it if need be
  // (it only grows while the runtime runs).
  std::unique_lock lock(sched.lock, std::defer_lock);
  for (int i = 0; !sched_locked && i < 100 && !lock.try_lock(); i++) {
    timespec ts{0, 1000 * 1000};
    sys::nanosleep(&ts, nullptr);
  }
  std::vector<M*> ms(sched.allm.begin(), sched.allm.end());
  if (lock.owns_lock()) lock.unlock();
  std::vector<M*> asked;
  for (M* m : ms) {
    if (m != self && freeze_m(m)) asked.push_back(m);
  }
  int64_t deadline = nanotime() + timeout_ns;
  for (M* m : asked) {
    while (!freeze_answered(m) && nanotime() < deadline) {
      timespec ts{0, 100 * 1000};
      sys::nanosleep(&ts, nullptr);
    }
  }
}

}  // namespace gort::internal

namespace gort {
namespace {

struct StackCall {
  bool all;
  std::string* out;
  internal::G* g;
  internal::UnwindRegs regs;
  internal::StackView view;
};

void stack_body(void* arg) {
  using namespace internal;
  auto* c = static_cast<StackCall*>(arg);
  std::lock_guard<std::mutex> symbols(symbolizer_mutex());
  int level = traceback_settings().level >= 2 ? 2 : 1;
  TraceWriter w(c->out);
  if (c->g != nullptr) {
    GoroutineFrames f;
    unwind(c->regs, c->view, FirstPc::kReturnAddress, &f.pcs);
    f.kind = GoroutineFrames::kWalked;
    f.skip = 1;  // gort::stack itself
    print_goroutine(w, c->g, "running", f, level);
  }
  if (c->all) {
    MutexLock lock(sched.lock);
    if (c->g == nullptr) {
      // print_all separates goroutines with a blank line before each.
      std::string rest;
      TraceWriter w2(&rest);
      print_all(w2, nullptr, level, Frozen::kNo);
      c->out->append(rest.empty() ? rest : rest.substr(1));
    } else {
      print_all(w, c->g, level, Frozen::kNo);
    }
  }
}

struct BubbleCall {
  const internal::Bubble* b;
  internal::G* skip;
  std::string* out;
};

void bubble_body(void* arg) {
  using namespace internal;
  auto* c = static_cast<BubbleCall*>(arg);
  std::lock_guard<std::mutex> symbols(symbolizer_mutex());
  int level = traceback_settings().level >= 2 ? 2 : 1;
  TraceWriter w(c->out);
  MutexLock lock(sched.lock);
  print_all(w, c->skip, level, Frozen::kNo, c->b);
}

}  // namespace

namespace internal {

std::string bubble_stacks(const Bubble* b, G* skip) {
  std::string out;
  gort::BubbleCall c{b, skip, &out};
  systemstack(&gort::bubble_body, &c);
  return out;
}

}  // namespace internal

__attribute__((noinline)) std::string stack(bool all) {
  std::string out;
  if (!internal::runtime.running.load(std::memory_order_acquire)) return out;
  StackCall c{all, &out, internal::getg(), {}, {}};
  if (c.g == nullptr && !all) return out;
  GORT_CURRENT_REGS(&c.regs, &c.view);
  internal::systemstack(&stack_body, &c);
  return out;
}

}  // namespace gort

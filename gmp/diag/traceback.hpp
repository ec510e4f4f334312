// gmp/diag/traceback.hpp — goroutine tracebacks in Go's format (docs/debugging.md):
//
//   goroutine 7 [chan receive, 3 minutes]:
//   worker(gort::Chan<int>)
//   	/src/app/worker.cpp:42 +0x5d
//   main()::{lambda()#1}::operator()() const
//   	/src/app/main.cpp:17
//   created by main() in goroutine 1
//   	/src/app/main.cpp:16 +0x9b
//
// The pieces are reusable: the frames of any goroutine (goroutine_frames),
// printing one goroutine (print_goroutine), every goroutine (print_all), to
// a file descriptor or into a string (TraceWriter). Who prints what, and
// when, is fatal.cpp's, panic.cpp's, the stall report's and gort::stack's.
//
// Everything here needs symbolizer_mutex() (symbolize.hpp) held.
#pragma once

#include "gmp/diag/room.hpp"

#include <cstdint>
#include <string>

#include "gmp/g.hpp"
#include "gmp/diag/unwind.hpp"

namespace gort::internal {

// GORT_TRACEBACK (Go's GOTRACEBACK): level 0 prints no goroutines, 1 hides
// the runtime's frames, 2 shows them; `all` prints every goroutine, not
// only the one that failed; `crash` aborts afterwards (a core dump).
struct TracebackSettings {
  int level = 1;
  bool all = false;
  bool crash = false;
};
// Reads GORT_TRACEBACK (at every gort::run; a value it does not know is
// reported once on stderr and the default used).
void traceback_init();
TracebackSettings traceback_settings();

// Buffered output, to a file descriptor (write(2) only: usable while dying,
// in a signal handler) or appended to a string.
class TraceWriter {
 public:
  explicit TraceWriter(int fd) : fd_(fd) {}
  explicit TraceWriter(std::string* out) : out_(out) {}
  ~TraceWriter() { flush(); }
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  void put(const char* s);
  void put(const std::string& s) { put(s.c_str()); }
  void put_int(int64_t v);
  void put_hex(uint64_t v);
  void flush();
  // Re-arms alarm(seconds) at every flush: a dying process's watchdog
  // fires only when its traceback stops making progress.
  void set_watchdog(unsigned seconds) { watchdog_ = seconds; }

 private:
  void put_bytes(const char* s, size_t n);
  int fd_ = -1;
  unsigned watchdog_ = 0;
  std::string* out_ = nullptr;
  size_t n_ = 0;
  char buf_[8192];
};

// How a goroutine's frames were found, and the walk.
struct GoroutineFrames {
  enum Kind {
    kWalked,       // pcs holds its frames
    kUnavailable,  // running on another thread that could not be asked
    kNotStarted,   // created, never ran: no frames yet
  };
  Kind kind = kUnavailable;
  PcList pcs;
  // Physical frames to drop from the top (the traceback machinery itself).
  int skip = 0;
  // Drop every frame up to and including the outermost of the top ones that
  // throws (__cxa_throw, __cxa_rethrow, std::rethrow_exception): a panic
  // shows where the exception was thrown, not how it was raised.
  bool cut_at_throw = false;
};

// Walks a goroutine that is not the caller's: parked, runnable, preempted,
// or running on another M. `may_ask`: a running one's M may be signalled
// for its registers (copy buffer `buf` of `cap` bytes); otherwise, or when
// the M does not answer or is inside gort::blocking, its frames are
// unavailable. Use frozen_frames for a frozen M's.
void goroutine_frames(G* g, bool may_ask, char* buf, size_t cap, GoroutineFrames* out);

// "goroutine N [state]:" (with the wait in minutes once it reaches one,
// and at level 2 the G's and M's addresses), then its frames per `level`,
// then "created by". `state` overrides the state shown (null: the G's).
void print_goroutine(TraceWriter& w, G* g, const char* state, const GoroutineFrames& f, int level);

// Just the frames (no header, no created-by), for a stack that is not a
// goroutine's (Go's "runtime stack:").
void print_frames(TraceWriter& w, const GoroutineFrames& f, int level);

// Whether the world is frozen for good (freeze_world: a dying process).
enum class Frozen : bool { kNo = false, kYes = true };

// Prints every goroutine but `skip`, each after a blank line, in the order
// they were created. Frozen::kYes: running goroutines' regs come from
// their frozen Ms; otherwise running ones are asked for theirs. Sched::lock
// held by the caller, or, frozen, not takable (a stopped thread holds it):
// then the G pointers are checked against the stack pool before they are
// used.
// `only`: just the goroutines of that synctest bubble.
void print_all(TraceWriter& w, G* skip, int level, Frozen frozen, const Bubble* only = nullptr);

// The tracebacks of bubble b's goroutines but `skip` (its root), each after
// a blank line, for the deadlock panic of synctest::test (Go prints them
// under the panic's text).
std::string bubble_stacks(const Bubble* b, G* skip);

// Stops every M but the caller's for good (a dying process), and sysmon's
// work: their stacks hold still while they are printed. Waits up to
// `timeout_ns` for the Ms to stop. `sched_locked`: the caller holds
// Sched::lock.
void freeze_world(int64_t timeout_ns, bool sched_locked);

}  // namespace gort::internal

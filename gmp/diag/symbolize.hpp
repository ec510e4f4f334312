// gmp/diag/symbolize.hpp — program counters to functions and source lines, for
// tracebacks (docs/debugging.md).
//
// One libdw (elfutils) session per process, made on first use from
// /proc/self/maps, re-read when a PC falls outside every known module (a
// library dlopen'ed since). libdw gives the ELF symbol of a PC, its line,
// and the chain of inlined calls at it (DW_TAG_inlined_subroutine scopes,
// each with the file:line of its call site), so one PC can stand for several
// logical frames, innermost first, as Go's inline unwinder does.
//
// Results are cached per looked-up address for the life of the session: a
// dump of 100,000 goroutines parked in a handful of places symbolises a
// handful of PCs. Separate debug info is looked up locally only (build-id
// under /usr/lib/debug, .gnu_debuglink), never over the network: a dying
// process must not wait on a debuginfod server.
//
// Thread-safety: libdw is not thread-safe; every function here requires
// symbolizer_mutex(), which also serialises whole dumps (one traceback at a
// time per process).
#pragma once

#include "gmp/diag/room.hpp"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

typedef struct Dwfl Dwfl;

namespace gort::internal {

// One logical frame: a function, and where execution is in it.
struct SymFrame {
  std::string function;  // demangled; empty if unknown
  std::string file;      // normalised absolute path; empty if unknown
  int line = 0;
  bool inlined = false;  // an inlined call: no physical frame of its own
  // gort's internals (gort::internal::..., the runtime's own helpers),
  // Boost.Context, the thread start: shown only with GORT_TRACEBACK=system.
  bool runtime = false;
  // A library's frame: the C++ standard library's (headers or libstdc++),
  // shown where the frame that called it is (Go's showframe for the
  // standard library); and gort's public entry points (gort::sleep,
  // Chan::send, the interposed libc calls such as read), as Go shows
  // time.Sleep, shown unless gort's code called them (see `gort`).
  bool stdlib = false;
  // Where a thread or a goroutine starts (goroutine_main, start_thread):
  // hidden as the runtime's, without hiding the library frame it called.
  bool start = false;
  // gort's code (libgort, or gort's sources and headers; in a module
  // without debug information, a name in namespace gort): of a run of such
  // frames only the outermost, the entry point the program called, is
  // shown (below it everything is the runtime's, whatever its name says;
  // a build with little debug information names inlined frames without
  // their namespaces). Not the invoker of a goroutine's callable
  // (invoke_inline, gort::run's body) nor what is inlined into it: the
  // runtime's, but a callable's call in tail position (`go([] {
  // gort::sleep(d); })`) leaves gort::sleep right above it.
  bool gort = false;
  // gort's invoker of a goroutine's callable, in a program built without
  // debug information, named for the callable ("main::{lambda()#1}::
  // operator()(...)"): the callable's code is usually inlined there. Hidden
  // where the callable has a frame of its own.
  bool invoker = false;
};

// What one looked-up address stands for.
struct SymPC {
  // Innermost first; the last one is the physical (outermost) function.
  // Never empty: an unknown PC gives one frame with an empty function.
  std::vector<SymFrame> frames;
  uintptr_t entry = 0;  // start of the physical function's symbol, 0 unknown
  std::string module;   // the ELF file the PC lies in; empty if none
};

std::mutex& symbolizer_mutex();

// The libdw session (null if libdw could not read this process). Lock held.
Dwfl* symbolizer_dwfl();
// Ends the session (its open files, caches), at the end of gort::run: a
// program that prints no traceback keeps no debug information in memory,
// and run leaves no descriptor behind. The next use starts a new one, whose
// generation differs. Lock held.
void symbolizer_reset();
uint64_t symbolizer_generation();

// Symbolises `addr`: a return address minus one (so that it lies in the
// call instruction) or the exact PC of an interrupted instruction. The
// reference stays valid until symbolizer_reset. Lock held.
const SymPC& symbolize(uintptr_t addr);

// Whether `path` (a source file) belongs to gort's own sources or public
// headers. Lock held.
bool is_runtime_source(const std::string& path);

}  // namespace gort::internal

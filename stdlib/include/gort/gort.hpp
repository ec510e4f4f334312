// gort/gort.hpp — the umbrella header: everything public in gort.
//
//   #include <gort/gort.hpp>
//   int main() { return gort::run([] { gort::go([] { /* ... */ }); }); }
//
// Build with `pkg-config --cflags --libs gort` or Meson's dependency('gort').
#pragma once

#include "gort/chan.hpp"
#include "gort/chrono.hpp"
#include "gort/context.hpp"
#include "gort/errgroup.hpp"
#include "gort/errors.hpp"
#include "gort/exec.hpp"
#include "gort/net.hpp"
#include "gort/os.hpp"
#include "gort/pprof.hpp"
#include "gort/preempt.hpp"
#include "gort/runtime.hpp"
#include "gort/server.hpp"
#include "gort/signal.hpp"
#include "gort/sync.hpp"
#include "gort/synctest.hpp"
#include "gort/time.hpp"
#include "gort/trace.hpp"

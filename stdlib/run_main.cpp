// stdlib/run_main.cpp — gort::run's entry: the one place that wires the areas
// together.
//
// gmp (the scheduler) sits at the bottom and names nothing above it; its
// diagnostics (gmp/diag/), the poller (netpoll/) and preemption (preempt/)
// plug into it through
// SchedHooks (gmp/sched.hpp). Each area installs its hooks when run_main
// asks, before anything starts, as Go's runtime calls netpollinit and
// starts sysmon. The calls are what link the areas in: a program built
// against a static libgort gets sysmon and the poller because this file
// names them (tests/static checks it).
#include "gmp/diag/diag.hpp"
#include "gmp/sched.hpp"
#include "gort/runtime.hpp"
#include "netpoll/hook/hook.hpp"
#include "netpoll/netpoll.hpp"
#include "preempt/preempt.hpp"
#include "stdlib/pprof/cpu_profile.hpp"
#include "stdlib/trace/trace_files.hpp"

namespace gort::internal {

namespace {

// The program's body, inside what the environment asks of a whole run:
// GORT_TRACE, GORT_FLIGHTREC (stdlib/trace/trace_run.cpp) and
// GORT_CPUPROFILE (stdlib/pprof/cpu_profile.hpp), each written when the
// body returns.
struct MainBody {
  void (*body)(void* arg, int* result);
  void* arg;
  const char* cpu_profile;
};

void main_body(void* arg, int* result) {
  auto* b = static_cast<MainBody*>(arg);
  struct RunEnd {
    ~RunEnd() { trace_run_end(); }
  } run_end;
  trace_run_begin();
  if (b->cpu_profile != nullptr) cpu_profile_env_begin(b->cpu_profile);
  b->body(b->arg, result);
  if (b->cpu_profile != nullptr) cpu_profile_env_end();
}

}  // namespace

int run_main(void (*body)(void* arg, int* result), void* arg, const Config& cfg) {
  SchedHooks hooks;
  hook::link_all();
  install_diag_hooks(&hooks);
  install_netpoll_hooks(&hooks);
  install_sysmon_hooks(&hooks);
  install_slice_timer_hooks(&hooks);
  MainBody main{body, arg, cpu_profile_env()};
  return run_scheduler(&main_body, &main, cfg, hooks);
}

}  // namespace gort::internal

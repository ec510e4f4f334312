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

namespace gort::internal {
namespace {

// GORT_CPUPROFILE=path: main's body runs inside a CPU profile
// (stdlib/pprof/cpu_profile.hpp), written when it returns.
struct Profiled {
  void (*body)(void* arg, int* result);
  void* arg;
  const char* path;
};

void profiled_body(void* arg, int* result) {
  auto* p = static_cast<Profiled*>(arg);
  cpu_profile_env_begin(p->path);
  p->body(p->arg, result);
  cpu_profile_env_end();
}

}  // namespace

int run_main(void (*body)(void* arg, int* result), void* arg, const Config& cfg) {
  SchedHooks hooks;
  hook::link_all();
  install_diag_hooks(&hooks);
  install_netpoll_hooks(&hooks);
  install_sysmon_hooks(&hooks);
  install_slice_timer_hooks(&hooks);
  if (const char* path = cpu_profile_env()) {
    Profiled p{body, arg, path};
    return run_scheduler(&profiled_body, &p, cfg, hooks);
  }
  return run_scheduler(body, arg, cfg, hooks);
}

}  // namespace gort::internal

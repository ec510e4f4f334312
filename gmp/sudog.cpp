// gmp/sudog.cpp — blocking in and waking from a Sudog (gmp/sudog.hpp).
#include "gmp/sudog.hpp"

#include <string>

#include "gmp/os/fatal.hpp"
#include "gmp/sched.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {

bool thread_may_wait() { return runtime.running.load(std::memory_order_acquire); }

void thread_wait_outside_run(WaitReason reason) {
  throw panic_error(std::string(wait_reason_string(reason)) +
                    ": the runtime is not running (call it inside gort::run)");
}

void sudog_block(Sudog* s, bool (*unlock)(G*, void*), void* arg, WaitReason reason) {
  if (s->g != nullptr) {
    park(unlock, arg, reason);
    return;
  }
  // A plain thread: it may wake goroutines later, so while it waits the
  // deadlock detector must not conclude that nothing can happen.
  runtime.external_ops.fetch_add(1, std::memory_order_acq_rel);
  unlock(nullptr, arg);
  s->note->sleep();
  runtime.external_ops.fetch_sub(1, std::memory_order_acq_rel);
}

namespace {

bool never_unlock(G*, void*) { return true; }

}  // namespace

void block_forever(WaitReason reason, const char* woken) {
  Note note;
  Sudog s{.g = getg(), .note = &note};
  if (!may_wait(s)) thread_wait_outside_run(reason);
  sudog_block(&s, &never_unlock, nullptr, reason);
  fatal(woken);
}

void sudog_ready(Sudog* s) {
  if (s->won != nullptr) *s->won = s;
  if (G* g = s->g) {
    g->param = s;
    ready(g);
  } else {
    s->note->wakeup();
  }
}

}  // namespace gort::internal

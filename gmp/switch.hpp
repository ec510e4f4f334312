// gmp/switch.hpp — the context switch (the only user of Boost.Context).
//
// Every switch, cooperative or not, goes through switch_to:
//   1. the departing context saves the goroutine-owned thread state (errno,
//      the C++ exception globals) into its G and clears the exception
//      globals, so the next context starts from a clean slate;
//   2. it tells ASan about the stack change and jumps (jump_fcontext);
//   3. the arriving context records the departed context's fcontext in that
//      G, calls after_switch(prev) to carry out what the departing side
//      asked for (requeue, park unlock, recycle), and restores its own
//      thread state.
// Because the departed G is published (requeued, or made findable by a
// waker) only in step 3, nobody can resume it before its context is saved.
#pragma once

#include "gmp/g.hpp"

namespace gort::internal {

// Switches from the running context `from` (a G, or this M's g0) to `to`.
// Returns when `from` is resumed, possibly on another M.
void switch_to(G* from, G* to);
// Like switch_to for a goroutine that has exited: never returns.
[[noreturn]] void switch_exit(G* from, G* to);
struct M;
// Caches the calling thread's errno and exception-globals addresses in m.
void m_thread_state_init(M* m);
// Records the caller's floating-point control state as g's initial one.
void capture_fp_control(G* g);
// Prepares g (which has a stack) to start running goroutine_main(g).
void make_context(G* g);

// Runs fn(arg) on this M's own thread stack when called on a goroutine's
// (Go's systemstack): tracebacks need more stack than a goroutine may have
// left. Elsewhere (g0, a plain thread, sanitizer builds) it calls fn in
// place. The goroutine's frames stay intact meanwhile.
void systemstack(void (*fn)(void*), void* arg);

}  // namespace gort::internal

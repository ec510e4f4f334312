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

#include "gmp/room.hpp"

#include <cstdint>

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

// ---- reading a saved context (for the unwinder, gmp/diag/unwind.hpp) ----

// Registers in DWARF numbering for x86-64: rax rdx rcx rbx rsi rdi rbp rsp
// r8-r15 rip; `known` has bit i set for each register whose value is known.
struct UnwindRegs {
  uint64_t r[17] = {};
  uint32_t known = 0;
  uint64_t pc() const { return r[16]; }
  uint64_t sp() const { return r[7]; }
};
inline constexpr int kRegRbx = 3, kRegRbp = 6, kRegRsp = 7, kRegRip = 16;

// The registers of a context saved by a switch (a parked, runnable or
// preempted goroutine); switch.cpp, which knows Boost.Context's layout.
// A goroutine has a saved context only while it is switched out: none
// (empty registers) while it runs or while its switch away is under way.
void parked_regs(const G* g, UnwindRegs* regs);
// The same from a context pointer read once (G::ctx); the context's words
// are read from `bytes`, a copy of the memory at ctx, if given.
void context_regs(const void* ctx, UnwindRegs* regs, const void* bytes = nullptr);

// A thread interrupted inside Boost's jump_fcontext (`in`: its registers)
// stands between two contexts: the one it leaves (in registers and on top
// of its stack until they are pushed, then whole) and the one it enters
// (whole in memory until the jump is done). Both as a caller's state after
// the call (FirstPc::kReturnAddress). False if `in` is not inside
// jump_fcontext, or its code is not the one this knows (switch.cpp).
struct JumpSides {
  UnwindRegs leaving;
  UnwindRegs entering;
};
bool in_jump_fcontext(const UnwindRegs& in, JumpSides* out);

}  // namespace gort::internal

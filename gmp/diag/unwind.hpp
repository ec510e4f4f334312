// gmp/diag/unwind.hpp — the frames of any goroutine: the calling one, a parked or
// preempted one, one running on another M (docs/debugging.md, "How frames
// are found").
//
// One unwinder for all of them: libdw's (elfutils), which walks DWARF call
// frame information (.eh_frame/.debug_frame, signal frames included, with a
// frame-pointer fallback) for any "thread" whose registers and memory we
// supply through its Dwfl_Thread_Callbacks. What differs per goroutine is
// only where its registers come from:
//
//   the caller      getcontext() on its own stack (current_regs);
//   parked          the callee-saved registers Boost.Context pushed at the
//                   switch (parked_regs, switch.cpp); a preempted goroutine
//                   is parked too, and the walk goes through the trampoline
//                   (async_preempt_x86_64.S marks its frame a signal frame
//                   and says where the interrupted registers are);
//   running on      its M's signal handler records the interrupted context
//   another M       and copies the live stack (ask_running_m), and the walk
//                   reads the copy;
//   a fault         the ucontext of the fault handler.
//
// Every memory read of the walk is checked against the goroutine's stack
// bounds (or reads the copy): a corrupt or changing stack ends the walk, it
// never faults. The walk stops at a zero return address: make_context puts
// one below every goroutine's first frame.
//
// Rejected: libgcc's _Unwind_Backtrace (walks only the calling thread's own
// stack); libunwind (unw_init_local with a made-up context works, but reads
// memory unchecked and would be a second DWARF reader next to the symbolizer's).
#pragma once

#include "gmp/diag/room.hpp"

#include <sys/ucontext.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdint>

#include "gmp/g.hpp"
#include "gmp/switch.hpp"

namespace gort::internal {

struct M;


// The memory a walk may read: [lo, hi), from `copy` (holding the bytes of
// [copy_lo, copy_lo + copied)) or, when copy is null, live.
struct StackView {
  uintptr_t lo = 0;
  uintptr_t hi = 0;
  const char* copy = nullptr;
  uintptr_t copy_lo = 0;
};

struct PcEntry {
  uintptr_t pc = 0;
  // The PC of an interrupted instruction (the first frame of a fault or a
  // running goroutine, the frame below a signal frame), not a return
  // address: it is symbolised as is, not one byte back.
  bool exact = false;
};

// The physical frames of one walk: the innermost kInner and the outermost
// kOuter (Go prints 50 + 50 and says how many it left out between).
struct PcList {
  static constexpr int kInner = 50;
  static constexpr int kOuter = 50;
  // A walk stops after this many frames (a runaway on a damaged stack).
  static constexpr int64_t kMaxFrames = 200000;
  PcEntry inner[kInner];
  PcEntry outer[kOuter];  // a ring: the last min(total - kInner, kOuter) frames
  int64_t total = 0;

  void add(PcEntry e) {
    if (total < kInner) {
      inner[total] = e;
    } else {
      outer[(total - kInner) % kOuter] = e;
    }
    total++;
  }
  int64_t elided() const { return total > kInner + kOuter ? total - kInner - kOuter : 0; }
  // Frame i of the ones kept (i < total - elided()), innermost first.
  PcEntry at(int64_t i) const {
    if (i < kInner) return inner[i];
    int64_t k = i + elided() - kInner;  // index among frames past kInner
    return outer[k % kOuter];
  }
  int64_t kept() const { return total - elided(); }
};

// What regs.pc() is: the instruction a signal or fault interrupted (a
// running goroutine's), or a return address (a parked goroutine's, or
// the caller's own from GORT_CURRENT_REGS).
enum class FirstPc : bool { kInterrupted = false, kReturnAddress = true };

// Walks from `regs` over `view` into *out. symbolizer_mutex() held. False
// if libdw is unavailable.
bool unwind(const UnwindRegs& regs, const StackView& view, FirstPc first, PcList* out);

// The calling function's registers (right after the getcontext call in it)
// and the bounds of the stack it runs on: the walk starts with the caller's
// own frame, which stays valid as long as the caller does not return. A
// macro, because getcontext must run in the caller's frame (a function
// that calls it cannot be inlined).
#define GORT_CURRENT_REGS(regs, view)                            \
  do {                                                           \
    ucontext_t gort_uc_;                                         \
    getcontext(&gort_uc_);                                       \
    ::gort::internal::current_regs_from(&gort_uc_, regs, view);  \
  } while (0)
void current_regs_from(const ucontext_t* uc, UnwindRegs* regs, StackView* view);


// The goroutine whose stack slot holds address `sp` (its G sits at the top
// of the slot), or null (not in a slot, or in a slot's guard).
G* goroutine_on_stack(uintptr_t sp);

// Copies a switched-out goroutine's stack from its saved context `ctx` up
// (as much as fits in `cap` bytes) into `buf`, and reads the context's
// registers from the copy: a walk over the returned view needs nothing of
// the live stack, which the goroutine may overwrite as soon as it resumes.
StackView copy_parked_stack(const G* g, const void* ctx, char* buf, size_t cap, UnwindRegs* regs);


// The registers of an interrupted context (a signal handler's ucontext).
void regs_from_ucontext(const ucontext_t* uc, UnwindRegs* regs);

// The whole stack of g (never null for a goroutine).
StackView goroutine_stack(const G* g);

// ---- asking another M ----

// What ask_running_m found.
struct RunningRegs {
  bool ok = false;  // the M interrupted g on g's stack
  // regs are a caller's state after a call (a saved context, or one read
  // off a switch under way): FirstPc::kReturnAddress, not kInterrupted.
  bool after_call = false;
  UnwindRegs regs;
  StackView view;   // over the copy (or live, for a frozen M)

  FirstPc first_pc() const { return after_call ? FirstPc::kReturnAddress : FirstPc::kInterrupted; }
};

// Asks m, which runs g, for g's registers and a copy of its stack, into
// `buf` of `cap` bytes, waiting up to `timeout_ns`. symbolizer_mutex()
// held. Async-signal-safe on the asking side too (a dying process asks
// from wherever it dies).
bool ask_running_m(M* m, G* g, char* buf, size_t cap, int64_t timeout_ns, RunningRegs* out);

// Freezes m for good: its handler records what it interrupted and stays.
// Returns without waiting (false if m could not be signalled).
bool freeze_m(M* m);

// Whether frozen m has answered. An M caught just as a switch landed
// declines (the goroutine it left is not yet walkable) and is signalled
// again here: call this until it says yes or the caller gives up.
bool freeze_answered(M* m);
// What the frozen Ms that have answered say of g: the registers of g if
// one was interrupted on g's stack (whatever g's status says: it may be a
// step ahead of the switch), or g's saved context if one was caught about
// to resume g (out->parked). False if none knows g. The world is frozen:
// allm is read without Sched::lock.
bool frozen_regs_of(const G* g, RunningRegs* out);

// Called by the preemption signal handler (preempt/signal.cpp) on m, for
// every signal of the runtime's: answers a pending request. Async-signal-safe.
void traceback_signal_handler(M* m, const ucontext_t* uc);

}  // namespace gort::internal

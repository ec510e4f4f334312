// gort/signal.hpp — Go's os/signal: incoming signals delivered as channel
// values, for graceful shutdown and reloads.
//
//   auto sigs = gort::make_chan<int>(1);
//   gort::signal::notify(sigs, {SIGINT, SIGTERM});
//   int sig = *sigs.recv();        // parks until Ctrl-C or `kill`
//   listener.close();              // stop accepting, drain, return 0
//
// - notify(ch, sigs) relays each listed signal to ch; no list: every signal
//   a program may catch (below). Calling it again for the same channel adds
//   signals. A send never blocks: if ch has no room (and no receiver
//   waiting) the signal is dropped for that channel, as in Go — give it a
//   buffer of 1 for "one signal is enough". Several channels may watch one
//   signal; each gets it.
// - stop(ch): no more signals to ch; when no channel watches a signal any
//   more, it gets back the disposition it had before the first notify.
// - ignore(sigs) (no list: all): the signals are ignored (SIG_IGN) and no
//   channel gets them; ignored(sig) tells whether a signal is ignored now.
// - reset(sigs) (no list: all): undoes notify and ignore — the signals get
//   back the disposition they had before gort touched them (for SIGQUIT:
//   gort's goroutine dump).
//
// Signals that cannot be relayed, and panic (gort::panic_error) when
// listed: SIGKILL and SIGSTOP (uncatchable), SIGSEGV, SIGBUS, SIGFPE,
// SIGILL and SIGTRAP (they report faults, and gort turns those into stack
// overflow reports and fatal errors), the preemption signal (SIGURG unless
// configured otherwise), and glibc's internal real-time signals 32 and 33.
// A number outside 1..64 panics too.
//
// How: a handler (SA_SIGINFO | SA_ONSTACK | SA_RESTART) marks the signal
// pending and writes to an eventfd that one goroutine waits on in the
// netpoller (no thread is blocked); that goroutine sends to the channels.
// It exists while some channel is registered. Everything is undone when the
// run ends: the dispositions are restored and the eventfd closed.
//
// Thread-safety: any goroutine or plain thread while the runtime runs
// (outside a run, notify panics `gort::signal::notify: the runtime is not
// running`; stop, ignore, reset and ignored work anywhere). Costs: one
// handler entry, one eventfd write and a goroutine wake per signal.
#pragma once

#include <initializer_list>

#include "gort/chan.hpp"
#include "gort/detail/api.hpp"

namespace gort::signal {

GORT_API void notify(const SendChan<int>& ch, std::initializer_list<int> sigs = {});
GORT_API void stop(const SendChan<int>& ch);
GORT_API void ignore(std::initializer_list<int> sigs = {});
GORT_API bool ignored(int sig);
GORT_API void reset(std::initializer_list<int> sigs = {});

}  // namespace gort::signal

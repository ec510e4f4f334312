// stdlib/sync/time.cpp — gort::sleep, Timer, Ticker, after_func on runtime timers.
//
// Timer and Ticker channels have Go 1.23's synchronous semantics: once stop
// or reset has returned, no value from before it is received. The channel
// keeps a buffer of one (the runtime's timer callback must not block), and
// State::send_mu orders the two ways a stale value could get through:
//
//   send_time (timer callback)           stop / reset
//     lock send_mu                         lock send_mu
//     seq of the claim == timer_seq?       timer_stop / timer_reset (bump seq)
//       yes: send (drop if full)           drain the buffer
//       no: a stop/reset came after        unlock send_mu
//           the claim: drop it
//     unlock send_mu
//
// A value sent before the stop is drained by it; a firing claimed before
// the stop but sending after it sees the bumped seq (gmp/timer.hpp, "Stale
// firings") and drops its value. Go does the same with its timer's seq
// and the channel lock (runtime/time.go, unlockAndRun and timerchandrain).
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmp/bubble.hpp"
#include "gmp/diag/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"
#include "gmp/trace.hpp"
#include "gort/time.hpp"
#include "stdlib/sync/chan_core.hpp"
#include "stdlib/sync/chan_ring.hpp"

namespace gort {

namespace {

int64_t to_ns(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return 0;
  if (d >= absl::Hours(24 * 365 * 100)) return int64_t{1} << 62;
  return absl::ToInt64Nanoseconds(d);
}

void require_running(const char* what) {
  if (!internal::runtime.running.load(std::memory_order_acquire)) {
    throw panic_error(std::string(what) + ": the runtime is not running (call it inside gort::run)");
  }
}

// On the runtime's timer clock (internal::clock_now: a bubble's fake time
// in a bubble, where the timers are bound to it).
int64_t when_after(absl::Duration d) {
  int64_t ns = to_ns(d);
  int64_t now = internal::clock_now();
  return ns > (int64_t{1} << 62) - now ? int64_t{1} << 62 : now + ns;
}

}  // namespace

struct Timer::State {
  // What Timer::reset reads comes first, and then the timer, whose own
  // first fields are its reset's (gmp/timer.hpp): a server's deadlines are
  // too many to stay in the cache, and each line is a miss.
  Chan<absl::Time> c;
  // Written under send_mu: a value may sit in c (send_time put one there,
  // and no drain has found c empty since). While it is false, a reset that
  // pushes a queued timer later needs neither send_mu nor the channel
  // (Timer::reset).
  std::atomic<bool> sent{false};
  // Tickers: set when the last Ticker handle is gone. From then on the
  // ticker stops as soon as nobody holds its channel either (Go 1.23
  // collects a ticker nothing refers to): at once if nobody does, or at
  // the first tick after the last copy of the channel is dropped. Nothing
  // can get a new reference then, so the check cannot be undone.
  std::atomic<bool> orphaned{false};
  // Under send_mu: a one-shot arming whose value has not been sent yet (so
  // a stop that finds the timer idle knows a claimed firing is in flight).
  bool armed = false;
  internal::Timer t;
  std::function<void()> f;
  // Held while the runtime holds references (the timer is queued, or its
  // f is running): the timer keeps its state alive when no handle is left.
  // The runtime's references overlap (a reset while f runs), so they are
  // counted; `self` is set while the count is non-zero.
  std::shared_ptr<State> self;
  std::weak_ptr<State> weak;
  internal::WordLock<internal::LockRank::kTimerRefs> ref_mu;
  int refs = 0;
  // Channel timers: orders sends with stop/reset (top of this file). Held
  // in scheduler context by send_time, so only ever briefly.
  internal::WordLock<internal::LockRank::kTimerSend> send_mu;

  bool unreachable() const {
    return orphaned.load(std::memory_order_acquire) && internal::ChanAccess::core(c)->refs.load(std::memory_order_acquire) == 1;
  }

  static void ref(internal::Timer* t, int delta) {
    auto* s = static_cast<State*>(t->arg);
    std::shared_ptr<State> drop;
    s->ref_mu.lock();
    s->refs += delta;
    if (delta > 0 && s->refs == 1) {
      // A handle or an earlier reference is alive: lock() cannot fail.
      s->self = s->weak.lock();
    } else if (s->refs == 0) {
      drop = std::move(s->self);
    }
    s->ref_mu.unlock();
  }  // `drop` may free s, after its lock is released

  static void send_time(internal::Timer* t, int64_t fired_at, uint32_t seq) {
    auto* s = static_cast<State*>(t->arg);
    s->send_mu.lock();
    if (s->unreachable()) {
      internal::timer_stop(t);  // the runner holds a reference across this call
    } else if (internal::timer_seq(t) == seq) {
      s->armed = false;
      // A bubble's timer fires at its fake `now` (Unix ns), which is what
      // its goroutines read as the time.
      absl::Time now = t->bubble != nullptr ? absl::FromUnixNanos(fired_at) : absl::Now();
      internal::SelectCase sc{internal::ChanAccess::core(s->c), &now, true, false};
      internal::selectgo(&sc, 1, false);  // drop the value if the buffer is full
      s->sent.store(true, std::memory_order_release);
    }
    s->send_mu.unlock();
  }

  // send_mu held: takes a value left in the channel; true if there was one.
  bool drain() {
    // Only send_time sends on c, under send_mu: an empty ring stays empty
    // (a receiver can only empty it further). A reset of a timer that has
    // not fired since the last drain (a deadline pushed back) skips the
    // channel altogether, and one whose value was received skips the select.
    if (!sent.load(std::memory_order_relaxed)) return false;
    sent.store(false, std::memory_order_relaxed);
    if (internal::ring_len(internal::ChanAccess::core(c)) == 0) return false;
    absl::Time stale;
    internal::SelectCase sc{internal::ChanAccess::core(c), &stale, false, false};
    return internal::selectgo(&sc, 1, false) == 0 && sc.received;
  }

  // Go 1.23's Stop/Reset for channel timers: stops (or re-arms, when
  // `when` >= 0) the timer, then discards what it had delivered but nobody
  // received. Returns whether a value was still to come: the timer was
  // queued, a claimed firing was in flight (its value is dropped), or a
  // value sat in the channel.
  bool stop_or_reset(int64_t when, int64_t period) {
    send_mu.lock();
    bool pending = when < 0 ? internal::timer_stop(&t) : internal::timer_reset(&t, when, period);
    if (armed) pending = true;
    if (drain()) pending = true;
    armed = when >= 0 && period == 0;
    send_mu.unlock();
    return pending;
  }

  static void start_func(internal::Timer* t, int64_t, uint32_t) {
    auto* s = static_cast<State*>(t->arg);
    gort::go(s->f);
  }

  ~State() { internal::timer_unbind_bubble(&t); }

  static std::shared_ptr<State> make(void (*f)(internal::Timer*, int64_t, uint32_t)) {
    auto s = std::make_shared<State>();
    internal::timer_bind_bubble(&s->t);  // a bubble's goroutine makes a fake timer
    s->weak = s;
    s->t.f = f;
    s->t.arg = s.get();
    s->t.ref = &State::ref;
    return s;
  }
};

absl::Time now() {
  if (internal::Bubble* b = internal::current_bubble()) [[unlikely]] {
    return absl::FromUnixNanos(b->now.load(std::memory_order_acquire));
  }
  return absl::Now();
}

void sleep(absl::Duration d) {
  GORT_TRACE_BLOCKING_CALL();
  internal::preempt_check_may_park("sleep");
  if (d <= absl::ZeroDuration()) return;
  if (internal::getg() == nullptr) {
    absl::SleepFor(d);
    return;
  }
  internal::timer_sleep(when_after(d), internal::WaitReason::kSleep);
  // Not a tail call: a sleeping goroutine's traceback and gdb backtrace
  // show gort::sleep, as Go's show time.Sleep.
  asm volatile("");
}

Chan<absl::Time> Timer::chan() const { return s_ ? s_->c : Chan<absl::Time>(); }

bool Timer::stop() const {
  if (!s_) throw panic_error("time: Stop called on uninitialized Timer");
  internal::timer_check_bubble(&s_->t, "stop");
  if (!s_->c) return internal::timer_stop(&s_->t);  // after_func
  return s_->stop_or_reset(-1, 0);
}

bool Timer::reset(absl::Duration d) const {
  if (!s_) throw panic_error("time: Reset called on uninitialized Timer");
  internal::timer_check_bubble(&s_->t, "reset");
  const int64_t when = when_after(d);
  if (!s_->c) return internal::timer_reset(&s_->t, when, 0);
  // The common reset, a deadline pushed back before it fired: the timer is
  // queued, nothing sits in its channel, and it moves later without
  // send_mu. No value can arrive meanwhile: a firing of this arming that
  // was claimed fails the push (timer_push_later), and an older one's is
  // stale (timer.hpp, "Stale firings").
  if (!s_->sent.load(std::memory_order_acquire) && internal::timer_push_later(&s_->t, when)) return true;
  return s_->stop_or_reset(when, 0);
}

namespace {

// A timer's channel: a buffer of one, whose len and cap read 0 (Go 1.23).
Chan<absl::Time> make_timer_chan() {
  Chan<absl::Time> c = make_chan<absl::Time>(1);
  internal::ChanAccess::core(c)->timer = true;
  return c;
}

}  // namespace

Timer new_timer(absl::Duration d) {
  require_running("gort::new_timer");
  auto s = Timer::State::make(&Timer::State::send_time);
  s->c = make_timer_chan();
  s->armed = true;  // not shared yet: no lock needed
  internal::timer_add(&s->t, when_after(d), 0);
  return Timer(std::move(s));
}

Timer after_func(absl::Duration d, std::function<void()> f) {
  require_running("gort::after_func");
  auto s = Timer::State::make(&Timer::State::start_func);
  s->f = std::move(f);
  internal::timer_add(&s->t, when_after(d), 0);
  return Timer(std::move(s));
}

Chan<absl::Time> after(absl::Duration d) { return new_timer(d).chan(); }

namespace {

// What every copy of one Ticker shares (through the aliasing shared_ptr in
// Ticker): the last copy to go marks the state orphaned.
struct TickerHandles {
  std::shared_ptr<Timer::State> s;
  ~TickerHandles() {
    s->orphaned.store(true, std::memory_order_release);
    if (s->unreachable()) s->stop_or_reset(-1, 0);
  }
};

}  // namespace

Ticker new_ticker(absl::Duration d) {
  if (d <= absl::ZeroDuration()) throw panic_error("non-positive interval for NewTicker");
  require_running("gort::new_ticker");
  auto s = Timer::State::make(&Timer::State::send_time);
  s->c = make_timer_chan();
  int64_t period = to_ns(d);
  internal::timer_add(&s->t, when_after(d), period);
  Timer::State* state = s.get();
  auto handles = std::make_shared<TickerHandles>();
  handles->s = std::move(s);
  return Ticker(std::shared_ptr<Timer::State>(std::move(handles), state));
}

Chan<absl::Time> Ticker::chan() const { return s_ ? s_->c : Chan<absl::Time>(); }

void Ticker::stop() const {
  if (!s_) return;
  internal::timer_check_bubble(&s_->t, "stop");
  s_->stop_or_reset(-1, 0);
}

void Ticker::reset(absl::Duration d) const {
  if (d <= absl::ZeroDuration()) throw panic_error("non-positive interval for Ticker.Reset");
  if (!s_) throw panic_error("time: Reset called on uninitialized Ticker");
  internal::timer_check_bubble(&s_->t, "reset");
  s_->stop_or_reset(when_after(d), to_ns(d));
}

}  // namespace gort

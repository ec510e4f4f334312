// stdlib/time.cpp — gort::sleep, Timer, Ticker, after_func on runtime timers.
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmp/fatal.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gmp/timer.hpp"
#include "gmp/tls.hpp"
#include "gort/time.hpp"

namespace gort {

namespace {

int64_t to_ns(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return 0;
  if (d >= absl::Hours(24 * 365 * 100)) return int64_t{1} << 62;
  return absl::ToInt64Nanoseconds(d);
}

void require_running(const char* what) {
  if (!internal::sched.running.load(std::memory_order_acquire)) {
    throw panic_error(std::string(what) + ": the runtime is not running (call it inside gort::run)");
  }
}

int64_t when_after(absl::Duration d) {
  int64_t ns = to_ns(d);
  int64_t now = internal::nanotime();
  return ns > (int64_t{1} << 62) - now ? int64_t{1} << 62 : now + ns;
}

}  // namespace

struct Timer::State {
  internal::Timer t;
  Chan<absl::Time> c;
  std::function<void()> f;
  // Held while the runtime holds references (the timer is queued, or its
  // f is running): the timer keeps its state alive when no handle is left.
  // The runtime's references overlap (a reset while f runs), so they are
  // counted; `self` is set while the count is non-zero.
  std::shared_ptr<State> self;
  std::weak_ptr<State> weak;
  std::atomic<uint32_t> ref_mu{0};
  int refs = 0;

  static void ref(internal::Timer* t, int delta) {
    auto* s = static_cast<State*>(t->arg);
    std::shared_ptr<State> drop;
    internal::lock_word(&s->ref_mu);
    s->refs += delta;
    if (delta > 0 && s->refs == 1) {
      // A handle or an earlier reference is alive: lock() cannot fail.
      s->self = s->weak.lock();
    } else if (s->refs == 0) {
      drop = std::move(s->self);
    }
    internal::unlock_word(&s->ref_mu);
  }  // `drop` may free s, after its lock is released

  static void send_time(internal::Timer* t, int64_t) {
    auto* s = static_cast<State*>(t->arg);
    absl::Time now = absl::Now();
    internal::SelectCase sc{s->c.core(), &now, true, false};
    internal::selectgo(&sc, 1, false);  // drop the value if the buffer is full
  }

  static void start_func(internal::Timer* t, int64_t) {
    auto* s = static_cast<State*>(t->arg);
    gort::go(s->f);
  }

  static std::shared_ptr<State> make(void (*f)(internal::Timer*, int64_t)) {
    auto s = std::make_shared<State>();
    s->weak = s;
    s->t.f = f;
    s->t.arg = s.get();
    s->t.ref = &State::ref;
    return s;
  }
};

void sleep(absl::Duration d) {
  internal::preempt_check();
  if (d <= absl::ZeroDuration()) return;
  internal::G* g = internal::getg();
  if (g == nullptr) {
    absl::SleepFor(d);
    return;
  }
  internal::Timer t;
  t.f = [](internal::Timer* t, int64_t) { internal::ready(static_cast<internal::G*>(t->arg)); };
  t.arg = g;
  t.when = when_after(d);
  // Arm the timer only once we are parked, so it cannot fire first.
  internal::park(
      [](internal::G*, void* arg) {
        auto* t = static_cast<internal::Timer*>(arg);
        internal::timer_add_unshared(t, t->when);
        return true;
      },
      &t, internal::WaitReason::kSleep);
}

Chan<absl::Time> Timer::chan() const { return s_ ? s_->c : Chan<absl::Time>(); }

bool Timer::stop() const {
  if (!s_) throw panic_error("time: Stop called on uninitialized Timer");
  return internal::timer_stop(&s_->t);
}

bool Timer::reset(absl::Duration d) const {
  if (!s_) throw panic_error("time: Reset called on uninitialized Timer");
  return internal::timer_reset(&s_->t, when_after(d), 0);
}

Timer new_timer(absl::Duration d) {
  require_running("gort::new_timer");
  auto s = Timer::State::make(&Timer::State::send_time);
  s->c = make_chan<absl::Time>(1);
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

Ticker new_ticker(absl::Duration d) {
  if (d <= absl::ZeroDuration()) throw panic_error("non-positive interval for NewTicker");
  require_running("gort::new_ticker");
  auto s = Timer::State::make(&Timer::State::send_time);
  s->c = make_chan<absl::Time>(1);
  int64_t period = to_ns(d);
  internal::timer_add(&s->t, when_after(d), period);
  return Ticker(std::move(s));
}

Chan<absl::Time> Ticker::chan() const { return s_ ? s_->c : Chan<absl::Time>(); }

void Ticker::stop() const {
  if (s_) internal::timer_stop(&s_->t);
}

void Ticker::reset(absl::Duration d) const {
  if (d <= absl::ZeroDuration()) throw panic_error("non-positive interval for Ticker.Reset");
  if (!s_) throw panic_error("time: Reset called on uninitialized Ticker");
  internal::timer_reset(&s_->t, when_after(d), to_ns(d));
}

}  // namespace gort

// stdlib/sync/context_cancel.cpp — the cancellation tree behind gort::Context
// (Go's cancelCtx, timerCtx, afterFuncCtx and propagateCancel): linking a
// child under its parent, cancelling a subtree, and detaching what nobody
// can cancel any more. Ownership and lock rules: stdlib/sync/context_node.hpp.
//
// Races considered:
// - A child created while its parent is cancelled: propagate links it under
//   the parent's lock, or finds the parent cancelled under that lock and
//   cancels the child itself; cancel takes the children out under the same
//   lock. Either way the child is cancelled.
// - Err and done: cancel publishes err and cause (kCancelling), closes done
//   and publishes kCancelled, all under mu; readers that see kCancelling
//   take mu once to wait for the close, so an error is never seen before
//   done is closed, nor done closed before the error is visible. done()
//   makes the channel under mu (closed already if cancelled).
// - A child's last SourceRef going away while its parent detaches: the
//   child's lost_sources reads "linked?" under the parent's lock and the
//   parent's detach unlinks under it and then reads the child's `sources`;
//   whichever comes second detaches the child (detach is idempotent).
// - An after_func's f: started by the cancel that sets `claimed`, or kept
//   from running by the stop that sets it; never both.
// - A deadline's timer: armed under mu unless already cancelled; the
//   cancel that wins stops it after unlocking. timer_stop returning false
//   means the timer fired, and its goroutine cancels (a no-op now).
#include <atomic>
#include <string>
#include <vector>

#include "gmp/clock_rand.hpp"
#include "gmp/lock.hpp"
#include "gmp/sched.hpp"
#include "gort/time.hpp"
#include "gmp/timer.hpp"
#include "gort/context.hpp"
#include "gort/detail/race.hpp"
#include "gort/runtime.hpp"
#include "stdlib/sync/context_node.hpp"

namespace gort {
namespace internal {

namespace {

std::atomic<int64_t> watchers_started{0};

// A channel closed at start-up: done() of a context cancelled before anyone
// asked for its channel (Go's closedchan).
const Chan<std::monostate>& closed_chan() {
  static const Chan<std::monostate> c = [] {
    auto ch = make_chan<std::monostate>();
    ch.close();
    return ch;
  }();
  return c;
}

bool runtime_running() { return runtime.running.load(std::memory_order_acquire); }

void require_running(const char* op, const char* why) {
  if (!runtime_running()) {
    throw panic_error(std::string(op) + ": " + why + ", and the runtime is not running (call it inside gort::run)");
  }
}

// Starts f in its own goroutine; dropped if the runtime is not running (as
// a timer due after gort::run returns never fires).
void start(std::function<void()> f) {
  if (runtime_running()) gort::go(std::move(f));
}

// Moves x's children out of its list into `out` (their references).
void take_children(CancelNode* x, std::vector<std::shared_ptr<CancelNode>>* out)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(x->mu) {
  for (CancelNode* c = x->first_child; c != nullptr;) {
    CancelNode* next = c->next;
    c->prev = c->next = nullptr;
    out->push_back(std::move(c->listed));
    c = next;
  }
  x->first_child = nullptr;
}

// Marks x cancelled and takes its children into `kids`. False if it was
// cancelled already.
bool cancel_one(CancelNode* x, FromParent from_parent, const absl::Status& err, const absl::Status& cause,
                std::vector<std::shared_ptr<CancelNode>>* kids) {
  x->mu.lock();
  if (x->state.load(std::memory_order_relaxed) != CancelNode::kActive) {
    x->mu.unlock();
    return false;
  }
  x->err = err;
  x->cause = cause;
  // Cancellation happens before err() reports it (cancel_err) and before a
  // receive sees done() closed (the channel's own edge).
  race_release(x);
  x->state.store(CancelNode::kCancelling, std::memory_order_release);
  if (x->has_done.load(std::memory_order_relaxed)) x->done_.close();
  x->state.store(CancelNode::kCancelled, std::memory_order_release);
  take_children(x, kids);
  bool stop_timer = x->timer_armed;
  std::function<bool()> stop_parent = std::move(x->stop_parent);
  x->stop_parent = nullptr;
  x->mu.unlock();

  if (x->flavour == CancelNode::Flavour::kAfterFunc) {
    auto* a = static_cast<AfterFuncNode*>(x);
    if (!a->claimed.exchange(true, std::memory_order_acq_rel)) {
      race_acquire(&a->f);  // what after_func's caller did, for the race detector
      start(std::move(a->f));
    }
  }
  // A stopped timer drops its reference (TimerNode::armed) in its ref hook.
  if (stop_timer) timer_stop(&static_cast<TimerNode*>(x)->t);
  // Go's removeChild on a stopCtx: tell a custom parent to forget us. When
  // the parent cancelled us (its f is running), there is nothing to forget.
  if (stop_parent && from_parent == FromParent::kRemove) stop_parent();
  return true;
}

// Unlinks n from the node it was linked under, if it still is.
void unlink(CancelNode* n) {
  CancelNode* p = n->registered_with;
  if (p == nullptr) return;
  std::shared_ptr<CancelNode> ref;
  p->mu.lock();
  if (n->listed) {
    if (n->prev != nullptr) n->prev->next = n->next;
    if (n->next != nullptr) n->next->prev = n->prev;
    if (p->first_child == n) p->first_child = n->next;
    n->prev = n->next = nullptr;
    ref = std::move(n->listed);
  }
  p->mu.unlock();
}  // `ref` is not the last reference: the caller holds n

// Links child under p, or cancels it if p already is. Returns false if p
// will never be cancelled (detached): then there is nothing to link.
void link(CancelNode* p, const std::shared_ptr<CancelNode>& child) {
  p->mu.lock();
  if (p->state.load(std::memory_order_relaxed) != CancelNode::kActive) {
    absl::Status err = p->err, cause = p->cause;
    p->mu.unlock();
    cancel(child.get(), FromParent::kKeep, err, cause);
    return;
  }
  if (p->detached) {
    p->mu.unlock();
    return;
  }
  child->registered_with = p;
  child->next = p->first_child;
  if (child->next != nullptr) child->next->prev = child.get();
  p->first_child = child.get();
  child->listed = child;
  p->mu.unlock();
}

// Detaches x (see context_node.hpp) unless something may still cancel it:
// it is then never cancelled; its children are unlinked into `kids`.
void detach_one(CancelNode* x, std::vector<std::shared_ptr<CancelNode>>* kids) {
  x->mu.lock();
  if (x->state.load(std::memory_order_relaxed) != CancelNode::kActive || x->detached ||
      x->sources.load(std::memory_order_acquire) > 0) {
    x->mu.unlock();
    return;
  }
  x->detached = true;
  take_children(x, kids);
  x->mu.unlock();
}

void detach(CancelNode* n) {
  std::vector<std::shared_ptr<CancelNode>> kids;
  detach_one(n, &kids);
  // Children with sources of their own stay cancellable, as roots now.
  for (size_t i = 0; i < kids.size(); i++) detach_one(kids[i].get(), &kids);
}  // the links are dropped here, after every lock is released

// n's last SourceRef is gone.
void lost_sources(CancelNode* n) {
  if (n->state.load(std::memory_order_acquire) != CancelNode::kActive) return;
  if (CancelNode* p = n->registered_with) {
    p->mu.lock();
    bool linked = n->listed != nullptr;
    p->mu.unlock();
    if (linked) return;  // p may still cancel n; if p is detached, so is n
  }
  detach(n);
}

// Go 1.19's watcher for a parent of a custom kind: cancels the child when
// the parent's done closes; ends when either is done.
void watch(const Chan<std::monostate>& parent_done, const std::shared_ptr<CancelNode>& child) {
  watchers_started.fetch_add(1, std::memory_order_relaxed);
  gort::go([pdone = parent_done, cdone = cancel_done(child.get()), src = SourceRef(child)] {
    gort::select(gort::on_recv(pdone,
                               [&] {
                                 CancelNode* c = src.get();
                                 cancel(c, FromParent::kKeep, c->parent.err(), gort::cause(c->parent));
                               }),
                 gort::on_recv(cdone));
  });
}

// The parent is (or is reached through) a custom kind: Go's propagateCancel
// from its Done() check on.
void propagate_custom(const Context& parent, CancelNode* inner, const std::shared_ptr<CancelNode>& child,
                      const char* op) {
  Chan<std::monostate> done = parent.done();
  if (done.is_nil()) return;  // never cancelled
  bool closed = false;
  gort::select(gort::on_recv(done, [&](std::optional<std::monostate> v) { closed = !v; }), gort::on_default());
  if (closed) {
    cancel(child.get(), FromParent::kKeep, parent.err(), gort::cause(parent));
    return;
  }
  // Wrappers that forward done() to a cancel node: join it directly.
  if (inner != nullptr && done == cancel_done(inner)) {
    link(inner, child);
    return;
  }
  internal::ContextNode* pn = internal::ContextAccess::node(parent).get();
  if (pn != nullptr && pn->kind == internal::ContextNode::Kind::kCustom) {
    std::function<bool()> stop = ContextAccess::custom(pn)->after_func([src = SourceRef(child)] {
      CancelNode* c = src.get();
      cancel(c, FromParent::kKeep, c->parent.err(), gort::cause(c->parent));
    });
    if (stop) {
      child->mu.lock();
      if (child->state.load(std::memory_order_relaxed) == CancelNode::kActive) child->stop_parent = std::exchange(stop, nullptr);
      child->mu.unlock();
      if (stop) stop();  // cancelled meanwhile: unregister at once
      return;
    }
  }
  require_running(op, "a parent of a custom kind is watched by a goroutine");
  watch(done, child);
}

}  // namespace

SourceRef::SourceRef(std::shared_ptr<CancelNode> n) : n_(std::move(n)) {
  if (n_) n_->sources.fetch_add(1, std::memory_order_relaxed);
}

SourceRef::SourceRef(const SourceRef& o) : n_(o.n_) {
  if (n_) n_->sources.fetch_add(1, std::memory_order_relaxed);
}

void SourceRef::reset() {
  if (!n_) return;
  if (n_->sources.fetch_sub(1, std::memory_order_acq_rel) == 1) lost_sources(n_.get());
  n_.reset();
}

const absl::Status& canceled_error() {
  static const absl::Status s = absl::CancelledError("context canceled");
  return s;
}

const absl::Status& deadline_error() {
  static const absl::Status s = absl::DeadlineExceededError("context deadline exceeded");
  return s;
}

void cancel(CancelNode* n, FromParent from_parent, const absl::Status& err, const absl::Status& cause) {
  const absl::Status& why = cause.ok() ? err : cause;
  std::vector<std::shared_ptr<CancelNode>> kids;
  if (!cancel_one(n, from_parent, err, why, &kids)) return;
  // Breadth first over the subtree, in this frame: no recursion per level.
  for (size_t i = 0; i < kids.size(); i++) cancel_one(kids[i].get(), FromParent::kKeep, err, why, &kids);
  if (from_parent == FromParent::kRemove) unlink(n);
}  // the children's links are dropped here

CancelNode* innermost_cancel_node(const Context& ctx) {
  internal::ContextNode* n = internal::ContextAccess::node(ctx).get();
  while (n != nullptr) {
    switch (n->kind) {
      case internal::ContextNode::Kind::kCancel:
        return static_cast<CancelNode*>(n);
      case internal::ContextNode::Kind::kValue:
        n = internal::ContextAccess::node(static_cast<ValueNodeBase*>(n)->parent).get();
        break;
      case internal::ContextNode::Kind::kCustom:
        if (auto* w = dynamic_cast<const WrappedContext*>(ContextAccess::custom(n))) {
          n = internal::ContextAccess::node(w->parent()).get();
          break;
        }
        return nullptr;
      default:  // todo, without_cancel
        return nullptr;
    }
  }
  return nullptr;
}

void propagate(const Context& parent, const std::shared_ptr<CancelNode>& child, const char* op) {
  // Walk to the innermost cancel node; a custom kind on the way means its
  // done() decides (Go checks parent.Done() first for every parent).
  bool custom = false;
  CancelNode* inner = nullptr;
  for (internal::ContextNode* n = internal::ContextAccess::node(parent).get(); n != nullptr;) {
    auto kind = n->kind;
    if (kind == internal::ContextNode::Kind::kCancel) {
      inner = static_cast<CancelNode*>(n);
      break;
    }
    if (kind == internal::ContextNode::Kind::kValue) {
      n = internal::ContextAccess::node(static_cast<ValueNodeBase*>(n)->parent).get();
    } else if (kind == internal::ContextNode::Kind::kCustom) {
      custom = true;
      auto* w = dynamic_cast<const WrappedContext*>(ContextAccess::custom(n));
      n = w != nullptr ? internal::ContextAccess::node(w->parent()).get() : nullptr;
    } else {
      break;  // todo, without_cancel: never cancelled
    }
  }
  if (custom) {
    propagate_custom(parent, inner, child, op);
  } else if (inner != nullptr) {
    link(inner, child);
  }
}

Chan<std::monostate> cancel_done(CancelNode* n) {
  Chan<std::monostate> d;
  if (n->has_done.load(std::memory_order_acquire)) {
    d = n->done_;
  } else {
    n->mu.lock();
    if (!n->has_done.load(std::memory_order_relaxed)) {
      n->done_ = n->state.load(std::memory_order_relaxed) != CancelNode::kActive ? closed_chan()
                                                                                  : make_chan<std::monostate>();
      n->has_done.store(true, std::memory_order_release);
    }
    d = n->done_;
    n->mu.unlock();
  }
  // A context cancelled before its first done() shares one closed channel,
  // whose close was nobody's here: the edge from cancel to a receive that
  // sees done() closed must come from the node (cancel_one's release).
  if (n->state.load(std::memory_order_acquire) != CancelNode::kActive) race_acquire(n);
  return d;
}

bool settled_cancelled(const CancelNode* n) {
  uint8_t s = n->state.load(std::memory_order_acquire);
  if (s == CancelNode::kActive) return false;
  if (s == CancelNode::kCancelling) {  // the canceller is closing done under mu
    n->mu.lock();
    n->mu.unlock();
  }
  return true;
}

absl::Status cancel_err(const CancelNode* n) {
  if (!settled_cancelled(n)) return absl::OkStatus();
  race_acquire(n);
  return n->err;
}

int64_t context_watchers_started() { return watchers_started.load(std::memory_order_relaxed); }

size_t context_children(const Context& ctx) {
  CancelNode* p = innermost_cancel_node(ctx);
  if (p == nullptr) return 0;
  size_t n = 0;
  p->mu.lock();
  for (CancelNode* c = p->first_child; c != nullptr; c = c->next) n++;
  p->mu.unlock();
  return n;
}

namespace {

// The deadline timer's reference hook: +1 when the timer enters a heap,
// -1 when it leaves: stopped, abandoned when gort::run returns, or after
// timer_fire. In that last case the reference goes to a goroutine that
// cancels: the runner is in scheduler context, and cancelling drops
// references that may run user destructors (Go's AfterFunc runs in a
// goroutine too). This is the runner's last touch of the node, so the
// goroutine may free it at once.
void timer_ref(Timer* t, int delta) {
  auto* n = static_cast<TimerNode*>(t->arg);
  if (delta > 0) {
    n->armed = SourceRef(n->shared_from_this());
  } else if (n->fired) {
    gort::go([src = std::move(n->armed)] {
      auto* n = static_cast<TimerNode*>(src.get());
      cancel(n, FromParent::kRemove, deadline_error(), n->deadline_cause);
    });
  } else {
    SourceRef drop = std::move(n->armed);
  }
}

// Followed by timer_ref(t, -1) on the same M.
void timer_fire(Timer* t, int64_t, uint32_t) { static_cast<TimerNode*>(t->arg)->fired = true; }

// t on the runtime's timer clock (clock_now: nanotime, or a bubble's fake
// time); 100 years or more: never.
int64_t nanotime_at(absl::Time t) {
  absl::Duration d = t - gort::now();
  if (d >= absl::Hours(24 * 365 * 100)) return int64_t{1} << 62;
  int64_t now = clock_now();
  int64_t ns = absl::ToInt64Nanoseconds(d);
  return ns > (int64_t{1} << 62) - now ? int64_t{1} << 62 : now + ns;
}

CancelFunc make_cancel(SourceRef src) {
  return [src = std::move(src)] { cancel(src.get(), FromParent::kRemove, canceled_error(), absl::OkStatus()); };
}

}  // namespace
}  // namespace internal

using internal::CancelNode;
using internal::SourceRef;

std::pair<Context, CancelFunc> with_cancel(const Context& parent) {
  auto n = std::make_shared<CancelNode>(CancelNode::Flavour::kCancel);
  n->parent = parent;
  n->depth = internal::depth_under(parent);
  n->deadline = parent.deadline();
  SourceRef src(n);  // first, so that `sources` is never 0 before the caller has it
  internal::propagate(parent, n, "gort::with_cancel");
  return {internal::ContextAccess::make(std::move(n)), internal::make_cancel(std::move(src))};
}

std::pair<Context, CancelCauseFunc> with_cancel_cause(const Context& parent) {
  auto n = std::make_shared<CancelNode>(CancelNode::Flavour::kCancel);
  n->parent = parent;
  n->depth = internal::depth_under(parent);
  n->deadline = parent.deadline();
  SourceRef src(n);
  internal::propagate(parent, n, "gort::with_cancel_cause");
  return {internal::ContextAccess::make(std::move(n)), [src = std::move(src)](absl::Status cause) {
            internal::cancel(src.get(), internal::FromParent::kRemove, internal::canceled_error(), cause);
          }};
}

std::pair<Context, CancelFunc> with_deadline_cause(const Context& parent, absl::Time t, absl::Status cause) {
  if (auto cur = parent.deadline(); cur && *cur < t) {
    return with_cancel(parent);  // the parent's deadline is sooner
  }
  bool future = t > gort::now();
  if (future) internal::require_running("gort::with_deadline", "a deadline needs a timer");
  auto n = std::make_shared<internal::TimerNode>();
  n->parent = parent;
  n->depth = internal::depth_under(parent);
  n->deadline = t;
  n->deadline_cause = std::move(cause);
  SourceRef src(n);
  internal::propagate(parent, n, "gort::with_deadline");
  if (!future) {  // the deadline has passed
    internal::cancel(n.get(), internal::FromParent::kRemove, internal::deadline_error(), n->deadline_cause);
    return {internal::ContextAccess::make(std::move(n)), internal::make_cancel(std::move(src))};
  }
  n->t.f = &internal::timer_fire;
  n->t.ref = &internal::timer_ref;
  n->t.arg = n.get();
  n->mu.lock();
  if (n->state.load(std::memory_order_relaxed) == CancelNode::kActive) {
    internal::timer_add(&n->t, internal::nanotime_at(t), 0);
    n->timer_armed = true;
  }
  n->mu.unlock();
  return {internal::ContextAccess::make(std::move(n)), internal::make_cancel(std::move(src))};
}

std::pair<Context, CancelFunc> with_deadline(const Context& parent, absl::Time t) {
  return with_deadline_cause(parent, t, absl::OkStatus());
}

std::pair<Context, CancelFunc> with_timeout(const Context& parent, absl::Duration d) {
  return with_deadline_cause(parent, gort::now() + d, absl::OkStatus());
}

std::pair<Context, CancelFunc> with_timeout_cause(const Context& parent, absl::Duration d, absl::Status cause) {
  return with_deadline_cause(parent, gort::now() + d, std::move(cause));
}

std::function<bool()> after_func(const Context& ctx, std::function<void()> f) {
  auto a = std::make_shared<internal::AfterFuncNode>();
  a->parent = ctx;
  a->depth = internal::depth_under(ctx);
  a->f = std::move(f);
  // Calling after_func happens before f runs (Go: through the context's
  // mutex, then the go statement): the cancel that starts f acquires this.
  internal::race_release(&a->f);
  SourceRef src(a);
  internal::propagate(ctx, a, "gort::after_func");
  return [src = std::move(src)]() -> bool {
    auto* a = static_cast<internal::AfterFuncNode*>(src.get());
    if (a->claimed.exchange(true, std::memory_order_acq_rel)) return false;
    a->f = nullptr;  // ours now: release what it holds
    internal::cancel(a, internal::FromParent::kRemove, internal::canceled_error(), absl::OkStatus());
    return true;
  };
}

}  // namespace gort

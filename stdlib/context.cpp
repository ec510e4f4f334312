// stdlib/context.cpp — gort::Context (Go's context.go, cancelCtx and
// timerCtx).
//
// Each node has a lock (a runtime lock: it is never held across a park)
// protecting its error, its children and its timer. Cancellation takes the
// node's lock, records the error, closes done, detaches the children and
// cancels them after unlocking (so a lock is never held while taking a
// child's: no lock order to get wrong). A child unregisters itself from its
// parent when cancelled on its own.
#include <mutex>
#include <unordered_map>

#include "gmp/lock.hpp"
#include "gort/context.hpp"
#include "gort/time.hpp"

namespace gort {

struct Context::Node : std::enable_shared_from_this<Context::Node> {
  std::atomic<uint32_t> lock{0};
  Chan<std::monostate> done = make_chan<std::monostate>();
  absl::Status err;  // OK until cancelled
  std::atomic<bool> cancelled{false};
  std::optional<absl::Time> deadline;
  std::weak_ptr<Node> parent;
  std::unordered_map<Node*, std::shared_ptr<Node>> child_refs;
  Timer timer;
  bool has_timer_ = false;

  void cancel(bool remove_from_parent, const absl::Status& why) {
    internal::lock_word(&lock);
    if (cancelled.load(std::memory_order_relaxed)) {
      internal::unlock_word(&lock);
      return;
    }
    err = why;
    cancelled.store(true, std::memory_order_release);
    auto kids = std::move(child_refs);
    child_refs.clear();
    Timer t = timer;
    bool has_timer = has_timer_;
    internal::unlock_word(&lock);
    done.close();
    if (has_timer) t.stop();  // release the deadline timer
    for (auto& [raw, child] : kids) child->cancel(false, why);
    if (remove_from_parent) {
      if (auto p = parent.lock()) {
        internal::lock_word(&p->lock);
        p->child_refs.erase(this);
        internal::unlock_word(&p->lock);
      }
    }
  }
};

Context::Context() = default;

Chan<std::monostate> Context::done() const { return n_ ? n_->done : Chan<std::monostate>(); }

absl::Status Context::err() const {
  if (!n_ || !n_->cancelled.load(std::memory_order_acquire)) return absl::OkStatus();
  internal::lock_word(&n_->lock);
  absl::Status s = n_->err;
  internal::unlock_word(&n_->lock);
  return s;
}

std::optional<absl::Time> Context::deadline() const {
  return n_ ? n_->deadline : std::nullopt;
}

Context background() { return Context(); }

namespace {

const absl::Status& canceled_error() {
  static const absl::Status s = absl::CancelledError("context canceled");
  return s;
}

const absl::Status& deadline_error() {
  static const absl::Status s = absl::DeadlineExceededError("context deadline exceeded");
  return s;
}

// Links child under parent (or cancels it at once if the parent already is).
void attach(const Context& parent, const std::shared_ptr<Context::Node>& child) {
  const auto& p = parent.node();
  if (!p) return;  // background is never cancelled
  child->parent = p;
  internal::lock_word(&p->lock);
  if (p->cancelled.load(std::memory_order_relaxed)) {
    absl::Status why = p->err;
    internal::unlock_word(&p->lock);
    child->cancel(false, why);
    return;
  }
  p->child_refs.emplace(child.get(), child);
  internal::unlock_word(&p->lock);
}

CancelFunc make_cancel(const std::shared_ptr<Context::Node>& n) {
  std::weak_ptr<Context::Node> w = n;
  return [w] {
    if (auto n = w.lock()) n->cancel(true, canceled_error());
  };
}

}  // namespace

std::pair<Context, CancelFunc> with_cancel(const Context& parent) {
  auto n = std::make_shared<Context::Node>();
  n->deadline = parent.deadline();
  attach(parent, n);
  return {Context(n), make_cancel(n)};
}

std::pair<Context, CancelFunc> with_deadline(const Context& parent, absl::Time t) {
  if (auto pd = parent.deadline(); pd && *pd <= t) {
    // The parent's deadline is sooner: this is just a cancel context.
    return with_cancel(parent);
  }
  auto n = std::make_shared<Context::Node>();
  n->deadline = t;
  attach(parent, n);
  absl::Duration d = t - absl::Now();
  if (d <= absl::ZeroDuration()) {
    n->cancel(true, deadline_error());
    return {Context(n), make_cancel(n)};
  }
  std::weak_ptr<Context::Node> w = n;
  internal::lock_word(&n->lock);
  if (!n->cancelled.load(std::memory_order_relaxed)) {
    n->timer = after_func(d, [w] {
      if (auto n = w.lock()) n->cancel(true, deadline_error());
    });
    n->has_timer_ = true;
  }
  internal::unlock_word(&n->lock);
  return {Context(n), make_cancel(n)};
}

std::pair<Context, CancelFunc> with_timeout(const Context& parent, absl::Duration d) {
  return with_deadline(parent, absl::Now() + d);
}

}  // namespace gort

// stdlib/sync/context_node.hpp — the nodes behind gort::Context (not public).
//
// Kinds (internal::ContextNode::Kind): kCancel (with_cancel, with_deadline and the
// registrations of after_func, Go's cancelCtx, timerCtx and afterFuncCtx),
// kValue (gort/context.hpp), kWithoutCancel, kCustom (a CustomContext),
// kTodo (one static node); background() is the null node.
//
// Ownership (docs/time-and-context.md#ownership). Go's graph is
// child -> parent (the embedded Context), parent -> child (the children
// set), CancelFunc -> node and timer -> node, and its collector frees what no
// goroutine can reach. Here:
//
//   | edge                         | held by                                | until                              |
//   |------------------------------|----------------------------------------|------------------------------------|
//   | child -> parent              | `parent` (a Context)                   | the child is destroyed             |
//   | cancel parent -> child       | the child's `listed`                   | either is cancelled, or detach     |
//   | CancelFunc, stop, watcher    | a SourceRef                            | it is destroyed                    |
//   | deadline timer -> node       | TimerNode::armed (a SourceRef)         | it fires (handed to the goroutine  |
//   |                              |                                        | that cancels) or is stopped        |
//
// The two first make a cycle while a child is linked. It is broken when
// either is cancelled, and otherwise by *detach*: a SourceRef is anything
// that may still cancel its node, and `sources` counts them. When the last
// one of a node that is not linked under a parent goes away, nothing can
// ever cancel that node or its children without sources of their own, and
// detach unlinks them all: what Go's collector would find unreachable (or
// reachable but never to be cancelled) is then freed by the handles'
// reference counts. `sources` never rises from 0 again: every SourceRef is
// made while the node has one (the CancelFunc's is made first).
//
// Locks: each cancel node's `mu` is a runtime lock word (never held across
// a park). No code holds two of them: cancellation and detach take a node's
// children out of its list under its lock and work on them after releasing
// it (iteratively, so deep trees take no stack). Fields marked "under
// registered_with->mu" belong to the list of the node the child is linked
// under. References are dropped only after unlocking, since dropping one
// may free nodes and run user destructors.
#pragma once

#include "stdlib/sync/room.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <variant>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmp/lock.hpp"
#include "gmp/bubble.hpp"
#include "gmp/timer.hpp"
#include "gort/chan.hpp"
#include "gort/context.hpp"

namespace gort::internal {

struct CancelNode;

// A strong reference that may cancel its node (see above): copies count.
class SourceRef {
 public:
  SourceRef() = default;
  explicit SourceRef(std::shared_ptr<CancelNode> n);
  SourceRef(const SourceRef& o);
  SourceRef(SourceRef&& o) noexcept = default;
  SourceRef& operator=(SourceRef o) noexcept {
    std::swap(n_, o.n_);
    return *this;
  }
  ~SourceRef() { reset(); }

  void reset();
  CancelNode* get() const { return n_.get(); }

 private:
  std::shared_ptr<CancelNode> n_;
};

// The runtime's view of a Context: its chain's nodes, and the custom
// context behind a kCustom node.
struct ContextAccess {
  static const std::shared_ptr<ContextNode>& node(const Context& c) noexcept { return c.n_; }
  static Context make(std::shared_ptr<ContextNode> n) noexcept { return Context(std::move(n)); }
  static const CustomContext* custom(const ContextNode* n) noexcept { return static_cast<const CustomContext*>(n); }
  static CustomContext* custom(ContextNode* n) noexcept { return static_cast<CustomContext*>(n); }
};

// The depth of a node made under `parent`.
inline uint32_t depth_under(const Context& parent) {
  const internal::ContextNode* p = internal::ContextAccess::node(parent).get();
  return p != nullptr ? p->depth + 1 : 1;
}

// Called by the destructor of a node at `depth` before `parent` (its link
// up) is destroyed. Dropping the last handle of a chain destroys each node
// from its child's destructor, a frame per level: every kChainChunk levels
// the rest of the chain is handed to a fresh goroutine, so that a chain of
// any length fits in a goroutine's stack.
void release_chain(Context* parent, uint32_t depth);
inline constexpr uint32_t kChainChunk = 256;

struct CancelNode : internal::ContextNode, std::enable_shared_from_this<CancelNode> {
  enum class Flavour : uint8_t { kCancel, kTimer, kAfterFunc };
  explicit CancelNode(Flavour f) : ContextNode(Kind::kCancel), flavour(f) {}
  CancelNode(const CancelNode&) = delete;
  CancelNode& operator=(const CancelNode&) = delete;
  ~CancelNode() { release_chain(&parent, depth); }

  // Set before the node is published, then read-only.
  Context parent;
  std::optional<absl::Time> deadline;
  const Flavour flavour;
  // The cancel node this one was linked under (kept alive by `parent`), or
  // null if it never was.
  CancelNode* registered_with = nullptr;

  mutable WordLock<LockRank::kCancelNode> mu;
  // kActive -> kCancelling (err and cause final) -> kCancelled (done
  // closed), both steps under mu (release). Readers of err and cause go
  // through settled_cancelled, so that they never see an error before done
  // is closed (Go's Err waits on Done for that).
  enum State : uint8_t { kActive, kCancelling, kCancelled };
  std::atomic<uint8_t> state{kActive};
  // done_ is set (stored with release under mu; done_ never changes then).
  std::atomic<bool> has_done{false};
  std::atomic<int64_t> sources{0};

  bool detached ABSL_GUARDED_BY(mu) = false;  // never to be cancelled
  bool timer_armed ABSL_GUARDED_BY(mu) = false;
  // Written under mu; read without it once has_done says it is set.
  Chan<std::monostate> done_;
  // Written under mu; read without it once state says they are final.
  absl::Status err;
  absl::Status cause;
  CancelNode* first_child ABSL_GUARDED_BY(mu) = nullptr;
  // Unregisters from a custom parent's after_func (Go's stopCtx).
  std::function<bool()> stop_parent ABSL_GUARDED_BY(mu);

  // Under registered_with->mu: the list of its children, and its reference.
  CancelNode* prev = nullptr;
  CancelNode* next = nullptr;
  std::shared_ptr<CancelNode> listed;
};

struct TimerNode final : CancelNode {
  // The deadline's timer runs on the creator's bubble's fake clock, if any.
  TimerNode() : CancelNode(Flavour::kTimer) { timer_bind_bubble(&t); }
  ~TimerNode() { timer_unbind_bubble(&t); }
  Timer t;
  absl::Status deadline_cause;
  // The timer's reference, from its entering a heap until it is stopped or
  // abandoned, or handed to the goroutine that cancels when it fires.
  SourceRef armed;
  bool fired = false;  // set by the runner, then read by it (timer_ref)
};

struct AfterFuncNode final : CancelNode {
  AfterFuncNode() : CancelNode(Flavour::kAfterFunc) {}
  std::atomic<bool> claimed{false};  // Go's once: set by whoever runs or stops f
  std::function<void()> f;           // owned by whoever set claimed
};

// Whether cancel unlinks the node from its parent (Go's removeFromParent):
// not when the parent is what cancels it.
enum class FromParent : bool { kKeep = false, kRemove = true };
// Go's cancel: marks n cancelled (if it is not yet) with err and cause (OK:
// cause = err), closes done, cancels its children, starts an after_func's f,
// stops the timer, and with FromParent::kRemove unlinks n from its parent.
void cancel(CancelNode* n, FromParent from_parent, const absl::Status& err, const absl::Status& cause);
// Go's propagateCancel: arranges for child (not yet published) to be
// cancelled with `parent`. `op` names the caller in a panic.
void propagate(const Context& parent, const std::shared_ptr<CancelNode>& child, const char* op);
Chan<std::monostate> cancel_done(CancelNode* n);
absl::Status cancel_err(const CancelNode* n);
// True if n is cancelled, once its done channel is closed (err and cause
// are final then).
bool settled_cancelled(const CancelNode* n);

const absl::Status& canceled_error();
const absl::Status& deadline_error();

// Go's parentCancelCtx without its done check: the innermost cancel node
// of ctx's chain, seen through value nodes and WrappedContexts; null if a
// kind that cannot be seen through comes first.
CancelNode* innermost_cancel_node(const Context& ctx);

// Test hooks: watcher goroutines started for custom parents (Go's
// `goroutines` counter), and the children linked under ctx's innermost
// cancel node (Go's len(children); after_func registrations count).
int64_t context_watchers_started();
size_t context_children(const Context& ctx);

}  // namespace gort::internal

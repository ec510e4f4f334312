// stdlib/sync/context.cpp — gort::Context handles (Go's context.go apart from
// the cancellation tree, which is stdlib/sync/context_cancel.cpp): the methods
// of each kind, background and todo, values, without_cancel, cause and the
// chain's name (Go's String methods).

#include <cstdlib>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gort/context.hpp"
#include "gort/time.hpp"
#include "gmp/sched.hpp"
#include "stdlib/sync/context_node.hpp"

namespace gort {

using internal::CancelNode;
using internal::ContextAccess;
using internal::ValueNodeBase;
using Kind = internal::ContextNode::Kind;

namespace {

struct WithoutCancelNode final : internal::ContextNode {
  WithoutCancelNode() : ContextNode(Kind::kWithoutCancel) {}
  WithoutCancelNode(const WithoutCancelNode&) = delete;
  WithoutCancelNode& operator=(const WithoutCancelNode&) = delete;
  ~WithoutCancelNode() { internal::release_chain(&parent, depth); }
  Context parent;
};

// Where done(), err() and deadline() are answered: value nodes forward to
// their nearest other ancestor.
const internal::ContextNode* state_of(const internal::ContextNode* n) {
  if (n != nullptr && n->kind == Kind::kValue) return static_cast<const ValueNodeBase*>(n)->state;
  return n;
}

const internal::ContextNode* parent_of(const internal::ContextNode* n) {
  switch (n->kind) {
    case Kind::kCancel:
      return internal::ContextAccess::node(static_cast<const CancelNode*>(n)->parent).get();
    case Kind::kValue:
      return internal::ContextAccess::node(static_cast<const ValueNodeBase*>(n)->parent).get();
    case Kind::kWithoutCancel:
      return internal::ContextAccess::node(static_cast<const WithoutCancelNode*>(n)->parent).get();
    default:
      return nullptr;
  }
}

}  // namespace

Context::Context() = default;

Context::Context(std::shared_ptr<CustomContext> custom)
    : n_(custom ? std::shared_ptr<internal::ContextNode>(custom, static_cast<internal::ContextNode*>(custom.get())) : nullptr) {}

Chan<std::monostate> Context::done() const {
  const internal::ContextNode* s = state_of(n_.get());
  if (s == nullptr) return {};
  switch (s->kind) {
    case Kind::kCancel:
      return internal::cancel_done(const_cast<CancelNode*>(static_cast<const CancelNode*>(s)));
    case Kind::kCustom:
      return ContextAccess::custom(s)->done();
    default:
      return {};
  }
}

absl::Status Context::err() const {
  const internal::ContextNode* s = state_of(n_.get());
  if (s == nullptr) return absl::OkStatus();
  switch (s->kind) {
    case Kind::kCancel:
      return internal::cancel_err(static_cast<const CancelNode*>(s));
    case Kind::kCustom:
      return ContextAccess::custom(s)->err();
    default:
      return absl::OkStatus();
  }
}

std::optional<absl::Time> Context::deadline() const {
  const internal::ContextNode* s = state_of(n_.get());
  if (s == nullptr) return std::nullopt;
  switch (s->kind) {
    case Kind::kCancel:
      return static_cast<const CancelNode*>(s)->deadline;
    case Kind::kCustom:
      return ContextAccess::custom(s)->deadline();
    default:
      return std::nullopt;
  }
}

const void* Context::lookup(const ContextKeyBase& key) const {
  for (const internal::ContextNode* n = n_.get(); n != nullptr; n = parent_of(n)) {
    if (n->kind == Kind::kValue) {
      auto* v = static_cast<const ValueNodeBase*>(n);
      if (v->key == &key) return v->value;
    } else if (n->kind == Kind::kCustom) {
      return ContextAccess::custom(n)->lookup(key);
    }
  }
  return nullptr;
}

std::string Context::to_string() const {
  // Innermost first, then joined from the root: chains may be long, and a
  // recursive String() would take a frame per level.
  std::vector<std::string> parts;
  const internal::ContextNode* n = n_.get();
  for (; n != nullptr; n = parent_of(n)) {
    if (n->kind == Kind::kCustom) {
      parts.push_back(ContextAccess::custom(n)->to_string());
      break;
    }
    if (n->kind == Kind::kTodo) {
      parts.push_back("context.TODO");
      break;
    }
    if (n->kind == Kind::kWithoutCancel) {
      parts.push_back(".WithoutCancel");
    } else if (n->kind == Kind::kValue) {
      auto* v = static_cast<const ValueNodeBase*>(n);
      parts.push_back(absl::StrCat(".WithValue(", v->key->describe(), ", ", v->describe(v->value), ")"));
    } else {
      auto* c = static_cast<const CancelNode*>(n);
      if (c->flavour == CancelNode::Flavour::kTimer) {
        parts.push_back(absl::StrCat(".WithDeadline(",
                                     absl::FormatTime("%Y-%m-%d %H:%M:%E*S %z %Z", *c->deadline,
                                                      absl::LocalTimeZone()),
                                     " [", absl::FormatDuration(*c->deadline - gort::now()), "])"));
      } else {
        parts.push_back(".WithCancel");
      }
    }
  }
  if (n == nullptr) parts.push_back("context.Background");
  std::string s;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) s += *it;
  return s;
}

std::ostream& operator<<(std::ostream& os, const Context& ctx) { return os << ctx.to_string(); }

Context background() { return Context(); }

Context todo() {
  static const std::shared_ptr<internal::ContextNode> node = std::make_shared<internal::ContextNode>(Kind::kTodo);
  return ContextAccess::make(node);
}

Context without_cancel(const Context& parent) {
  auto n = std::make_shared<WithoutCancelNode>();
  n->parent = parent;
  n->depth = internal::depth_under(parent);
  return ContextAccess::make(std::move(n));
}

absl::Status cause(const Context& ctx) {
  if (CancelNode* c = internal::innermost_cancel_node(ctx)) {
    if (internal::settled_cancelled(c)) return c->cause;
    // Not cancelled when we looked: asking err() now could see a
    // cancellation whose cause we missed.
    if (state_of(internal::ContextAccess::node(ctx).get()) == c) return absl::OkStatus();
  }
  // A custom kind's own error (it has no cause), or OK.
  return ctx.err();
}

CustomContext::~CustomContext() = default;

std::string CustomContext::to_string() const { return internal::type_name(typeid(*this)); }

std::function<bool()> CustomContext::after_func(std::function<void()>) { return {}; }

std::string ContextKeyBase::describe() const {
  return name_.empty() ? internal::type_name(type_()) : std::string(name_);
}

namespace internal {

ValueNodeBase::~ValueNodeBase() { release_chain(&parent, depth); }

void release_chain(Context* parent, uint32_t depth) {
  if (depth % kChainChunk != 0 || !internal::ContextAccess::node(*parent) || !runtime.running.load(std::memory_order_acquire)) return;
  try {
    gort::go([p = std::move(*parent)]() mutable { p = Context(); });
  } catch (const panic_error&) {
    // The runtime stopped meanwhile: the caller's stack drops it.
  }
}

Context link_value(const Context& parent, const ContextKeyBase& key, std::shared_ptr<ValueNodeBase> n) {
  n->parent = parent;
  n->depth = depth_under(parent);
  n->state = state_of(internal::ContextAccess::node(parent).get());
  n->key = &key;
  return ContextAccess::make(std::move(n));
}

}  // namespace internal
}  // namespace gort

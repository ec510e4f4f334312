// gort/context.hpp — Go's context package: cancellation, deadlines and
// request-scoped values that flow down a tree of operations.
//
//   auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(2));
//   auto conn = gort::net::dial(ctx, "tcp", "example.com:80");  // gives up after 2 s
//   cancel();                                                   // release the timer
//   // std::chrono works too (gort/chrono.hpp): with_timeout(ctx, 2s),
//   // with_deadline(ctx, std::chrono::steady_clock::now() + 2s).
//
//   gort::select(gort::on_recv(ctx.done(), [&](auto) { return; }),
//                gort::on_recv(work, [&](auto w) { ... }));
//
//   inline const gort::ContextKey<std::string> kRequestId{"request-id"};
//   gort::Context req = gort::with_value(ctx, kRequestId, "a1b2");
//   if (const std::string* id = req.value(kRequestId)) log(*id);
//
// A Context is a copyable handle; copies share the same node. Cancelling a
// context cancels all its descendants (never its parent). ctx.done() is a
// channel closed on cancellation (the nil channel for a context that can
// never be cancelled, such as background()); ctx.err() is OK until then,
// then absl::CancelledError("context canceled") or
// absl::DeadlineExceededError("context deadline exceeded"); cause(ctx) is
// the reason given to a CancelCauseFunc (Go 1.20). The first cancellation
// wins. to_string() names the chain as Go's String() does:
// "context.Background.WithCancel.WithValue(request-id, a1b2)".
//
// Ownership is Go's (docs/time-and-context.md#ownership): a handle keeps its
// node and all its ancestors; a parent keeps its uncancelled children (so a
// done channel held on its own is still closed); a CancelFunc keeps the
// context it cancels; a deadline's timer keeps its context until it fires
// or is stopped. A cancelled context is released by its parent, and a tree
// that nobody can cancel any more (every CancelFunc dropped uncalled, no
// timer) is released when its handles are gone. Call the CancelFunc when
// done (it is idempotent), as in Go.
//
// User-defined kinds of context derive from CustomContext (or, to override
// a few methods of a parent, WrappedContext), as a Go type implements the
// Context interface; their children are cancelled with them as Go's
// propagateCancel arranges.
//
// Costs: with_cancel allocates the node and its CancelFunc; done() makes
// the channel on its first call (a context cancelled before that shares one
// closed channel); with_value allocates one node; a deadline's timer lives
// in its node. All calls are safe from any goroutine or plain thread and
// never park. The runtime (gort::run) is needed only by a deadline in the
// future and by a parent of a custom kind that a goroutine watches; without
// it those with_* calls panic.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <stop_token>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gort/chan.hpp"
#include "gort/chrono.hpp"
#include "gort/detail/api.hpp"

namespace gort {

using CancelFunc = std::function<void()>;
// Cancels with a cause (Go's CancelCauseFunc); an OK status means
// "no cause", and cause(ctx) then reports ctx.err().
using CancelCauseFunc = std::function<void(absl::Status)>;

class CustomContext;
namespace internal {
struct ContextAccess;  // stdlib/sync/context_node.hpp: the runtime's view of a Context

// What every node of a chain is; the kinds themselves are not public.
struct ContextNode {
  enum class Kind : uint8_t { kTodo, kCancel, kValue, kWithoutCancel, kCustom };
  explicit ContextNode(Kind k) noexcept : kind(k) {}
  Kind kind;
  uint32_t depth = 0;  // nodes above it, plus one (a custom node: 0)
};
}  // namespace internal

// The identity of a context value: the key object's address (two keys never
// compare equal, whatever their names). Define keys as long-lived objects,
// typically `inline const ContextKey<T> kName{"name"};` in your header.
class GORT_API ContextKeyBase {
 public:
  ContextKeyBase(const ContextKeyBase&) = delete;
  ContextKeyBase& operator=(const ContextKeyBase&) = delete;

  // The name given at construction (it must outlive the key: a literal).
  std::string_view name() const { return name_; }
  // How to_string() shows the key: its name, or its type if it has none.
  std::string describe() const;

 protected:
  constexpr ContextKeyBase(std::string_view name, const std::type_info& (*type)())
      : name_(name), type_(type) {}
  ~ContextKeyBase() = default;

 private:
  std::string_view name_;
  const std::type_info& (*type_)();
};

// A key for values of type T: with_value(ctx, key, T) stores one,
// ctx.value(key) returns a `const T*`.
template <class T>
class ContextKey final : public ContextKeyBase {
  static_assert(std::is_object_v<T> && !std::is_array_v<T>, "gort::ContextKey<T>: T must be an object type");

 public:
  constexpr explicit ContextKey(std::string_view name = {}) : ContextKeyBase(name, &type) {}

 private:
  static const std::type_info& type() { return typeid(ContextKey); }
};

class GORT_API Context {
 public:
  // background().
  Context();
  // A context of a user-defined kind (null: background()).
  explicit Context(std::shared_ptr<CustomContext> custom);

  // Closed when the context is cancelled or its deadline passes; the nil
  // channel (never ready) if it can never be cancelled. The same channel on
  // every call.
  Chan<std::monostate> done() const;
  absl::Status err() const;
  std::optional<absl::Time> deadline() const;

  // The value stored under `key` by the nearest with_value on the chain, or
  // nullptr. It lives as long as any handle on this chain.
  template <class T>
  const T* value(const ContextKey<T>& key) const {
    return static_cast<const T*>(lookup(key));
  }
  // Untyped form of value() (Go's Value), for CustomContext::lookup: a
  // pointer to the T stored under a ContextKey<T>, or nullptr.
  const void* lookup(const ContextKeyBase& key) const;

  // The chain, as Go's String(): "context.Background.WithCancel".
  std::string to_string() const;


 private:
  friend struct internal::ContextAccess;
  explicit Context(std::shared_ptr<internal::ContextNode> n) noexcept : n_(std::move(n)) {}

  std::shared_ptr<internal::ContextNode> n_;  // null: background
};

GORT_API std::ostream& operator<<(std::ostream& os, const Context& ctx);

// A user-defined kind of context (Go: a type implementing context.Context).
// Held by shared_ptr; create the handle with make_context<T>(args...). The
// methods must be safe from any goroutine, must not park, and must keep
// Go's rules: done() returns the same channel every time, err() is OK until
// done() is closed and the same error afterwards.
//
// A child of a custom context is cancelled when the custom context's done()
// closes, with its err() and cause(): through after_func() if the kind
// supports it (Go 1.21's AfterFunc method), else by a goroutine that waits
// on both (Go 1.19's way; it ends when either is done). A WrappedContext
// whose done() is its parent's costs neither: the child joins the parent.
class GORT_API CustomContext : private internal::ContextNode {
 public:
  CustomContext() : ContextNode(Kind::kCustom) {}
  CustomContext(const CustomContext&) = default;
  CustomContext& operator=(const CustomContext&) = default;
  virtual ~CustomContext();

  virtual std::optional<absl::Time> deadline() const = 0;
  virtual Chan<std::monostate> done() const = 0;
  virtual absl::Status err() const = 0;
  // Go's Value: see Context::lookup.
  virtual const void* lookup(const ContextKeyBase& key) const = 0;
  // The default is the demangled type name (Go: the type of a context that
  // is no Stringer).
  virtual std::string to_string() const;
  // Optional (Go 1.21's afterFuncer): arrange for f() to be called once
  // when done() is closed, without blocking the caller (in a goroutine or
  // from whatever closes it), and return a function that unregisters f and
  // returns true if it did so before f was called. The default returns an
  // empty function: not supported.
  virtual std::function<bool()> after_func(std::function<void()> f);

 private:
  friend class Context;
  friend struct internal::ContextAccess;
};

// A custom context that forwards everything to a parent; derive from it and
// override what differs (Go: a struct embedding a context.Context).
class GORT_API WrappedContext : public CustomContext {
 public:
  explicit WrappedContext(Context parent) : parent_(std::move(parent)) {}

  std::optional<absl::Time> deadline() const override { return parent_.deadline(); }
  Chan<std::monostate> done() const override { return parent_.done(); }
  absl::Status err() const override { return parent_.err(); }
  const void* lookup(const ContextKeyBase& key) const override { return parent_.lookup(key); }
  const Context& parent() const { return parent_; }

 private:
  Context parent_;
};

template <class T, class... Args>
Context make_context(Args&&... args) {
  static_assert(std::is_base_of_v<CustomContext, T>, "gort::make_context<T>: T must derive from gort::CustomContext");
  return Context(std::shared_ptr<CustomContext>(std::make_shared<T>(std::forward<Args>(args)...)));
}

// The root context: never cancelled, no deadline, no values.
GORT_API Context background();
// Like background(); says "the right context is not plumbed through yet"
// (Go's TODO). to_string() tells them apart.
GORT_API Context todo();

// A child that is cancelled when cancel is called or the parent is.
[[nodiscard]] GORT_API std::pair<Context, CancelFunc> with_cancel(const Context& parent);
// Like with_cancel; cancel(cause) records a cause for cause() (Go 1.20).
[[nodiscard]] GORT_API std::pair<Context, CancelCauseFunc> with_cancel_cause(const Context& parent);
// A child cancelled at t (or earlier, with the parent or by cancel) with
// absl::DeadlineExceededError("context deadline exceeded"). If the parent's
// deadline is earlier, this is with_cancel(parent). A deadline in the
// future needs the runtime: outside gort::run it panics.
[[nodiscard]] GORT_API std::pair<Context, CancelFunc> with_deadline(const Context& parent, absl::Time t);
[[nodiscard]] GORT_API std::pair<Context, CancelFunc> with_timeout(const Context& parent, absl::Duration d);
// Like with_deadline/with_timeout; when the deadline passes, cause() reports
// `cause` (Go 1.21). The CancelFunc sets no cause.
[[nodiscard]] GORT_API std::pair<Context, CancelFunc> with_deadline_cause(const Context& parent, absl::Time t, absl::Status cause);
[[nodiscard]] GORT_API std::pair<Context, CancelFunc> with_timeout_cause(const Context& parent, absl::Duration d, absl::Status cause);

// The same four with a std::chrono time point or duration (gort/chrono.hpp):
// `gort::with_timeout(ctx, 200ms)`, `gort::with_deadline(ctx,
// std::chrono::steady_clock::now() + 1s)`.
template <chrono_time_point T>
[[nodiscard]] std::pair<Context, CancelFunc> with_deadline(const Context& parent, T t) {
  return gort::with_deadline(parent, from_chrono(t));
}
template <chrono_duration D>
[[nodiscard]] std::pair<Context, CancelFunc> with_timeout(const Context& parent, D d) {
  return gort::with_timeout(parent, from_chrono(d));
}
template <chrono_time_point T>
[[nodiscard]] std::pair<Context, CancelFunc> with_deadline_cause(const Context& parent, T t, absl::Status cause) {
  return gort::with_deadline_cause(parent, from_chrono(t), std::move(cause));
}
template <chrono_duration D>
[[nodiscard]] std::pair<Context, CancelFunc> with_timeout_cause(const Context& parent, D d, absl::Status cause) {
  return gort::with_timeout_cause(parent, from_chrono(d), std::move(cause));
}

// A child with the parent's values that is never cancelled: no deadline,
// err() always OK, done() the nil channel, cause() OK (Go 1.21).
GORT_API Context without_cancel(const Context& parent);

namespace internal {

struct GORT_API ValueNodeBase : ContextNode {
  ValueNodeBase() : ContextNode(Kind::kValue) {}
  ValueNodeBase(const ValueNodeBase&) = delete;
  ValueNodeBase& operator=(const ValueNodeBase&) = delete;
  ~ValueNodeBase();
  Context parent;
  // The nearest ancestor that is not a value node (null: background):
  // done(), err() and deadline() are its.
  const internal::ContextNode* state = nullptr;
  const ContextKeyBase* key = nullptr;
  const void* value = nullptr;
  std::string (*describe)(const void* value) = nullptr;
};

// T's demangled name ("std::string", "acme::Key"), as panics name types
// (gmp/diag/exception.cpp).
GORT_API std::string type_name(const std::type_info& t);

template <class T>
concept HasToString = requires(const T& v) {
  { v.to_string() } -> std::convertible_to<std::string>;
};

// Go's stringify for to_string(): strings as they are, Stringers (here: a
// to_string() member) by their string, null as "<nil>", anything else by
// its type.
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

// Go's stringify for to_string(): strings as they are, Stringers (here: a
// to_string() member) by their string, null (a null pointer, nullptr, an
// empty optional) as "<nil>", anything else by its type.
template <class T>
std::string describe_value(const void* p) {
  const T& v = *static_cast<const T*>(p);
  if constexpr (std::is_same_v<T, std::nullptr_t>) {
    return "<nil>";
  } else if constexpr (IsOptional<T>::value) {
    if (!v) return "<nil>";
    return describe_value<typename T::value_type>(&*v);
  } else if constexpr (std::is_pointer_v<T>) {
    if (v == nullptr) return "<nil>";
    if constexpr (std::is_convertible_v<T, std::string_view>) {
      return std::string(std::string_view(v));
    } else {
      return type_name(typeid(T));
    }
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return std::string(std::string_view(v));
  } else if constexpr (HasToString<T>) {
    return std::string(v.to_string());
  } else {
    return type_name(typeid(T));
  }
}

template <class T>
struct ValueNode final : ValueNodeBase {
  explicit ValueNode(T x) : v(std::move(x)) {
    value = &v;
    describe = &describe_value<T>;
  }
  T v;
};

GORT_API Context link_value(const Context& parent, const ContextKeyBase& key, std::shared_ptr<ValueNodeBase> n);

}  // namespace internal

// A child carrying `value` under `key`; every other lookup goes to the
// parent. Use values for request-scoped data, not optional arguments (Go's
// advice).
template <class T>
[[nodiscard]] Context with_value(const Context& parent, const ContextKey<T>& key, std::type_identity_t<T> value) {
  return internal::link_value(parent, key, std::make_shared<internal::ValueNode<T>>(std::move(value)));
}

// Why ctx was cancelled: the cause given to the CancelCauseFunc (or to
// with_deadline_cause) of the context whose cancellation reached ctx first,
// else ctx.err(); OK while ctx is not cancelled.
GORT_API absl::Status cause(const Context& ctx);

// Go 1.21's AfterFunc: calls f in its own goroutine once ctx is done (at
// once if it already is). The returned stop function unregisters f: it
// returns true if that kept f from being started, false if f was already
// started or stopped; it does not wait for f. If ctx is cancelled while the
// runtime is not running, f does not run.
GORT_API std::function<bool()> after_func(const Context& ctx, std::function<void()> f);

// ---- std::stop_token, both ways (docs/standard-cpp.md) ----

// A child of parent that is also cancelled (err() "context canceled") when
// a stop is requested on st: std::jthread's token reaches gort code that
// takes a Context. If the stop was already requested, the child is
// cancelled before this returns. The stop callback is registered for as
// long as the child (or a copy of it) lives; the CancelFunc is with_cancel's.
[[nodiscard]] inline std::pair<Context, CancelFunc> with_stop_token(const Context& parent, std::stop_token st) {
  auto [ctx, cancel] = with_cancel(parent);
  using Callback = std::stop_callback<CancelFunc>;
  static const ContextKey<std::shared_ptr<Callback>> kStopCallback{"gort.stop_callback"};
  auto cb = std::make_shared<Callback>(std::move(st), cancel);
  return {with_value(ctx, kStopCallback, std::move(cb)), std::move(cancel)};
}

// A std::stop_token whose stop is requested once ctx is done: a Context
// reaches C++ code that takes a token (std::condition_variable_any's wait,
// a std::jthread's loop). For a context that can never be cancelled
// (background()) the token's stop_possible() is false. The request is made
// by after_func's goroutine, so it needs the runtime, as after_func does.
[[nodiscard]] inline std::stop_token make_stop_token(const Context& ctx) {
  if (ctx.done().is_nil()) return std::stop_token();
  std::stop_source src;
  std::stop_token token = src.get_token();
  (void)after_func(ctx, [src]() mutable { src.request_stop(); });
  return token;
}

}  // namespace gort

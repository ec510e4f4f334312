// tests/stdlib/sync/context_helpers.hpp — what the context suites share: Go's
// two errors and test durations, Go's otherContext, non-blocking and
// bounded checks of a done channel, and weak references to watch nodes go.
#pragma once

#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gort/context.hpp"
#include "gort/chan.hpp"
#include "gort/time.hpp"
#include "stdlib/sync/context_node.hpp"

namespace gort::test {

inline const absl::Status kCanceled = absl::CancelledError("context canceled");
inline const absl::Status kDeadline = absl::DeadlineExceededError("context deadline exceeded");

// Go's test durations: something to wait for that should not happen, a
// deadline that never comes, and a bound on what must happen.
inline constexpr absl::Duration kShort = absl::Milliseconds(1);
inline constexpr absl::Duration kVeryLong = absl::Hours(1000);
inline constexpr absl::Duration kQuiescent = absl::Seconds(20);

// Go's otherContext: a custom kind that embeds a context and overrides
// nothing, so that the package cannot take it for one of its own.
struct OtherContext final : gort::WrappedContext {
  using WrappedContext::WrappedContext;
};

inline gort::Context other(const gort::Context& c) { return gort::make_context<OtherContext>(c); }

// The channel is closed: a receive completes at once with nullopt.
inline bool is_closed(const gort::Chan<std::monostate>& ch) {
  bool done = false;
  gort::select(gort::on_recv(ch, [&](std::optional<std::monostate> v) { done = !v.has_value(); }),
               gort::on_default());
  return done;
}

inline bool is_done(const gort::Context& ctx) { return is_closed(ctx.done()); }

// Waits (bounded: for something that must happen) until ch is closed.
inline bool closed_within(const gort::Chan<std::monostate>& ch, absl::Duration limit) {
  bool done = false;
  auto bound = gort::new_timer(limit);
  gort::select(gort::on_recv(ch, [&](auto) { done = true; }), gort::on_recv(bound.chan()));
  bound.stop();
  return done;
}

inline bool done_within(const gort::Context& ctx, absl::Duration limit) {
  return closed_within(ctx.done(), limit);
}

// Weak references to context nodes, to watch them being released.
class NodeWatch {
 public:
  void add(const gort::Context& c) { nodes_.push_back(gort::internal::ContextAccess::node(c)); }
  // How many of the watched nodes still exist.
  int alive() const {
    int n = 0;
    for (const auto& w : nodes_) n += w.expired() ? 0 : 1;
    return n;
  }
  size_t size() const { return nodes_.size(); }

 private:
  std::vector<std::weak_ptr<gort::internal::ContextNode>> nodes_;
};

}  // namespace gort::test

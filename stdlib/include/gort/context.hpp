// gort/context.hpp — Go's context package: cancellation and deadlines that
// flow down a tree of operations.
//
//   auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(2));
//   auto conn = gort::net::dial(ctx, "tcp", "example.com:80");  // gives up after 2 s
//   cancel();                                                   // release the timer
//
//   gort::select(gort::on_recv(ctx.done(), [&](auto) { return; }),
//                gort::on_recv(work, [&](auto w) { ... }));
//
// A Context is a copyable handle; copies share the same node. Cancelling a
// context cancels all its descendants (never its parent). ctx.done() is a
// channel closed on cancellation (the nil channel for background(), which is
// never cancelled); ctx.err() is OK until then, then
// absl::CancelledError("context canceled") or
// absl::DeadlineExceededError("context deadline exceeded"). A deadline
// context releases its timer when cancelled; call the CancelFunc when done
// with it (as in Go; it is idempotent). All methods are safe from any
// goroutine and never park.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gort/chan.hpp"

namespace gort {

using CancelFunc = std::function<void()>;

class Context {
 public:
  // background().
  Context();

  // Closed when the context is cancelled or its deadline passes.
  Chan<std::monostate> done() const;
  absl::Status err() const;
  std::optional<absl::Time> deadline() const;

  struct Node;
  explicit Context(std::shared_ptr<Node> n) : n_(std::move(n)) {}
  const std::shared_ptr<Node>& node() const { return n_; }

 private:
  std::shared_ptr<Node> n_;  // null: background
};

// The root context: never cancelled, no deadline.
Context background();
// A child that is cancelled when cancel is called or the parent is.
std::pair<Context, CancelFunc> with_cancel(const Context& parent);
// A child cancelled at t (or earlier, with the parent or by cancel) with
// absl::DeadlineExceededError("context deadline exceeded").
std::pair<Context, CancelFunc> with_deadline(const Context& parent, absl::Time t);
std::pair<Context, CancelFunc> with_timeout(const Context& parent, absl::Duration d);

}  // namespace gort

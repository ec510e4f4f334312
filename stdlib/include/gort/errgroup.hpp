// gort/errgroup.hpp — Go's golang.org/x/sync/errgroup: a group of
// goroutines working on parts of one task, where the first failure is the
// task's result and (with a context) cancels the others.
//
//   gort::errgroup::Group g(ctx);                // Go's errgroup.WithContext
//   for (const std::string& url : urls) {
//     g.go([&, url]() -> absl::Status {
//       return fetch(g.context(), url);          // stops early once one fails
//     });
//   }
//   absl::Status err = g.wait();                 // the first error, or OK
//
// - go(f) starts f in a new goroutine. f returns absl::Status (Go's
//   `func() error`) or void (always OK). The first non-OK status is kept;
//   with a context, it also cancels the group's context with that status as
//   its cause (gort::cause).
// - wait() waits until every f has returned, cancels the context (with the
//   first error as the cause, or plain `context canceled`), and returns the
//   first error. A group may be used again after wait; its first error
//   (and context cancellation) stay, as in Go.
// - set_limit(n): at most n goroutines at a time; go() then waits for room,
//   try_go() does not start f and returns false. n < 0: no limit. Changing
//   the limit while goroutines of the group are active panics, as in Go:
//   `errgroup: modify limit while 2 goroutines in the group are still
//   active`.
// - C++ exceptions: an exception that escapes f is caught, counts as the
//   group's failure (the context is cancelled with cause `errgroup: a
//   goroutine threw: <what()>`), and wait() rethrows the first one once
//   every goroutine has returned — so it reaches the caller of wait, as it
//   would have in sequential code, instead of ending the process.
// - The destructor waits for goroutines still running (as std::jthread
//   joins): f may refer to the group. Call wait() to get the result.
//
// Thread-safety: go/try_go may be called from any goroutine (or plain
// thread while the runtime runs) concurrently; wait from one at a time.
// set_limit while nothing runs. Costs: go() is one gort::go plus a
// WaitGroup add, and with a limit one channel send; the first failure takes
// a Mutex once.
#pragma once

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/detail/api.hpp"
#include "gort/runtime.hpp"
#include "gort/sync.hpp"

namespace gort::errgroup {

class GORT_API Group {
 public:
  // A group without a context: a failure cancels nothing, and there is no
  // limit (Go's zero Group).
  Group() = default;
  // Go's errgroup.WithContext: context() is derived from parent and
  // cancelled by the first failure or by wait().
  explicit Group(const Context& parent);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // The group's context (a default-constructed group: background()).
  const Context& context() const { return ctx_; }

  // f: callable with no arguments (a constraint: reported at the call).
  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&>
  void go(F&& f) {
    if (sem_) sem_.send(0);
    spawn(std::forward<F>(f));
  }

  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&>
  [[nodiscard]] bool try_go(F&& f) {
    if (sem_ && gort::select(on_send(sem_, char{0}), on_default()) == 1) return false;
    spawn(std::forward<F>(f));
    return true;
  }

  absl::Status wait();
  void set_limit(int n);

 private:
  template <class F>
  void spawn(F&& f) {
    wg_.add(1);
    gort::go([this, f = std::forward<F>(f)]() mutable {
      try {
        if constexpr (std::is_void_v<std::invoke_result_t<decltype(f)&>>) {
          f();
        } else {
          absl::Status s = f();
          if (!s.ok()) fail(std::move(s));
        }
      } catch (...) {
        fail_exception(std::current_exception());
      }
      done();
    });
  }
  void fail(absl::Status s);
  void fail_exception(std::exception_ptr e);
  void done();

  Context ctx_ = background();
  CancelCauseFunc cancel_;
  WaitGroup wg_;
  Chan<char> sem_;  // nil: no limit
  Mutex mu_;        // guards err_, exc_
  std::optional<absl::Status> err_;
  std::exception_ptr exc_;
};

}  // namespace gort::errgroup

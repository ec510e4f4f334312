// gort/chan.hpp — Go's channels and select.
//
// Chan<T> is a copyable handle to a channel (Go's `chan T`); copies refer to
// the same channel, which lives until the last copy is gone. A
// default-constructed Chan is the nil channel: send and recv block forever,
// close panics, and select never picks it. A moved-from Chan is not nil:
// every use of it (send, recv, close, len, cap, range, a select case) panics
// `<op> moved-from gort::Chan`, where a nil channel would hang silently;
// assign to it to use it again. Give each goroutine its own copy (capture by
// value): a send can still be running when its value has been received, and
// must not find the channel destroyed (docs/channels.md).
//
//   auto results = gort::make_chan<int>();       // unbuffered
//   for (int i = 0; i < 3; i++) gort::go([results, i] { results.send(i * i); });
//   for (int i = 0; i < 3; i++) std::printf("%d\n", *results.recv());
//
//   auto jobs = gort::make_chan<std::string>(100);  // buffered
//   gort::go([jobs] { for (auto& j : load()) jobs.send(j); jobs.close(); });
//   for (std::string j : jobs) process(j);           // until closed & drained
//
//   gort::select(
//       gort::on_recv(jobs, [](std::optional<std::string> j) { ... }),
//       gort::on_send(out, 42, [] { ... }),
//       gort::on_default([] { ... }));
//
//   // A std::ranges::input_range that receives lazily: take(3) receives
//   // three values and leaves the fourth in the channel.
//   for (int v : results | std::views::take(3)) use(v);
//
//   void produce(gort::SendChan<int> out);   // Go's chan<- int
//   void consume(gort::RecvChan<int> in);    // Go's <-chan int
//   produce(results);                        // a Chan converts to either
//
// Semantics are Go's: an unbuffered send completes when a receiver takes the
// value (a parked receiver gets it moved straight into its slot and runs
// next on this P); sends on a closed channel panic `send on closed channel`
// (also a sender parked when the channel gets closed); close panics `close of
// closed channel` / `close of nil channel`; receivers get every buffered value
// and then std::nullopt forever once closed. send, recv, range-for (and
// std::ranges algorithms and views over a channel) and a select without
// default may park the calling goroutine; close, len, cap never do. All
// operations are safe from any goroutine; called from a plain OS thread they
// wait by sleeping the thread.
//
// T must be nothrow-move-constructible (the move happens under the channel
// lock, or inside a buffer slot that others may be waiting on). Costs: an
// unbuffered hand-off takes the channel's lock once; a buffered send or
// receive takes no lock (one CAS on the buffer's head or tail, and the
// slot) unless it has to park or to wake a parked partner. Nothing
// allocates; make_chan allocates the channel and its buffer in one block.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "gort/detail/chan_ops.hpp"
#include "gort/runtime.hpp"

namespace gort {

namespace internal {

template <class T>
void move_to(void* dst, void* src) {
  ::new (dst) T(std::move(*static_cast<T*>(src)));
}
template <class T>
void destroy_elem(void* p) {
  static_cast<T*>(p)->~T();
}
template <class T>
inline constexpr ElemType kElemType = {
    sizeof(T), alignof(T), &move_to<T>, &destroy_elem<T>,
    std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>};

// Uninitialised storage for one T.
template <class T>
struct Slot {
  alignas(T) unsigned char bytes[sizeof(T)];
  void* ptr() { return bytes; }
  std::optional<T> take(bool present) {
    if (!present) return std::nullopt;
    T* p = std::launder(reinterpret_cast<T*>(bytes));
    std::optional<T> r(std::move(*p));
    p->~T();
    return r;
  }
};

// The runtime's view of a channel handle (select's cases, timers): its
// core. Not part of the API; defined below the handles.
struct ChanAccess;

}  // namespace internal

template <class T>
class Chan {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "gort::Chan<T>: T must be nothrow move constructible");
  static_assert(!std::is_reference_v<T> && !std::is_array_v<T>, "gort::Chan<T>: T must be an object type");

 public:
  using value_type = T;
  class iterator;

  Chan() noexcept = default;  // the nil channel
  Chan(const Chan& o) noexcept : c_(o.c_) {
    if (internal::is_chan(c_)) internal::chan_retain(c_);
  }
  // Leaves o moved-from (not nil): any use of o but assigning to it,
  // destroying it or copying it (the copy is moved-from too) panics.
  Chan(Chan&& o) noexcept : c_(std::exchange(o.c_, internal::moved_from_chan())) {}
  Chan& operator=(const Chan& o) noexcept {
    if (internal::is_chan(o.c_)) internal::chan_retain(o.c_);
    if (internal::is_chan(c_)) internal::chan_release(c_);
    c_ = o.c_;
    return *this;
  }
  Chan& operator=(Chan&& o) noexcept {
    if (this != &o) {
      if (internal::is_chan(c_)) internal::chan_release(c_);
      c_ = std::exchange(o.c_, internal::moved_from_chan());
    }
    return *this;
  }
  ~Chan() {
    if (internal::is_chan(c_)) internal::chan_release(c_);
  }

  // Blocks until the value is received (unbuffered) or buffered.
  void send(T v) const { internal::chan_send(c_, &v); }
  // Blocks until a value arrives; std::nullopt once closed and drained.
  std::optional<T> recv() const {
    internal::Slot<T> s;
    bool ok = internal::chan_recv(c_, s.ptr());
    return s.take(ok);
  }
  void close() const { internal::chan_close(c_); }
  // Not noexcept: on a moved-from handle they panic, as every operation does.
  size_t len() const { return internal::chan_len(c_); }
  size_t cap() const { return internal::chan_cap(c_); }

  // The nil channel (default-constructed or set to {}); a moved-from handle
  // is not nil. bool(ch) is !ch.is_nil().
  bool is_nil() const noexcept { return c_ == nullptr; }
  explicit operator bool() const noexcept { return c_ != nullptr; }
  friend bool operator==(const Chan& a, const Chan& b) noexcept { return a.c_ == b.c_; }

  // A std::ranges::input_range: range-for, std::ranges algorithms and
  // std::views receive until the channel is closed and drained (Go's
  // `for v := range ch`). The end is std::default_sentinel. See iterator.
  iterator begin() const noexcept { return iterator(c_); }
  std::default_sentinel_t end() const noexcept { return std::default_sentinel; }

 private:
  template <class U>
  friend Chan<U> make_chan(size_t cap);
  friend struct internal::ChanAccess;
  explicit Chan(internal::ChanCore* c) : c_(c) {}

  // nullptr: the nil channel; internal::moved_from_chan(): moved from.
  internal::ChanCore* c_ = nullptr;
};

// The iterator of a Chan<T> (and RecvChan<T>): an input iterator that never
// receives ahead of what its user consumes. The receive happens lazily, at
// the first comparison with the end or the first dereference after an
// increment, whichever comes first; ++ only marks the value consumed (it
// receives, and drops, a value only when it skips one nobody looked at). So
// `ch | std::views::take(3)` receives exactly three values, and the next
// recv() gets the fourth.
//
// *it is the value held in the iterator: T& for a copyable T (binds to
// `T v` (a copy), `T&`, `const T&`, `auto&`, `auto&&`), T&& for a move-only
// T (binds to `T v` (moves it out), `const T&`, `T&&`, `auto&&`; not to
// `T&`). T&& only where a copy is impossible: a filter's predicate that
// takes a copyable T by value must not steal the value its view yields
// next. Dereferencing again gives the same value; dereferencing the end
// (the channel closed and drained) panics.
//
// The iterator is move-only (a copy would be a second reader at the same
// position) and holds a reference to the channel, so it stays valid if the
// handle it came from goes away. T need not be assignable: each value is
// constructed where the last one was destroyed. Not for sharing between
// goroutines (give each its own range-for).
template <class T>
class Chan<T>::iterator {
 public:
  using iterator_concept = std::input_iterator_tag;
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  using reference = std::conditional_t<std::is_copy_constructible_v<T>, T&, T&&>;

  iterator() noexcept = default;  // an end
  // A moved-from iterator is an end.
  iterator(iterator&& o) noexcept { take(o); }
  iterator& operator=(iterator&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  iterator(const iterator&) = delete;
  iterator& operator=(const iterator&) = delete;
  ~iterator() { reset(); }

  // The current value, received now if it has not been. May park.
  reference operator*() const { return static_cast<reference>(current()); }
  T* operator->() const { return std::addressof(current()); }
  // Marks the current value consumed. May park only to skip a value that
  // was never looked at.
  iterator& operator++() {
    if (state_ == State::kPending) fetch();
    if (state_ == State::kHeld) {
      held().~T();
      state_ = State::kPending;
    }
    return *this;
  }
  void operator++(int) { ++*this; }
  // At the end once the channel is closed and drained. May park (to find
  // out, it receives the current value).
  friend bool operator==(const iterator& it, std::default_sentinel_t) {
    if (it.state_ == State::kPending) it.fetch();
    return it.state_ == State::kEnd;
  }

 private:
  friend class Chan<T>;
  // kPending: the current value is not received yet; kHeld: it is in slot_;
  // kEnd: the channel was closed and drained.
  enum class State : unsigned char { kPending, kHeld, kEnd };

  explicit iterator(internal::ChanCore* c) noexcept : c_(c), state_(State::kPending) {
    if (internal::is_chan(c_)) internal::chan_retain(c_);
  }
  T& held() const { return *std::launder(reinterpret_cast<T*>(slot_.ptr())); }
  void take(iterator& o) noexcept {
    c_ = std::exchange(o.c_, nullptr);
    state_ = std::exchange(o.state_, State::kEnd);
    if (state_ == State::kHeld) {
      ::new (slot_.ptr()) T(std::move(o.held()));
      o.held().~T();
    }
  }
  void reset() noexcept {
    if (state_ == State::kHeld) held().~T();
    state_ = State::kEnd;
    if (internal::is_chan(c_)) internal::chan_release(c_);
    c_ = nullptr;
  }
  // Panics (moved-from handle) or parks (nil channel) as recv does.
  void fetch() const { state_ = internal::chan_recv(c_, slot_.ptr()) ? State::kHeld : State::kEnd; }
  T& current() const {
    if (state_ == State::kPending) fetch();
    if (state_ != State::kHeld) throw panic_error("gort::Chan iterator: dereference at the end (channel closed)");
    return held();
  }

  internal::ChanCore* c_ = nullptr;
  mutable State state_ = State::kEnd;
  mutable internal::Slot<T> slot_;
};

// A new channel with room for `cap` buffered values (0: unbuffered).
template <class T>
Chan<T> make_chan(size_t cap = 0) {
  return Chan<T>(internal::chan_make(&internal::kElemType<T>, cap));
}

// ---- directional handles ----

namespace internal {

// What every handle to a channel offers; SendChan and RecvChan add their
// direction's operations.
template <class T>
class ChanView {
 public:
  using value_type = T;

  size_t len() const { return c_.len(); }
  size_t cap() const { return c_.cap(); }
  bool is_nil() const noexcept { return c_.is_nil(); }
  explicit operator bool() const noexcept { return static_cast<bool>(c_); }

 protected:
  friend struct ChanAccess;
  ChanView() = default;
  explicit ChanView(Chan<T> c) noexcept : c_(std::move(c)) {}
  Chan<T> c_;
};

struct ChanAccess {
  template <class T>
  static ChanCore* core(const Chan<T>& c) noexcept {
    return c.c_;
  }
  template <class T>
  static ChanCore* core(const ChanView<T>& v) noexcept {
    return v.c_.c_;
  }
};

}  // namespace internal

// Go's `chan<- T`: a handle through which a channel can only be sent on
// (and closed, and measured). A Chan<T> converts to it implicitly, as a
// `chan T` is assignable to a `chan<- T`; nothing converts back. Give one
// to a producer to say, and have the compiler check, that it only sends.
//
//   void produce(gort::SendChan<Job> out) { ...; out.send(job); out.close(); }
//   auto jobs = gort::make_chan<Job>(16);
//   gort::go(produce, jobs);
//
// A copyable handle like Chan<T> (default-constructed: the nil channel),
// with the same semantics, costs and panics for what it offers. It compares
// equal to a SendChan or Chan<T> of the same channel; comparing it with a
// RecvChan does not compile (nor does it in Go).
template <class T>
class SendChan : public internal::ChanView<T> {
 public:
  SendChan() = default;  // the nil channel
  SendChan(Chan<T> c) noexcept : internal::ChanView<T>(std::move(c)) {}  // NOLINT: implicit, as in Go

  void send(T v) const { this->c_.send(std::move(v)); }
  // Go lets a send-only channel be closed: its producer is who closes it.
  void close() const { this->c_.close(); }

  friend bool operator==(const SendChan& a, const SendChan& b) { return a.c_ == b.c_; }
  friend bool operator==(const SendChan& a, const Chan<T>& b) { return a.c_ == b; }
};

// Go's `<-chan T`: a handle through which a channel can only be received
// from (recv, range-for, select's on_recv, len, cap). It cannot send or
// close: those do not compile, as in Go, where closing a receive-only
// channel is a compile error. A Chan<T> converts to it implicitly.
//
//   void consume(gort::RecvChan<Job> in) { for (Job j : in) run(j); }
//
// A copyable handle like Chan<T>; compares equal to a RecvChan or Chan<T>
// of the same channel.
template <class T>
class RecvChan : public internal::ChanView<T> {
 public:
  using iterator = typename Chan<T>::iterator;

  RecvChan() = default;  // the nil channel
  RecvChan(Chan<T> c) noexcept : internal::ChanView<T>(std::move(c)) {}  // NOLINT: implicit, as in Go

  std::optional<T> recv() const { return this->c_.recv(); }
  // A std::ranges::input_range, as Chan<T>: receives until closed and
  // drained, never ahead of what is consumed (Chan<T>::iterator).
  iterator begin() const noexcept { return this->c_.begin(); }
  std::default_sentinel_t end() const noexcept { return std::default_sentinel; }

  friend bool operator==(const RecvChan& a, const RecvChan& b) { return a.c_ == b.c_; }
  friend bool operator==(const RecvChan& a, const Chan<T>& b) { return a.c_ == b; }
};

// ---- select ----

template <class T, class F>
struct RecvCase {
  internal::ChanCore* c;
  F f;
  internal::Slot<T> slot;
};

template <class T, class F>
struct SendCase {
  internal::ChanCore* c;
  T v;
  F f;
};

template <class F>
struct DefaultCase {
  F f;
};

namespace internal {
struct Noop {
  template <class... A>
  void operator()(A&&...) const {}
};
}  // namespace internal

namespace internal {
// What on_recv's callback may take: the received value (nullopt: closed), or
// nothing. A constraint rather than a static_assert, so that a wrong
// callback is reported at the on_recv call.
template <class F, class T>
concept RecvCallback = std::is_invocable_v<F&, std::optional<T>> || std::is_invocable_v<F&>;
template <class F>
concept CaseCallback = std::is_invocable_v<F&>;
}  // namespace internal

// A receive case: f is called with std::optional<T> (nullopt: the channel is
// closed), or with no argument if it does not take one.
template <class T, class F = internal::Noop>
  requires internal::RecvCallback<F, T>
RecvCase<T, F> on_recv(const Chan<T>& ch, F f = {}) {
  return RecvCase<T, F>{internal::ChanAccess::core(ch), std::move(f), {}};
}

template <class T, class F = internal::Noop>
  requires internal::RecvCallback<F, T>
RecvCase<T, F> on_recv(const RecvChan<T>& ch, F f = {}) {
  return RecvCase<T, F>{internal::ChanAccess::core(ch), std::move(f), {}};
}

// A send case: f() is called once the value has been sent.
template <class T, class U, class F = internal::Noop>
  requires std::is_constructible_v<T, U&&> && internal::CaseCallback<F>
SendCase<T, F> on_send(const Chan<T>& ch, U&& v, F f = {}) {
  return SendCase<T, F>{internal::ChanAccess::core(ch), T(std::forward<U>(v)), std::move(f)};
}
template <class T, class U, class F = internal::Noop>
  requires std::is_constructible_v<T, U&&> && internal::CaseCallback<F>
SendCase<T, F> on_send(const SendChan<T>& ch, U&& v, F f = {}) {
  return SendCase<T, F>{internal::ChanAccess::core(ch), T(std::forward<U>(v)), std::move(f)};
}

// Makes the select non-blocking: chosen when no other case is ready.
template <class F = internal::Noop>
  requires internal::CaseCallback<F>
DefaultCase<F> on_default(F f = {}) {
  return DefaultCase<F>{std::move(f)};
}

namespace internal {

template <class C>
struct CaseTraits;
template <class T, class F>
struct CaseTraits<RecvCase<T, F>> {
  static constexpr bool is_default = false;
  static SelectCase make(RecvCase<T, F>& c) { return {c.c, c.slot.ptr(), false, false}; }
  static void run(RecvCase<T, F>& c, const SelectCase& sc) {
    std::optional<T> v = c.slot.take(sc.received);
    if constexpr (std::is_invocable_v<F&, std::optional<T>>) {
      c.f(std::move(v));
    } else {
      c.f();  // internal::RecvCallback
    }
  }
};
template <class T, class F>
struct CaseTraits<SendCase<T, F>> {
  static constexpr bool is_default = false;
  static SelectCase make(SendCase<T, F>& c) { return {c.c, &c.v, true, false}; }
  static void run(SendCase<T, F>& c, const SelectCase&) { c.f(); }
};
template <class F>
struct CaseTraits<DefaultCase<F>> {
  static constexpr bool is_default = true;
  static SelectCase make(DefaultCase<F>&) { return {nullptr, nullptr, false, false}; }
  static void run(DefaultCase<F>& c, const SelectCase&) { c.f(); }
};

template <class... Cases, size_t... I>
size_t select_impl(std::index_sequence<I...>, Cases&... cases) {
  constexpr size_t n = sizeof...(Cases);
  constexpr size_t ndefault = (0 + ... + (CaseTraits<Cases>::is_default ? 1 : 0));
  constexpr size_t default_index = [] {
    size_t idx = n;
    size_t i = 0;
    ((CaseTraits<Cases>::is_default ? (idx = i, ++i) : ++i), ...);
    return idx;
  }();
  SelectCase sc[n > 0 ? n : 1] = {CaseTraits<Cases>::make(cases)...};
  int chosen = selectgo(sc, static_cast<int>(n), ndefault == 0);
  size_t idx = chosen < 0 ? default_index : static_cast<size_t>(chosen);
  ((I == idx ? (CaseTraits<Cases>::run(cases, sc[I]), 0) : 0), ...);
  return idx;
}

// select's cases: each made by on_recv, on_send or on_default, and at most
// one on_default.
template <class C>
concept SelectCaseOf = requires { CaseTraits<std::remove_cvref_t<C>>::is_default; };
template <class... Cases>
concept SelectCases = (SelectCaseOf<Cases> && ...) &&
                      (0 + ... + (CaseTraits<std::remove_cvref_t<Cases>>::is_default ? 1 : 0)) <= 1;

}  // namespace internal

// Go's select: runs exactly one ready case, chosen uniformly at random
// among the ready ones, and returns its index (in argument order). Without
// an on_default case it parks until a case is ready; with one it never
// blocks. Cases on nil channels are never ready; a receive from a closed
// channel is always ready (with std::nullopt). A select with no cases (or
// only nil channels and no default) blocks forever. Anything but cases, or
// a second on_default, does not compile (internal::SelectCases).
template <class... Cases>
  requires internal::SelectCases<Cases...>
size_t select(Cases&&... cases) {
  return internal::select_impl(std::index_sequence_for<Cases...>{}, cases...);
}

}  // namespace gort

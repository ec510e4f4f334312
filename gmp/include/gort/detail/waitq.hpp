// gort/detail/waitq.hpp — Go's waitq: the two ends of a queue of blocked
// goroutines and threads, embedded in gort's sync objects.
//
// Not part of the public API: included by <gort/detail/sema.hpp> and
// <gort/sync.hpp> so that a Mutex or Semaphore carries its queue inline.
// The records (Sudog) and the operations are the runtime's own
// (gmp/sudog.hpp); the queue is used under its owner's lock.
#pragma once

namespace gort::internal {

struct Sudog;
struct WakeList;  // gmp/sudog.hpp

struct WaitQ {
  Sudog* first = nullptr;
  Sudog* last = nullptr;

  bool empty() const noexcept { return first == nullptr; }
  // Defined in gmp/sudog.hpp, for the runtime's own translation units.
  inline void push(Sudog* s) noexcept;
  inline void push_front(Sudog* s) noexcept;
  inline void remove(Sudog* s) noexcept;
  inline Sudog* dequeue() noexcept;
  inline Sudog* take_all() noexcept;  // returns the last
  // Empties the queue into *wl (success = false, as a close wants them),
  // dropping select Sudogs whose select already completed.
  inline void drain(WakeList* wl) noexcept;
};

}  // namespace gort::internal

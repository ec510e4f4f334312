// gmp/transition.hpp — checked state machines.
//
// A state machine of the runtime is an enum class whose legal transitions
// are written once, as a table of (from, to) pairs next to the enum, at the
// top of the file that owns it (gmp/p.hpp's PStatus, gmp/m.hpp's
// RetakeState, ...). TransitionTable folds the pairs at compile time into a
// bit set, so that checking a transition whose states are constants, as
// nearly every caller's are, costs nothing, and any other a shift and a
// test:
//
//   enum class Door : uint8_t { kOpen, kShut, kLocked };
//   inline constexpr const char* kDoorNames[] = {"open", "shut", "locked"};
//   inline constexpr Transition<Door> kDoorTransitions[] = {
//       {Door::kOpen, Door::kShut},    // who makes it
//       {Door::kShut, Door::kOpen},
//       {Door::kShut, Door::kLocked},
//       {Door::kLocked, Door::kShut},
//   };
//   inline constexpr TransitionTable<Door> kDoorTable{kDoorTransitions, kDoorNames};
//   static_assert(!kDoorTable.legal(Door::kOpen, Door::kLocked));
//
// Each machine's setters check the transition, and for the owner's own
// changes (a checked load, then a store) the state found; a broken one is a
// runtime bug, which bad_transition reports as a fatal error naming the
// machine, both states and, when the transition is legal but the state was
// another, the state found. A CAS that loses a race is no error: the
// setters of racy transitions return whether theirs won.
#pragma once

#include "gmp/room.hpp"

#include <cstddef>
#include <cstdint>

namespace gort::internal {

template <class S>
struct Transition {
  S from;
  S to;
};

// At most 8 states (from * 8 + to indexes 64 bits; a state past that does
// not compile).
template <class S>
class TransitionTable {
 public:
  template <size_t N, size_t K>
  constexpr TransitionTable(const Transition<S> (&edges)[N], const char* const (&names)[K]) : names_(names), count_(K) {
    for (const Transition<S>& e : edges) bits_ |= bit(e.from, e.to);
  }
  constexpr bool legal(S from, S to) const { return (bits_ & bit(from, to)) != 0; }
  constexpr const char* name(S s) const {
    return static_cast<size_t>(s) < count_ ? names_[static_cast<size_t>(s)] : "(not a state)";
  }

 private:
  static constexpr uint64_t bit(S from, S to) {
    return uint64_t{1} << (static_cast<unsigned>(from) * 8 + static_cast<unsigned>(to));
  }
  uint64_t bits_ = 0;
  const char* const* names_;
  size_t count_;
};

// Dies with `fatal error: <machine> <id>: ...`: "illegal <field> transition
// <from> -> <to>" when found is null, else "<field> <from> -> <to> found it
// <found>". machine and id name whose state it is ("P", 3).
[[noreturn]] void bad_transition(const char* machine, int64_t id, const char* field, const char* from,
                                 const char* to, const char* found);

template <class S>
[[noreturn, gnu::cold, gnu::noinline]] void bad_transition(const TransitionTable<S>& table, const char* machine,
                                                           int64_t id, const char* field, S from, S to, S found) {
  bad_transition(machine, id, field, table.name(from), table.name(to),
                 table.legal(from, to) ? table.name(found) : nullptr);
}

}  // namespace gort::internal

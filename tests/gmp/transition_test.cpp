// tests/gmp/transition_test.cpp — the runtime's checked state machines
// (gmp/transition.hpp): each table holds exactly the transitions its file
// documents, and a change outside its table, or from a state the object is
// not in, is a fatal error naming the states.
#include <iterator>
#include <memory>

#include "gmp/m.hpp"
#include "gmp/p.hpp"
#include "gmp/sched.hpp"
#include "tests/testing.hpp"

namespace gort::test {
namespace {

using internal::PStatus;
using internal::RetakeState;
using internal::SliceTimerState;
using internal::TracebackState;

enum class Door : uint8_t { kOpen, kShut, kLocked };
constexpr const char* kDoorNames[] = {"open", "shut", "locked"};
constexpr internal::Transition<Door> kDoorTransitions[] = {
    {Door::kOpen, Door::kShut},
    {Door::kShut, Door::kOpen},
    {Door::kShut, Door::kLocked},
    {Door::kLocked, Door::kShut},
};
constexpr internal::TransitionTable<Door> kDoorTable{kDoorTransitions, kDoorNames};

// Folded at compile time: a check whose states are constants costs nothing.
static_assert(kDoorTable.legal(Door::kShut, Door::kLocked));
static_assert(kDoorTable.legal(Door::kLocked, Door::kShut));
static_assert(!kDoorTable.legal(Door::kOpen, Door::kLocked));
static_assert(!kDoorTable.legal(Door::kOpen, Door::kOpen));

// Every name table covers its enum.
static_assert(std::size(internal::kPStatusNames) == static_cast<size_t>(PStatus::kDead) + 1);
static_assert(std::size(internal::kRetakeStateNames) == static_cast<size_t>(RetakeState::kDone) + 1);
static_assert(std::size(internal::kSliceTimerStateNames) == static_cast<size_t>(SliceTimerState::kMade) + 1);
static_assert(std::size(internal::kTracebackStateNames) == static_cast<size_t>(TracebackState::kDone) + 1);

// How many (from, to) pairs the table allows, over every pair of states.
template <class S>
int legal_pairs(const internal::TransitionTable<S>& table, int nstates) {
  int n = 0;
  for (int from = 0; from < nstates; from++) {
    for (int to = 0; to < nstates; to++) n += table.legal(static_cast<S>(from), static_cast<S>(to));
  }
  return n;
}

TEST(TransitionTable, AllowsItsRowsAndNothingElse) {
  EXPECT_EQ(legal_pairs(kDoorTable, 3), 4);
  EXPECT_STREQ(kDoorTable.name(Door::kLocked), "locked");
  EXPECT_STREQ(kDoorTable.name(static_cast<Door>(5)), "(not a state)");
}

TEST(TransitionTable, PStatusIsTheDocumentedMachine) {
  const auto& t = internal::kPStatusTable;
  EXPECT_EQ(legal_pairs(t, 5), static_cast<int>(std::size(internal::kPStatusTransitions)));
  EXPECT_EQ(legal_pairs(t, 5), 12);
  // A P is never handed from one M to another while it runs, never runs
  // blocking() without having run, and leaves use only stopped.
  EXPECT_TRUE(t.legal(PStatus::kIdle, PStatus::kRunning));
  EXPECT_TRUE(t.legal(PStatus::kBlocking, PStatus::kIdle));
  EXPECT_TRUE(t.legal(PStatus::kDead, PStatus::kStopped));
  EXPECT_FALSE(t.legal(PStatus::kIdle, PStatus::kBlocking));
  EXPECT_FALSE(t.legal(PStatus::kRunning, PStatus::kDead));
  EXPECT_FALSE(t.legal(PStatus::kDead, PStatus::kRunning));
  EXPECT_FALSE(t.legal(PStatus::kRunning, PStatus::kRunning));
}

TEST(TransitionTable, RetakeIsTheDocumentedMachine) {
  const auto& t = internal::kRetakeTable;
  EXPECT_EQ(legal_pairs(t, 3), 4);
  EXPECT_TRUE(t.legal(RetakeState::kNone, RetakeState::kDeciding));
  EXPECT_TRUE(t.legal(RetakeState::kDone, RetakeState::kNone));
  // sysmon decides before it takes; only the M leaves kDone.
  EXPECT_FALSE(t.legal(RetakeState::kNone, RetakeState::kDone));
  EXPECT_FALSE(t.legal(RetakeState::kDone, RetakeState::kDeciding));
}

TEST(TransitionTable, SliceTimerIsTheDocumentedMachine) {
  const auto& t = internal::kSliceTimerTable;
  EXPECT_EQ(legal_pairs(t, 3), 4);
  EXPECT_TRUE(t.legal(SliceTimerState::kMaking, SliceTimerState::kMade));
  EXPECT_FALSE(t.legal(SliceTimerState::kNone, SliceTimerState::kMade));
  EXPECT_FALSE(t.legal(SliceTimerState::kMade, SliceTimerState::kMaking));
}

TEST(TransitionTable, TracebackRequestIsTheDocumentedMachine) {
  const auto& t = internal::kTracebackTable;
  EXPECT_EQ(legal_pairs(t, 4), 6);
  EXPECT_TRUE(t.legal(TracebackState::kBusy, TracebackState::kAsked));
  // Only the handler answers, and only the asker lets an answer go.
  EXPECT_FALSE(t.legal(TracebackState::kAsked, TracebackState::kDone));
  EXPECT_FALSE(t.legal(TracebackState::kDone, TracebackState::kAsked));
  EXPECT_FALSE(t.legal(TracebackState::kBusy, TracebackState::kIdle));
}

// A P of no run: its owner's changes move it, a CAS that finds it
// elsewhere fails quietly (someone else moved it first).
TEST(PStatus, SettersMoveAPAlongTheTable) {
  auto p = std::make_unique<internal::P>();
  EXPECT_EQ(p->status.load(), PStatus::kIdle);
  internal::set_status(p.get(), PStatus::kIdle, PStatus::kRunning);
  internal::set_status(p.get(), PStatus::kRunning, PStatus::kBlocking);
  EXPECT_FALSE(internal::cas_status(p.get(), PStatus::kRunning, PStatus::kIdle));
  EXPECT_EQ(p->status.load(), PStatus::kBlocking);
  EXPECT_TRUE(internal::cas_status(p.get(), PStatus::kBlocking, PStatus::kStopped));
  EXPECT_FALSE(internal::cas_status(p.get(), PStatus::kBlocking, PStatus::kRunning));
  internal::set_status(p.get(), PStatus::kStopped, PStatus::kDead);
  EXPECT_EQ(p->status.load(), PStatus::kDead);
}

gort::Config one_p() {
  gort::Config cfg;
  cfg.procs = 1;
  return cfg;
}

// In the main goroutine, on P 0 (kRunning), with its M's retake at kNone.
template <class F>
void on_main_goroutine(F f) {
  ::alarm(30);
  gort::run([&f] { f(current_m()); }, one_p());
}

TEST(PStatusDeath, IllegalTransitionNamesBothStates) {
  EXPECT_EXIT(on_main_goroutine([](internal::M* m) {
                internal::set_status(m->p, PStatus::kRunning, PStatus::kDead);
              }),
              ::testing::ExitedWithCode(2), "fatal error: P 0: illegal status transition running -> dead\n");
}

TEST(PStatusDeath, UnexpectedStateNamesTheStateFound) {
  EXPECT_EXIT(on_main_goroutine([](internal::M* m) {
                internal::set_status(m->p, PStatus::kIdle, PStatus::kRunning);
              }),
              ::testing::ExitedWithCode(2), "fatal error: P 0: status idle -> running found it running\n");
}

// A CAS is checked against the table too, before it is tried.
TEST(PStatusDeath, IllegalCasNamesBothStates) {
  EXPECT_EXIT(on_main_goroutine([](internal::M* m) {
                (void)internal::cas_status(m->p, PStatus::kIdle, PStatus::kBlocking);
              }),
              ::testing::ExitedWithCode(2), "fatal error: P 0: illegal status transition idle -> blocking\n");
}

TEST(RetakeDeath, UnexpectedStateNamesTheStateFound) {
  EXPECT_EXIT(on_main_goroutine([](internal::M* m) {
                internal::set_retake(m, RetakeState::kDone, RetakeState::kNone, std::memory_order_relaxed);
              }),
              ::testing::ExitedWithCode(2), "fatal error: M [0-9]+: retake done -> none found it none\n");
}

TEST(RetakeDeath, IllegalTransitionNamesBothStates) {
  EXPECT_EXIT(on_main_goroutine([](internal::M* m) {
                (void)internal::cas_retake(m, RetakeState::kNone, RetakeState::kDone);
              }),
              ::testing::ExitedWithCode(2), "fatal error: M [0-9]+: illegal retake transition none -> done\n");
}

}  // namespace
}  // namespace gort::test

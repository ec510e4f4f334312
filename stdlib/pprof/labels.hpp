// stdlib/pprof/labels.hpp — label sets (Go's pprof labels) behind
// G::labels (gmp/profiling.hpp): immutable, reference-counted, sorted by key.
//
// Who may read a set: its holders (a goroutine reads its own G::labels
// freely), and a profile that reads other goroutines' pointers or keeps a
// pointer past its owner (the CPU profile's samples, a goroutine profile's
// walk) while it holds a LabelsHold. A set whose last reference goes while
// a hold exists is freed when the last hold ends, never before: the hold
// is taken under the same lock the last release looks at, after which the
// holder's loads of G::labels see every replacement made before (labels.cpp).
//
// A CPU profile holds for its whole length, and a server that labels each
// request releases sets all along: its hold is a flushing one, whose owner
// frees the sets released so far once it has read every sample taken
// before (labels_take_released), unless another hold is under way.
#pragma once

#include "stdlib/pprof/room.hpp"

#include <vector>

#include "gmp/g.hpp"
#include "gmp/profiling.hpp"
#include "gort/pprof.hpp"

namespace gort::internal {

// A new set holding `kv` (a key given twice keeps its last value), with
// one reference; null for an empty one.
GLabels* labels_make(pprof::LabelSet kv);
// The pairs of a set (empty for null). Only while it is held.
const pprof::LabelSet& labels_of(const GLabels* l);

// Another goroutine's set, for a holder of a LabelsHold.
inline GLabels* labels_load(const G* g) { return __atomic_load_n(&g->labels, __ATOMIC_ACQUIRE); }

// Keeps every set alive while it exists (see the top). A flushing hold
// (one at a time: the CPU profile's) lets labels_take_released hand its
// owner the sets released meanwhile.
class LabelsHold {
 public:
  enum class Kind : bool { kPlain, kFlushing };
  explicit LabelsHold(Kind kind = Kind::kPlain);
  ~LabelsHold();
  LabelsHold(const LabelsHold&) = delete;
  LabelsHold& operator=(const LabelsHold&) = delete;

 private:
  Kind kind_;
};

// For the owner of the flushing hold: the sets released until now, unless
// a plain hold exists (then none). The owner frees them (labels_free) once
// it has read every sample taken until now: a sample names a set its
// goroutine held when the sample was taken, before the set's release.
std::vector<GLabels*> labels_take_released();
void labels_free(const std::vector<GLabels*>& sets);

}  // namespace gort::internal

// stdlib/pprof/labels.cpp — see labels.hpp; the public label calls of
// gort/pprof.hpp.
//
// Why a deferred free and not a reference taken by the reader: a profile
// reads another goroutine's G::labels while that goroutine may replace it
// and drop the last reference at once; a reference taken after the load
// could revive a set already being freed. So a reader announces itself
// first (LabelsHold, under the deferred list's lock) and the last release
// looks under that lock:
//
//   release before the hold: the replacing store happened before the
//     release's unlock, hence before the hold's lock and the reader's later
//     loads, which see the new pointer;
//   release after the hold: the set goes on g_deferred and is freed when
//     the last hold ends.
#include "stdlib/pprof/labels.hpp"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "gmp/tls.hpp"

namespace gort::internal {
namespace {

struct LabelSetImpl : GLabels {
  pprof::LabelSet kv;  // sorted by key, keys unique
};

LabelSetImpl* impl(GLabels* l) { return static_cast<LabelSetImpl*>(l); }
const LabelSetImpl* impl(const GLabels* l) { return static_cast<const LabelSetImpl*>(l); }

// Never destroyed: goroutines may still release sets while the process
// exits.
struct Deferred {
  std::mutex mu;
  int64_t holds = 0;            // guarded by mu: every hold
  int64_t plain_holds = 0;      // guarded by mu: those that do not flush
  std::vector<GLabels*> sets;   // guarded by mu: released while held
};
Deferred* const g_deferred = new Deferred;

void release(GLabels* l) {
  {
    std::lock_guard<std::mutex> lock(g_deferred->mu);
    if (g_deferred->holds > 0) {
      g_deferred->sets.push_back(l);
      return;
    }
  }
  delete impl(l);
}

// Replaces the calling goroutine's set with `next` (whose reference it
// takes over) and returns the old one with its reference.
GLabels* swap_own(G* g, GLabels* next) {
  GLabels* old = g->labels;
  __atomic_store_n(&g->labels, next, __ATOMIC_RELEASE);
  return old;
}

}  // namespace

GLabels* labels_make(pprof::LabelSet kv) {
  if (kv.empty()) return nullptr;
  // Stable: of a key's pairs the last given stays last, and wins.
  std::stable_sort(kv.begin(), kv.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  pprof::LabelSet unique;
  unique.reserve(kv.size());
  for (size_t i = 0; i < kv.size(); i++) {
    if (i + 1 < kv.size() && kv[i + 1].first == kv[i].first) continue;
    unique.push_back(std::move(kv[i]));
  }
  auto* l = new LabelSetImpl;
  l->release = &release;
  l->kv = std::move(unique);
  return l;
}

const pprof::LabelSet& labels_of(const GLabels* l) {
  static const pprof::LabelSet kNone;
  return l == nullptr ? kNone : impl(l)->kv;
}

LabelsHold::LabelsHold(Kind kind) : kind_(kind) {
  std::lock_guard<std::mutex> lock(g_deferred->mu);
  g_deferred->holds++;
  if (kind_ == Kind::kPlain) g_deferred->plain_holds++;
}

LabelsHold::~LabelsHold() {
  std::vector<GLabels*> free;
  {
    std::lock_guard<std::mutex> lock(g_deferred->mu);
    if (kind_ == Kind::kPlain) g_deferred->plain_holds--;
    if (--g_deferred->holds == 0) free.swap(g_deferred->sets);
  }
  labels_free(free);
}

std::vector<GLabels*> labels_take_released() {
  std::vector<GLabels*> out;
  std::lock_guard<std::mutex> lock(g_deferred->mu);
  // A plain hold's owner may be reading any of them.
  if (g_deferred->plain_holds == 0) out.swap(g_deferred->sets);
  return out;
}

void labels_free(const std::vector<GLabels*>& sets) {
  for (GLabels* l : sets) delete impl(l);
}

LabelScope::LabelScope(const pprof::LabelSet& labels) {
  G* g = getg();
  if (g == nullptr) return;
  g_ = g;
  pprof::LabelSet kv = labels_of(g->labels);
  kv.insert(kv.end(), labels.begin(), labels.end());
  prev_ = swap_own(g, labels_make(std::move(kv)));
}

LabelScope::~LabelScope() {
  if (g_ == nullptr) return;
  // The same goroutine as the constructor's, on whichever M it runs now.
  GLabels* mine = swap_own(static_cast<G*>(g_), static_cast<GLabels*>(prev_));
  if (mine != nullptr) glabels_unref(mine);
}

}  // namespace gort::internal

namespace gort::pprof {

LabelSet labels() {
  internal::G* g = internal::getg();
  return g != nullptr ? internal::labels_of(g->labels) : LabelSet{};
}

std::optional<std::string> label(std::string_view key) {
  internal::G* g = internal::getg();
  if (g == nullptr) return std::nullopt;
  const LabelSet& kv = internal::labels_of(g->labels);
  auto it = std::lower_bound(kv.begin(), kv.end(), key, [](const auto& p, std::string_view k) { return p.first < k; });
  if (it == kv.end() || it->first != key) return std::nullopt;
  return it->second;
}

void set_goroutine_labels(const LabelSet& labels) {
  internal::G* g = internal::getg();
  if (g == nullptr) return;
  internal::GLabels* old = internal::swap_own(g, internal::labels_make(labels));
  if (old != nullptr) internal::glabels_unref(old);
}

}  // namespace gort::pprof

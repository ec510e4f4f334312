// gmp/lockrank.cpp — the lock order checked at run time (Go's
// lockrank_on.go), in a build with the Meson option lock_rank.
//
// Each thread keeps the ranks it holds, in the order it took them. Taking a
// lock whose rank is below one held, or equal to one held when the rank
// does not nest, is a fatal error that names both (the table of ranks:
// gort/detail/word_lock.hpp). Runtime locks are OS-thread locks (never held
// across a switch but through park's unlock function, which runs on the
// same thread), so a thread's list is the whole truth. Consecutive locks of
// one nesting rank (select's channels) share an entry with a count.
//
// The list is an initial-exec thread-local array: no allocation, usable in
// a signal handler, and a lock taken there is checked like any other.
#include "gmp/lock.hpp"

#ifdef GORT_LOCK_RANK

#include <cstdio>

#include "gmp/os/fatal.hpp"

namespace gort::internal {
namespace {

struct RankInfo {
  const char* name;
  bool nests;
};

constexpr RankInfo kRanks[] = {
    {"none", false},
#define GORT_LOCK_RANK_INFO(rank, nests) {#rank + 1, nests},
    GORT_LOCK_RANKS(GORT_LOCK_RANK_INFO)
#undef GORT_LOCK_RANK_INFO
};

const RankInfo& info(LockRank r) { return kRanks[static_cast<uint8_t>(r)]; }

struct Held {
  LockRank rank;
  uint32_t count;
  const void* lock;  // the last one taken, for the report
};

constexpr int kMaxHeld = 32;
__thread Held t_held[kMaxHeld] __attribute__((tls_model("initial-exec")));
__thread int t_nheld __attribute__((tls_model("initial-exec"))) = 0;

void print_held() {
  char line[160];
  for (int i = 0; i < t_nheld; i++) {
    std::snprintf(line, sizeof line, "%d : %s %u %p (x%u)\n", i, info(t_held[i].rank).name,
                  static_cast<unsigned>(t_held[i].rank), t_held[i].lock, t_held[i].count);
    write_stderr(line);
  }
}

[[noreturn]] void die(const char* what, LockRank taking, const void* lock, const Held* held) {
  char msg[256];
  if (held != nullptr) {
    std::snprintf(msg, sizeof msg, "lock ordering problem: taking %s (rank %u, %p) while holding %s (rank %u)",
                  info(taking).name, static_cast<unsigned>(taking), lock, info(held->rank).name,
                  static_cast<unsigned>(held->rank));
  } else {
    std::snprintf(msg, sizeof msg, "%s: %s (rank %u, %p)", what, info(taking).name, static_cast<unsigned>(taking),
                  lock);
  }
  print_held();
  // The death path takes locks of its own: this thread stops checking.
  t_nheld = 0;
  fatal(msg);
}

void push(LockRank rank, const void* lock) {
  if (t_nheld > 0 && t_held[t_nheld - 1].rank == rank && info(rank).nests) {
    t_held[t_nheld - 1].count++;
    t_held[t_nheld - 1].lock = lock;
    return;
  }
  if (t_nheld == kMaxHeld) die("too many runtime locks held", rank, lock, nullptr);
  t_held[t_nheld++] = Held{rank, 1, lock};
}

}  // namespace

void lockrank_acquire(LockRank rank, const void* lock) {
  for (int i = 0; i < t_nheld; i++) {
    LockRank h = t_held[i].rank;
    if (h > rank || (h == rank && !info(rank).nests)) die(nullptr, rank, lock, &t_held[i]);
  }
  push(rank, lock);
}

void lockrank_acquired_try(LockRank rank, const void* lock) { push(rank, lock); }

void lockrank_release(LockRank rank, const void* lock) {
  for (int i = t_nheld - 1; i >= 0; i--) {
    if (t_held[i].rank != rank) continue;
    if (--t_held[i].count == 0) {
      for (int j = i; j + 1 < t_nheld; j++) t_held[j] = t_held[j + 1];
      t_nheld--;
    }
    return;
  }
  die("lock rank release without matching lock acquire", rank, lock, nullptr);
}

}  // namespace gort::internal

#endif  // GORT_LOCK_RANK

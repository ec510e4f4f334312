// stdlib/sync/semtable.cpp — see semtable.hpp. Invariants (under a root's
// lock): a count is positive only while no waiter for its address is
// queued in its root; a dequeued waiter is readied exactly once, with its
// unit. A waiter waits in a Sudog on its stack (gmp/sudog.hpp) whose elem
// is the count's address.
#include "stdlib/sync/semtable.hpp"

#include <cstddef>

#include "gmp/lock.hpp"
#include "gmp/sudog.hpp"
#include "gmp/tls.hpp"

namespace gort::internal {
namespace {

// Go's semTabSize: a prime, so that addresses with a common stride spread.
constexpr size_t kRoots = 251;

struct alignas(64) SemaRoot {
  WordLock<LockRank::kSema> lock;
  WaitQ q;
};

SemaRoot g_roots[kRoots];

SemaRoot& root_of(const uint32_t* count) {
  return g_roots[(reinterpret_cast<uintptr_t>(count) >> 2) % kRoots];
}

}  // namespace

void semacquire_addr(uint32_t* count, WaitReason reason) {
  SemaRoot& r = root_of(count);
  Note note;
  Sudog s{.g = getg(), .note = &note, .elem = count};
  r.lock.lock();
  if (*count > 0) {
    (*count)--;
    r.lock.unlock();
    return;
  }
  if (!may_wait(s)) [[unlikely]] {
    r.lock.unlock();
    thread_wait_outside_run(reason);
  }
  r.q.push(&s);
  sudog_block(&s, &park_unlock<decltype(r.lock)>, &r.lock, reason);
  released_by_park(r.lock);
  // Woken only by semrelease_addr, which handed over its unit.
}

void semrelease_addr(uint32_t* count) {
  SemaRoot& r = root_of(count);
  r.lock.lock();
  Sudog* s = r.q.first;
  while (s != nullptr && s->elem != count) s = s->next;
  if (s == nullptr) {
    (*count)++;
    r.lock.unlock();
    return;
  }
  r.q.remove(s);
  s->success = true;
  r.lock.unlock();
  sudog_ready(s);  // s may be gone after this
}

}  // namespace gort::internal

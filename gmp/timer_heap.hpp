// gmp/timer_heap.hpp — the 4-ary min-heap on Timer::when that a P's timers
// (timer.cpp) and a synctest bubble's (bubble_timer.cpp) are kept in. Each
// timer records its index, so that a stop removes it in O(log n). Not
// thread-safe: the owner's lock is held.
#pragma once

#include "gmp/room.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gmp/timer.hpp"

namespace gort::internal {

// 4-ary min-heap on `when`.
inline void sift_up(std::vector<Timer*>& h, size_t i) {
  Timer* t = h[i];
  while (i > 0) {
    size_t parent = (i - 1) / 4;
    if (h[parent]->when <= t->when) break;
    h[i] = h[parent];
    h[i]->index = static_cast<int32_t>(i);
    i = parent;
  }
  h[i] = t;
  t->index = static_cast<int32_t>(i);
}

inline void sift_down(std::vector<Timer*>& h, size_t i) {
  size_t n = h.size();
  Timer* t = h[i];
  for (;;) {
    size_t c = 4 * i + 1;
    if (c >= n) break;
    size_t best = c;
    for (size_t k = c + 1; k < c + 4 && k < n; k++) {
      if (h[k]->when < h[best]->when) best = k;
    }
    if (h[best]->when >= t->when) break;
    h[i] = h[best];
    h[i]->index = static_cast<int32_t>(i);
    i = best;
  }
  h[i] = t;
  t->index = static_cast<int32_t>(i);
}

// Removes t (at t->index) and keeps the heap's order.
inline void heap_erase(std::vector<Timer*>& h, Timer* t) {
  size_t i = static_cast<size_t>(t->index);
  Timer* last = h.back();
  h.pop_back();
  if (i < h.size()) {
    h[i] = last;
    last->index = static_cast<int32_t>(i);
    sift_up(h, i);
    sift_down(h, static_cast<size_t>(last->index));
  }
  t->index = -1;
}

inline void heap_insert(std::vector<Timer*>& h, Timer* t) {
  h.push_back(t);
  sift_up(h, h.size() - 1);
}

}  // namespace gort::internal

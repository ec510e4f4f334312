// gmp/random_order.hpp — Go's randomOrder: a walk over count items (the
// Ps a thief visits) that reaches each exactly once, in an order that
// differs from walk to walk, without allocating.
//
// A walk starts at a random position and steps by a random number coprime
// with count, so (pos + k * inc) % count for k in [0, count) is a
// permutation of [0, count). The coprimes are listed when count changes
// (run start, set_procs with the world stopped), never while a walk is on.
#pragma once

#include "gmp/room.hpp"

#include <cstdint>
#include <numeric>

namespace gort::internal {

class RandomOrder {
 public:
  // The largest count (kMaxProcs; checked in sched.hpp).
  static constexpr uint32_t kMaxCount = 1024;

  // Go's randomOrder.reset. count in [1, kMaxCount].
  void reset(uint32_t count) {
    count_ = count;
    ncoprimes_ = 0;
    for (uint32_t i = 1; i <= count; i++) {
      if (std::gcd(i, count) == 1) coprimes_[ncoprimes_++] = i;
    }
  }

  // One walk (Go's randomEnum).
  class Enum {
   public:
    bool done() const { return i_ == count_; }
    void next() {
      i_++;
      pos_ = (pos_ + inc_) % count_;
    }
    uint32_t position() const { return pos_; }

   private:
    friend class RandomOrder;
    Enum(uint32_t count, uint32_t pos, uint32_t inc) : count_(count), pos_(pos), inc_(inc) {}
    uint32_t i_ = 0;
    uint32_t count_;
    uint32_t pos_;
    uint32_t inc_;
  };

  // A walk chosen by the random number r (Go's randomOrder.start).
  Enum start(uint32_t r) const {
    return Enum(count_, r % count_, coprimes_[r / count_ % ncoprimes_]);
  }

  uint32_t count() const { return count_; }

 private:
  uint32_t count_ = 0;
  uint32_t ncoprimes_ = 0;
  uint32_t coprimes_[kMaxCount] = {};
};

}  // namespace gort::internal

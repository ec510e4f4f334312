// stdlib/net/fd_mutex.hpp — FdMutex: Go's fdMutex (internal/poll/fd_mutex.go),
// a NetFD's reference count, closed flag, read lock and write lock in one
// word. A read or a write enters with one atomic operation (rwlock) and
// leaves with one (rwunlock); a separate reference count and a gort::Mutex
// per direction took two each (six atomic operations more per echoed
// message, 1-2 % of the server's user time: docs/server-cpu.md).
//
// The word, low bits first:
//
//   bit  0       closed
//   bit  1       read lock held
//   bit  2       write lock held
//   bits 3-23    references: calls in progress, waiters for a lock included
//   bits 24-43   goroutines waiting for the read lock
//   bits 44-63   goroutines waiting for the write lock
//
// Transitions (each one CAS on the word):
//
//   | call             | when                 | change                                    |
//   | ---------------- | -------------------- | ----------------------------------------- |
//   | incref           | not closed           | ref + 1                                   |
//   | incref_and_close | not closed           | closed, ref + 1, both wait counts to 0,   |
//   |                  |                      | then one semaphore release per waiter     |
//   | decref           | always               | ref - 1                                   |
//   | rwlock, entering | not closed, free     | lock, ref + 1                             |
//   |                  | not closed, held     | wait + 1, ref + 1; sleep, then retry      |
//   | rwlock, retrying | closed               | ref - 1 (fails)                           |
//   |                  | free                 | lock                                      |
//   |                  | held                 | wait + 1; sleep, then retry               |
//   | rwunlock         | no waiter            | unlock, ref - 1                           |
//   |                  | waiters              | unlock, wait - 1; release one; then ref-1 |
//
// Two differences from Go's, both because a NetFD is freed by its owner
// once its last reference is gone, not by a garbage collector: a waiter
// holds a reference while it sleeps (woken by close, it still reads the
// word), and an unlocker that wakes a waiter drops its own reference only
// after the release (Sema::release still touches the semaphore after the
// waiter may have run). decref, rwlock and rwunlock report when the caller
// dropped the last reference of a closed FdMutex: it then destroys the
// NetFD.
//
// Misuse: more than 1,048,575 goroutines waiting on one lock, or 2,097,151
// references, panics with Go's "too many concurrent operations on a single
// file or socket"; an unlock of a lock not held is a fatal error.
//
// Thread-safety: every method may be called from any goroutine or thread;
// waiters park goroutines (plain threads sleep).
#pragma once

#include "stdlib/net/room.hpp"

#include <atomic>
#include <cstdint>


namespace gort::internal {

class FdMutex {
 public:
  FdMutex() = default;
  FdMutex(const FdMutex&) = delete;
  FdMutex& operator=(const FdMutex&) = delete;

  // A reference for a call that takes neither lock; false once closed.
  [[nodiscard]] bool incref();
  // Marks it closed and takes a reference (dropped with decref when the
  // closing is done); waiters for either lock wake and fail. False if it
  // was closed already.
  [[nodiscard]] bool incref_and_close();
  // True if that was the last reference of a closed FdMutex.
  [[nodiscard]] bool decref();

  // Takes the read (`read`) or the write lock and a reference, waiting while
  // another holds the lock. False once closed; then *last says whether
  // this call dropped the closed FdMutex's last reference.
  [[nodiscard]] bool rwlock(bool read, bool* last);
  // Drops the lock and its reference; true if that was the last reference
  // of a closed FdMutex.
  [[nodiscard]] bool rwunlock(bool read);

  bool closed() const { return (state_.load(std::memory_order_acquire) & kClosed) != 0; }

  static constexpr uint64_t kClosed = 1;
  static constexpr uint64_t kRLock = 1 << 1;
  static constexpr uint64_t kWLock = 1 << 2;
  static constexpr uint64_t kRef = 1 << 3;
  static constexpr uint64_t kRefMask = ((uint64_t{1} << 21) - 1) << 3;
  static constexpr uint64_t kRWait = uint64_t{1} << 24;
  static constexpr uint64_t kRWaitMask = ((uint64_t{1} << 20) - 1) << 24;
  static constexpr uint64_t kWWait = uint64_t{1} << 44;
  static constexpr uint64_t kWWaitMask = ((uint64_t{1} << 20) - 1) << 44;

  // For tests: the word.
  uint64_t state() const { return state_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> state_{0};
  // The two semaphores' counts; their waiters queue in the address-keyed
  // table (stdlib/sync/semtable.hpp), as Go's fdMutex's do, so that the
  // object is 16 bytes rather than 72 (an idle connection holds one).
  uint32_t rsema_ = 0;
  uint32_t wsema_ = 0;
};

}  // namespace gort::internal

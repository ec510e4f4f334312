// netpoll/fd_table.hpp — what the runtime knows of each descriptor number:
// one word per fd, read without a lock on every hooked call.
//
//   | slot value   | meaning                                                 |
//   |--------------|---------------------------------------------------------|
//   | kSlotEmpty   | nothing known: the hooks look at it (fstat) on first use |
//   | kSlotFile    | a regular file or block device (or one epoll refuses):  |
//   |              | hooked calls run through the system-call protocol       |
//   | kSlotPlain   | nothing to do (a directory): hooked calls pass through  |
//   | a PollDesc*  | known to the poller (poll_desc.hpp says who uses it);   |
//   |              | the slot holds one of its references                    |
//
// A slot changes with a CAS, by whoever learns something of the number: a
// hooked call that made the descriptor or met it first, a NetFD's
// poll_open, a close (hooked or gort's own), a dup onto it. A number whose
// descriptor was closed behind the hooks (fclose, glibc's own close) keeps
// its stale slot until something makes a new descriptor with that number
// through a hooked call or poll_open, which replaces the slot and wakes
// whoever still waited on the old one with EBADF (fd_slot_reset); sysmon
// finds the rest (poll_check_stale).
//
// Chunks of 1,024 slots are allocated on first use and never freed (a
// plain thread may read one after the run that made it has ended); up to
// 64 M descriptor numbers, beyond which the hooks pass calls through.
#pragma once

#include <atomic>
#include <cstdint>

namespace gort::internal {

struct PollDesc;

inline constexpr uintptr_t kSlotEmpty = 0;
inline constexpr uintptr_t kSlotFile = 1;
inline constexpr uintptr_t kSlotPlain = 2;
inline bool slot_is_pd(uintptr_t v) { return v > kSlotPlain; }
inline PollDesc* slot_pd(uintptr_t v) { return reinterpret_cast<PollDesc*>(v); }

inline constexpr int kFdChunkBits = 10;
inline constexpr int kFdChunks = 1 << 16;
using FdChunk = std::atomic<uintptr_t>[1 << kFdChunkBits];
extern std::atomic<FdChunk*> g_fd_chunks[kFdChunks];

// fd's slot, or null if fd is out of range or its chunk was never made.
inline std::atomic<uintptr_t>* fd_slot(int fd) {
  if (fd < 0) return nullptr;
  unsigned c = static_cast<unsigned>(fd) >> kFdChunkBits;
  if (c >= static_cast<unsigned>(kFdChunks)) return nullptr;
  FdChunk* chunk = g_fd_chunks[c].load(std::memory_order_acquire);
  if (chunk == nullptr) return nullptr;
  return &(*chunk)[fd & ((1 << kFdChunkBits) - 1)];
}
inline uintptr_t fd_slot_load(int fd) {
  std::atomic<uintptr_t>* s = fd_slot(fd);
  return s != nullptr ? s->load(std::memory_order_acquire) : kSlotEmpty;
}
// fd's slot, making its chunk if needed; null if fd is out of range.
std::atomic<uintptr_t>* fd_slot_make(int fd);

// Stores v (kSlotFile, kSlotPlain or a PollDesc* whose reference it takes
// over) into fd's slot, replacing what was there: a PollDesc left there is
// treated as closed behind the runtime's back (fd_slot_reset). False if fd
// is out of range (v's reference, if any, stays the caller's).
bool fd_slot_store(int fd, uintptr_t v);
// A new descriptor now has number fd (made by a hooked call or gort): a
// PollDesc still in the slot belongs to a descriptor closed behind the
// hooks. Empties the slot, marks that PollDesc closing and wakes its
// waiters (their calls fail with EBADF), and drops the slot's reference.
void fd_slot_reset(int fd);
// Empties fd's slot if it holds `pd` (a close, gort's or hooked), dropping
// the slot's reference. False if the slot held something else.
bool fd_slot_release(int fd, PollDesc* pd);

// Calls f(fd, pd) for each slot holding a PollDesc, then, with `clear`,
// empties every slot (the end of a run: fds survive the run, what the hooks
// knew of them does not). Not safe against concurrent slot changes: the
// runtime is stopped (run end) or the caller serialises (fork).
void fd_table_each(void (*f)(int fd, PollDesc* pd, void* arg), void* arg);
void fd_table_clear();

// The libc hooks act for this run's goroutines (Config::hook_libc and
// GORT_DEBUG=hooklibc; set by the poller's init, cleared by its fini).
extern std::atomic<bool> g_libc_hooks_on;

// Set once the run has a descriptor with O_NONBLOCK set underneath
// (FdOrigin::kOwned), cleared at its end: until then a plain thread's
// hooked call does not look at the table at all.
extern std::atomic<bool> g_fd_owned_any;

}  // namespace gort::internal

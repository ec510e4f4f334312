// gmp/stack.cpp — see stack.hpp.
#include "gmp/stack.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "gmp/os/fatal.hpp"
#include "gmp/race/race.hpp"
#include "gmp/race/sanitizer.hpp"
#include "gmp/os/sys.hpp"

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

namespace gort::internal {

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

namespace {

// -1 unknown, 1 madvise guards work, 0 fall back to mprotect.
std::atomic<int> g_madvise_guards{-1};

void install_guard(char* lo) {
  int mode = g_madvise_guards.load(std::memory_order_relaxed);
  if (mode != 0) {
    if (madvise(lo, kGuardSize, MADV_GUARD_INSTALL) == 0) {
      g_madvise_guards.store(1, std::memory_order_relaxed);
      return;
    }
    if (errno != EINVAL && errno != ENOSYS) fatal("stack: madvise(MADV_GUARD_INSTALL) failed");
    g_madvise_guards.store(0, std::memory_order_relaxed);
  }
  if (mprotect(lo, kGuardSize, PROT_NONE) != 0) {
    fatal("stack: mprotect guard failed (vm.max_map_count reached?)");
  }
}

// advice over all n ranges (n ≤ IOV_MAX) with process_madvise(2) on the
// process's own pidfd: one system call for many ranges (Linux 6.13+ takes
// any advice for the caller's own process). false unless the kernel took
// every byte.
bool advise_self(int pidfd, const iovec* iov, size_t n, int advice) {
  size_t want = 0;
  for (size_t i = 0; i < n; i++) want += iov[i].iov_len;
  for (;;) {
    long r = syscall(SYS_process_madvise, pidfd, iov, n, advice, 0);
    if (r < 0 && errno == EINTR) continue;
    return r >= 0 && static_cast<size_t>(r) == want;
  }
}

// process_madvise with MADV_DONTNEED: one system call, and one TLB
// shootdown, for many ranges. -1 unknown, 1 works, 0 plain madvise per
// range.
std::atomic<int> g_process_madvise{-1};

// Gives back the pages of n ranges (iov), guards between them included:
// a guard marker survives MADV_DONTNEED.
void release_ranges(int pidfd, iovec* iov, size_t n) {
  size_t done = 0;
  if (pidfd >= 0 && g_process_madvise.load(std::memory_order_relaxed) != 0) {
    while (done < n) {
      size_t batch = std::min<size_t>(n - done, IOV_MAX);
      if (!advise_self(pidfd, iov + done, batch, MADV_DONTNEED)) {
        // Refused (an older kernel, a seccomp filter): madvise from here on.
        g_process_madvise.store(0, std::memory_order_relaxed);
        break;
      }
      g_process_madvise.store(1, std::memory_order_relaxed);
      done += batch;
    }
  }
  for (size_t i = done; i < n; i++) madvise(iov[i].iov_base, iov[i].iov_len, MADV_DONTNEED);
}

// Whether fresh slots are prepared several at a time (prepare_group):
// -1 unknown, 1 yes, 0 one at a time (no madvise guards, or the kernel
// refused process_madvise's guard or populate advice).
std::atomic<int> g_batch_prepare{-1};

// The address space one page-table page maps: 2 MiB with 4 KiB pages.
size_t table_span() { return page_size() / sizeof(void*) * page_size(); }

}  // namespace

bool stack_guard_madvise_supported() { return g_madvise_guards.load() == 1; }

void StackPool::init(size_t stack_size, size_t warm_limit) {
  size_t p = page_size();
  if (stack_size < 16 * 1024) stack_size = 16 * 1024;
  size_ = (stack_size + p - 1) / p * p;
  slot_ = size_ + kGuardSize;
  warm_limit_ = warm_limit;
  // About 64 MiB of address space per slab, at least one stack.
  slots_per_slab_ = (64u << 20) / slot_;
  if (slots_per_slab_ == 0) slots_per_slab_ = 1;
  // Kept for the run, not opened per batch: a descriptor that comes and
  // goes while the program runs would show in its own counts of open
  // files. Close-on-exec; without it (ENOSYS, EMFILE) batches go range by
  // range.
  if (pidfd_ < 0) pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
}

const char* StackPool::guard_kind() const {
  return g_madvise_guards.load() == 0 ? "mprotect" : "madvise";
}

void StackPool::grow_locked() {
  size_t bytes = slot_ * slots_per_slab_;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) fatal("stack: out of address space for goroutine stacks (mmap failed)");
  char* base = static_cast<char*>(mem);
  // Where transparent huge pages are on for all memory (`always`), a
  // stack's first touch would commit the 2 MiB around it.
  madvise(base, bytes, MADV_NOHUGEPAGE);
  slabs_.emplace_back(base, bytes);
  SlabRange* r = spare_ranges_;
  if (r != nullptr) {
    spare_ranges_ = r->next.load(std::memory_order_relaxed);
  } else {
    r = new SlabRange;
  }
  r->base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_relaxed);
  r->bytes.store(bytes, std::memory_order_relaxed);
  r->slot.store(slot_, std::memory_order_relaxed);
  r->next.store(ranges_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  ranges_.store(r, std::memory_order_release);
  // LeakSanitizer scans goroutine stacks as roots. Each stack is registered
  // on its own: a region spanning the slab would include the guards, and a
  // leak check reading a guard page faults.
  for (size_t i = 0; i < slots_per_slab_; i++) lsan_register_root(base + i * slot_ + kGuardSize, size_);
  // Stacks leave the pool free of ASan poison. A slab of an earlier run
  // mapped here may have left some behind (ASan clears a region this large
  // by remapping its shadow, so this is cheap).
  asan_unpoison(base, bytes);
  // Hand out low addresses first: push in reverse so pop_back yields slot 0.
  // Guards come later, a few slots at a time as they are used: see "Guards"
  // in stack.hpp.
  for (size_t i = slots_per_slab_; i-- > 0;) fresh_.push_back(base + i * slot_ + kGuardSize);
}

void StackPool::alloc(char** out, size_t n) {
  size_t unprepared;
  {
    MutexLock lock(mu_);
    unprepared = fill_locked(out, n);
  }
  handed_out(unprepared);
}

size_t StackPool::refill(char** out, size_t max) {
  size_t n = max;
  size_t unprepared;
  {
    MutexLock lock(mu_);
    if (prep_state_.load(std::memory_order_relaxed) == kPrepRunning) {
      // What the helper has ready, or a few fresh slots if nothing is: the
      // next refill, soon, then finds what it prepared meanwhile, instead
      // of the spawner preparing a whole cache's worth itself.
      size_t ready = warm_.size() + cold_.size();
      n = std::min(max, ready > 0 ? ready : kPrepareBatch);
    }
    unprepared = fill_locked(out, n);
  }
  handed_out(unprepared);
  return n;
}

size_t StackPool::fill_locked(char** out, size_t n) {
  size_t unprepared = 0;
  // Filled from the end: a P's cache pops from the end, so it hands out
  // the warmest stack first, and fresh slots in rising address order, each
  // above one already in use and guarded (a frame that jumps its own guard
  // and the whole stack below still lands in a guard).
  for (size_t i = n; i-- > 0;) {
    if (!warm_.empty()) {
      out[i] = warm_.back();
      warm_.pop_back();
      continue;
    }
    if (!cold_.empty()) {
      out[i] = cold_.back();
      cold_.pop_back();
      continue;
    }
    if (fresh_.empty()) grow_locked();
    out[i] = with_tag(fresh_.back());
    fresh_.pop_back();
    unprepared++;
  }
  return unprepared;
}

void StackPool::handed_out(size_t unprepared) {
  if (unprepared == 0) return;
  handed_unprepared_.fetch_add(unprepared, std::memory_order_relaxed);
  wake_preparer();
}

void StackPool::wake_preparer() {
  if (prep_state_.load(std::memory_order_acquire) != kPrepRunning) return;
  if (prep_want_.exchange(PrepWant::kWork, std::memory_order_acq_rel) == PrepWant::kAsleep) prep_note_.wakeup();
}

bool StackPool::start_preparer(std::atomic<int32_t>* threads) {
  uint32_t idle = kPrepIdle;
  if (!prep_state_.compare_exchange_strong(idle, kPrepStarting, std::memory_order_acq_rel)) {
    return prep_state_.load(std::memory_order_acquire) == kPrepRunning;
  }
  prep_threads_ = threads;
  threads->fetch_add(1);
  // Not an M: no signal is for it (preemption signals go to Ms by thread
  // id; a process-directed one must find a thread that takes it).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int err = pthread_create(&prep_thread_, nullptr, &StackPool::preparer_main, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err != 0) threads->fetch_sub(1);
  prep_state_.store(err == 0 ? kPrepRunning : kPrepFailed, std::memory_order_release);
  if (err == 0) wake_preparer();  // the burst that asked for it is under way
  return err == 0;
}

void* StackPool::preparer_main(void* arg) {
  auto* pool = static_cast<StackPool*>(arg);
  pthread_setname_np(pthread_self(), "gort-stackprep");
  for (;;) {
    if (pool->prep_stop_.load(std::memory_order_acquire)) return nullptr;
    PrepWant want = pool->prep_want_.load(std::memory_order_acquire);
    if (want == PrepWant::kWork) {
      pool->prepare_some();
      continue;
    }
    // Cleared before kAsleep is published: the waker that sees kAsleep
    // wakes a note nobody clears after it.
    pool->prep_note_.clear();
    if (pool->prep_want_.compare_exchange_strong(want, PrepWant::kAsleep, std::memory_order_acq_rel)) {
      pool->prep_note_.sleep();
    }
  }
}

// Prepares up to kPrepareBatch fresh slots outside the lock and adds them to the warm
// stacks (in any order: unlike fresh slots, each already has its guard).
// Sets prep_want_ to kIdle once kPrepareStock prepared stacks wait.
void StackPool::prepare_some() {
  char* batch[kPrepareBatch];
  size_t k = 0;
  {
    MutexLock lock(mu_);
    if (warm_.size() >= kPrepareStock) {
      prep_want_.store(PrepWant::kIdle, std::memory_order_release);
      return;
    }
    size_t n = std::min(kPrepareBatch, kPrepareStock - warm_.size());
    for (; k < n; k++) {
      if (fresh_.empty()) grow_locked();
      batch[k] = fresh_.back();
      fresh_.pop_back();
    }
  }
  prepare_lows(batch, k);
  {
    MutexLock lock(mu_);
    warm_.insert(warm_.end(), batch, batch + k);
    // A full stock: sleep until a refill hands out an unprepared slot.
    // Decided here, with the insert, not at the next look: a refill taking
    // from the stock meanwhile would otherwise have it prepare on.
    if (warm_.size() >= kPrepareStock) prep_want_.store(PrepWant::kIdle, std::memory_order_release);
  }
  // Counted once they can be handed out: a count seen means stacks ready.
  prepared_ahead_.fetch_add(k, std::memory_order_release);
}

void StackPool::stop_preparer() {
  if (prep_state_.load(std::memory_order_acquire) == kPrepRunning) {
    prep_stop_.store(true, std::memory_order_release);
    wake_preparer();
    pthread_join(prep_thread_, nullptr);
    prep_threads_->fetch_sub(1);
  }
  prep_state_.store(kPrepIdle, std::memory_order_relaxed);
  prep_stop_.store(false, std::memory_order_relaxed);
  prep_want_.store(PrepWant::kIdle, std::memory_order_relaxed);
  handed_unprepared_.store(0, std::memory_order_relaxed);
  prepared_ahead_.store(0, std::memory_order_relaxed);
  fresh_taken_.store(0, std::memory_order_relaxed);
}

char* StackPool::prepare(char* entry) {
  char* lo = without_tag(entry);
  prepare_lows(&lo, 1);
  return lo;
}

char* StackPool::take_last(char** entries, size_t n) {
  char*& last = entries[n - 1];
  if (!unprepared(last)) [[likely]] return last;
  // This slot and the unprepared ones handed out after it (below it in the
  // cache, higher in the slab), as many as the fresh slots taken so far,
  // up to kPrepareBatch: a process's first `go` prepares one stack, a
  // burst eight at a time.
  size_t want = std::clamp<size_t>(fresh_taken_.load(std::memory_order_relaxed), 1, kPrepareBatch);
  char* lows[kPrepareBatch];
  size_t k = 0;
  for (size_t i = n; i-- > 0 && k < want && unprepared(entries[i]);) {
    entries[i] = lows[k++] = without_tag(entries[i]);
  }
  fresh_taken_.fetch_add(k, std::memory_order_relaxed);
  prepare_lows(lows, k);
  return last;
}

size_t stack_group_len(char* const* lows, size_t n, size_t stack_size, size_t table_span) {
  auto region = [table_span](const char* a) { return reinterpret_cast<uintptr_t>(a) / table_span; };
  const uintptr_t r = region(lows[0] - kGuardSize);
  size_t len = 0;
  while (len < n && region(lows[len] - kGuardSize) == r && region(lows[len] + stack_size - 1) == r) len++;
  return len > 0 ? len : 1;  // a slot across a table boundary goes alone
}

#ifdef GORT_TESTING
void stack_batch_prepare_for_test(bool enabled) {
  g_batch_prepare.store(enabled ? -1 : 0, std::memory_order_relaxed);
}
#endif

bool stack_batch_prepare_works() { return g_batch_prepare.load(std::memory_order_relaxed) == 1; }

void StackPool::prepare_lows(char* const* lows, size_t n) {
  // In groups whose guards and top pages all lie under one page-table
  // page (stack.hpp, "Guards": a group adds at most one table).
  for (size_t done = 0; done < n;) {
    size_t len = stack_group_len(lows + done, n - done, size_, table_span());
    prepare_group(lows + done, len);
    done += len;
  }
}

void StackPool::prepare_group(char* const* lows, size_t n) {
  const size_t page = page_size();
  const bool populate = g_madvise_guards.load(std::memory_order_relaxed) == 1 &&
                        g_batch_prepare.load(std::memory_order_relaxed) != 0;
  bool guarded = false;
  if (populate && n > 1 && pidfd_ >= 0) {
    // The guards in one call, then the top pages committed in one (the
    // kernel fills them in a loop, no fault taken per page), then the
    // writes below: accesses through the new table, as a shadow-paging
    // host wants to see (stack.hpp, "Guards").
    iovec guards[kPrepareBatch];
    iovec tops[kPrepareBatch];
    for (size_t i = 0; i < n; i++) {
      guards[i] = iovec{lows[i] - kGuardSize, kGuardSize};
      tops[i] = iovec{lows[i] + size_ - page, page};
    }
    guarded = advise_self(pidfd_, guards, n, MADV_GUARD_INSTALL);
    // Refused (an older kernel, a seccomp filter): one at a time from
    // here on. A refused populate leaves the first touch to the writes.
    bool batched = guarded && advise_self(pidfd_, tops, n, MADV_POPULATE_WRITE);
    g_batch_prepare.store(batched ? 1 : 0, std::memory_order_relaxed);
  } else if (populate && n == 1) {
    install_guard(lows[0] - kGuardSize);
    madvise(lows[0] + size_ - page, page, MADV_POPULATE_WRITE);
    guarded = true;
  }
  for (size_t i = 0; i < n; i++) {
    // One at a time: the guard, then at once a user-mode write to the top
    // page, the pairing of stack.hpp's "Guards".
    if (!guarded) install_guard(lows[i] - kGuardSize);
    static_cast<volatile char*>(lows[i])[size_ - 1] = 0;
  }
}

void StackPool::free(char* const* entries, size_t n) {
  for (size_t done = 0; done < n;) {
    size_t k = std::min(n - done, kFreeBatchMax);
    free_batch(entries + done, k);
    done += k;
  }
}

void StackPool::free_batch(char* const* entries, size_t n) {
  char* cold[kFreeBatchMax];
  size_t k = 0;
  {
    MutexLock lock(mu_);
    for (size_t i = 0; i < n; i++) {
      if (unprepared(entries[i])) {
        fresh_.push_back(without_tag(entries[i]));  // never used: nothing to give back
      } else if (warm_.size() < warm_limit_) {
        warm_.push_back(entries[i]);
      } else {
        cold[k++] = entries[i];
      }
    }
  }
  if (k == 0) return;
  // The rest give their pages back, outside the lock, before any of them
  // can be handed out again.
  if constexpr (kTsanEnabled) {
    // The race detector's record of the pages must go with them (race.hpp):
    // one mmap per stack instead of the batched MADV_DONTNEED below.
    for (size_t i = 0; i < k; i++) tsan_forget_stack(cold[i], size_);
  } else {
    // Sorted, neighbouring slots make one range (stacks die roughly in the
    // order they were born, so runs are common), and all the ranges go in
    // one process_madvise: one TLB shootdown for the batch instead of one
    // per stack, each of which interrupted every CPU running the process
    // (perf: smp_call_function_many_cond was a tenth of a
    // million-goroutine wake-up).
    std::sort(cold, cold + k);
    iovec iov[kFreeBatchMax];
    size_t nr = 0;
    for (size_t i = 0; i < k; i++) {
      if (nr > 0 && static_cast<char*>(iov[nr - 1].iov_base) + iov[nr - 1].iov_len + kGuardSize == cold[i]) {
        iov[nr - 1].iov_len += slot_;
      } else {
        iov[nr++] = iovec{cold[i], size_};
      }
    }
    release_ranges(pidfd_, iov, nr);
  }
  MutexLock lock(mu_);
  cold_.insert(cold_.end(), cold, cold + k);
}

StackPool::~StackPool() {
  if (pidfd_ >= 0) sys::close(pidfd_);
  for (SlabRange* list : {ranges_.exchange(nullptr), spare_ranges_}) {
    while (list != nullptr) {
      SlabRange* next = list->next.load(std::memory_order_relaxed);
      delete list;
      list = next;
    }
  }
  spare_ranges_ = nullptr;
}

bool StackPool::find(const void* addr, StackSlot* out) const {
  auto a = reinterpret_cast<uintptr_t>(addr);
  for (SlabRange* r = ranges_.load(std::memory_order_acquire); r != nullptr;
       r = r->next.load(std::memory_order_relaxed)) {
    uintptr_t base = r->base.load(std::memory_order_relaxed);
    uintptr_t bytes = r->bytes.load(std::memory_order_relaxed);
    uintptr_t slot = r->slot.load(std::memory_order_relaxed);
    if (a < base || a - base >= bytes || slot == 0) continue;
    uintptr_t off = (a - base) % slot;
    out->lo = reinterpret_cast<char*>(a - off + kGuardSize);
    out->size = slot - kGuardSize;
    out->guard = off < kGuardSize;
    return true;
  }
  return false;
}

size_t StackPool::slabs() const {
  MutexLock lock(mu_);
  return slabs_.size();
}

void StackPool::destroy(bool keep_mapped) {
  stop_preparer();  // before the slabs it prepares go
  if (pidfd_ >= 0) sys::close(pidfd_);
  pidfd_ = -1;
  MutexLock lock(mu_);
  // Unpublish the ranges before unmapping; a fault handler still walking
  // them reads nodes that stay allocated.
  SlabRange* r = ranges_.exchange(nullptr, std::memory_order_acq_rel);
  while (r != nullptr) {
    SlabRange* next = r->next.load(std::memory_order_relaxed);
    r->next.store(spare_ranges_, std::memory_order_relaxed);
    spare_ranges_ = r;
    r = next;
  }
  for (auto& [base, bytes] : slabs_) {
    if (keep_mapped) continue;  // deliberately never unmapped (see header)
    for (size_t i = 0; i < bytes / slot_; i++) lsan_unregister_root(base + i * slot_ + kGuardSize, size_);
    munmap(base, bytes);
  }
  slabs_.clear();
  warm_.clear();
  cold_.clear();
  fresh_.clear();
  warm_.shrink_to_fit();
  cold_.shrink_to_fit();
  fresh_.shrink_to_fit();
}

}  // namespace gort::internal

// gmp/trace_consume.cpp — where retired trace buffers go, and collecting
// them into a raw trace (gmp/trace_consume.hpp has the rules).
#include "gmp/trace_consume.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "gmp/lock.hpp"
#include "gmp/m.hpp"
#include "gmp/os/clock.hpp"
#include "gmp/trace.hpp"

namespace gort::internal {

namespace {

// Ms whose buffers collections and the fatal dump read: a fixed table, so
// that a signal handler can walk it.
constexpr int kMaxTraceMs = 4096;
// Free buffers kept past a trace's stop; the rest go back to the kernel.
constexpr int kKeepFree = 64;

struct Tracer {
  WordLock<LockRank::kTracer> lock;
  uint64_t seq ABSL_GUARDED_BY(lock) = 0;
  TraceBuf* free ABSL_GUARDED_BY(lock) = nullptr;
  int nfree ABSL_GUARDED_BY(lock) = 0;
  // The trace.
  bool trace_on ABSL_GUARDED_BY(lock) = false;
  uint64_t trace_gen ABSL_GUARDED_BY(lock) = 0;
  std::vector<TraceBuf*> trace_bufs ABSL_GUARDED_BY(lock);
  int64_t trace_bytes ABSL_GUARDED_BY(lock) = 0;
  int64_t trace_max ABSL_GUARDED_BY(lock) = 0;
  int64_t trace_lost ABSL_GUARDED_BY(lock) = 0;
  // The flight recorder's ring, oldest first (ring_head). Read without the
  // lock by the fatal dump.
  bool flight_on ABSL_GUARDED_BY(lock) = false;
  TraceBuf* ring_head = nullptr;
  TraceBuf* ring_tail ABSL_GUARDED_BY(lock) = nullptr;
  int64_t ring_bytes ABSL_GUARDED_BY(lock) = 0;
  int64_t ring_max ABSL_GUARDED_BY(lock) = 0;
  int64_t ring_age ABSL_GUARDED_BY(lock) = 0;
  bool ring_stacks ABSL_GUARDED_BY(lock) = false;
  // Threads without an M.
  WordLock<LockRank::kTraceNoM> nom_lock;
  std::atomic<TraceBuf*> nom_buf{nullptr};
};

Tracer tracer;
std::atomic<bool> block_stacks{true};
std::atomic<std::atomic<TraceBuf*>*> mslots[kMaxTraceMs];
std::atomic<int> nmslots{0};

// The first (ticks, nanotime) pair: rates are measured from it.
std::atomic<uint64_t> calib_ticks{0};
std::atomic<int64_t> calib_ns{0};

// The fatal dump's file name and state (static: a signal handler fills it).
char dump_prefix[512];
char dump_path[600];
std::atomic<int64_t> last_stall_dump{0};
std::atomic<int> stall_dumps{0};

inline uint64_t ticks() { return __builtin_ia32_rdtsc(); }

void calibrate_start() {
  if (calib_ticks.load(std::memory_order_acquire) != 0) return;
  int64_t ns = nanotime();
  uint64_t t = ticks();
  calib_ns.store(ns, std::memory_order_relaxed);
  uint64_t zero = 0;
  calib_ticks.compare_exchange_strong(zero, t, std::memory_order_release);
}

// Nanoseconds per tick since the first pair. `wait`: sleep until 20 ms
// have passed since it, so that the rate is good to a few parts in 1e5.
double ns_per_tick(bool wait) {
  uint64_t t0 = calib_ticks.load(std::memory_order_acquire);
  int64_t n0 = calib_ns.load(std::memory_order_relaxed);
  if (t0 == 0) return 0;
  int64_t n1 = nanotime();
  if (wait && n1 - n0 < 20'000'000) {
    timespec ts{0, static_cast<long>(20'000'000 - (n1 - n0))};
    nanosleep(&ts, nullptr);
  }
  n1 = nanotime();
  uint64_t t1 = ticks();
  if (t1 <= t0 || n1 <= n0) return 0;
  return static_cast<double>(n1 - n0) / static_cast<double>(t1 - t0);
}

TraceBuf* buf_alloc() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tracer.lock) {
  if (TraceBuf* b = tracer.free) {
    tracer.free = b->link;
    tracer.nfree--;
    return b;
  }
  void* mem = mmap(nullptr, sizeof(TraceBuf), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return nullptr;
  return new (mem) TraceBuf;
}

void buf_free(TraceBuf* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tracer.lock) {
  b->link = tracer.free;
  tracer.free = b;
  tracer.nfree++;
}

void buf_unref(TraceBuf* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tracer.lock) {
  if (b->refs.fetch_sub(1, std::memory_order_relaxed) == 1) buf_free(b);
}

void trim_free() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tracer.lock) {
  while (tracer.nfree > kKeepFree) {
    TraceBuf* b = tracer.free;
    tracer.free = b->link;
    tracer.nfree--;
    munmap(b, sizeof(TraceBuf));
  }
}

void ring_evict(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tracer.lock) {
  while (TraceBuf* b = tracer.ring_head) {
    bool too_big = tracer.ring_bytes > tracer.ring_max;
    bool too_old = b != tracer.ring_tail && b->end_ns < now - tracer.ring_age;
    if (!too_big && !too_old) break;
    tracer.ring_head = b->link;
    if (tracer.ring_head == nullptr) tracer.ring_tail = nullptr;
    tracer.ring_bytes -= b->pos.load(std::memory_order_relaxed);
    buf_unref(b);
  }
}

void retire(TraceBuf* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tracer.lock) {
  int64_t now = nanotime();
  b->end_ns = now;
  b->link = nullptr;
  int64_t len = b->pos.load(std::memory_order_relaxed);
  b->refs.store(0, std::memory_order_relaxed);
  if (tracer.trace_on && b->gen >= tracer.trace_gen && len > 0) {
    if (tracer.trace_bytes + len <= tracer.trace_max) {
      b->refs.fetch_add(1, std::memory_order_relaxed);
      tracer.trace_bufs.push_back(b);
      tracer.trace_bytes += len;
    } else {
      tracer.trace_lost++;
    }
  }
  if (tracer.flight_on && len > 0) {
    b->refs.fetch_add(1, std::memory_order_relaxed);
    if (tracer.ring_tail != nullptr) tracer.ring_tail->link = b; else tracer.ring_head = b;
    tracer.ring_tail = b;
    tracer.ring_bytes += len;
    ring_evict(now);
  }
  if (b->refs.load(std::memory_order_relaxed) == 0) buf_free(b);
}

void append(std::string* out, const void* p, size_t n) { out->append(static_cast<const char*>(p), n); }

void append_record(std::string* out, RawTag tag, const void* p, size_t n) {
  RawRecord r{tag, static_cast<uint32_t>(n)};
  append(out, &r, sizeof r);
  append(out, p, n);
}

// A raw trace's header. Async-signal-safe unless `wait` (the fatal dump
// calls it too).
RawHeader raw_header(bool wait) {
  RawHeader h;
  std::memcpy(h.magic, kRawMagic, sizeof h.magic);
  h.pid = getpid();
  h.mono_ns = nanotime();
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h.unix_ns = ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
  h.ns_per_tick = ns_per_tick(wait);
  return h;
}

RawBufHeader raw_buf_header(const TraceBuf* b, uint32_t len) {
  return {b->gen, b->seq, b->m_id, b->start_ticks, b->start_ns, len, 0};
}

void append_header(std::string* out, bool wait) {
  RawHeader h = raw_header(wait);
  append(out, &h, sizeof h);
}

void append_buffer(std::string* out, const TraceBuf* b, uint32_t len, const uint8_t* data) {
  RawBufHeader h = raw_buf_header(b, len);
  RawRecord r{RawTag::kBuffer, static_cast<uint32_t>(sizeof h + len)};
  append(out, &r, sizeof r);
  append(out, &h, sizeof h);
  append(out, data, len);
}

// A consistent copy of a buffer an M may still be appending to (the prefix
// protocol, gmp/trace.hpp). False if it was being reused.
bool copy_prefix(const TraceBuf* b, TraceBuf* meta, std::vector<uint8_t>* data) {
  for (int attempt = 0; attempt < 4; attempt++) {
    uint32_t v1 = b->version.load(std::memory_order_acquire);
    if (v1 & 1) continue;
    meta->gen = b->gen;
    meta->seq = b->seq;
    meta->m_id = b->m_id;
    meta->start_ticks = b->start_ticks;
    meta->start_ns = b->start_ns;
    uint32_t n = b->pos.load(std::memory_order_acquire);
    if (n > sizeof b->data) continue;
    data->assign(b->data, b->data + n);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (b->version.load(std::memory_order_relaxed) == v1) return true;
  }
  return false;
}

struct Partial {
  TraceBuf meta;
  std::vector<uint8_t> data;
};

// What the Ms (and threads without one) have not retired yet, of
// generation `min_gen` or later.
std::vector<Partial*> copy_partials(uint64_t min_gen) {
  std::vector<Partial*> out;
  auto take = [&](const std::atomic<TraceBuf*>* slot) {
    const TraceBuf* b = slot->load(std::memory_order_acquire);
    if (b == nullptr) return;
    auto* p = new Partial;
    if (copy_prefix(b, &p->meta, &p->data) && p->meta.gen >= min_gen && !p->data.empty()) {
      out.push_back(p);
    } else {
      delete p;
    }
  };
  int n = nmslots.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++) {
    if (auto* slot = mslots[i].load(std::memory_order_acquire)) take(slot);
  }
  take(&tracer.nom_buf);
  return out;
}

void append_partials(std::string* out, std::vector<Partial*>* parts, const std::vector<TraceBuf*>& whole) {
  for (Partial* p : *parts) {
    bool dup = false;
    for (const TraceBuf* b : whole) dup |= b->seq == p->meta.seq;
    if (!dup) append_buffer(out, &p->meta, static_cast<uint32_t>(p->data.size()), p->data.data());
    delete p;
  }
  parts->clear();
}

// The program's modules and name, so that a raw trace can be named on
// another process's time (gort-trace), then the end.
void append_end(std::string* out) {
  std::string maps;
  if (FILE* f = std::fopen("/proc/self/maps", "re")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) maps.append(buf, n);
    std::fclose(f);
  }
  append_record(out, RawTag::kMaps, maps.data(), maps.size());
  append_record(out, RawTag::kName, program_invocation_short_name, strlen(program_invocation_short_name));
  append_record(out, RawTag::kEnd, nullptr, 0);
}

// ---- the fatal dump: async-signal-safe ----

void write_all(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    c += w;
    n -= static_cast<size_t>(w);
  }
}

void raw_dump_buffer(int fd, const TraceBuf* b) {
  uint32_t n = b->pos.load(std::memory_order_acquire);
  if (n == 0 || n > sizeof b->data) return;
  RawBufHeader h = raw_buf_header(b, n);
  RawRecord r{RawTag::kBuffer, static_cast<uint32_t>(sizeof h + n)};
  write_all(fd, &r, sizeof r);
  write_all(fd, &h, sizeof h);
  write_all(fd, b->data, n);
}

alignas(16) char maps_buf[256 * 1024];

void raw_dump_maps(int fd) {
  int mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (mfd < 0) return;
  size_t n = 0;
  while (n < sizeof maps_buf) {
    ssize_t r = read(mfd, maps_buf + n, sizeof maps_buf - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += static_cast<size_t>(r);
  }
  close(mfd);
  RawRecord rec{RawTag::kMaps, static_cast<uint32_t>(n)};
  write_all(fd, &rec, sizeof rec);
  write_all(fd, maps_buf, n);
}

char* put_dec(char* p, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = tmp[--n];
  return p;
}

}  // namespace

std::atomic<TraceBuf*>* trace_nom_lock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  tracer.nom_lock.lock();
  return &tracer.nom_buf;
}

void trace_nom_unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { tracer.nom_lock.unlock(); }

bool trace_block_stacks() { return block_stacks.load(std::memory_order_relaxed); }

TraceBuf* trace_refill(std::atomic<TraceBuf*>* slot, int64_t m_id, uint64_t gen) {
  MutexLock lock(tracer.lock);
  TraceBuf* old = slot->load(std::memory_order_relaxed);
  if (old != nullptr) {
    // Off the slot before it is handed on: a collection that still finds
    // it there reads it through the version check.
    slot->store(nullptr, std::memory_order_release);
    retire(old);
  }
  // Room for the trace's buffers-to-be only while something consumes them.
  if (!tracer.trace_on && !tracer.flight_on) return nullptr;
  TraceBuf* b = buf_alloc();
  if (b == nullptr) return nullptr;
  uint32_t v = b->version.load(std::memory_order_relaxed);
  b->version.store(v + 1, std::memory_order_relaxed);  // odd: being reset
  std::atomic_thread_fence(std::memory_order_release);
  b->pos.store(0, std::memory_order_relaxed);
  b->gen = gen;
  b->seq = ++tracer.seq;
  b->m_id = m_id;
  b->start_ns = nanotime();
  b->start_ticks = ticks();
  b->last_ticks = b->start_ticks;
  b->end_ns = 0;
  b->link = nullptr;
  b->refs.store(0, std::memory_order_relaxed);
  b->version.store(v + 2, std::memory_order_release);
  slot->store(b, std::memory_order_release);
  return b;
}

void trace_register_m(M* m) {
  int i = nmslots.fetch_add(1, std::memory_order_acq_rel);
  if (i < kMaxTraceMs) {
    mslots[i].store(&m->trace.buf, std::memory_order_release);
  } else {
    nmslots.store(kMaxTraceMs, std::memory_order_relaxed);
  }
}

void trace_release_m(M* m) {
  // Every M is joined (teardown): nothing writes or reads its buffer.
  int n = nmslots.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++) {
    if (mslots[i].load(std::memory_order_relaxed) == &m->trace.buf) mslots[i].store(nullptr);
  }
  if (TraceBuf* b = m->trace.buf.exchange(nullptr)) {
    MutexLock lock(tracer.lock);
    retire(b);
  }
}

bool tracer_start_trace(const TraceLimits& limits) {
  calibrate_start();
  {
    MutexLock lock(tracer.lock);
    if (tracer.trace_on) return false;
    tracer.trace_on = true;
    tracer.trace_gen = tracer_gen.fetch_add(1, std::memory_order_acq_rel) + 1;
    tracer.trace_max = limits.max_bytes;
    tracer.trace_bytes = 0;
    tracer.trace_lost = 0;
    block_stacks.store(limits.block_stacks, std::memory_order_relaxed);
  }
  trace_enabled.fetch_or(kTraceOn, std::memory_order_acq_rel);
  trace_snapshot_goroutines();
  return true;
}

bool tracer_trace_running() { return (trace_enabled.load(std::memory_order_acquire) & kTraceOn) != 0; }

void tracer_stop_trace(std::string* raw, int64_t* lost) {
  std::vector<TraceBuf*> bufs;
  uint64_t gen;
  std::vector<Partial*> parts;
  {
    MutexLock lock(tracer.lock);
    if (!tracer.trace_on) return;
    gen = tracer.trace_gen;
  }
  // The Ms' buffers first, then the retired ones: a buffer retired in
  // between is whole in the list and dropped from the copies (same seq).
  parts = copy_partials(gen);
  {
    MutexLock lock(tracer.lock);
    tracer.trace_on = false;
    bufs.swap(tracer.trace_bufs);
    *lost = tracer.trace_lost;
    tracer_gen.fetch_add(1, std::memory_order_acq_rel);
    trace_enabled.fetch_and(~kTraceOn, std::memory_order_acq_rel);
    // The flight recorder goes on with its own choice of stacks.
    block_stacks.store(tracer.flight_on && tracer.ring_stacks, std::memory_order_relaxed);
  }
  raw->clear();
  append_header(raw, true);
  for (const TraceBuf* b : bufs) append_buffer(raw, b, b->pos.load(std::memory_order_relaxed), b->data);
  append_partials(raw, &parts, bufs);
  append_end(raw);
  MutexLock lock(tracer.lock);
  for (TraceBuf* b : bufs) buf_unref(b);
  trim_free();
}

bool tracer_start_flight(const TraceLimits& limits, const std::string& prefix) {
  calibrate_start();
  {
    MutexLock lock(tracer.lock);
    if (tracer.flight_on) return false;
    tracer.flight_on = true;
    tracer.ring_max = limits.max_bytes;
    tracer.ring_age = limits.min_age_ns;
    tracer.ring_stacks = limits.block_stacks;
    if (!tracer.trace_on) block_stacks.store(limits.block_stacks, std::memory_order_relaxed);
    size_t n = std::min(prefix.size(), sizeof dump_prefix - 1);
    std::memcpy(dump_prefix, prefix.data(), n);
    dump_prefix[n] = 0;
  }
  trace_enabled.fetch_or(kFlightOn, std::memory_order_acq_rel);
  return true;
}

bool tracer_flight_running() { return (trace_enabled.load(std::memory_order_acquire) & kFlightOn) != 0; }

void tracer_stop_flight() {
  MutexLock lock(tracer.lock);
  if (!tracer.flight_on) return;
  tracer.flight_on = false;
  trace_enabled.fetch_and(~kFlightOn, std::memory_order_acq_rel);
  tracer_gen.fetch_add(1, std::memory_order_acq_rel);
  while (TraceBuf* b = tracer.ring_head) {
    tracer.ring_head = b->link;
    buf_unref(b);
  }
  tracer.ring_tail = nullptr;
  tracer.ring_bytes = 0;
  trim_free();
}

bool tracer_flight_snapshot(std::string* raw) {
  if (!tracer_flight_running()) return false;
  // Every goroutine's state and creation site, at the end of the window:
  // the ring has long lost most creations.
  trace_snapshot_goroutines();
  std::vector<Partial*> parts = copy_partials(0);
  std::vector<TraceBuf*> bufs;
  {
    MutexLock lock(tracer.lock);
    if (!tracer.flight_on) {
      for (Partial* p : parts) delete p;
      return false;
    }
    for (TraceBuf* b = tracer.ring_head; b != nullptr; b = b->link) {
      b->refs.fetch_add(1, std::memory_order_relaxed);
      bufs.push_back(b);
    }
  }
  raw->clear();
  append_header(raw, true);
  for (const TraceBuf* b : bufs) append_buffer(raw, b, b->pos.load(std::memory_order_relaxed), b->data);
  append_partials(raw, &parts, bufs);
  append_end(raw);
  MutexLock lock(tracer.lock);
  for (TraceBuf* b : bufs) buf_unref(b);
  return true;
}

const char* tracer_dump_fatal(bool stall) {
  if (!tracer_flight_running() || dump_prefix[0] == 0) return nullptr;
  char* p = dump_path;
  size_t n = strnlen(dump_prefix, sizeof dump_prefix);
  std::memcpy(p, dump_prefix, n);
  p += n;
  if (stall) {
    int64_t now = nanotime();
    int64_t last = last_stall_dump.load(std::memory_order_relaxed);
    if (last != 0 && now - last < 60'000'000'000LL) return nullptr;
    if (!last_stall_dump.compare_exchange_strong(last, now)) return nullptr;
    *p++ = '-';
    *p++ = 's';
    p = put_dec(p, static_cast<uint64_t>(stall_dumps.fetch_add(1) + 1));
  }
  std::memcpy(p, ".gtrace", 8);
  int fd = open(dump_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  RawHeader h = raw_header(false);
  write_all(fd, &h, sizeof h);
  // Read without the lock: the process is dying, and a holder may be
  // frozen. The walk is bounded in case the list is mid-change.
  int budget = 1 << 16;
  for (const TraceBuf* b = tracer.ring_head; b != nullptr && budget-- > 0; b = b->link) raw_dump_buffer(fd, b);
  int nm = nmslots.load(std::memory_order_acquire);
  for (int i = 0; i < nm; i++) {
    auto* slot = mslots[i].load(std::memory_order_acquire);
    if (slot == nullptr) continue;
    if (const TraceBuf* b = slot->load(std::memory_order_acquire)) raw_dump_buffer(fd, b);
  }
  if (const TraceBuf* b = tracer.nom_buf.load(std::memory_order_acquire)) raw_dump_buffer(fd, b);
  raw_dump_maps(fd);
  RawRecord name{RawTag::kName, static_cast<uint32_t>(strlen(program_invocation_short_name))};
  write_all(fd, &name, sizeof name);
  write_all(fd, program_invocation_short_name, name.len);
  RawRecord end{RawTag::kEnd, 0};
  write_all(fd, &end, sizeof end);
  close(fd);
  return dump_path;
}

}  // namespace gort::internal

// tests/preempt/integrity_test.cpp — asynchronous preemption never corrupts
// what the interrupted code had in flight (preempt/async_preempt_x86_64.S,
// preempt/signal.cpp): general registers and flags, SSE/AVX/AVX-512 vector
// registers and mask registers, the x87 stack, the rounding mode (MXCSR);
// and goroutines that live in malloc, std::string, iostreams and exception
// handling keep working (no deadlock, no corruption) while others are
// preempted every 100 µs.
//
// Every kernel is a deterministic function computed once before the runtime
// starts; goroutines recompute it under preemption and compare bit for bit.
// Goroutines count mismatches in atomics; the main goroutine checks them.
// The heavy tests run in a subprocess so that a hang or a crash fails only
// them.
#include <cfenv>
#include <cstring>
#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/preempt/helpers.hpp"

namespace gort::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// ---- kernels ----

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Twelve integer chains live at once (most general registers) plus a carry
// produced by add-with-overflow (flags live between two instructions).
__attribute__((noinline)) uint64_t int_kernel(uint64_t seed, int n) {
  uint64_t a = seed, b = seed ^ 0x9E3779B97F4A7C15ull, c = seed * 3, d = ~seed, e = seed + 17,
           f = rotl(seed, 9), g = seed ^ 0xDEADBEEF, h = seed * 0x100000001B3ull, k = 7, l = 11,
           m = 13, q = seed >> 3;
  uint64_t carry = 0;
  for (int i = 0; i < n; i++) {
    a = a * 0x9E3779B97F4A7C15ull + b;
    b = rotl(b ^ c, 7) + carry;
    c += d >> 3;
    d ^= e * 3;
    e += f ^ static_cast<uint64_t>(i);
    f = rotl(f, 13) ^ g;
    g -= h;
    h ^= l + a;
    l = l * 5 + 1;
    carry = __builtin_add_overflow(k, m, &k) ? 1 : 0;
    m ^= rotl(q, 17) + carry;
    q += a >> 11;
  }
  return a ^ b ^ c ^ d ^ e ^ f ^ g ^ h ^ k ^ l ^ m ^ q;
}

// Eight Kahan sums of exactly representable values (multiples of 1/8,
// partial sums far below 2^53): the exact result is known in closed form.
struct Kahan {
  double s = 0, c = 0;
  void add(double x) {
    double y = x - c;
    double t = s + y;
    c = (t - s) - y;
    s = t;
  }
};

__attribute__((noinline)) double kahan_kernel(int n) {
  Kahan k0, k1, k2, k3, k4, k5, k6, k7;
  for (int i = 0; i + 8 <= n; i += 8) {
    k0.add((i % 1000) * 0.125);
    k1.add(((i + 1) % 1000) * 0.125);
    k2.add(((i + 2) % 1000) * 0.125);
    k3.add(((i + 3) % 1000) * 0.125);
    k4.add(((i + 4) % 1000) * 0.125);
    k5.add(((i + 5) % 1000) * 0.125);
    k6.add(((i + 6) % 1000) * 0.125);
    k7.add(((i + 7) % 1000) * 0.125);
  }
  return ((k0.s + k1.s) + (k2.s + k3.s)) + ((k4.s + k5.s) + (k6.s + k7.s));
}

double kahan_exact(int n) {
  int64_t sum = 0;
  for (int i = 0; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; j++) sum += (i + j) % 1000;
  }
  return static_cast<double>(sum) * 0.125;
}

// Inexact double arithmetic (divisions, square roots, products that
// round): IEEE results are deterministic, so only bit equality is checked.
__attribute__((noinline)) double mixed_fp_kernel(double x0, int n) {
  double x = x0, y = 1.0 / x0, z = 0.5, w = 2.0;
  for (int i = 0; i < n; i++) {
    x = x * 1.0000001 + y / 3.0;
    y = __builtin_sqrt(y * y + 1.0) / 1.5;
    z = z * 0.999 + x / (w + static_cast<double>(i & 15));
    w = w + z * 1e-9;
  }
  return x + y + z + w;
}

// The x87 stack.
__attribute__((noinline)) long double x87_kernel(int n) {
  long double s = 0, t = 1;
  for (int i = 0; i < n; i++) {
    s += static_cast<long double>(i % 1000) / 7.0L;
    t = t * 1.0000000001L + s * 1e-12L;
  }
  return s + t;
}

// Under a given rounding mode; the result depends on it.
__attribute__((noinline)) double rounding_kernel(int mode, int n) {
  int old = fegetround();
  fesetround(mode);
  volatile double three = 3.0;
  double s = 0;
  for (int i = 0; i < n; i++) s += 1.0 / (three + static_cast<double>(i % 7));
  volatile double out = s;
  fesetround(old);
  return out;
}

// Same, without touching the mode: uses the caller's.
__attribute__((noinline)) double current_mode_kernel(int n) {
  volatile double three = 3.0;
  double s = 0;
  for (int i = 0; i < n; i++) s += 1.0 / (three + static_cast<double>(i % 7));
  return s;
}

constexpr int kVecLen = 1536;  // a multiple of 48 and of 192
alignas(64) double g_va[kVecLen];
alignas(64) double g_vb[kVecLen];

void init_vectors() {
  for (int i = 0; i < kVecLen; i++) {
    g_va[i] = static_cast<double>(i % 17);
    g_vb[i] = static_cast<double>((i * 7) % 13);
  }
}

// Plain loops GCC vectorizes with SSE2 at -O2 (integer-valued doubles: exact).
__attribute__((noinline)) double sse_kernel(int reps) {
  double c[kVecLen];
  for (int i = 0; i < kVecLen; i++) c[i] = 0;
  for (int r = 0; r < reps; r++) {
    for (int i = 0; i < kVecLen; i++) c[i] += g_va[i] * g_vb[i] + static_cast<double>(r & 3);
  }
  double s = 0;
  for (int i = 0; i < kVecLen; i++) s += c[i];
  return s;
}

// Twelve AVX2 accumulators (YMM upper halves live across the loop).
__attribute__((noinline, target("avx2,fma"))) double avx2_kernel(int reps) {
  __m256d acc[12];
  for (auto& a : acc) a = _mm256_setzero_pd();
  for (int r = 0; r < reps; r++) {
    for (int i = 0; i < kVecLen; i += 48) {
      for (int j = 0; j < 12; j++) {
        __m256d x = _mm256_loadu_pd(g_va + i + 4 * j);
        __m256d y = _mm256_loadu_pd(g_vb + i + 4 * j);
        acc[j] = _mm256_fmadd_pd(x, y, acc[j]);
      }
    }
  }
  __m256d s = _mm256_setzero_pd();
  for (auto& a : acc) s = _mm256_add_pd(s, a);
  alignas(32) double out[4];
  _mm256_store_pd(out, s);
  return out[0] + out[1] + out[2] + out[3];
}

// 24 ZMM accumulators (so zmm16-31 are used) and four opmask registers
// that stay live for the whole loop.
__attribute__((noinline, target("avx512f"))) double avx512_kernel(int reps) {
  __m512d acc[24];
  for (auto& a : acc) a = _mm512_setzero_pd();
  volatile int mk = 0xA5;
  __mmask8 k1 = static_cast<__mmask8>(mk), k2 = static_cast<__mmask8>(mk >> 1),
           k3 = static_cast<__mmask8>(~mk), k4 = static_cast<__mmask8>(mk * 3);
  for (int r = 0; r < reps; r++) {
    for (int i = 0; i + 192 <= kVecLen; i += 192) {
      for (int j = 0; j < 24; j++) {
        __m512d x = _mm512_loadu_pd(g_va + i + 8 * j);
        __m512d y = _mm512_loadu_pd(g_vb + i + 8 * j);
        __mmask8 k = (j & 3) == 0 ? k1 : (j & 3) == 1 ? k2 : (j & 3) == 2 ? k3 : k4;
        acc[j] = _mm512_mask3_fmadd_pd(x, y, acc[j], k);
      }
    }
  }
  __m512d s = _mm512_setzero_pd();
  for (auto& a : acc) s = _mm512_add_pd(s, a);
  return _mm512_reduce_add_pd(s);
}

struct References {
  uint64_t ints[4];
  double kahan;
  double mixed;
  long double x87;
  double upward;
  double nearest;
  double sse;
  double avx2;
  double avx512;
};

constexpr int kIntN = 200000;
constexpr int kKahanN = 200000;
constexpr int kMixedN = 100000;
constexpr int kX87N = 100000;
constexpr int kRoundN = 100000;
constexpr int kVecReps = 60;

bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool has_avx512() { return __builtin_cpu_supports("avx512f"); }

References compute_references() {
  init_vectors();
  References r{};
  for (int i = 0; i < 4; i++) r.ints[i] = int_kernel(0x1000u + static_cast<uint64_t>(i), kIntN);
  r.kahan = kahan_kernel(kKahanN);
  r.mixed = mixed_fp_kernel(1.25, kMixedN);
  r.x87 = x87_kernel(kX87N);
  r.upward = rounding_kernel(FE_UPWARD, kRoundN);
  r.nearest = rounding_kernel(FE_TONEAREST, kRoundN);
  r.sse = sse_kernel(kVecReps);
  r.avx2 = has_avx2() ? avx2_kernel(kVecReps) : 0;
  r.avx512 = has_avx512() ? avx512_kernel(kVecReps) : 0;
  return r;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(PreemptIntegrity, ReferencesAreSane) {
  References r = compute_references();
  EXPECT_EQ(r.kahan, kahan_exact(kKahanN));
  EXPECT_NE(r.upward, r.nearest) << "the rounding kernel does not depend on the rounding mode";
  EXPECT_TRUE(same_bits(r.nearest, current_mode_kernel(kRoundN)));
  EXPECT_EQ(fegetround(), FE_TONEAREST);
}

// ---- registers, flags and FP/SIMD state ----

TEST(PreemptIntegrity, RegistersAndFpStateSurviveHeavyPreemption) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  if (!gort::async_preemption_available()) GTEST_SKIP() << "no async preemption in this build";
  auto child = [] {
    const References ref = compute_references();
    ASSERT_EQ(ref.kahan, kahan_exact(kKahanN));
    ASSERT_NE(ref.upward, ref.nearest);
    enum Kind { kInt, kKahanK, kMixed, kX87, kRound, kUpward, kSse, kAvx2, kAvx512, kMemcpy, kNumKinds };
    const char* names[kNumKinds] = {"int", "kahan", "mixed", "x87", "rounding", "upward-goroutine",
                                    "sse", "avx2", "avx512", "memcpy"};
    std::atomic<int64_t> runs[kNumKinds] = {};
    std::atomic<int64_t> bad[kNumKinds] = {};
    std::atomic<int64_t> bad_mode{0};
    std::atomic<uint64_t> preempts{0};
    auto deadline = Clock::now() + 3s;

    run_cfg(preempt_cfg(2, absl::Microseconds(100)), [&] {
      std::vector<int> kinds = {kInt, kInt, kKahanK, kMixed, kX87, kRound, kUpward, kSse, kMemcpy};
      if (has_avx2()) kinds.insert(kinds.end(), {kAvx2, kAvx2});
      if (has_avx512()) kinds.insert(kinds.end(), {kAvx512, kAvx512});
      Countdown cd(static_cast<int64_t>(kinds.size()));
      std::atomic<int> started{0};
      const int total = static_cast<int>(kinds.size());
      for (size_t gi = 0; gi < kinds.size(); gi++) {
        int kind = kinds[gi];
        gort::go([&, kind, gi, total] {
          started++;
          if (kind == kUpward) {
            // For the rest of this goroutine's life; only once every other
            // goroutine has started (a goroutine's first run must not
            // inherit it: FreshGoroutineDoesNotInheritAnUnrelatedRoundingMode).
            while (started.load() < total) gort::yield();
            fesetround(FE_UPWARD);
          }
          std::vector<char> src(8192, 'x'), dst(8192);
          src.back() = 0;
          int iter = 0;
          while (Clock::now() < deadline) {
            bool ok = true;
            switch (kind) {
              case kInt: {
                int i = static_cast<int>((gi + static_cast<size_t>(iter)) % 4);
                ok = int_kernel(0x1000u + static_cast<uint64_t>(i), kIntN) == ref.ints[i];
                break;
              }
              case kKahanK: ok = same_bits(kahan_kernel(kKahanN), ref.kahan); break;
              case kMixed: ok = same_bits(mixed_fp_kernel(1.25, kMixedN), ref.mixed); break;
              case kX87: ok = x87_kernel(kX87N) == ref.x87; break;
              case kRound:
                ok = same_bits(rounding_kernel(FE_UPWARD, kRoundN), ref.upward) &&
                     same_bits(rounding_kernel(FE_TONEAREST, kRoundN), ref.nearest);
                break;
              case kUpward:
                ok = same_bits(current_mode_kernel(kRoundN), ref.upward);
                if (fegetround() != FE_UPWARD) bad_mode++;
                break;
              case kSse: ok = same_bits(sse_kernel(kVecReps), ref.sse); break;
              case kAvx2: ok = same_bits(avx2_kernel(kVecReps), ref.avx2); break;
              case kAvx512: ok = same_bits(avx512_kernel(kVecReps), ref.avx512); break;
              case kMemcpy:
                // glibc's AVX/EVEX string functions use the upper vector
                // halves; they run on the same threads as the kernels.
                for (int k = 0; k < 200; k++) {
                  std::memcpy(dst.data(), src.data(), src.size());
                  ok = ok && std::strlen(dst.data()) == src.size() - 1;
                  std::memset(dst.data(), 'y', dst.size() - 1);
                }
                gort::yield();
                break;
            }
            if (kind != kUpward && fegetround() != FE_TONEAREST) bad_mode++;
            runs[kind]++;
            if (!ok) bad[kind]++;
            iter++;
          }
          if (kind == kUpward) fesetround(FE_TONEAREST);
          preempts += self_async_preempts();
          cd.done();
        });
      }
      cd.wait();
    });
    for (int k = 0; k < kNumKinds; k++) {
      EXPECT_EQ(bad[k].load(), 0) << names[k] << ": " << bad[k].load() << " wrong results in "
                                  << runs[k].load() << " runs";
    }
    EXPECT_EQ(bad_mode.load(), 0) << "a goroutine saw another's rounding mode";
    EXPECT_GT(runs[kInt].load(), 0);
    // Not a speed check: just that the test exercised what it claims to.
    EXPECT_GE(preempts.load(), 100u) << "too few asynchronous preemptions to mean anything";
    std::fprintf(stderr, "[info] %llu async preemptions\n",
                 static_cast<unsigned long long>(preempts.load()));
  };
  GORT_EXPECT_SUBPROCESS_OK(60, reporting(child));
}

// A goroutine's rounding mode must not leak into another goroutine. Here
// the main goroutine creates `fresh` while in the default mode, then
// switches to FE_UPWARD and parks; `fresh` gets its first run from that
// context (a direct switch on one P).
TEST(PreemptIntegrity, FreshGoroutineDoesNotInheritAnUnrelatedRoundingMode) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  std::atomic<int> fresh_mode{-1};
  std::atomic<int> main_mode_after{-1};
  run_cfg(preempt_cfg(1), [&] {
    Countdown cd(1);
    gort::go([&] {
      fresh_mode = fegetround();
      cd.done();
    });
    fesetround(FE_UPWARD);
    cd.wait();
    main_mode_after = fegetround();
    fesetround(FE_TONEAREST);
  });
  EXPECT_EQ(main_mode_after.load(), FE_UPWARD) << "the main goroutine lost its own rounding mode";
  EXPECT_EQ(fresh_mode.load(), FE_TONEAREST)
      << "a goroutine created in the default rounding mode started in FE_UPWARD, the mode of "
         "the goroutine that happened to switch to it";
}

// ---- libc / libstdc++ under preemption ----

struct Unwound {
  std::atomic<int64_t>* bad;
  int* count;
  ~Unwound() {
    if (std::uncaught_exceptions() != 1) bad->fetch_add(1);
    ++*count;
  }
};

__attribute__((noinline)) void throw_deep(int depth, int i, std::atomic<int64_t>* bad, int* dtors) {
  Unwound u{bad, dtors};
  if (depth == 0) throw std::runtime_error("failure " + std::to_string(i));
  throw_deep(depth - 1, i, bad, dtors);
}

// Burns ~`us` microseconds in a call-free loop (a likely preemption point).
__attribute__((noinline)) uint64_t burn(int us) {
  auto end = Clock::now() + std::chrono::microseconds(us);
  uint64_t x = 0;
  while (Clock::now() < end) {
    for (int i = 0; i < 512; i++) {
      x = x * 31 + static_cast<uint64_t>(i);
      asm volatile("" : "+r"(x));
    }
  }
  return x;
}

TEST(PreemptIntegrity, MallocStringsStreamsAndExceptionsUnderPreemption) {
  SKIP_WITHOUT_ASYNC_PREEMPTION();
  if (!gort::async_preemption_available()) GTEST_SKIP() << "no async preemption in this build";
  auto child = [] {
    enum Kind { kSpin, kMalloc, kString, kStream, kExcept, kNumKinds };
    const char* names[kNumKinds] = {"spin", "malloc", "string", "ostringstream", "exceptions"};
    std::atomic<int64_t> runs[kNumKinds] = {};
    std::atomic<int64_t> bad[kNumKinds] = {};
    std::atomic<uint64_t> preempts{0};
    std::atomic<uint64_t> moved_in_catch{0};
    auto deadline = Clock::now() + 3s;
    std::atomic<bool> stop_spinners{false};

    run_cfg(preempt_cfg(2, absl::Microseconds(100)), [&] {
      std::vector<int> kinds = {kSpin, kSpin, kMalloc, kMalloc, kString, kString,
                                kStream, kStream, kExcept, kExcept, kExcept};
      Countdown cd(static_cast<int64_t>(kinds.size()));
      for (size_t gi = 0; gi < kinds.size(); gi++) {
        int kind = kinds[gi];
        gort::go([&, kind, gi] {
          uint64_t rng = 0x9E3779B97F4A7C15ull * (gi + 1);
          auto next = [&rng] {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            return rng;
          };
          int iter = 0;
          while (Clock::now() < deadline) {
            bool ok = true;
            switch (kind) {
              case kSpin:
                burn(2000);
                break;
              case kMalloc: {
                void* ptrs[64];
                size_t sizes[64];
                for (int k = 0; k < 64; k++) {
                  sizes[k] = 1 + next() % 4096;
                  ptrs[k] = std::malloc(sizes[k]);
                  std::memset(ptrs[k], k, sizes[k]);
                }
                for (int k = 0; k < 64; k++) {
                  auto* p = static_cast<unsigned char*>(ptrs[k]);
                  if (p[0] != k || p[sizes[k] - 1] != k || p[sizes[k] / 2] != k) ok = false;
                  std::free(ptrs[k]);
                }
                auto v = std::make_unique<std::vector<int>>(1000, iter);
                if ((*v)[999] != iter) ok = false;
                break;
              }
              case kString: {
                std::string s;
                size_t expect = 0;
                for (int k = 0; k < 200; k++) {
                  std::string part = std::to_string(k * 1000 + iter);
                  s += part;
                  s.push_back(',');
                  expect += part.size() + 1;
                }
                if (s.size() != expect) ok = false;
                if (s.find(std::to_string(199 * 1000 + iter) + ",") == std::string::npos) ok = false;
                std::string copy = s.substr(0, s.size() / 2) + s.substr(s.size() / 2);
                if (copy != s) ok = false;
                break;
              }
              case kStream: {
                std::ostringstream os;
                char expect[128];
                int n = iter % 100000;
                os << n << ' ' << (n * 0.5) << ' ' << std::hex << n << std::dec << " end";
                std::snprintf(expect, sizeof expect, "%d %g %x end", n, n * 0.5, n);
                if (os.str() != expect) ok = false;
                std::istringstream is(os.str());
                int back = -1;
                is >> back;
                if (back != n) ok = false;
                break;
              }
              case kExcept: {
                int dtors = 0;
                try {
                  throw_deep(3, iter, &bad[kExcept], &dtors);
                  ok = false;
                } catch (const std::runtime_error& e) {
                  // Linger inside the handler: preemption (and a move to
                  // another thread) lands here often.
                  internal::M* m0 = current_m();
                  burn(iter % 8 == 0 ? 300 : 20);
                  if (current_m() != m0) moved_in_catch++;
                  if (std::string(e.what()) != "failure " + std::to_string(iter)) ok = false;
                  if (std::current_exception() == nullptr) ok = false;
                  if (std::uncaught_exceptions() != 0) ok = false;
                  try {
                    throw;  // rethrow the one we are handling
                  } catch (const std::exception& again) {
                    if (&again != &e) ok = false;
                  }
                }
                if (dtors != 4) ok = false;
                if (std::current_exception() != nullptr) ok = false;
                break;
              }
            }
            runs[kind]++;
            if (!ok) bad[kind]++;
            if (++iter % 64 == 0) gort::yield();
          }
          preempts += self_async_preempts();
          cd.done();
        });
      }
      cd.wait();
      stop_spinners = true;
    });
    for (int k = 0; k < kNumKinds; k++) {
      EXPECT_EQ(bad[k].load(), 0) << names[k] << ": " << bad[k].load() << " failures in "
                                  << runs[k].load() << " runs";
      EXPECT_GT(runs[k].load(), 0) << names[k];
    }
    EXPECT_GE(preempts.load(), 100u);
    std::fprintf(stderr, "[info] %llu async preemptions, %llu moves inside a catch block\n",
                 static_cast<unsigned long long>(preempts.load()),
                 static_cast<unsigned long long>(moved_in_catch.load()));
  };
  GORT_EXPECT_SUBPROCESS_OK(60, reporting(child));
}

}  // namespace
}  // namespace gort::test

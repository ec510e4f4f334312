// stdlib/sync/synctest.cpp — gort::synctest on the runtime's bubbles
// (gmp/bubble.hpp; the driver is gmp/bubble_run.cpp).
#include "gort/synctest.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "gmp/bubble.hpp"
#include "gmp/diag/traceback.hpp"
#include "gmp/tls.hpp"
#include "gort/runtime.hpp"

namespace gort::synctest {

namespace {

// Shared by test and the bubble's main goroutine: on a deadlock main may
// stay parked past test's return.
struct Main {
  std::function<void()> f;
  std::exception_ptr thrown;
};

std::optional<uint64_t> env_seed() {
  const char* v = std::getenv("GORT_SCHEDSEED");
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || *end != '\0') throw panic_error(std::string("synctest: GORT_SCHEDSEED=") + v + " is not a number");
  return n;
}

void print_seed(uint64_t seed) {
  std::fprintf(stderr, "synctest: schedule seed %llu (GORT_SCHEDSEED=%llu replays it)\n",
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
}

// Runs f as the main goroutine of bubble b (begun on the caller) until the
// bubble is done; returns its final schedule hash. Throws the deadlock
// panic, or rethrows what f threw.
uint64_t drive(internal::Bubble* b, std::function<void()> f) {
  auto m = std::make_shared<Main>();
  m->f = std::move(f);
  try {
    gort::go([m] {
      try {
        m->f();
      } catch (...) {
        m->thrown = std::current_exception();
      }
    });
  } catch (...) {
    internal::bubble_end(b);
    throw;
  }
  const char* reason = internal::bubble_run(b);
  const uint64_t hash = b->schedule_hash;
  std::string report;
  if (reason != nullptr) report = reason + internal::bubble_stacks(b, internal::getg());
  internal::bubble_end(b);
  if (reason != nullptr) {
    if (m->thrown) {
      try {
        std::rethrow_exception(m->thrown);
      } catch (const std::exception& e) {
        report += std::string("\n\nthe bubble's main goroutine threw: ") + e.what();
      } catch (...) {
        report += "\n\nthe bubble's main goroutine threw an exception";
      }
    }
    throw panic_error(report);
  }
  if (m->thrown) std::rethrow_exception(m->thrown);
  return hash;
}

// test's body; returns the final schedule hash of a seeded bubble.
uint64_t run_bubble(std::function<void()> f, const Options& options) {
  std::optional<uint64_t> seed = options.seed ? options.seed : env_seed();
  if (seed && gort::procs() != 1) {
    throw panic_error("synctest: a seeded bubble needs one P (Config::procs = 1), not " +
                      std::to_string(gort::procs()));
  }
  if (options.yield_probability < 0 || options.yield_probability > 1) {
    throw panic_error("synctest: yield_probability must be in [0, 1]");
  }
  internal::Bubble* b = internal::bubble_begin(options.fake_std_clocks);
  internal::G* root = internal::getg();
  if (seed) {
    internal::bubble_seed(b, *seed, static_cast<uint32_t>(options.yield_probability * 65536));
    root->nopreempt++;
  }
  // The root is never preempted while it drives a seeded bubble.
  struct Unseed {
    internal::G* root;
    bool seeded;
    ~Unseed() {
      if (seeded) root->nopreempt--;
    }
  } unseed{root, seed.has_value()};
  try {
    return drive(b, std::move(f));
  } catch (...) {
    if (seed) print_seed(*seed);
    throw;
  }
}

}  // namespace

void test(std::function<void()> f, Options options) { run_bubble(std::move(f), options); }

std::vector<uint64_t> explore(std::function<void()> f, ExploreOptions options) {
  std::vector<uint64_t> hashes;
  for (int i = 0; i < options.runs; i++) {
    Options o;
    o.seed = options.first_seed + static_cast<uint64_t>(i);
    o.yield_probability = options.yield_probability;
    o.fake_std_clocks = options.fake_std_clocks;
    hashes.push_back(run_bubble(f, o));
  }
  return hashes;
}

std::optional<uint64_t> seed() {
  internal::Bubble* b = internal::seeded_bubble(internal::getg());
  if (b == nullptr) return std::nullopt;
  return b->seed;
}

uint64_t schedule_hash() {
  internal::Bubble* b = internal::seeded_bubble(internal::getg());
  return b != nullptr ? b->schedule_hash : 0;
}



void wait() { internal::bubble_wait(); }

bool in_bubble() { return internal::current_bubble() != nullptr; }

}  // namespace gort::synctest

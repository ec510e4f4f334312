// tests/stdlib/pprof/profiles_test.cpp — the named profiles
// (stdlib/pprof/profiles.cpp): the goroutine profile counts 100 labelled
// goroutines parked in one function (pprof and Go's text forms, debug 1
// and 2); the block profile records a channel wait with at least the
// delay its sender slept; the mutex profile sees contention on a
// gort::Mutex and on a std::mutex; an unknown name is an error naming the
// known ones.
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "gort/pprof.hpp"
#include "gort/time.hpp"
#include "tests/stdlib/helpers.hpp"
#include "tests/stdlib/pprof/decode.hpp"

namespace gort_pprof_test {
namespace {

using gort::test::Parked;
using gort::test::WaitReason;

std::atomic<int64_t> g_sink{0};

class Profiles : public gort::test::ProcsTest {};
GORT_INSTANTIATE_STDLIB_PROCS(Profiles);

// ---- goroutine ----

[[gnu::noinline]] void pprof_parked_here(gort::Chan<int> c, gort::WaitGroup* started) {
  started->done();
  (void)c.recv();
  g_sink.fetch_add(1, std::memory_order_relaxed);  // no tail call: this frame stays
}

TEST_P(Profiles, GoroutineProfileCountsParkedGoroutines) {
  run_test([] {
    constexpr int kGoroutines = 100;
    auto c = gort::make_chan<int>();
    gort::WaitGroup started, done;
    gort::pprof::with_labels({{"group", "parked"}}, [&] {
      for (int i = 0; i < kGoroutines; i++) {
        started.add(1);
        done.add(1);
        gort::go([&, c] {
          pprof_parked_here(c, &started);
          done.done();
        });
      }
    });
    started.wait();  // each is in pprof_parked_here from now on, parked or about to be

    // Once all are parked, at the same place: one sample of 100.
    Profile p;
    absl::Status status;
    const bool one_sample = gort::test::eventually([&] {
      absl::StatusOr<std::string> gz = gort::pprof::profile("goroutine");
      status = gz.status();
      p.Clear();
      if (!gz.ok() || !decode(*gz, &p)) return false;
      for (const Sample& s : p.sample()) {
        if (has_function(p, s, "pprof_parked_here") && s.value(0) == kGoroutines) return true;
      }
      return false;
    });
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_TRUE(one_sample) << "no sample of " << kGoroutines << " goroutines in pprof_parked_here";
    EXPECT_EQ(sample_types(p), (std::vector<std::string>{"goroutine/count"}));
    EXPECT_EQ(period_type(p), "goroutine/count");
    EXPECT_EQ(sum_with(p, "pprof_parked_here", 0), kGoroutines);
    for (const Sample& s : p.sample()) {
      if (has_function(p, s, "pprof_parked_here")) {
        EXPECT_EQ(label(p, s, "group"), "parked");
      }
    }
    EXPECT_GT(p.mapping_size(), 0);

    absl::StatusOr<std::string> text = gort::pprof::profile("goroutine", 1);
    EXPECT_TRUE(text.ok()) << text.status();
    if (text.ok()) {
      EXPECT_EQ(text->rfind("goroutine profile: total ", 0), 0u) << *text;
      EXPECT_NE(text->find("pprof_parked_here"), std::string::npos) << *text;
      EXPECT_NE(text->find(std::to_string(kGoroutines) + " @ 0x"), std::string::npos) << *text;
      EXPECT_NE(text->find("# labels: {\"group\":\"parked\"}"), std::string::npos) << *text;
    }

    absl::StatusOr<std::string> dump = gort::pprof::profile("goroutine", 2);
    EXPECT_TRUE(dump.ok()) << dump.status();
    if (dump.ok()) {
      EXPECT_NE(dump->find("[chan receive]:"), std::string::npos) << *dump;
      EXPECT_NE(dump->find("pprof_parked_here"), std::string::npos) << *dump;
    }

    c.close();
    done.wait();
  });
}

// ---- block ----

[[gnu::noinline]] void pprof_block_recv_here(gort::Chan<int> c, Parked* parked) {
  parked->mark();
  (void)c.recv();
  g_sink.fetch_add(1, std::memory_order_relaxed);
}

TEST_P(Profiles, BlockProfileRecordsAChannelWait) {
  run_test([] {
    constexpr auto kSleep = absl::Milliseconds(30);
    gort::pprof::set_block_profile_rate(1);
    auto c = gort::make_chan<int>();
    Parked parked;
    gort::WaitGroup wg;
    wg.add(1);
    // The sender sleeps once the receiver is parked: its wait is longer.
    gort::go([&, c] {
      EXPECT_TRUE(parked.wait(WaitReason::kChanRecv));
      gort::sleep(kSleep);
      c.send(1);
      wg.done();
    });
    pprof_block_recv_here(c, &parked);
    wg.wait();
    gort::pprof::set_block_profile_rate(0);

    absl::StatusOr<std::string> gz = gort::pprof::profile("block");
    if (!gz.ok()) {
      ADD_FAILURE() << gz.status();
      return;
    }
    Profile p;
    EXPECT_TRUE(decode(*gz, &p));
    EXPECT_EQ(sample_types(p), (std::vector<std::string>{"contentions/count", "delay/nanoseconds"}));
    EXPECT_GE(sum_with(p, "pprof_block_recv_here", 0), 1);
    EXPECT_GE(sum_with(p, "pprof_block_recv_here", 1), absl::ToInt64Nanoseconds(kSleep));

    absl::StatusOr<std::string> text = gort::pprof::profile("block", 1);
    EXPECT_TRUE(text.ok()) << text.status();
    if (text.ok()) {
      EXPECT_EQ(text->rfind("--- contention:\ncycles/second=1000000000\n", 0), 0u) << *text;
      EXPECT_NE(text->find("pprof_block_recv_here"), std::string::npos) << *text;
    }
  });
}

// ---- mutex ----

[[gnu::noinline]] void pprof_gort_mutex_waiter(gort::Mutex* mu, Parked* parked) {
  parked->mark();
  mu->lock();
  mu->unlock();
  g_sink.fetch_add(1, std::memory_order_relaxed);
}

TEST_P(Profiles, MutexProfileSeesGortMutexContention) {
  run_test([] {
    constexpr auto kHold = absl::Milliseconds(20);
    const int before = gort::pprof::set_mutex_profile_fraction(1);
    EXPECT_EQ(gort::pprof::set_mutex_profile_fraction(-1), 1);  // only asks
    gort::Mutex mu;
    mu.lock();
    Parked parked;
    gort::WaitGroup wg;
    wg.add(1);
    gort::go([&] {
      pprof_gort_mutex_waiter(&mu, &parked);
      wg.done();
    });
    EXPECT_TRUE(parked.wait(WaitReason::kSyncMutex));
    gort::sleep(kHold);
    mu.unlock();
    wg.wait();
    gort::pprof::set_mutex_profile_fraction(before);

    absl::StatusOr<std::string> gz = gort::pprof::profile("mutex");
    if (!gz.ok()) {
      ADD_FAILURE() << gz.status();
      return;
    }
    Profile p;
    EXPECT_TRUE(decode(*gz, &p));
    EXPECT_EQ(sample_types(p), (std::vector<std::string>{"contentions/count", "delay/nanoseconds"}));
    EXPECT_GE(sum_with(p, "pprof_gort_mutex_waiter", 0), 1);
    EXPECT_GE(sum_with(p, "pprof_gort_mutex_waiter", 1), absl::ToInt64Nanoseconds(kHold));
  });
}

[[gnu::noinline]] void pprof_std_mutex_waiter(std::mutex* mu) {
  mu->lock();
  mu->unlock();
  g_sink.fetch_add(1, std::memory_order_relaxed);
}

// std::mutex through the pthread_mutex_lock interposer (preempt/oslock.cpp):
// a plain thread holds it while a goroutine waits (blocking its thread).
TEST_P(Profiles, MutexProfileSeesStdMutexContention) {
  run_test([] {
    const int before = gort::pprof::set_mutex_profile_fraction(1);
    std::mutex mu;
    std::atomic<bool> held{false};
    std::thread holder([&] {
      mu.lock();
      held.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      mu.unlock();
    });
    while (!held.load()) gort::sleep(absl::Microseconds(100));
    pprof_std_mutex_waiter(&mu);
    holder.join();
    gort::pprof::set_mutex_profile_fraction(before);

    absl::StatusOr<std::string> text = gort::pprof::profile("mutex", 1);
    EXPECT_TRUE(text.ok()) << text.status();
    if (text.ok()) {
      EXPECT_EQ(text->rfind("--- mutex:\ncycles/second=1000000000\nsampling period=", 0), 0u) << *text;
      EXPECT_NE(text->find("pprof_std_mutex_waiter"), std::string::npos) << *text;
    }
    absl::StatusOr<std::string> gz = gort::pprof::profile("mutex");
    if (!gz.ok()) {
      ADD_FAILURE() << gz.status();
      return;
    }
    Profile p;
    EXPECT_TRUE(decode(*gz, &p));
    EXPECT_GE(sum_with(p, "pprof_std_mutex_waiter", 0), 1);
    EXPECT_GT(sum_with(p, "pprof_std_mutex_waiter", 1), 0);
  });
}

// ---- names ----

TEST(ProfilesName, UnknownNameIsAnError) {
  absl::StatusOr<std::string> r = gort::pprof::profile("heap");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("\"heap\""), std::string::npos) << msg;
  for (const char* known : {"goroutine", "block", "mutex"}) EXPECT_NE(msg.find(known), std::string::npos) << msg;
  EXPECT_FALSE(gort::pprof::write_profile("threadcreate", ::testing::TempDir() + "x.pprof").ok());
}

}  // namespace
}  // namespace gort_pprof_test

// pipeline — fan-out/fan-in with cancellation, and a bounded worker pool.
//
// Part 1 follows "Go Concurrency Patterns: Pipelines and cancellation":
// a source stage emits numbers, several workers (fan-out) square them, a
// merge stage (fan-in) combines their outputs, and the consumer stops early
// by closing `done`: every stage watches done in a select, so no goroutine
// is left blocked on a send nobody will receive.
//
// Part 2 is a bounded worker pool: jobs go through a buffered channel to a
// fixed number of workers, results come back on another channel, and a
// weighted gort::Semaphore caps how many "expensive" jobs run at once.
//
// Usage: pipeline [workers] [jobs]
#include <gort/gort.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Done = gort::Chan<std::monostate>;

gort::Chan<int64_t> source(Done done, int64_t n) {
  auto out = gort::make_chan<int64_t>();
  gort::go([=] {
    for (int64_t i = 1; i <= n; i++) {
      bool stop = false;
      gort::select(gort::on_send(out, i), gort::on_recv(done, [&] { stop = true; }));
      if (stop) break;
    }
    out.close();
  });
  return out;
}

gort::Chan<int64_t> square(Done done, gort::Chan<int64_t> in) {
  auto out = gort::make_chan<int64_t>();
  gort::go([=] {
    for (int64_t v : in) {
      bool stop = false;
      gort::select(gort::on_send(out, v * v), gort::on_recv(done, [&] { stop = true; }));
      if (stop) break;
    }
    out.close();
  });
  return out;
}

gort::Chan<int64_t> merge(Done done, const std::vector<gort::Chan<int64_t>>& ins) {
  auto out = gort::make_chan<int64_t>();
  auto wg = std::make_shared<gort::WaitGroup>();
  for (const auto& in : ins) {
    wg->add(1);
    gort::go([=] {
      for (int64_t v : in) {
        bool stop = false;
        gort::select(gort::on_send(out, v), gort::on_recv(done, [&] { stop = true; }));
        if (stop) break;
      }
      wg->done();
    });
  }
  gort::go([=] {
    wg->wait();
    out.close();
  });
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int workers = argc > 1 ? std::atoi(argv[1]) : 4;
  int jobs = argc > 2 ? std::atoi(argv[2]) : 1000;
  if (workers <= 0 || jobs <= 0) {
    std::fprintf(stderr, "usage: %s [workers > 0] [jobs > 0]\n", argv[0]);
    return 2;
  }
  return gort::run([=] {
    // Part 1: fan-out/fan-in, stop after the first 10 results.
    {
      Done done = gort::make_chan<std::monostate>();
      auto src = source(done, 1000000);
      std::vector<gort::Chan<int64_t>> squares;
      for (int i = 0; i < workers; i++) squares.push_back(square(done, src));
      auto merged = merge(done, squares);
      int64_t sum = 0;
      int taken = 0;
      for (int64_t v : merged) {
        sum += v;
        if (++taken == 10) break;
      }
      done.close();  // cancels every stage
      // Drain so the merge goroutines can finish; they stop at done anyway.
      for (int64_t v : merged) (void)v;
      std::printf("pipeline: took %d squares (sum %lld) and cancelled the rest\n", taken,
                  static_cast<long long>(sum));
    }
    // Part 2: a bounded worker pool.
    {
      auto job_ch = gort::make_chan<int>(static_cast<size_t>(workers) * 2);
      auto results = gort::make_chan<int64_t>(static_cast<size_t>(workers) * 2);
      gort::Semaphore expensive(2);  // at most 2 expensive jobs at a time
      gort::WaitGroup wg;
      for (int w = 0; w < workers; w++) {
        wg.add(1);
        gort::go([&, job_ch, results] {
          for (int j : job_ch) {
            int64_t r = 0;
            if (j % 10 == 0) {
              expensive.acquire();
              for (int k = 0; k < 1000; k++) r += static_cast<int64_t>(j) * k % 7;
              expensive.release();
            } else {
              r = static_cast<int64_t>(j) * 2;
            }
            results.send(r);
          }
          wg.done();
        });
      }
      gort::go([&, job_ch] {
        for (int j = 0; j < jobs; j++) job_ch.send(j);
        job_ch.close();
      });
      gort::go([&, results] {
        wg.wait();
        results.close();
      });
      int64_t total = 0;
      int count = 0;
      for (int64_t r : results) {
        total += r;
        count++;
      }
      std::printf("pool: %d workers finished %d jobs (checksum %lld)\n", workers, count,
                  static_cast<long long>(total));
    }
    return 0;
  });
}

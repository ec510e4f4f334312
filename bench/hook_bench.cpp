// bench/hook_bench.cpp — libc's blocking calls and unmodified blocking
// libraries on goroutines (netpoll/hook/, docs/blocking-libraries.md).
// Twin: bench/go/hook_bench/main.go (the first three cases; the libraries
// have no Go twin: bench/compare runs them for gort alone, against the
// targets in its GORT_TARGETS).
//
//   libc_sleep/procs:2    10,000 goroutines each call
//                         std::this_thread::sleep_for(200 ms) (Go:
//                         time.Sleep). ms: spawn to the last wake-up.
//   pipe_readers/procs:2  2,000 goroutines each read(2) a byte from a pipe
//                         of its own, which gets it 300 ms after the
//                         spawning ends (Go: os.Pipe). ms: spawn to the
//                         last read.
//   eventfd_read/procs:1  read(2) of 8 bytes from a ready eventfd
//                         (EFD_SEMAPHORE with a large count: always
//                         ready), 1,000,000 times on one goroutine: the
//                         mean of the middle half of the calls, each timed
//                         with the time-stamp counter. ns/read with
//                         the hooks on; ns/read_hooks_off with
//                         Config::hook_libc = false, in seven interleaved
//                         rounds of each; overhead_ns the median difference
//                         of neighbouring rounds (Go: syscall.Read, its
//                         mean).
//   hiredis_incr/procs:2  500 goroutines, each with a hiredis blocking
//                         context, 200 INCRs each against a redis-server
//                         the program starts. INCR/s; then
//                         redis-benchmark's with as many clients against
//                         the same server (redis_benchmark_INCR/s), and
//                         vs_redis_benchmark, the ratio of the two.
//   libpq_exec/procs:2    64 goroutines, each with a libpq connection
//                         (opened first: connect_ms), 30 queries each that
//                         wait 20 ms in a PostgreSQL the program starts
//                         (select pg_sleep(0.02)). ms: the queries.
//   curl_easy/procs:2     200 goroutines, libcurl's easy API, 20 GETs each
//                         from the http_server sample's /sleep?ms=50. ms.
//   beast_sync/procs:2    200 goroutines, Boost.Beast's synchronous client,
//                         10 GETs each on one connection, same endpoint. ms.
//
// Every case also reports os_threads (the most OS threads the process had,
// sampled every millisecond) and stall_reports (sysmon's, 0 is the target).
// The servers are child processes (tests/netpoll/servers.hpp); a case whose
// server cannot start reports an error.
#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

// Boost 1.74's asio/awaitable.hpp uses std::exchange without <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <gort/gort.hpp>

#include "bench_util.hpp"
#include "tests/netpoll/servers.hpp"

namespace {

using gortbench::Stopwatch;

// The most OS threads the process had while it lived, sampled every
// millisecond by a thread of its own (not counted).
class ThreadPeak {
 public:
  ThreadPeak() {
    sampler_ = std::thread([this] {
      while (!stop_.load(std::memory_order_relaxed)) {
        int n = count() - 1;
        if (n > peak_.load(std::memory_order_relaxed)) peak_.store(n, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  ~ThreadPeak() { stop(); }
  int stop() {
    if (sampler_.joinable()) {
      stop_ = true;
      sampler_.join();
    }
    return peak_.load();
  }

 private:
  static int count() {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/task")) {
      while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
      ::closedir(d);
    }
    return n;
  }
  std::atomic<bool> stop_{false};
  std::atomic<int> peak_{0};
  std::thread sampler_;
};

void report_common(benchmark::State& state, ThreadPeak& peak, int64_t stalls) {
  state.counters["os_threads"] = peak.stop();
  state.counters["stall_reports"] = static_cast<double>(stalls);
}

void libc_sleep(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(10'000);
  double seconds = 0;
  int64_t stalls = 0;
  ThreadPeak peak;
  gort::run(
      [&] {
        gort::WaitGroup wg;
        Stopwatch sw;
        for (int64_t i = 0; i < n; i++) {
          wg.add(1);
          gort::go([&wg] {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            wg.done();
          });
        }
        wg.wait();
        seconds = sw.seconds();
        stalls = gort::runtime_stats().stall_reports;
      },
      gort::Config{.procs = procs});
  state.SetIterationTime(seconds);
  state.counters["ms"] = seconds * 1e3;
  report_common(state, peak, stalls);
}

void pipe_readers(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(2'000);
  double seconds = 0;
  int64_t stalls = 0;
  ThreadPeak peak;
  gort::run(
      [&] {
        std::vector<std::pair<int, int>> pipes(static_cast<size_t>(n));
        for (auto& p : pipes) {
          int fds[2];
          if (::pipe(fds) != 0) state.SkipWithError("pipe failed");
          p = {fds[0], fds[1]};
        }
        std::atomic<int64_t> got{0};
        gort::WaitGroup wg;
        Stopwatch sw;
        for (auto& p : pipes) {
          wg.add(1);
          gort::go([&wg, &got, fd = p.first] {
            char c;
            if (::read(fd, &c, 1) == 1) got++;
            wg.done();
          });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        for (auto& p : pipes) {
          if (::write(p.second, "x", 1) != 1) state.SkipWithError("write failed");
        }
        wg.wait();
        seconds = sw.seconds();
        if (got.load() != n) state.SkipWithError("a reader got nothing");
        stalls = gort::runtime_stats().stall_reports;
        for (auto& p : pipes) {
          ::close(p.first);
          ::close(p.second);
        }
      },
      gort::Config{.procs = procs});
  state.SetIterationTime(seconds);
  state.counters["ms"] = seconds * 1e3;
  report_common(state, peak, stalls);
}

// A round of n reads of a ready eventfd on one goroutine: the time of one
// call, in ns, from the CPU's time-stamp counter around each call, as the
// mean of the middle half of the calls (what one call costs when nothing
// interrupts it; on a paravirtualised host a system call's mean is
// dominated by its rare long ones, whose noise would swamp what the hook
// adds).
double eventfd_round(int procs, bool hooks, int64_t n, double ns_per_tick) {
  double median_ns = 0;
  gort::Config cfg{.procs = procs};
  cfg.hook_libc = hooks;
  gort::run(
      [&] {
        int fd = ::eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
        uint64_t big = uint64_t{1} << 60;
        if (::write(fd, &big, sizeof big) != sizeof big) return;
        uint64_t v;
        for (int i = 0; i < 10000; i++) benchmark::DoNotOptimize(::read(fd, &v, sizeof v));
        std::vector<uint32_t> ticks(static_cast<size_t>(n));
        gort::NoPreempt stay;
        for (int64_t i = 0; i < n; i++) {
          uint64_t t0 = __builtin_ia32_rdtsc();
          benchmark::DoNotOptimize(::read(fd, &v, sizeof v));
          ticks[static_cast<size_t>(i)] = static_cast<uint32_t>(__builtin_ia32_rdtsc() - t0);
        }
        // The mean of the middle half: finer than one tick (some hosts
        // count the time-stamp counter in steps of several ticks).
        std::sort(ticks.begin(), ticks.end());
        double sum = 0;
        for (int64_t i = n / 4; i < 3 * n / 4; i++) sum += ticks[static_cast<size_t>(i)];
        median_ns = sum / static_cast<double>(3 * n / 4 - n / 4) * ns_per_tick;
        ::close(fd);
      },
      cfg);
  return median_ns;
}

// Nanoseconds per time-stamp counter tick, against the steady clock.
double ns_per_tick() {
  auto t0 = std::chrono::steady_clock::now();
  uint64_t c0 = __builtin_ia32_rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  uint64_t c1 = __builtin_ia32_rdtsc();
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(c1 - c0);
}

void eventfd_bench(benchmark::State& state, int procs) {
  const int64_t n = gortbench::scaled(1'000'000);
  const double tick = ns_per_tick();
  // Interleaved rounds; the medians of each side, and the median of the
  // differences of neighbouring rounds.
  constexpr int kRounds = 7;
  std::vector<double> on, off, diff;
  for (int r = 0; r < kRounds; r++) {
    on.push_back(eventfd_round(procs, true, n, tick));
    off.push_back(eventfd_round(procs, false, n, tick));
    diff.push_back(on.back() - off.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  state.SetIterationTime(median(on) * static_cast<double>(n) / 1e9);
  state.counters["ns/read"] = median(on);
  state.counters["ns/read_hooks_off"] = median(off);
  state.counters["overhead_ns"] = median(diff);
}

// redis-benchmark's INCR/s with `clients` clients and n requests, or -1.
double redis_benchmark_incr(int port, int64_t clients, int64_t n) {
  std::string cmd = "redis-benchmark -h 127.0.0.1 -p " + std::to_string(port) + " -c " + std::to_string(clients) +
                    " -n " + std::to_string(n) + " -t incr --csv 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char line[512];
  double rps = -1;
  while (std::fgets(line, sizeof line, p) != nullptr) {
    // "INCR","43233.89",...
    if (std::strncmp(line, "\"INCR\",\"", 8) == 0) rps = std::strtod(line + 8, nullptr);
  }
  ::pclose(p);
  return rps;
}

void hiredis_incr(benchmark::State& state, int procs) {
  gort::test::RedisServer redis;
  if (!redis.error().empty()) {
    state.SkipWithError(redis.error().c_str());
    return;
  }
  const int64_t clients = 500, each = gortbench::scaled(200);
  double seconds = 0;
  int64_t stalls = 0;
  std::atomic<int64_t> ok{0};
  ThreadPeak peak;
  gort::run(
      [&] {
        gort::WaitGroup wg;
        Stopwatch sw;
        for (int64_t i = 0; i < clients; i++) {
          wg.add(1);
          gort::go([&] {
            redisContext* c = redisConnect("127.0.0.1", redis.port());
            for (int64_t k = 0; c != nullptr && c->err == 0 && k < each; k++) {
              auto* r = static_cast<redisReply*>(redisCommand(c, "INCR bench:counter"));
              if (r != nullptr && r->type == REDIS_REPLY_INTEGER) ok++;
              freeReplyObject(r);
            }
            redisFree(c);
            wg.done();
          });
        }
        wg.wait();
        seconds = sw.seconds();
        stalls = gort::runtime_stats().stall_reports;
      },
      gort::Config{.procs = procs});
  if (ok.load() != clients * each) state.SkipWithError("commands failed");
  state.SetIterationTime(seconds);
  double ours = static_cast<double>(ok.load()) / seconds;
  state.counters["INCR/s"] = ours;
  report_common(state, peak, stalls);
  // redis-benchmark (C, one thread, an event loop) with the same clients
  // against the same server, right after: what this machine gives.
  double theirs = redis_benchmark_incr(redis.port(), clients, clients * each);
  if (theirs > 0) {
    state.counters["redis_benchmark_INCR/s"] = theirs;
    state.counters["vs_redis_benchmark"] = ours / theirs;
  }
}

void libpq_exec(benchmark::State& state, int procs) {
  gort::test::PostgresServer pg;
  if (!pg.error().empty()) {
    state.SkipWithError(pg.error().c_str());
    return;
  }
  const int clients = 64, each = static_cast<int>(gortbench::scaled(30));
  double connect = 0, seconds = 0;
  int64_t stalls = 0;
  std::atomic<int64_t> ok{0};
  ThreadPeak peak;
  gort::run(
      [&] {
        std::vector<PGconn*> conns(clients);
        gort::WaitGroup wg;
        Stopwatch csw;
        for (int i = 0; i < clients; i++) {
          wg.add(1);
          gort::go([&, i] {
            conns[static_cast<size_t>(i)] = PQconnectdb(pg.conninfo().c_str());
            wg.done();
          });
        }
        wg.wait();
        connect = csw.seconds();
        if (std::getenv("BENCH_DEBUG")) {
          for (PGconn* c : conns) if (PQstatus(c) != CONNECTION_OK) std::fprintf(stderr, "conn: %s", PQerrorMessage(c));
        }
        Stopwatch sw;
        for (PGconn* c : conns) {
          wg.add(1);
          gort::go([&, c] {
            for (int k = 0; PQstatus(c) == CONNECTION_OK && k < each; k++) {
              PGresult* r = PQexec(c, "select pg_sleep(0.02)");
              if (PQresultStatus(r) == PGRES_TUPLES_OK) ok++;
              else if (std::getenv("BENCH_DEBUG")) std::fprintf(stderr, "%s", PQerrorMessage(c));
              PQclear(r);
            }
            wg.done();
          });
        }
        wg.wait();
        seconds = sw.seconds();
        stalls = gort::runtime_stats().stall_reports;
        for (PGconn* c : conns) PQfinish(c);
      },
      gort::Config{.procs = procs});
  if (ok.load() != int64_t{clients} * each) state.SkipWithError("queries failed");
  state.SetIterationTime(seconds);
  state.counters["ms"] = seconds * 1e3;
  state.counters["connect_ms"] = connect * 1e3;
  report_common(state, peak, stalls);
}

// The http_server sample, for the HTTP clients: GORT_HTTP_SERVER, else
// next to this program in the build tree.
void find_http_server() {
  if (std::getenv("GORT_HTTP_SERVER") != nullptr) return;
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/'));
  std::string exe = dir + "/../samples/http_server/http_server";
  ::setenv("GORT_HTTP_SERVER", exe.c_str(), 0);
}

size_t discard(char*, size_t size, size_t n, void*) { return size * n; }

void curl_easy(benchmark::State& state, int procs) {
  find_http_server();
  gort::test::SampleHttpServer server;
  if (!server.error().empty()) {
    state.SkipWithError(server.error().c_str());
    return;
  }
  curl_global_init(CURL_GLOBAL_ALL);
  const int clients = 200, each = static_cast<int>(gortbench::scaled(20));
  double seconds = 0;
  int64_t stalls = 0;
  std::atomic<int64_t> ok{0};
  ThreadPeak peak;
  std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/sleep?ms=50";
  gort::run(
      [&] {
        gort::WaitGroup wg;
        Stopwatch sw;
        for (int i = 0; i < clients; i++) {
          wg.add(1);
          gort::go([&] {
            CURL* h = curl_easy_init();
            curl_easy_setopt(h, CURLOPT_URL, url.c_str());
            curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &discard);
            curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
            for (int k = 0; k < each; k++) {
              long code = 0;
              if (curl_easy_perform(h) == CURLE_OK && curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK &&
                  code == 200) {
                ok++;
              }
            }
            curl_easy_cleanup(h);
            wg.done();
          });
        }
        wg.wait();
        seconds = sw.seconds();
        stalls = gort::runtime_stats().stall_reports;
      },
      gort::Config{.procs = procs});
  curl_global_cleanup();
  if (ok.load() != int64_t{clients} * each) state.SkipWithError("requests failed");
  state.SetIterationTime(seconds);
  state.counters["ms"] = seconds * 1e3;
  report_common(state, peak, stalls);
}

void beast_sync(benchmark::State& state, int procs) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  find_http_server();
  gort::test::SampleHttpServer server;
  if (!server.error().empty()) {
    state.SkipWithError(server.error().c_str());
    return;
  }
  const int clients = 200, each = static_cast<int>(gortbench::scaled(10));
  double seconds = 0;
  int64_t stalls = 0;
  std::atomic<int64_t> ok{0};
  ThreadPeak peak;
  gort::run(
      [&] {
        gort::WaitGroup wg;
        asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(server.port()));
        Stopwatch sw;
        for (int i = 0; i < clients; i++) {
          wg.add(1);
          gort::go([&] {
            try {
              asio::io_context ioc;
              asio::ip::tcp::socket s(ioc);
              s.connect(ep);
              beast::flat_buffer b;
              for (int k = 0; k < each; k++) {
                http::request<http::empty_body> req{http::verb::get, "/sleep?ms=50", 11};
                req.set(http::field::host, "127.0.0.1");
                http::write(s, req);
                http::response<http::string_body> res;
                http::read(s, b, res);
                if (res.result_int() == 200) ok++;
              }
            } catch (const std::exception&) {
            }
            wg.done();
          });
        }
        wg.wait();
        seconds = sw.seconds();
        stalls = gort::runtime_stats().stall_reports;
      },
      gort::Config{.procs = procs});
  if (ok.load() != int64_t{clients} * each) state.SkipWithError("requests failed");
  state.SetIterationTime(seconds);
  state.counters["ms"] = seconds * 1e3;
  report_common(state, peak, stalls);
}

}  // namespace

int main(int argc, char** argv) {
  gortbench::register_once("libc_sleep", 2, libc_sleep);
  gortbench::register_once("pipe_readers", 2, pipe_readers);
  gortbench::register_once("eventfd_read", 1, eventfd_bench);
  gortbench::register_once("hiredis_incr", 2, hiredis_incr);
  gortbench::register_once("libpq_exec", 2, libpq_exec);
  gortbench::register_once("curl_easy", 2, curl_easy);
  gortbench::register_once("beast_sync", 2, beast_sync);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}

// redis_counter — thousands of goroutines talk to a real redis-server
// through hiredis, each in plain blocking style, with no thread per
// connection and no callbacks.
//
// hiredis runs in non-blocking mode and does its own reads and writes; gort
// only parks the goroutine between its attempts (gort::RawConn, Go's
// syscall.RawConn; docs/os.md). A pool of connections (a buffered channel
// of them) is shared by the goroutines: each takes one, runs a few
// commands, and gives it back.
//
// Each of G goroutines runs R rounds of
//   SET key:<g> <round>;  INCR counter;  GET key:<g>  (must read back <round>)
// then main checks that counter == G * R and prints what the server counted
// (INFO commandstats), so a test can compare the two.
//
// Usage: redis_counter HOST PORT [goroutines=2000] [rounds=20] [conns=50]
// Prints "ok: ..." and the server's counts; exit status 1 and the error on
// stderr if anything failed (server down, wrong reply).
#include <gort/gort.hpp>
#include <hiredis/hiredis.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

// One hiredis connection, driven through a borrowed gort::os::File.
class Redis {
 public:
  ~Redis() {
    file_ = gort::os::File();  // out of the poller before hiredis closes the fd
    if (ctx_ != nullptr) redisFree(ctx_);
  }

  static absl::StatusOr<std::unique_ptr<Redis>> dial(const std::string& host, int port) {
    auto r = std::unique_ptr<Redis>(new Redis);
    r->ctx_ = redisConnectNonBlock(host.c_str(), port);
    if (r->ctx_ == nullptr) return absl::ResourceExhaustedError("redis: out of memory");
    if (r->ctx_->err != 0) return absl::UnavailableError(std::string("redis: connect: ") + r->ctx_->errstr);
    auto f = gort::os::new_file(r->ctx_->fd, "redis", gort::os::Own::kBorrow);
    if (!f.ok()) return f.status();
    r->file_ = std::move(*f);
    // The non-blocking connect finishes when the socket is writable.
    absl::Status s = r->file_.set_deadline(absl::Now() + absl::Seconds(5));
    int soerr = 0;
    if (s.ok()) {
      s = r->file_.syscall_conn().write([&](int fd) {
        socklen_t len = sizeof soerr;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
        return soerr != EINPROGRESS;
      });
    }
    if (s.ok() && soerr != 0) s = absl::UnavailableError(std::string("redis: connect: ") + strerror(soerr));
    if (s.ok()) s = r->file_.set_deadline(absl::InfiniteFuture());
    if (!s.ok()) return s;
    return r;
  }

  // Sends one command (printf-style, as redisCommand) and waits for its
  // reply. Parks the goroutine, never the thread.
  template <class... A>
  absl::StatusOr<std::string> command(const char* fmt, A... args) {
    if (redisAppendCommand(ctx_, fmt, args...) != REDIS_OK) return error("append");
    gort::RawConn rc = file_.syscall_conn();
    // hiredis writes what it can; false (not done) parks until writable.
    absl::Status s = rc.write([&](int) {
      int done = 0;
      return redisBufferWrite(ctx_, &done) != REDIS_OK || done != 0;
    });
    if (!s.ok()) return s;
    if (ctx_->err != 0) return error("write");
    void* reply = nullptr;
    s = rc.read([&](int) { return read_step(&reply); });
    if (!s.ok()) return s;
    if (reply == nullptr) return error("read");
    std::unique_ptr<redisReply, void (*)(void*)> r(static_cast<redisReply*>(reply), freeReplyObject);
    switch (r->type) {
      case REDIS_REPLY_ERROR:
        return absl::FailedPreconditionError(std::string("redis: ") + r->str);
      case REDIS_REPLY_INTEGER:
        return std::to_string(r->integer);
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
        return std::string(r->str, r->len);
      case REDIS_REPLY_NIL:
        return std::string();
      default:
        return absl::UnimplementedError("redis: unexpected reply type");
    }
  }

 private:
  Redis() = default;

  // RawConn's rule: return false only once the socket said EAGAIN.
  // redisBufferRead hides EAGAIN, but its read buffer only grows when it
  // read something.
  bool read_step(void** reply) {
    for (;;) {
      if (redisGetReplyFromReader(ctx_, reply) != REDIS_OK || *reply != nullptr) return true;
      size_t before = ctx_->reader->len;
      if (redisBufferRead(ctx_) != REDIS_OK) return true;  // error or the server closed
      if (ctx_->reader->len == before) return false;        // EAGAIN: park, then again
    }
  }

  absl::Status error(const char* what) const {
    return absl::UnavailableError(std::string("redis: ") + what + ": " +
                                  (ctx_->err != 0 ? ctx_->errstr : "connection closed"));
  }

  redisContext* ctx_ = nullptr;
  gort::os::File file_;
};

int run(const std::string& host, int port, int goroutines, int rounds, int conns) {
  auto pool = gort::make_chan<Redis*>(conns);
  std::vector<std::unique_ptr<Redis>> all;
  for (int i = 0; i < conns; i++) {
    auto r = Redis::dial(host, port);
    if (!r.ok()) {
      std::fprintf(stderr, "redis_counter: %s\n", gort::error_text(r).c_str());
      return 1;
    }
    pool.send((*r).get());
    all.push_back(std::move(*r));
  }
  if (auto del = all[0]->command("DEL counter"); !del.ok()) {
    std::fprintf(stderr, "redis_counter: %s\n", gort::error_text(del).c_str());
    return 1;
  }
  std::atomic<int> failures{0};
  std::string first_error;
  gort::Mutex mu;
  auto fail = [&](const absl::Status& s) {
    if (failures.fetch_add(1) == 0) {
      mu.lock();
      first_error = gort::error_text(s);
      mu.unlock();
    }
  };
  auto start = std::chrono::steady_clock::now();
  gort::WaitGroup wg;
  for (int g = 0; g < goroutines; g++) {
    wg.add(1);
    gort::go([&, g] {
      std::string key = "key:" + std::to_string(g);
      for (int round = 0; round < rounds && failures.load() == 0; round++) {
        Redis* c = *pool.recv();  // take a connection (parks while all are busy)
        std::string want = std::to_string(round);
        absl::StatusOr<std::string> r = c->command("SET %s %s", key.c_str(), want.c_str());
        if (r.ok()) r = c->command("INCR counter");
        if (r.ok()) r = c->command("GET %s", key.c_str());
        pool.send(c);  // give it back
        if (!r.ok()) {
          fail(r.status());
        } else if (*r != want) {
          fail(absl::DataLossError("GET " + key + " = " + *r + ", want " + want));
        }
      }
      wg.done();
    });
  }
  wg.wait();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (failures.load() != 0) {
    std::fprintf(stderr, "redis_counter: %d failures, first: %s\n", failures.load(), first_error.c_str());
    return 1;
  }
  auto counter = all[0]->command("GET counter");
  long want = long{goroutines} * rounds;
  if (!counter.ok() || *counter != std::to_string(want)) {
    std::fprintf(stderr, "redis_counter: counter = %s, want %ld\n",
                 counter.ok() ? counter->c_str() : gort::error_text(counter).c_str(), want);
    return 1;
  }
  long commands = 3 * want;
  std::printf("ok: %d goroutines x %d rounds over %d connections: counter = %ld, %ld commands in %.0f ms (%.0f commands/s)\n",
              goroutines, rounds, conns, want, commands, ms, commands / (ms / 1000));
  auto stats = all[0]->command("INFO commandstats");
  if (stats.ok()) {
    for (const char* cmd : {"cmdstat_set:", "cmdstat_incr:", "cmdstat_get:"}) {
      size_t at = stats->find(cmd);
      if (at != std::string::npos) std::printf("server %s\n", stats->substr(at, stats->find('\r', at) - at).c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: redis_counter HOST PORT [goroutines=2000] [rounds=20] [conns=50]\n");
    return 2;
  }
  std::string host = argv[1];
  int port = std::atoi(argv[2]);
  int goroutines = argc > 3 ? std::atoi(argv[3]) : 2000;
  int rounds = argc > 4 ? std::atoi(argv[4]) : 20;
  int conns = argc > 5 ? std::atoi(argv[5]) : 50;
  if (port <= 0 || port > 65535 || goroutines <= 0 || rounds <= 0 || conns <= 0) {
    std::fprintf(stderr, "redis_counter: bad arguments\n");
    return 2;
  }
  return gort::run([&] { return run(host, port, goroutines, rounds, conns); });
}

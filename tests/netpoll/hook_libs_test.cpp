// tests/netpoll/hook_libs_test.cpp — unmodified blocking libraries on
// goroutines, against real servers the suite starts and stops itself
// (tests/netpoll/servers.hpp): hiredis's blocking API against
// redis-server, libpq against a throwaway PostgreSQL, libcurl's easy API
// against the http_server sample. Each checks its answers and the OS
// threads the run made (docs/blocking-libraries.md). Boost.Beast's
// synchronous client and server: hook_beast_test.cpp.
#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gort/sync.hpp"
#include "tests/netpoll/hook_helpers.hpp"
#include "tests/netpoll/servers.hpp"

namespace {

using gort::test::hook_cfg;
using gort::test::ms_created;

// The servers live for the whole suite (PostgreSQL's initdb takes a
// second or two).
gort::test::RedisServer* g_redis = nullptr;
gort::test::PostgresServer* g_pg = nullptr;
gort::test::SampleHttpServer* g_http = nullptr;

class Servers : public ::testing::Environment {
 public:
  void SetUp() override {
    g_redis = new gort::test::RedisServer;
    g_pg = new gort::test::PostgresServer;
    g_http = new gort::test::SampleHttpServer;
    curl_global_init(CURL_GLOBAL_ALL);
  }
  void TearDown() override {
    delete g_redis;
    delete g_pg;
    delete g_http;
    curl_global_cleanup();
  }
};
const auto* const kServers = ::testing::AddGlobalTestEnvironment(new Servers);

class HookLibs : public gort::test::ProcsTest {};
INSTANTIATE_TEST_SUITE_P(Procs, HookLibs, ::testing::Values(1, 2), gort::test::procs_name);

// ---- hiredis ----

struct RedisFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Redis = std::unique_ptr<redisContext, RedisFree>;

Redis redis_connect() { return Redis(redisConnect("127.0.0.1", g_redis->port())); }

long long redis_int(redisContext* c, const char* cmd) {
  auto* r = static_cast<redisReply*>(redisCommand(c, cmd));
  long long v = r != nullptr && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  freeReplyObject(r);
  return v;
}

TEST_P(HookLibs, HiredisBlockingApiFromManyGoroutines) {
  if (!g_redis->error().empty()) GTEST_SKIP() << g_redis->error();
  run_test([] {
    int ms_before = ms_created();
    {
      Redis c = redis_connect();
      ASSERT_TRUE(c && c->err == 0);
      redis_int(c.get(), "DEL hook:counter");
    }
    constexpr int kClients = 100, kEach = 50;
    std::atomic<int> ok{0};
    gort::WaitGroup wg;
    for (int i = 0; i < kClients; i++) {
      wg.add(1);
      gort::go([&] {
        Redis c = redis_connect();
        EXPECT_TRUE(c && c->err == 0) << (c ? c->errstr : "no context");
        for (int k = 0; c && c->err == 0 && k < kEach; k++) {
          if (redis_int(c.get(), "INCR hook:counter") > 0) ok++;
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(ok.load(), kClients * kEach);
    Redis c = redis_connect();
    auto* r = static_cast<redisReply*>(redisCommand(c.get(), "GET hook:counter"));
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(std::string(r->str, r->len), std::to_string(kClients * kEach));
    freeReplyObject(r);
    EXPECT_LE(ms_created() - ms_before, gort::procs()) << "hiredis's blocking calls made threads";
  });
}

// redisSetTimeout is SO_RCVTIMEO: a command the server holds longer (BLPOP
// on an empty list) ends with hiredis's I/O error, after the timeout, with
// the goroutine parked meanwhile.
TEST_P(HookLibs, HiredisTimeoutIsTheSocketsReceiveTimeout) {
  if (!g_redis->error().empty()) GTEST_SKIP() << g_redis->error();
  run_test([] {
    Redis c = redis_connect();
    ASSERT_TRUE(c && c->err == 0);
    timeval tv{0, 200000};
    ASSERT_EQ(redisSetTimeout(c.get(), tv), REDIS_OK);
    auto t0 = std::chrono::steady_clock::now();
    auto* r = static_cast<redisReply*>(redisCommand(c.get(), "BLPOP hook:empty 5"));
    EXPECT_EQ(r, nullptr);
    EXPECT_EQ(c->err, REDIS_ERR_IO);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(190));
    freeReplyObject(r);
  });
}

// ---- libpq ----

struct PgFinish {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Pg = std::unique_ptr<PGconn, PgFinish>;

TEST_P(HookLibs, LibpqQueriesThatWaitInTheServer) {
  if (!g_pg->error().empty()) GTEST_SKIP() << g_pg->error();
  run_test([] {
    int ms_before = ms_created();
    constexpr int kClients = 16, kEach = 5;
    std::atomic<int> ok{0};
    gort::WaitGroup wg;
    for (int i = 0; i < kClients; i++) {
      wg.add(1);
      gort::go([&, i] {
        Pg c(PQconnectdb(g_pg->conninfo().c_str()));
        EXPECT_EQ(PQstatus(c.get()), CONNECTION_OK) << PQerrorMessage(c.get());
        for (int k = 0; PQstatus(c.get()) == CONNECTION_OK && k < kEach; k++) {
          std::string q = "select pg_sleep(0.02), " + std::to_string(i * 100 + k);
          PGresult* r = PQexec(c.get(), q.c_str());
          if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
              std::string(PQgetvalue(r, 0, 1)) == std::to_string(i * 100 + k)) {
            ok++;
          }
          PQclear(r);
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(ok.load(), kClients * kEach);
    EXPECT_LE(ms_created() - ms_before, gort::procs() + 1) << "libpq's calls made threads";
  });
}

TEST_P(HookLibs, LibpqErrorsAndAConnectionRefused) {
  if (!g_pg->error().empty()) GTEST_SKIP() << g_pg->error();
  run_test([] {
    Pg c(PQconnectdb(g_pg->conninfo().c_str()));
    ASSERT_EQ(PQstatus(c.get()), CONNECTION_OK);
    PGresult* r = PQexec(c.get(), "selec 1");
    EXPECT_EQ(PQresultStatus(r), PGRES_FATAL_ERROR);
    EXPECT_NE(std::string(PQresultErrorMessage(r)).find("syntax error"), std::string::npos);
    PQclear(r);
    std::string nobody = "host=127.0.0.1 port=" + std::to_string(gort::test::free_port()) + " user=postgres";
    Pg refused(PQconnectdb(nobody.c_str()));
    EXPECT_EQ(PQstatus(refused.get()), CONNECTION_BAD);
    EXPECT_NE(std::string(PQerrorMessage(refused.get())).find("Connection refused"), std::string::npos)
        << PQerrorMessage(refused.get());
  });
}

// ---- libcurl's easy API ----

size_t append(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

TEST_P(HookLibs, CurlEasyApiFromManyGoroutines) {
  if (!g_http->error().empty()) GTEST_SKIP() << g_http->error();
  run_test([] {
    int ms_before = ms_created();
    constexpr int kClients = 40, kEach = 5;
    std::atomic<int> ok{0};
    gort::WaitGroup wg;
    for (int i = 0; i < kClients; i++) {
      wg.add(1);
      gort::go([&, i] {
        CURL* h = curl_easy_init();
        std::string url = "http://127.0.0.1:" + std::to_string(g_http->port()) +
                          (i % 2 == 0 ? "/sleep?ms=20" : "/");
        std::string body;
        curl_easy_setopt(h, CURLOPT_URL, url.c_str());
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &append);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        for (int k = 0; k < kEach; k++) {
          body.clear();
          CURLcode rc = curl_easy_perform(h);
          long code = 0;
          curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
          EXPECT_EQ(rc, CURLE_OK) << curl_easy_strerror(rc);
          if (rc == CURLE_OK && code == 200 && !body.empty()) ok++;
        }
        curl_easy_cleanup(h);
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(ok.load(), kClients * kEach);
    // Not a thread per call: on a loaded machine sysmon may still hand a P
    // off from a goroutine caught in a short system call (two at most here).
    EXPECT_LE(ms_created() - ms_before, gort::procs() + 2) << "libcurl's calls made threads";
  });
}

TEST_P(HookLibs, CurlTimeoutAndRefusedConnection) {
  if (!g_http->error().empty()) GTEST_SKIP() << g_http->error();
  run_test([] {
    CURL* h = curl_easy_init();
    std::string url = "http://127.0.0.1:" + std::to_string(g_http->port()) + "/sleep?ms=2000";
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 200L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    std::string body;
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &append);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    EXPECT_EQ(curl_easy_perform(h), CURLE_OPERATION_TIMEDOUT);
    std::string nobody = "http://127.0.0.1:" + std::to_string(gort::test::free_port()) + "/";
    curl_easy_setopt(h, CURLOPT_URL, nobody.c_str());
    EXPECT_EQ(curl_easy_perform(h), CURLE_COULDNT_CONNECT);
    curl_easy_cleanup(h);
  });
}

}  // namespace

// backend — an HTTP service whose handlers call PostgreSQL through libpq and
// Redis through hiredis, in plain blocking style, with a goroutine per
// connection. None of the three libraries knows about gort: Boost.Beast's
// synchronous server, libpq's PQexecParams and hiredis's redisCommand all
// block in libc, and gort's libc hooks park the goroutine instead of the
// thread (docs/blocking-libraries.md). Thousands of requests in flight cost
// goroutines, not threads.
//
// What it shows:
//   - cache-aside: GET /items/ID reads Redis first (X-Cache: hit), else
//     PostgreSQL, and fills the cache with a 30 s expiry (X-Cache: miss);
//     PUT /items/ID?name=N&price=P writes PostgreSQL, then drops the
//     cached entry;
//   - connection pools as channels: a gort::Chan holds the idle PGconn and
//     redisContext handles; a handler takes one (parking while all are
//     busy) and gives it back; a broken connection is replaced;
//   - parameterised SQL (PQexecParams: no string pasting into queries);
//   - a graceful shutdown on SIGINT/SIGTERM (gort::signal::notify): the
//     acceptor is closed, idle keep-alive connections are shut down, and
//     requests in flight finish.
//
// Routes:
//   GET /items/ID                 {"id":ID,"name":"...","price":P}, 404 if none
//   PUT /items/ID?name=N&price=P  stores it; 204
//   GET /stats                    {"hits":H,"misses":M,"threads":T,"goroutines":G}
//
// Usage: backend -pg "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
//                -redis 127.0.0.1:6379 [-listen 127.0.0.1:8080] [-procs N]
//                [-pool 16]
// Prints "listening on HOST:PORT" once it accepts connections. On first use
// it creates the table `items` and fills it with 1,000 rows.
//
// Try: curl -i http://127.0.0.1:8080/items/42 (twice: miss, then hit)
//      curl -X PUT 'http://127.0.0.1:8080/items/42?name=gizmo&price=7'
//      wrk -t2 -c100 -d10s http://127.0.0.1:8080/items/42
#include <gort/gort.hpp>

#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/socket.h>

// Boost 1.74's asio/awaitable.hpp uses std::exchange without <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct Options {
  std::string listen = "127.0.0.1:8080";
  std::string pg;
  std::string redis = "127.0.0.1:6379";
  int procs = 0;
  int pool = 16;
};

// ---- pools --------------------------------------------------------------

// Up to `size` connections made by `open`, handed out one goroutine at a
// time. take() parks while every one is in use; give() returns one (or
// nullptr for a broken one, which the next take() replaces).
template <class Conn, class Open, class Close>
class Pool {
 public:
  Pool(int size, Open open, Close close)
      : idle_(gort::make_chan<Conn*>(static_cast<size_t>(size))), open_(open), close_(close) {
    for (int i = 0; i < size; i++) idle_.send(nullptr);  // a slot, connected on first use
  }
  // Closes the idle connections (every one, once the handlers are done).
  ~Pool() {
    for (bool more = true; more;) {
      more = gort::select(gort::on_recv(idle_,
                                        [&](std::optional<Conn*> v) {
                                          if (v && *v != nullptr) close_(*v);
                                        }),
                          gort::on_default()) == 0;
    }
  }
  // Null if a new connection could not be made (the slot goes back).
  Conn* take() {
    Conn* c = *idle_.recv();
    if (c == nullptr) {
      c = open_();
      if (c == nullptr) idle_.send(nullptr);
    }
    return c;
  }
  void give(Conn* c, bool broken) {
    if (broken && c != nullptr) {
      close_(c);
      c = nullptr;
    }
    idle_.send(c);
  }

 private:
  gort::Chan<Conn*> idle_;
  Open open_;
  Close close_;
};

Options g_opt;
std::atomic<int64_t> g_hits{0}, g_misses{0};

PGconn* pg_open() {
  PGconn* c = PQconnectdb(g_opt.pg.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    std::fprintf(stderr, "backend: postgres: %s", PQerrorMessage(c));
    PQfinish(c);
    return nullptr;
  }
  return c;
}

redisContext* redis_open() {
  std::string_view hp(g_opt.redis);
  size_t colon = hp.rfind(':');
  std::string host(hp.substr(0, colon));
  int port = std::atoi(std::string(hp.substr(colon + 1)).c_str());
  redisContext* c = redisConnect(host.c_str(), port);
  if (c == nullptr || c->err != 0) {
    std::fprintf(stderr, "backend: redis: %s\n", c != nullptr ? c->errstr : "out of memory");
    if (c != nullptr) redisFree(c);
    return nullptr;
  }
  return c;
}

using PgPool = Pool<PGconn, PGconn* (*)(), void (*)(PGconn*)>;
using RedisPool = Pool<redisContext, redisContext* (*)(), void (*)(redisContext*)>;
PgPool* g_pg = nullptr;
RedisPool* g_redis = nullptr;

// ---- the data ------------------------------------------------------------

struct Item {
  std::string name;
  int64_t price = 0;
};

std::string json(int64_t id, const Item& it) {
  std::string s = "{\"id\":" + std::to_string(id) + ",\"name\":\"";
  for (char c : it.name) {
    if (c == '"' || c == '\\') s.push_back('\\');
    s.push_back(c);
  }
  return s + "\",\"price\":" + std::to_string(it.price) + "}";
}

// The cached JSON of item id, or nothing (a miss, or Redis is down: the
// database answers then).
std::optional<std::string> cache_get(int64_t id) {
  redisContext* r = g_redis->take();
  if (r == nullptr) return std::nullopt;
  auto* reply = static_cast<redisReply*>(redisCommand(r, "GET item:%lld", static_cast<long long>(id)));
  std::optional<std::string> v;
  if (reply != nullptr && reply->type == REDIS_REPLY_STRING) v.emplace(reply->str, reply->len);
  g_redis->give(r, reply == nullptr);
  freeReplyObject(reply);
  return v;
}

void cache(const char* fmt, int64_t id, const std::string* value) {
  redisContext* r = g_redis->take();
  if (r == nullptr) return;
  auto* reply = static_cast<redisReply*>(
      value != nullptr ? redisCommand(r, fmt, static_cast<long long>(id), value->data(), value->size())
                       : redisCommand(r, fmt, static_cast<long long>(id)));
  g_redis->give(r, reply == nullptr);
  freeReplyObject(reply);
}

// PQexecParams with text parameters; the result, or null when the
// connection failed (it goes back broken).
PGresult* query(const char* sql, std::initializer_list<std::string> params) {
  PGconn* c = g_pg->take();
  if (c == nullptr) return nullptr;
  const char* values[4];
  int n = 0;
  for (const std::string& p : params) values[n++] = p.c_str();
  PGresult* res = PQexecParams(c, sql, n, nullptr, values, nullptr, nullptr, 0);
  bool broken = PQstatus(c) != CONNECTION_OK;
  g_pg->give(c, broken);
  return res;
}

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::string> query_param(std::string_view q, std::string_view key) {
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view kv = q.substr(0, amp);
    size_t eq = kv.find('=');
    if (eq != std::string_view::npos && kv.substr(0, eq) == key) return std::string(kv.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// ---- HTTP ----------------------------------------------------------------

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

Response reply(const Request& req, http::status st, std::string body, const char* type = "application/json") {
  Response res{st, req.version()};
  res.set(http::field::content_type, type);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response get_item(const Request& req, int64_t id) {
  if (auto cached = cache_get(id)) {
    g_hits++;
    Response res = reply(req, http::status::ok, *cached);
    res.set("X-Cache", "hit");
    return res;
  }
  g_misses++;
  PGresult* r = query("select name, price from items where id = $1", {std::to_string(id)});
  if (r == nullptr || PQresultStatus(r) != PGRES_TUPLES_OK) {
    PQclear(r);
    return reply(req, http::status::service_unavailable, "{\"error\":\"database unavailable\"}");
  }
  if (PQntuples(r) == 0) {
    PQclear(r);
    return reply(req, http::status::not_found, "{\"error\":\"no such item\"}");
  }
  Item it{PQgetvalue(r, 0, 0), std::atoll(PQgetvalue(r, 0, 1))};
  PQclear(r);
  std::string body = json(id, it);
  cache("SET item:%lld %b EX 30", id, &body);
  Response res = reply(req, http::status::ok, body);
  res.set("X-Cache", "miss");
  return res;
}

Response put_item(const Request& req, int64_t id, std::string_view q) {
  auto name = query_param(q, "name");
  auto price = query_param(q, "price");
  if (!name || !price || !parse_int(*price)) {
    return reply(req, http::status::bad_request, "{\"error\":\"want ?name=N&price=P\"}");
  }
  PGresult* r = query(
      "insert into items (id, name, price) values ($1, $2, $3) "
      "on conflict (id) do update set name = excluded.name, price = excluded.price",
      {std::to_string(id), *name, *price});
  bool ok = r != nullptr && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) return reply(req, http::status::service_unavailable, "{\"error\":\"database unavailable\"}");
  cache("DEL item:%lld", id, nullptr);
  return reply(req, http::status::no_content, "");
}

Response route(const Request& req) {
  std::string_view target(req.target().data(), req.target().size());
  size_t qm = target.find('?');
  std::string_view path = target.substr(0, qm);
  std::string_view q = qm == std::string_view::npos ? std::string_view() : target.substr(qm + 1);
  if (path == "/stats" && req.method() == http::verb::get) {
    gort::RuntimeStats st = gort::runtime_stats();
    return reply(req, http::status::ok,
                 "{\"hits\":" + std::to_string(g_hits.load()) + ",\"misses\":" + std::to_string(g_misses.load()) +
                     ",\"threads\":" + std::to_string(st.threads) + ",\"goroutines\":" + std::to_string(st.goroutines) +
                     "}");
  }
  constexpr std::string_view kItems = "/items/";
  if (path.substr(0, kItems.size()) == kItems) {
    auto id = parse_int(path.substr(kItems.size()));
    if (!id) return reply(req, http::status::bad_request, "{\"error\":\"bad id\"}");
    if (req.method() == http::verb::get) return get_item(req, *id);
    if (req.method() == http::verb::put) return put_item(req, *id, q);
    Response res = reply(req, http::status::method_not_allowed, "{\"error\":\"method not allowed\"}");
    res.set(http::field::allow, "GET, PUT");
    return res;
  }
  return reply(req, http::status::not_found, "{\"error\":\"not found\"}");
}

// The open connections, so that shutdown can stop their idle reads.
gort::Mutex g_conns_mu;
std::set<int> g_conns;  // guarded by g_conns_mu
bool g_stopping = false;  // guarded by g_conns_mu

// One connection: requests until the client closes or shutdown.
void serve(tcp::socket sock, gort::WaitGroup* active) {
  int fd = sock.native_handle();
  {
    std::lock_guard lock(g_conns_mu);
    if (g_stopping) {
      active->done();
      return;
    }
    g_conns.insert(fd);
  }
  beast::flat_buffer buf;
  beast::error_code ec;
  for (;;) {
    Request req;
    http::read(sock, buf, req, ec);  // parks while the client is idle
    if (ec) break;
    Response res = route(req);
    http::write(sock, res, ec);
    if (ec || !res.keep_alive()) break;
  }
  {
    std::lock_guard lock(g_conns_mu);
    g_conns.erase(fd);
  }
  sock.shutdown(tcp::socket::shutdown_both, ec);
  active->done();
}

bool prepare_database() {
  PGresult* r = query("create table if not exists items (id bigint primary key, name text not null, price bigint not null)", {});
  bool ok = r != nullptr && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  if (!ok) return false;
  r = query("insert into items select i, 'item ' || i, i * 10 from generate_series(1, 1000) i on conflict do nothing", {});
  ok = r != nullptr && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  return ok;
}

int serve_main() {
  auto sigs = gort::make_chan<int>(1);
  gort::signal::notify(sigs, {SIGINT, SIGTERM});
  PgPool pg(g_opt.pool, &pg_open, &PQfinish);
  RedisPool redis(g_opt.pool, &redis_open, &redisFree);
  g_pg = &pg;
  g_redis = &redis;
  if (!prepare_database()) {
    std::fprintf(stderr, "backend: cannot prepare the database (-pg %s)\n", g_opt.pg.c_str());
    return 1;
  }
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc);
  try {
    std::string_view l(g_opt.listen);
    size_t colon = l.rfind(':');
    tcp::endpoint ep(asio::ip::make_address(std::string(l.substr(0, colon))),
                     static_cast<uint16_t>(std::atoi(std::string(l.substr(colon + 1)).c_str())));
    acceptor.open(ep.protocol());
    acceptor.set_option(asio::socket_base::reuse_address(true));
    acceptor.bind(ep);
    acceptor.listen();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "backend: listen %s: %s\n", g_opt.listen.c_str(), e.what());
    return 1;
  }
  tcp::endpoint at = acceptor.local_endpoint();
  std::printf("listening on %s:%d\n", at.address().to_string().c_str(), at.port());
  std::fflush(stdout);

  gort::WaitGroup active;
  const int listen_fd = acceptor.native_handle();
  gort::go([&, listen_fd] {
    sigs.recv();
    // Asio's objects are not for two goroutines at once: the acceptor is
    // left to the loop below, and its socket is shut down underneath, which
    // wakes the blocked accept with an error. Idle connections stop reading
    // the same way (their parked read sees end of stream); requests in
    // flight finish.
    ::shutdown(listen_fd, SHUT_RD);
    std::lock_guard lock(g_conns_mu);
    g_stopping = true;
    for (int fd : g_conns) ::shutdown(fd, SHUT_RD);
  });
  for (;;) {
    beast::error_code ec;
    tcp::socket sock(ioc);
    acceptor.accept(sock, ec);  // parks until a client connects
    if (ec) break;  // shut down (or out of descriptors: a real server would back off)
    active.add(1);
    gort::go(serve, std::move(sock), &active);
  }
  active.wait();
  std::printf("backend: %lld hits, %lld misses\n", static_cast<long long>(g_hits.load()),
              static_cast<long long>(g_misses.load()));
  return 0;
}

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s -pg CONNINFO [-redis HOST:PORT] [-listen HOST:PORT] [-procs N] [-pool N]\n", argv0);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    std::string_view a(argv[i]);
    if (i + 1 >= argc) usage(argv[0]);
    const char* v = argv[++i];
    if (a == "-listen") {
      g_opt.listen = v;
    } else if (a == "-pg") {
      g_opt.pg = v;
    } else if (a == "-redis") {
      g_opt.redis = v;
    } else if (a == "-procs") {
      g_opt.procs = std::atoi(v);
    } else if (a == "-pool") {
      g_opt.pool = std::atoi(v);
    } else {
      usage(argv[0]);
    }
  }
  if (g_opt.pg.empty() || g_opt.pool <= 0 || g_opt.redis.rfind(':') == std::string::npos) usage(argv[0]);
  gort::Config cfg;
  cfg.procs = g_opt.procs;
  return gort::run(serve_main, cfg);
}

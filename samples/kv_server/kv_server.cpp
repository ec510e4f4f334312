// kv_server — an in-memory key-value server that speaks the Redis protocol
// (RESP2), so redis-cli, redis-benchmark and Redis client libraries work
// with it.
//
// What it shows:
//   - one goroutine per connection with sequential code, and pipelining:
//     every complete command in the read buffer is executed before the
//     replies go out in one write (resp.hpp parses incrementally);
//   - shared state behind sharded gort::Mutexes (store.hpp): goroutines on
//     different Ps rarely meet on a lock, and a waiter parks, not a thread;
//   - expiry with timers: lazy on access, plus a sweeper goroutine on a
//     gort::Ticker that removes expired keys nobody touches;
//   - bounded resources (argument, inline and query-buffer limits, a
//     connection limit, an optional idle timeout), Redis's exact error texts,
//     and a graceful shutdown on SIGINT/SIGTERM: gort::net::Server
//     (gort/server.hpp) runs the accept loop, the limit and the shutdown.
//
// Commands: PING ECHO SET (EX PX EXAT PXAT NX XX KEEPTTL GET) GET SETNX SETEX
// APPEND STRLEN DEL EXISTS TYPE INCR DECR INCRBY DECRBY MGET MSET EXPIRE
// PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT) TTL PTTL PERSIST KEYS DBSIZE
// FLUSHALL FLUSHDB SELECT 0 INFO QUIT, and for tools: COMMAND (an empty
// reply), CONFIG GET (a few fixed values). Values are strings only.
//
// Usage: kv_server [-listen 127.0.0.1:6379] [-procs N] [-max-conns 10000]
//                  [-timeout SECONDS (0: none)]
// Prints "listening on HOST:PORT" (use -listen 127.0.0.1:0 for a free port).
// Try: redis-cli -p 6379 set greeting hello; redis-cli -p 6379 get greeting
//      redis-benchmark -p 6379 -q -t ping,set,get,incr,mset
#include <gort/gort.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "resp.hpp"
#include "store.hpp"

namespace {

using kv::Entry;
using kv::Store;

constexpr size_t kReadChunk = 16 * 1024;
constexpr size_t kFlushAt = 256 * 1024;  // write replies out beyond this, mid-batch
constexpr absl::Duration kWriteTimeout = absl::Seconds(30);

constexpr std::string_view kErrNotInt = "ERR value is not an integer or out of range";
constexpr std::string_view kErrSyntax = "ERR syntax error";

struct Options {
  std::string listen = "127.0.0.1:6379";
  int procs = 0;
  int max_conns = 10000;
  int timeout_s = 0;  // close idle clients after this; 0: never (Redis's default)
};

// ---- commands ----------------------------------------------------------------

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return r;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && lower(a) == lower(b);
}

struct Call {
  Store& store;
  std::span<const std::string_view> args;  // args[0] is the command name
  std::string& out;                        // replies
  std::string_view name;                   // the command's name, lower case
  bool quit = false;                       // close the connection after the replies

  void error(std::string_view msg) { kv::reply_error(out, msg); }
};

using Handler = void (*)(Call&);

struct Command {
  int arity;  // Redis's convention: n means exactly n, -n at least n (name included)
  Handler run;
};

void cmd_ping(Call& c) {
  if (c.args.size() > 2) {
    c.error("ERR wrong number of arguments for 'ping' command");
  } else if (c.args.size() == 2) {
    kv::reply_bulk(c.out, c.args[1]);
  } else {
    kv::reply_simple(c.out, "PONG");
  }
}

void cmd_echo(Call& c) { kv::reply_bulk(c.out, c.args[1]); }

void cmd_get(Call& c) {
  c.store.with(c.args[1], [&](Store::Ref& r) {
    if (Entry* e = r.entry()) {
      kv::reply_bulk(c.out, e->value);  // straight into the reply: one copy
    } else {
      kv::reply_null(c.out);
    }
  });
}

// Parses an expiry (EX/PX/EXAT/PXAT or SETEX's seconds) into an absolute
// deadline in ms; replies with the error and returns false if it is bad.
bool expire_at(Call& c, std::string_view arg, int64_t unit_ms, bool absolute, int64_t* at) {
  int64_t v;
  if (!kv::parse_int64(arg, &v)) {
    c.error(kErrNotInt);
    return false;
  }
  int64_t base = absolute ? 0 : kv::now_ms();
  if (v <= 0 || v > (INT64_MAX - base) / unit_ms) {
    c.error("ERR invalid expire time in '" + std::string(c.name) + "' command");
    return false;
  }
  *at = base + v * unit_ms;
  return true;
}

// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ms-ts|KEEPTTL]
void cmd_set(Call& c) {
  bool nx = false, xx = false, get = false, keepttl = false, has_expiry = false;
  int64_t at = 0;
  for (size_t i = 3; i < c.args.size(); i++) {
    std::string opt = lower(c.args[i]);
    bool next = i + 1 < c.args.size();
    if (opt == "nx" && !xx) {
      nx = true;
    } else if (opt == "xx" && !nx) {
      xx = true;
    } else if (opt == "get") {
      get = true;
    } else if (opt == "keepttl" && !has_expiry) {
      keepttl = true;
    } else if ((opt == "ex" || opt == "px" || opt == "exat" || opt == "pxat") && !keepttl &&
               !has_expiry && next) {
      int64_t unit = (opt == "ex" || opt == "exat") ? 1000 : 1;
      if (!expire_at(c, c.args[++i], unit, opt.size() == 4, &at)) return;
      has_expiry = true;
    } else {
      c.error(kErrSyntax);
      return;
    }
  }
  bool done = false;
  std::optional<std::string> old;
  c.store.with(c.args[1], [&](Store::Ref& r) {
    Entry* e = r.entry();
    if (get && e) old = e->value;
    if ((nx && e) || (xx && !e)) return;
    r.create().value.assign(c.args[2]);
    if (has_expiry) r.set_expire(at);
    else if (!keepttl) r.set_expire(0);
    done = true;
  });
  if (get) {
    if (old) kv::reply_bulk(c.out, *old);
    else kv::reply_null(c.out);
  } else if (done) {
    kv::reply_simple(c.out, "OK");
  } else {
    kv::reply_null(c.out);
  }
}

void cmd_setnx(Call& c) {
  bool done = c.store.with(c.args[1], [&](Store::Ref& r) {
    if (r.entry()) return false;
    r.create().value.assign(c.args[2]);
    return true;
  });
  kv::reply_int(c.out, done ? 1 : 0);
}

// SETEX key seconds value
void cmd_setex(Call& c) {
  int64_t at;
  if (!expire_at(c, c.args[2], 1000, false, &at)) return;
  c.store.with(c.args[1], [&](Store::Ref& r) {
    r.create().value.assign(c.args[3]);
    r.set_expire(at);
  });
  kv::reply_simple(c.out, "OK");
}

void cmd_append(Call& c) {
  size_t len = c.store.with(c.args[1], [&](Store::Ref& r) {
    Entry& e = r.create();
    e.value.append(c.args[2]);
    return e.value.size();
  });
  kv::reply_int(c.out, static_cast<int64_t>(len));
}

void cmd_strlen(Call& c) {
  size_t len = c.store.with(c.args[1], [&](Store::Ref& r) {
    return r.entry() ? r.entry()->value.size() : 0;
  });
  kv::reply_int(c.out, static_cast<int64_t>(len));
}

void cmd_type(Call& c) {
  bool found = c.store.with(c.args[1], [&](Store::Ref& r) { return r.entry() != nullptr; });
  kv::reply_simple(c.out, found ? "string" : "none");
}

// DEL and EXISTS: all keys under their shards' locks at once (atomic).
void cmd_del(Call& c) {
  auto keys = c.args.subspan(1);
  Store::Locked lock(c.store, keys);
  int64_t n = 0;
  for (std::string_view k : keys) {
    Store::Ref r = lock.ref(k);
    if (r.entry()) {
      r.erase();
      n++;
    }
  }
  kv::reply_int(c.out, n);
}

void cmd_exists(Call& c) {
  auto keys = c.args.subspan(1);
  Store::Locked lock(c.store, keys);
  int64_t n = 0;
  for (std::string_view k : keys) n += lock.ref(k).entry() ? 1 : 0;
  kv::reply_int(c.out, n);
}

void incr_by(Call& c, int64_t delta) {
  c.store.with(c.args[1], [&](Store::Ref& r) {
    int64_t v = 0;
    if (Entry* e = r.entry(); e && !kv::parse_int64(e->value, &v)) {
      c.error(kErrNotInt);
      return;
    }
    if ((delta > 0 && v > INT64_MAX - delta) || (delta < 0 && v < INT64_MIN - delta)) {
      c.error("ERR increment or decrement would overflow");
      return;
    }
    v += delta;
    r.create().value = std::to_string(v);  // keeps the key's expiry, as Redis does
    kv::reply_int(c.out, v);
  });
}

void cmd_incr(Call& c) { incr_by(c, 1); }
void cmd_decr(Call& c) { incr_by(c, -1); }
void cmd_incrby(Call& c) {
  int64_t d;
  if (!kv::parse_int64(c.args[2], &d)) return c.error(kErrNotInt);
  incr_by(c, d);
}
void cmd_decrby(Call& c) {
  int64_t d;
  if (!kv::parse_int64(c.args[2], &d)) return c.error(kErrNotInt);
  if (d == INT64_MIN) return c.error("ERR decrement would overflow");
  incr_by(c, -d);
}

void cmd_mget(Call& c) {
  auto keys = c.args.subspan(1);
  Store::Locked lock(c.store, keys);
  kv::reply_array(c.out, keys.size());
  for (std::string_view k : keys) {
    if (Entry* e = lock.ref(k).entry()) kv::reply_bulk(c.out, e->value);
    else kv::reply_null(c.out);
  }
}

void cmd_mset(Call& c) {
  if (c.args.size() % 2 == 0) return c.error("ERR wrong number of arguments for 'mset' command");
  std::vector<std::string_view> keys;
  for (size_t i = 1; i < c.args.size(); i += 2) keys.push_back(c.args[i]);
  Store::Locked lock(c.store, keys);
  for (size_t i = 1; i < c.args.size(); i += 2) {
    Store::Ref r = lock.ref(c.args[i]);
    r.create().value.assign(c.args[i + 1]);
    r.set_expire(0);
  }
  kv::reply_simple(c.out, "OK");
}

// EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT key when [NX|XX|GT|LT]
void expire_generic(Call& c, int64_t unit_ms, bool absolute) {
  int64_t when;
  if (!kv::parse_int64(c.args[2], &when)) return c.error(kErrNotInt);
  bool nx = false, xx = false, gt = false, lt = false;
  for (size_t i = 3; i < c.args.size(); i++) {
    std::string opt = lower(c.args[i]);
    if (opt == "nx") nx = true;
    else if (opt == "xx") xx = true;
    else if (opt == "gt") gt = true;
    else if (opt == "lt") lt = true;
    else return c.error("ERR Unsupported option " + std::string(c.args[i]));
  }
  if (nx && (xx || gt || lt)) {
    return c.error("ERR NX and XX, GT or LT options at the same time are not compatible");
  }
  if (gt && lt) return c.error("ERR GT and LT options at the same time are not compatible");
  int64_t base = absolute ? 0 : kv::now_ms();
  if (when > INT64_MAX / unit_ms || when < INT64_MIN / unit_ms ||
      (when > 0 && when * unit_ms > INT64_MAX - base)) {
    return c.error("ERR invalid expire time in '" + std::string(c.name) + "' command");
  }
  int64_t at = base + when * unit_ms;
  int64_t set = c.store.with(c.args[1], [&](Store::Ref& r) -> int64_t {
    Entry* e = r.entry();
    if (!e) return 0;
    int64_t cur = e->expire_at;  // 0: none, i.e. infinite for GT and LT
    if ((nx && cur != 0) || (xx && cur == 0) || (gt && (cur == 0 || at <= cur)) ||
        (lt && cur != 0 && at >= cur)) {
      return 0;
    }
    if (at <= kv::now_ms()) r.erase();  // a deadline in the past deletes, as in Redis
    else r.set_expire(at);
    return 1;
  });
  kv::reply_int(c.out, set);
}

void cmd_expire(Call& c) { expire_generic(c, 1000, false); }
void cmd_pexpire(Call& c) { expire_generic(c, 1, false); }
void cmd_expireat(Call& c) { expire_generic(c, 1000, true); }
void cmd_pexpireat(Call& c) { expire_generic(c, 1, true); }

void ttl_generic(Call& c, bool ms) {
  int64_t ttl = c.store.with(c.args[1], [&](Store::Ref& r) -> int64_t {
    Entry* e = r.entry();
    if (!e) return -2;
    if (e->expire_at == 0) return -1;
    int64_t left = std::max<int64_t>(0, e->expire_at - kv::now_ms());
    return ms ? left : (left + 500) / 1000;
  });
  kv::reply_int(c.out, ttl);
}

void cmd_ttl(Call& c) { ttl_generic(c, false); }
void cmd_pttl(Call& c) { ttl_generic(c, true); }

void cmd_persist(Call& c) {
  bool done = c.store.with(c.args[1], [&](Store::Ref& r) {
    if (!r.entry() || r.entry()->expire_at == 0) return false;
    r.set_expire(0);
    return true;
  });
  kv::reply_int(c.out, done ? 1 : 0);
}

void cmd_keys(Call& c) {
  std::vector<std::string> keys = c.store.keys(c.args[1]);
  kv::reply_array(c.out, keys.size());
  for (const std::string& k : keys) kv::reply_bulk(c.out, k);
}

void cmd_dbsize(Call& c) { kv::reply_int(c.out, c.store.size()); }

void cmd_flushall(Call& c) {
  if (c.args.size() > 2 || (c.args.size() == 2 && !iequals(c.args[1], "sync") &&
                            !iequals(c.args[1], "async"))) {
    return c.error(kErrSyntax);
  }
  c.store.flush();
  kv::reply_simple(c.out, "OK");
}

void cmd_select(Call& c) {
  int64_t db;
  if (!kv::parse_int64(c.args[1], &db)) return c.error(kErrNotInt);
  if (db != 0) return c.error("ERR DB index is out of range");
  kv::reply_simple(c.out, "OK");
}

void cmd_quit(Call& c) {
  kv::reply_simple(c.out, "OK");
  c.quit = true;
}

// Tools ask for command metadata (redis-cli's hints); an empty reply makes
// them fall back to their built-in tables.
void cmd_command(Call& c) {
  if (c.args.size() >= 2 && iequals(c.args[1], "count")) return kv::reply_int(c.out, 0);
  kv::reply_array(c.out, 0);
}

// CONFIG GET for the parameters tools ask about (redis-benchmark: save,
// appendonly); CONFIG SET is not supported.
void cmd_config(Call& c) {
  static const std::pair<std::string_view, std::string_view> kParams[] = {
      {"appendonly", "no"}, {"databases", "1"}, {"maxmemory", "0"},
      {"save", ""},         {"timeout", "0"},
  };
  std::string sub = lower(c.args[1]);
  if (sub == "get") {
    if (c.args.size() < 3) return c.error("ERR wrong number of arguments for 'config|get' command");
    std::vector<std::pair<std::string_view, std::string_view>> hits;
    for (const auto& p : kParams) {
      for (std::string_view pattern : c.args.subspan(2)) {
        if (kv::glob_match(lower(pattern), p.first)) {
          hits.push_back(p);
          break;
        }
      }
    }
    kv::reply_array(c.out, 2 * hits.size());
    for (const auto& [k, v] : hits) {
      kv::reply_bulk(c.out, k);
      kv::reply_bulk(c.out, v);
    }
  } else if (sub == "resetstat") {
    kv::reply_simple(c.out, "OK");
  } else if (sub == "set") {
    c.error("ERR CONFIG SET is not supported by this server");
  } else {
    c.error("ERR unknown subcommand '" + std::string(c.args[1]).substr(0, 128) +
            "'. Try CONFIG HELP.");
  }
}

void cmd_info(Call& c) {
  std::string s = "# Server\r\nredis_version:7.0.0\r\nserver_name:gort-kv_server\r\n";
  s += "gort_procs:" + std::to_string(gort::procs()) + "\r\n";
  s += "gort_goroutines:" + std::to_string(gort::num_goroutine()) + "\r\n";
  s += "\r\n# Keyspace\r\ndb0:keys=" + std::to_string(c.store.size()) + "\r\n";
  kv::reply_bulk(c.out, s);
}

const std::unordered_map<std::string_view, Command>& commands() {
  static const std::unordered_map<std::string_view, Command> table = {
      {"ping", {-1, cmd_ping}},         {"echo", {2, cmd_echo}},
      {"get", {2, cmd_get}},            {"set", {-3, cmd_set}},
      {"setnx", {3, cmd_setnx}},        {"setex", {4, cmd_setex}},
      {"append", {3, cmd_append}},      {"strlen", {2, cmd_strlen}},
      {"type", {2, cmd_type}},          {"del", {-2, cmd_del}},
      {"exists", {-2, cmd_exists}},     {"incr", {2, cmd_incr}},
      {"decr", {2, cmd_decr}},          {"incrby", {3, cmd_incrby}},
      {"decrby", {3, cmd_decrby}},      {"mget", {-2, cmd_mget}},
      {"mset", {-3, cmd_mset}},         {"expire", {-3, cmd_expire}},
      {"pexpire", {-3, cmd_pexpire}},   {"expireat", {-3, cmd_expireat}},
      {"pexpireat", {-3, cmd_pexpireat}}, {"ttl", {2, cmd_ttl}},
      {"pttl", {2, cmd_pttl}},          {"persist", {2, cmd_persist}},
      {"keys", {2, cmd_keys}},          {"dbsize", {1, cmd_dbsize}},
      {"flushall", {-1, cmd_flushall}}, {"flushdb", {-1, cmd_flushall}},
      {"select", {2, cmd_select}},      {"quit", {-1, cmd_quit}},
      {"command", {-1, cmd_command}},   {"config", {-2, cmd_config}},
      {"info", {-1, cmd_info}},
  };
  return table;
}

// Executes one command, appending its reply to out. Returns false if the
// connection should close after the replies (QUIT).
bool execute(Store& store, std::span<const std::string_view> args, std::string& out) {
  std::string name = lower(args[0].substr(0, 32));
  auto it = commands().find(name);
  if (it == commands().end() || args[0].size() > 32) {
    // Redis: the name as typed, then up to 128 bytes of arguments.
    std::string msg = "ERR unknown command '" + std::string(args[0].substr(0, 128)) +
                      "', with args beginning with: ";
    for (size_t i = 1; i < args.size() && msg.size() < 256; i++) {
      msg += "'" + std::string(args[i].substr(0, 128)) + "' ";
    }
    kv::reply_error(out, msg);
    return true;
  }
  const Command& cmd = it->second;
  int n = static_cast<int>(std::min<size_t>(args.size(), INT_MAX));
  if ((cmd.arity > 0 && n != cmd.arity) || (cmd.arity < 0 && n < -cmd.arity)) {
    kv::reply_error(out, "ERR wrong number of arguments for '" + name + "' command");
    return true;
  }
  Call call{store, args, out, name};
  cmd.run(call);
  return !call.quit;
}

// ---- connections -----------------------------------------------------------

bool flush(gort::net::Conn& c, std::string& out) {
  if (out.empty()) return true;
  (void)c.set_write_deadline(absl::Now() + kWriteTimeout);
  bool ok = c.write(absl::MakeConstSpan(out)).ok();
  out.clear();
  if (out.capacity() > 4 * kFlushAt) out.shrink_to_fit();  // after a huge reply
  return ok;
}

void serve_conn(gort::net::ServerConn& sc, Store& store, absl::Duration timeout) {
  gort::net::Conn& c = *sc.net_conn();
  std::string in, out, error;
  kv::Parser parser;
  std::vector<std::string_view> args;
  char chunk[kReadChunk];
  for (;;) {
    // Between commands the connection is idle (a shutdown closes it, the
    // server's idle timeout bounds the wait); in the middle of one, each
    // read gets the same timeout.
    if (in.empty()) {
      if (!sc.wait_input()) return;  // idle timeout, shutdown, error
    } else if (timeout > absl::ZeroDuration()) {
      (void)c.set_read_deadline(absl::Now() + timeout);
    }
    auto n = c.read(absl::MakeSpan(chunk));
    if (!n.ok() || *n == 0) return;  // EOF, error, timeout, or closed by shutdown
    in.append(chunk, *n);

    // Pipelining: run every complete command, then write all replies at once.
    bool close = false;
    for (;;) {
      auto r = parser.next(in, &args, &error);
      if (r == kv::Parser::Result::kNeedMore) break;
      if (r == kv::Parser::Result::kError) {
        kv::reply_error(out, error);
        close = true;  // as Redis: the stream cannot be resynchronised
        break;
      }
      if (args.empty()) continue;
      if (!execute(store, args, out)) {
        close = true;
        break;
      }
      if (out.size() >= kFlushAt && !flush(c, out)) return;
    }
    if (!flush(c, out)) return;
    if (close) {
      (void)c.close_write();
      return;
    }
    in.erase(0, parser.pos());
    parser.consumed_prefix();
    if (in.size() > kv::kMaxQueryBuffer) {
      kv::reply_error(out, "ERR Protocol error: query buffer limit exceeded");
      (void)flush(c, out);
      return;
    }
    if (in.capacity() > 4 * kReadChunk && in.size() < kReadChunk) in.shrink_to_fit();
  }
}

// ---- the server: gort::net::Server, the sweeper, shutdown ---------------

bool parse_int(std::string_view s, int* out) {
  int64_t v;
  if (!kv::parse_int64(s, &v) || v < 0 || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_flags(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i++) {
    std::string_view a = argv[i];
    if (a.starts_with("--")) a.remove_prefix(2);
    else if (a.starts_with("-")) a.remove_prefix(1);
    else return false;
    std::string_view name = a, value;
    if (size_t eq = a.find('='); eq != std::string_view::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (i + 1 < argc && name != "h" && name != "help") {
      value = argv[++i];
    } else {
      return false;
    }
    if (name == "listen") o->listen = std::string(value);
    else if (name == "procs") { if (!parse_int(value, &o->procs)) return false; }
    else if (name == "max-conns") { if (!parse_int(value, &o->max_conns) || o->max_conns < 1) return false; }
    else if (name == "timeout") { if (!parse_int(value, &o->timeout_s)) return false; }
    else return false;
  }
  return true;
}

int serve(const Options& o) {
  auto ln = gort::net::listen("tcp", o.listen);
  if (!ln.ok()) {
    std::fprintf(stderr, "kv_server: %s\n", gort::error_text(ln).c_str());
    return 1;
  }
  // From here on SIGINT and SIGTERM arrive on this channel (Go's
  // signal.Notify) instead of ending the process: set up before the port
  // is announced.
  auto sigs = gort::make_chan<int>(1);
  gort::signal::notify(sigs, {SIGINT, SIGTERM});
  std::printf("listening on %s\n", ln->addr().c_str());
  std::fflush(stdout);

  auto store = std::make_shared<Store>();
  gort::net::ServerConfig scfg;
  scfg.max_conns = o.max_conns;
  absl::Duration timeout = absl::Seconds(o.timeout_s);
  if (o.timeout_s > 0) scfg.idle_timeout = timeout;
  gort::net::Server srv([store, timeout](gort::net::ServerConn& c) { serve_conn(c, *store, timeout); }, scfg);

  // Active expiry: every 100 ms remove (a bounded number of) expired keys.
  auto stop_sweeper = gort::make_chan<std::monostate>();
  auto sweeper_done = gort::make_chan<std::monostate>();
  gort::go([store, stop_sweeper, sweeper_done] {
    auto tick = gort::new_ticker(absl::Milliseconds(100));
    for (bool stop = false; !stop;) {
      gort::select(gort::on_recv(tick.chan(), [&] { store->sweep(1000); }),
                   gort::on_recv(stop_sweeper, [&] { stop = true; }));
    }
    tick.stop();
    sweeper_done.close();
  });

  auto served = gort::make_chan<absl::Status>(1);
  gort::go([&, served] { served.send(srv.serve(*ln)); });

  // Wait for SIGINT or SIGTERM (a channel value: gort::signal) or for the
  // accept loop to fail.
  bool stopping = false;
  absl::Status accept_err;
  gort::select(gort::on_recv(sigs, [&](std::optional<int>) { stopping = true; }),
               gort::on_recv(served, [&](std::optional<absl::Status> s) { accept_err = *s; }));
  gort::signal::stop(sigs);
  // Idle connections are closed at once; commands in progress get 5 s.
  auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(5));
  if (!srv.shutdown(ctx).ok()) (void)srv.close();
  cancel();
  if (stopping) (void)served.recv();
  stop_sweeper.close();
  sweeper_done.recv();
  if (stopping) {
    std::fprintf(stderr, "kv_server: shutting down\n");
    return 0;
  }
  std::fprintf(stderr, "kv_server: accept: %s\n", gort::error_text(accept_err).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_flags(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [-listen 127.0.0.1:6379] [-procs N] [-max-conns N] "
                 "[-timeout SECONDS]\n",
                 argv[0]);
    return 2;
  }
  gort::Config cfg;
  cfg.procs = o.procs;
  return gort::run([&o] { return serve(o); }, cfg);
}

// http_server — a minimal HTTP/1.1 server with keep-alive and pipelining,
// one goroutine per connection, blocking-style reads and writes on
// gort::net::Conn.
//
// What it shows:
//   - parsing from a buffer that may hold several (pipelined) requests, or
//     only part of one: every complete request in the buffer is answered,
//     the responses go out in one write, and the rest of the buffer is kept
//     for the next read;
//   - bounded resources: a request line of at most 8 KiB (414 beyond),
//     request line and headers at most 16 KiB and 100 header fields (431),
//     bodies at most 1 MiB (413), at most -max-conns connections; an idle
//     keep-alive connection is closed after -idle-timeout seconds, a client
//     that stops reading is dropped after 30 s (a write deadline);
//   - Go's net/http answers for bad input: 400 for a malformed request, 501
//     for an unknown method or a Transfer-Encoding, 405 with Allow for a
//     method a route does not take, 505 for HTTP/2+, and after an error the
//     connection is closed gracefully (close_write, then drain briefly, so
//     the client reads the error rather than a reset);
//   - keep-alive rules: HTTP/1.1 keeps the connection unless "Connection:
//     close"; HTTP/1.0 closes it unless "Connection: keep-alive";
//     "Expect: 100-continue" gets an interim 100 response;
//   - the server around it is gort::net::Server (gort/server.hpp): the
//     accept loop, the connection limit, the idle timeout, and a graceful
//     shutdown on SIGINT/SIGTERM that closes idle connections at once and
//     gives requests in progress 5 s (Go's http.Server.Shutdown);
//   - idle keep-alive connections hold no goroutine: each connection is a
//     session (HttpSession) that answers what it has read and then waits
//     for the next request in the server's poller, its read buffer back in
//     the server's pool (-goroutines: a goroutine per connection instead,
//     parked in wait_input between requests);
//   - with -debug, Go's net/http/pprof: profiles, execution traces and a
//     flight recorder served by the program itself (debug_endpoint.hpp).
//
// Routes:
//   GET  /            "Hello, World!\n" (text/plain)
//   GET  /json        a small JSON object
//   POST /echo        the request body back, with its Content-Type
//   GET  /sleep?ms=N  sleeps N ms (0..10000) with gort::sleep, then answers
//   anything else     404
// and with -debug (debug_endpoint.hpp; 404 without it):
//   GET  /debug/pprof/                    an index of these routes
//   GET  /debug/pprof/profile?seconds=N   CPU profile (gzipped pprof; 30 s, 1..300)
//   GET  /debug/pprof/goroutine?debug=D   also block, mutex: D=0 pprof, 1 text,
//                                         2 every goroutine's traceback
//   GET  /debug/trace?seconds=N&format=F  execution trace (1 s, 1..60), F perfetto or json
//   GET  /debug/flightrecorder?format=F   the flight recorder's last ~10 s
//
// Usage: http_server [-listen 127.0.0.1:8080] [-procs N] [-max-conns 10000]
//                    [-idle-timeout 30] [-goroutines] [-tls-cert FILE -tls-key FILE]
//                    [-debug [-block-rate 10000] [-mutex-fraction 5] [-flight-dir .]]
// With -tls-cert and -tls-key it serves HTTPS (gort::tls; docs/tls.md).
// -debug serves the debug routes, runs a flight recorder for the process's
// life (its fatal-error dump goes to -flight-dir), turns on the block
// profile (a wait of -block-rate ns or more is always recorded, a shorter
// one with probability wait/rate; 0 off) and the mutex profile (one
// contention in -mutex-fraction; 0 off), and labels each request with
// route=<its route> for the CPU profile. Go leaves the block and mutex
// profiles off; these defaults cost little and catch waits of 10 us and up.
// Serve it on a private address only: it shows the program's insides.
//   go tool pprof http://127.0.0.1:8080/debug/pprof/profile?seconds=5
// Prints "listening on HOST:PORT" (use -listen 127.0.0.1:0 for a free port).
// Try: curl -v http://127.0.0.1:8080/ http://127.0.0.1:8080/json
//      wrk -t2 -c100 -d10s http://127.0.0.1:8080/
#include <gort/gort.hpp>
#include <gort/tls.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "debug_endpoint.hpp"
#include "http.hpp"

namespace {

using namespace http_server;

// A batch of responses, built in answer's arena.
using OutBuf = std::pmr::string;

constexpr size_t kMaxRequestLine = 8 * 1024;   // 414 beyond
constexpr size_t kMaxHeaderBytes = 16 * 1024;  // request line + header fields; 431 beyond
constexpr size_t kMaxHeaderFields = 100;
constexpr size_t kMaxBodyBytes = 1024 * 1024;
constexpr size_t kReadChunk = 16 * 1024;
constexpr size_t kFlushAt = 64 * 1024;         // write a batch of responses beyond this
constexpr int kMaxSleepMs = 10000;
constexpr absl::Duration kWriteTimeout = absl::Seconds(30);

struct Options {
  std::string listen = "127.0.0.1:8080";
  int procs = 0;
  int max_conns = 10000;
  int idle_timeout_s = 30;
  // A goroutine per connection instead of sessions (idle without one).
  bool goroutines = false;
  // HTTPS when both are set (PEM files): gort::tls, as Go's ListenAndServeTLS.
  std::string tls_cert, tls_key;
  // The debug endpoint (debug_endpoint.hpp) and its settings, which need it.
  bool debug = false;
  DebugOptions debug_options;
  bool debug_options_set = false;
};

// ---- string helpers (more in http.hpp) ------------------------------------

bool is_alnum(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool istarts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

// ---- parsing -------------------------------------------------------------

enum class Parse { kIncomplete, kComplete, kError };

struct ParseError {
  int status = 400;
  std::string_view detail;
};

// RFC 9110 token characters (method and header names).
bool is_tchar(unsigned char c) {
  if (is_alnum(c)) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}
bool has_ctl(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 && c != '\t') return true;
    if (c == 0x7f) return true;
  }
  return false;
}
// True if the comma-separated list `v` contains `token` (case-insensitive).
bool list_has(std::string_view v, std::string_view token) {
  for (Split parts(v, ','); auto part = parts.next();) {
    if (iequals(trim(*part), token)) return true;
  }
  return false;
}

// Parses one request from buf (which may hold less or more than one). On
// kComplete, *consumed is its length and req's views point into buf.
Parse parse_request(std::string_view buf, Request* req, size_t* consumed, ParseError* err) {
  req->expect_continue = false;
  size_t pos = 0;
  // RFC 9112 §2.2: ignore empty lines before the request line.
  while (pos < buf.size() && (buf[pos] == '\r' || buf[pos] == '\n')) pos++;
  size_t start = pos;

  // Next line without its line ending; nullopt if it is not complete yet.
  auto next_line = [&]() -> std::optional<std::string_view> {
    size_t nl = buf.find('\n', pos);
    if (nl == std::string_view::npos) return std::nullopt;
    std::string_view line = buf.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = nl + 1;
    return line;
  };
  auto too_big = [&](size_t at) { return at - start > kMaxHeaderBytes; };

  auto line = next_line();
  if (line ? line->size() > kMaxRequestLine : buf.size() - start > kMaxRequestLine) {
    *err = {414, "request line too long"};
    return Parse::kError;
  }
  if (!line) return Parse::kIncomplete;
  // method SP request-target SP HTTP-version
  size_t sp1 = line->find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line->find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line->find(' ', sp2 + 1) != std::string_view::npos) {
    *err = {400, "malformed request line"};
    return Parse::kError;
  }
  req->method = line->substr(0, sp1);
  req->target = line->substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line->substr(sp2 + 1);
  if (!is_token(req->method)) {
    *err = {400, "invalid method"};
    return Parse::kError;
  }
  if (req->target.empty() || has_ctl(req->target)) {
    *err = {400, "invalid request target"};
    return Parse::kError;
  }
  if (version == "HTTP/1.1") {
    req->minor = 1;
  } else if (version == "HTTP/1.0") {
    req->minor = 0;
  } else if (version.size() == 8 && version.starts_with("HTTP/") &&
             is_digit(version[5]) && version[6] == '.' &&
             is_digit(version[7])) {
    *err = {505, "unsupported protocol version"};
    return Parse::kError;
  } else {
    *err = {400, "malformed HTTP version"};
    return Parse::kError;
  }

  req->headers.clear();
  for (;;) {
    auto h = next_line();
    if (!h) {
      if (too_big(buf.size())) {
        *err = {431, "headers too large"};
        return Parse::kError;
      }
      return Parse::kIncomplete;
    }
    if (too_big(pos)) {
      *err = {431, "headers too large"};
      return Parse::kError;
    }
    if (h->empty()) break;  // end of the header section
    if (req->headers.size() == kMaxHeaderFields) {
      *err = {431, "too many header fields"};
      return Parse::kError;
    }
    size_t colon = h->find(':');
    // No obsolete line folding, no space before the colon (RFC 9112 §5).
    if (colon == std::string_view::npos || !is_token(h->substr(0, colon))) {
      *err = {400, "malformed header field"};
      return Parse::kError;
    }
    std::string_view value = trim(h->substr(colon + 1));
    if (has_ctl(value)) {
      *err = {400, "invalid header value"};
      return Parse::kError;
    }
    req->headers.emplace_back(h->substr(0, colon), value);
  }

  if (req->minor == 1 && req->header("Host").empty()) {
    bool present = false;
    for (const auto& kv : req->headers) present |= iequals(kv.first, "Host");
    if (!present) {
      *err = {400, "missing required Host header"};
      return Parse::kError;
    }
  }
  if (!req->header("Transfer-Encoding").empty()) {
    *err = {501, "unsupported transfer encoding"};
    return Parse::kError;
  }
  // Content-Length: digits only; repeated fields must agree.
  std::optional<uint64_t> length;
  for (const auto& [k, v] : req->headers) {
    if (!iequals(k, "Content-Length")) continue;
    uint64_t n;
    if (!parse_uint(v, &n, 18) || (length && *length != n)) {
      *err = {400, "bad Content-Length"};
      return Parse::kError;
    }
    length = n;
  }
  if (length && *length > kMaxBodyBytes) {
    *err = {413, "request body too large"};
    return Parse::kError;
  }

  std::string_view conn = req->header("Connection");
  req->keep_alive = req->minor == 1 ? !list_has(conn, "close") : list_has(conn, "keep-alive");

  size_t body_len = length.value_or(0);
  if (buf.size() - pos < body_len) {
    std::string_view expect = req->header("Expect");
    req->expect_continue = req->minor == 1 && iequals(expect, "100-continue");
    return Parse::kIncomplete;
  }
  req->body = buf.substr(pos, body_len);
  *consumed = pos + body_len;

  // Origin form "/path?query"; the absolute form "http://host/path" too.
  std::string_view t = req->target;
  if (istarts_with(t, "http://") || istarts_with(t, "https://")) {
    size_t slash = t.find('/', t.find("//") + 2);
    t = slash == std::string_view::npos ? "/" : t.substr(slash);
  } else if (t != "*" && t[0] != '/') {
    *err = {400, "invalid request target"};
    return Parse::kError;
  }
  size_t q = t.find('?');
  req->path = t.substr(0, q);
  req->query = q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
  return Parse::kComplete;
}

// ---- responses -----------------------------------------------------------

const char* status_text(int code) {
  switch (code) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Request Entity Too Large";
    case 414: return "Request URI Too Long";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

// The Date header's value (RFC 9110's IMF-fixdate, "Sun, 06 Nov 1994
// 08:49:37 GMT") of a time in seconds, by std::chrono's calendar: plain
// arithmetic, a few nanoseconds, so each batch of responses makes its own.
// No lock and no cache shared between goroutines (a thread_local cache
// would be shared by the goroutines an M runs, and the race detector
// rightly reports it).
struct HttpDate {
  char text[29];
  std::string_view view() const { return {text, sizeof text}; }
};

HttpDate http_date(time_t t) {
  using namespace std::chrono;
  const sys_seconds s{seconds{t}};
  const sys_days day = floor<days>(s);
  const year_month_day ymd{day};
  const hh_mm_ss<seconds> hms{s - day};
  static constexpr char kDays[] = "SunMonTueWedThuFriSat";
  static constexpr char kMonths[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  HttpDate d;
  char* p = d.text;
  auto two = [&p](unsigned v) {
    *p++ = static_cast<char>('0' + v / 10 % 10);
    *p++ = static_cast<char>('0' + v % 10);
  };
  std::memcpy(p, kDays + 3 * weekday{day}.c_encoding(), 3);
  p += 3;
  *p++ = ',';
  *p++ = ' ';
  two(static_cast<unsigned>(ymd.day()));
  *p++ = ' ';
  std::memcpy(p, kMonths + 3 * (static_cast<unsigned>(ymd.month()) - 1), 3);
  p += 3;
  *p++ = ' ';
  const unsigned y = static_cast<unsigned>(std::clamp(static_cast<int>(ymd.year()), 0, 9999));
  two(y / 100);
  two(y);
  *p++ = ' ';
  two(static_cast<unsigned>(hms.hours().count()));
  *p++ = ':';
  two(static_cast<unsigned>(hms.minutes().count()));
  *p++ = ':';
  two(static_cast<unsigned>(hms.seconds().count()));
  std::memcpy(p, " GMT", 4);
  return d;
}

void append_response(OutBuf& out, const Response& r, bool head, bool keep_alive,
                     bool http10, const HttpDate& date) {
  append(out, "HTTP/1.1 ", r.status, " ", status_text(r.status), "\r\n");
  if (r.status != 204) {
    append(out, "Content-Type: ", r.content_type, "\r\nContent-Length: ",
                    r.body.size(), "\r\n");
  }
  if (!r.allow.empty()) append(out, "Allow: ", r.allow, "\r\n");
  out += r.extra_headers;
  out += "Date: ";
  put(out, date.view());
  out += "\r\nServer: gort\r\n";
  if (!keep_alive) {
    out += "Connection: close\r\n";
  } else if (http10) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  if (!head && r.status != 204) out += r.body;
}

bool known_method(std::string_view m) {
  for (std::string_view k : {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}) {
    if (m == k) return true;
  }
  return false;
}

// The application: routes a complete request to its handler.
Response route(const Request& req) {
  if (!known_method(req.method)) return text(501, "501 method not implemented\n");

  if (req.path == "/") {
    if (auto r = allow(req, "GET, HEAD")) return *r;
    return text(200, "Hello, World!\n");
  }
  if (req.path == "/json") {
    if (auto r = allow(req, "GET, HEAD")) return *r;
    Response r;
    r.content_type = "application/json";
    r.body = cat(R"({"message":"Hello, World!","server":"gort","goroutines":)",
                          gort::num_goroutine(), R"(,"procs":)", gort::procs(), "}\n");
    return r;
  }
  if (req.path == "/echo") {
    if (auto r = allow(req, "POST, PUT")) return *r;
    Response r;
    std::string_view ct = req.header("Content-Type");
    r.content_type = ct.empty() ? "application/octet-stream" : ct;
    r.body = std::string(req.body);
    return r;
  }
  if (req.path == "/sleep") {
    if (auto r = allow(req, "GET, HEAD")) return *r;
    auto v = query_param(req.query, "ms");
    int ms = 0;
    if (!v || !parse_uint(*v, &ms, 5) || ms > kMaxSleepMs) {
      return text(400, cat("400 want /sleep?ms=N with 0 <= N <= ", kMaxSleepMs, "\n"));
    }
    gort::sleep(absl::Milliseconds(ms));  // parks this goroutine only
    return text(200, cat("slept ", ms, " ms\n"));
  }
  return text(404, "404 page not found\n");
}

// The route a path belongs to, for pprof labels and trace regions: a fixed
// set of names, whatever paths clients send.
std::string_view route_name(std::string_view path, const DebugEndpoint* debug) {
  for (std::string_view r : {"/", "/json", "/echo", "/sleep"}) {
    if (path == r) return r;
  }
  if (debug != nullptr) {
    if (std::string_view r = DebugEndpoint::route_name(path); !r.empty()) return r;
  }
  return "(none)";
}

// One complete request: the debug endpoint's routes (with -debug), else
// the application's. With -debug the handling runs under the pprof label
// route=<its route>, so that CPU profiles split by route (`go tool pprof
// -tagfocus=route=/json`), and, while a trace or the flight recorder runs
// (-debug starts the recorder; GORT_TRACE a trace), in a trace region
// "handle <route>". Regions only with -debug: two events per request, as
// many as the scheduler's own, which a server that keeps the flight
// recorder running pays for every request (docs/benchmarks.md, "Tracing
// overhead"). Without -debug, route() alone: the benchmark's path.
Response handle(const Request& req, DebugEndpoint* debug, gort::net::ServerConn& c) {
  auto serve = [&] {
    std::optional<gort::trace::Region> region;
    if (debug != nullptr && gort::trace::is_enabled()) region.emplace(cat("handle ", route_name(req.path, debug)));
    if (debug != nullptr) {
      if (std::optional<Response> r = debug->serve(req, c.context())) return *std::move(r);
    }
    return route(req);
  };
  if (debug == nullptr) return serve();
  return gort::pprof::with_labels({{"route", std::string(route_name(req.path, debug))}}, serve);
}

// ---- connections -----------------------------------------------------------

// Go's closeWriteAndWait: send FIN, then read and discard briefly, so that
// unread request bytes do not make the kernel reset the connection before
// the client has read our (error) response.
template <class C>  // gort::net::Conn or gort::tls::Conn
void linger_close(C& c) {
  (void)c.close_write();
  (void)c.set_read_deadline(absl::Now() + absl::Milliseconds(500));
  char sink[4096];
  for (size_t total = 0; total < 256 * 1024;) {
    auto n = c.read(absl::MakeSpan(sink));
    if (!n.ok() || *n == 0) break;
    total += *n;
  }
}

// Writes the batch. The write deadline is the server's (write_timeout from
// the request's start), but after a handler that took long (the debug
// endpoint's, which may take minutes) it starts again here.
template <class C>
bool flush(C& c, OutBuf& out, bool renew_deadline) {
  if (out.empty()) return true;
  if (renew_deadline) (void)c.set_write_deadline(absl::Now() + kWriteTimeout);
  bool ok = c.write(absl::MakeConstSpan(out.data(), out.size())).ok();
  out.clear();
  return ok;
}

// What a connection does after answering what it had read.
enum class After : uint8_t {
  kIdle,   // everything answered: wait for the next request
  kMore,   // part of a request is here: read the rest now
  kClose,  // closed (by request, after an error, or a failed write)
};

// Answers every complete request at the front of `in` (consuming them) and
// writes the responses in one go. `sent_continue` is the connection's: a
// 100 Continue already sent for the request still incomplete.
After answer(gort::net::ServerConn& c, std::string& in, bool& sent_continue, absl::Duration idle,
             DebugEndpoint* debug) {
  // The batch's responses and its requests' header lists are built in an
  // arena on this goroutine's stack (2 KiB of responses before the heap).
  // One clock reading, in seconds, serves the batch's Date headers (read
  // again after a debug request, which may take minutes).
  std::byte arena[4096];
  std::pmr::monotonic_buffer_resource mem(arena, sizeof arena);
  OutBuf out(&mem);  // responses not yet written
  out.reserve(2000);
  Request req(&mem);
  HttpDate date = http_date(std::time(nullptr));
  const bool renew = debug != nullptr;
  size_t pos = 0;
  bool close_after = false, graceful = false;
  for (;;) {
    size_t used = 0;
    ParseError err;
    Parse p = parse_request(std::string_view(in).substr(pos), &req, &used, &err);
    if (p == Parse::kIncomplete) {
      if (req.expect_continue && !sent_continue) {
        out += "HTTP/1.1 100 Continue\r\n\r\n";
        sent_continue = true;
      }
      break;
    }
    if (p == Parse::kError) {
      Response r = text(err.status, cat(err.status, " ", status_text(err.status), ": ", err.detail, "\n"));
      append_response(out, r, false, false, false, date);
      close_after = graceful = true;
      break;
    }
    Response r = handle(req, debug, c);
    if (debug != nullptr) date = http_date(std::time(nullptr));
    append_response(out, r, req.method == "HEAD", req.keep_alive, req.minor == 0, date);
    pos += used;
    sent_continue = false;
    if (!req.keep_alive) {
      close_after = true;
      break;
    }
    if (out.size() >= kFlushAt && !flush(c, out, renew)) return After::kClose;
  }
  bool wrote = !out.empty();
  if (!flush(c, out, renew)) return After::kClose;
  if (close_after) {
    if (graceful) linger_close(c);
    else (void)c.close_write();
    return After::kClose;
  }
  in.erase(0, pos);
  if (in.empty()) return After::kIdle;
  // Part of the next request is here: the client has the idle timeout,
  // from the last response, to send the rest.
  if (wrote && idle > absl::ZeroDuration()) (void)c.set_read_deadline(absl::Now() + idle);
  return After::kMore;
}

// Reads once into `in`; false at end of stream or on an error (a timeout,
// or closed by shutdown).
bool read_more(gort::net::ServerConn& c, std::string& in) {
  char chunk[kReadChunk];
  auto n = c.read(absl::MakeSpan(chunk));
  if (!n.ok() || *n == 0) return false;
  in.append(chunk, *n);
  return true;
}

// A keep-alive connection as a session (the default): between requests it
// waits for the next one without a goroutine or a stack, and its read
// buffer goes back to the server's pool (docs/net.md, "Idle connections
// without a goroutine").
struct HttpSession : gort::net::Session {
  HttpSession(absl::Duration idle, DebugEndpoint* debug) : idle(idle), debug(debug) {}
  gort::net::Next turn(gort::net::ServerConn& c) override {
    std::string& in = c.buffer();
    for (;;) {
      if (!read_more(c, in)) return gort::net::Next::kClose;
      switch (answer(c, in, sent_continue, idle, debug)) {
        case After::kIdle: return gort::net::Next::kWaitInput;
        case After::kClose: return gort::net::Next::kClose;
        case After::kMore: break;
      }
    }
  }
  absl::Duration idle;
  DebugEndpoint* debug;
  bool sent_continue = false;
};

// The same with a goroutine per connection (-goroutines): between requests
// it parks in wait_input, without the read buffer.
void serve_conn(gort::net::ServerConn& c, absl::Duration idle, DebugEndpoint* debug) {
  std::string in;  // bytes read and not yet consumed
  bool sent_continue = false;
  for (;;) {
    // Between requests the connection is idle: a shutdown closes it at
    // once. The server's idle timeout bounds the wait, and its read timeout
    // (the same) the request that follows.
    if (in.empty() && !c.wait_input()) return;
    if (!read_more(c, in)) return;
    if (answer(c, in, sent_continue, idle, debug) == After::kClose) return;
  }
}

// ---- the server: gort::net::Server, shutdown ------------------------------

bool parse_int(std::string_view s, int* out) {
  return parse_uint(s, out);
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
    } else if (name == "goroutines" || name == "debug") {
      value = "true";
    } else if (i + 1 < argc && name != "h" && name != "help") {
      value = argv[++i];
    } else {
      return false;
    }
    if (name == "listen") o->listen = std::string(value);
    else if (name == "procs") { if (!parse_int(value, &o->procs)) return false; }
    else if (name == "max-conns") { if (!parse_int(value, &o->max_conns) || o->max_conns < 1) return false; }
    else if (name == "idle-timeout") { if (!parse_int(value, &o->idle_timeout_s)) return false; }
    else if (name == "goroutines") {
      if (value != "true" && value != "false") return false;
      o->goroutines = value == "true";
    }
    else if (name == "debug") {
      if (value != "true" && value != "false") return false;
      o->debug = value == "true";
    }
    else if (name == "block-rate") {
      if (!parse_uint(value, &o->debug_options.block_rate_ns, 18)) return false;
      o->debug_options_set = true;
    }
    else if (name == "mutex-fraction") {
      if (!parse_int(value, &o->debug_options.mutex_fraction)) return false;
      o->debug_options_set = true;
    }
    else if (name == "flight-dir") {
      o->debug_options.flight_dir = std::string(value);
      o->debug_options_set = true;
    }
    else if (name == "tls-cert") o->tls_cert = std::string(value);
    else if (name == "tls-key") o->tls_key = std::string(value);
    else return false;
  }
  return true;
}

template <class L>
int serve_on(absl::StatusOr<L> ln, const Options& o, DebugEndpoint* debug) {
  if (!ln.ok()) {
    std::fprintf(stderr, "http_server: %s\n", gort::error_text(ln).c_str());
    return 1;
  }
  // From here on SIGINT and SIGTERM arrive on this channel (Go's
  // signal.Notify) instead of ending the process: set up before the port
  // is announced.
  auto sigs = gort::make_chan<int>(1);
  gort::signal::notify(sigs, {SIGINT, SIGTERM});
  std::printf("listening on %s\n", ln->addr().c_str());
  std::fflush(stdout);

  // gort/server.hpp: the accept loop (L: gort::net::Listener, or
  // gort::tls::Listener, whose connections run their handshake on the first
  // read, in their own goroutine), the connection limit, the timeouts.
  absl::Duration idle = absl::Seconds(o.idle_timeout_s);
  gort::net::ServerConfig scfg;
  scfg.max_conns = o.max_conns;
  if (o.idle_timeout_s > 0) scfg.idle_timeout = scfg.read_timeout = idle;
  // From each request's start, as Go's WriteTimeout (set with the read
  // deadline when they are equal: one clock reading per request for both).
  scfg.write_timeout = kWriteTimeout;
  std::optional<gort::net::Server> srv_storage;
  if (o.goroutines) {
    srv_storage.emplace([idle, debug](gort::net::ServerConn& c) { serve_conn(c, idle, debug); }, scfg);
  } else {
    auto make = [idle, debug](gort::net::ServerConn&) -> std::unique_ptr<gort::net::Session> {
      return std::make_unique<HttpSession>(idle, debug);
    };
    srv_storage.emplace(gort::net::Sessions{make}, scfg);
  }
  gort::net::Server& srv = *srv_storage;
  auto served = gort::make_chan<absl::Status>(1);
  gort::go([&, served] { served.send(srv.serve(*ln)); });

  // Wait for SIGINT or SIGTERM (a channel value: gort::signal) or for the
  // accept loop to fail.
  bool stopping = false;
  absl::Status accept_err;
  gort::select(gort::on_recv(sigs, [&](std::optional<int>) { stopping = true; }),
               gort::on_recv(served, [&](std::optional<absl::Status> s) { accept_err = *s; }));
  gort::signal::stop(sigs);
  // Idle keep-alive connections are closed at once; requests in progress
  // get 5 s (Go's http.Server.Shutdown).
  auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(5));
  if (!srv.shutdown(ctx).ok()) (void)srv.close();
  cancel();
  if (stopping) (void)served.recv();
  if (stopping) {
    std::fprintf(stderr, "http_server: shutting down\n");
    return 0;
  }
  std::fprintf(stderr, "http_server: accept: %s\n", gort::error_text(accept_err).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_flags(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [-listen 127.0.0.1:8080] [-procs N] [-max-conns N] "
                 "[-idle-timeout SECONDS] [-goroutines] [-tls-cert FILE -tls-key FILE]\n"
                 "          [-debug [-block-rate NS] [-mutex-fraction N] [-flight-dir DIR]]\n",
                 argv[0]);
    return 2;
  }
  gort::Config cfg;
  cfg.procs = o.procs;
  return gort::run(
      [&o] {
        if (o.tls_cert.empty() != o.tls_key.empty()) {
          std::fprintf(stderr, "http_server: -tls-cert and -tls-key go together\n");
          return 2;
        }
        if (o.debug_options_set && !o.debug) {
          std::fprintf(stderr, "http_server: -block-rate, -mutex-fraction and -flight-dir need -debug\n");
          return 2;
        }
        // Lives until the server has stopped (serve_on destroys it and
        // waits for its handlers first).
        std::unique_ptr<DebugEndpoint> debug;
        if (o.debug) {
          debug = std::make_unique<DebugEndpoint>(o.debug_options);
          if (absl::Status st = debug->start(); !st.ok()) {
            std::fprintf(stderr, "http_server: -debug: no flight recorder: %s\n", gort::error_text(st).c_str());
          }
        }
        if (o.tls_cert.empty()) return serve_on(gort::net::listen("tcp", o.listen), o, debug.get());
        gort::tls::Config tls;
        tls.cert_file = o.tls_cert;
        tls.key_file = o.tls_key;
        tls.next_protos = {"http/1.1"};
        return serve_on(gort::tls::listen("tcp", o.listen, tls), o, debug.get());
      },
      cfg);
}

// http.hpp — what the http_server sample's two parts share: a parsed
// request, a response to write, and the small string helpers both use
// (http_server.cpp parses and writes; debug_endpoint.cpp answers -debug's
// routes). Views only: a Request points into the connection's read buffer
// and is valid while the request is being answered.
#pragma once

#include <algorithm>
#include <charconv>
#include <memory_resource>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace http_server {

// ---- string helpers (std::string_view only) ------------------------------

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
// The parts of s between the separators, one at a time, without allocating
// (this runs on every request):
//   for (Split parts(s, ','); auto part = parts.next();) use(*part);
class Split {
 public:
  Split(std::string_view s, char sep) : rest_(s), sep_(sep) {}
  std::optional<std::string_view> next() {
    if (done_) return std::nullopt;
    size_t i = rest_.find(sep_);
    std::string_view part = rest_.substr(0, i);
    if (i == std::string_view::npos) {
      done_ = true;
    } else {
      rest_.remove_prefix(i + 1);
    }
    return part;
  }

 private:
  std::string_view rest_;
  char sep_;
  bool done_ = false;
};
// A decimal number of at most max_digits digits (no sign, no spaces).
template <class T>
bool parse_uint(std::string_view s, T* out, size_t max_digits = 9) {
  if (s.empty() || s.size() > max_digits || !std::all_of(s.begin(), s.end(), is_digit)) return false;
  return std::from_chars(s.data(), s.data() + s.size(), *out).ec == std::errc();
}

// Appends its arguments, strings and integers, to a string (a std::string,
// or the std::pmr::string a batch of responses is built in):
//   append(out, "HTTP/1.1 ", status, "\r\n");   std::string s = cat("slept ", ms, " ms\n");
template <class S>
void put(S& out, std::string_view s) {
  out.append(s.data(), s.size());
}
template <class S, class I>
  requires std::is_integral_v<I>
void put(S& out, I v) {
  char b[24];
  out.append(b, std::to_chars(b, b + sizeof b, v).ptr);
}
template <class S, class... A>
void append(S& out, const A&... a) {
  (put(out, a), ...);
}
template <class... A>
std::string cat(const A&... a) {
  std::string s;
  append(s, a...);
  return s;
}

// ---- a request, a response -------------------------------------------------

struct Request {
  std::string_view method, target, path, query;
  int minor = 1;  // HTTP/1.<minor>
  // From the memory resource the request was made with (answer's arena on
  // the goroutine's stack: no allocation per request).
  std::pmr::vector<std::pair<std::string_view, std::string_view>> headers;
  std::string_view body;
  bool keep_alive = true;
  bool expect_continue = false;  // headers complete, body not yet, client waits for 100

  Request() = default;
  explicit Request(std::pmr::memory_resource* mem) : headers(mem) {}

  std::string_view header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (iequals(k, name)) return v;
    }
    return {};
  }
};

// Written with Content-Type and Content-Length (none for 204), Date,
// Server and the connection's keep-alive header.
struct Response {
  int status = 200;
  std::string_view content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string_view allow;  // for 405
  // More header lines, each ending in "\r\n" (the debug endpoint's
  // Content-Disposition); empty on the application's routes.
  std::string extra_headers;
};

inline Response text(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// A query parameter's value ("" if it has no '='); nullopt if absent. Not
// percent-decoded: the sample's parameters are numbers and names.
inline std::optional<std::string_view> query_param(std::string_view query, std::string_view name) {
  for (Split parts(query, '&'); auto kv = parts.next();) {
    size_t eq = kv->find('=');
    if (kv->substr(0, eq) == name) return eq == std::string_view::npos ? "" : kv->substr(eq + 1);
  }
  return std::nullopt;
}

// For a route that takes `methods` ("GET, HEAD"): nullopt if req's method
// is one of them, else the answer: 204 with Allow for OPTIONS, 405 with
// Allow for the others.
inline std::optional<Response> allow(const Request& req, std::string_view methods) {
  if (req.method == "OPTIONS") {
    Response r;
    r.status = 204;
    r.allow = methods;
    return r;
  }
  for (Split parts(methods, ','); auto m = parts.next();) {
    if (req.method == trim(*m)) return std::nullopt;
  }
  Response r = text(405, "405 method not allowed\n");
  r.allow = methods;
  return r;
}

}  // namespace http_server

// tests/stdlib/net/net_helpers.hpp — what the gort::net suites share.
//
//   - NetTest: the ProcsTest fixture run with 1, 2 and 4 Ps
//     (GORT_INSTANTIATE_STDLIB_PROCS); run_test() checks that no fd or
//     goroutine leaked.
//   - must(): unwraps a StatusOr, failing the test (not crashing) if it is
//     an error.
//   - read_exactly / read_to_eof / write_str: loops over Conn::read.
//   - temp_dir(): a fresh directory for Unix sockets, removed at exit.
//   - fnv(): a checksum for large transfers.
//   - Serving: a Server's serve() on its own goroutine, and its result.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "gort/net.hpp"
#include "gort/server.hpp"
#include "tests/stdlib/helpers.hpp"

namespace gort::test {

class NetTest : public ProcsTest {};

// The value of a StatusOr, or T{} after recording a failure.
template <class T>
T must(absl::StatusOr<T> r, const char* what = "") {
  EXPECT_TRUE(r.ok()) << what << ": " << r.status();
  if (!r.ok()) return T{};
  return std::move(*r);
}

// A listener and a connected pair over loopback (p.ln empty after a
// recorded failure).
struct Pair {
  gort::net::Listener ln;
  gort::net::Conn client, server;
};

inline Pair make_pair() {
  Pair p;
  p.ln = must(gort::net::listen("tcp", "127.0.0.1:0"));
  if (!p.ln) return p;
  p.client = must(gort::net::dial("tcp", p.ln.addr()));
  p.server = must(p.ln.accept());
  return p;
}

inline std::string_view msg(const absl::Status& s) {
  return std::string_view(s.message().data(), s.message().size());
}

inline absl::Status write_str(gort::net::Conn& c, std::string_view s) {
  auto r = c.write(absl::MakeConstSpan(s.data(), s.size()));
  if (!r.ok()) return r.status();
  EXPECT_EQ(*r, s.size());
  return absl::OkStatus();
}

// Reads exactly n bytes (fewer only at end of stream or on error).
inline absl::StatusOr<std::string> read_exactly(gort::net::Conn& c, size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    auto r = c.read(absl::MakeSpan(out.data() + got, n - got));
    if (!r.ok()) return r.status();
    if (*r == 0) break;
    got += *r;
  }
  out.resize(got);
  return out;
}

inline absl::StatusOr<std::string> read_to_eof(gort::net::Conn& c) {
  std::string out;
  char buf[4096];
  for (;;) {
    auto r = c.read(absl::MakeSpan(buf));
    if (!r.ok()) return r.status();
    if (*r == 0) return out;
    out.append(buf, *r);
  }
}

// FNV-1a, continued from h.
inline uint64_t fnv(const char* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; i++) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// A fresh directory under /tmp; removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gort-net-XXXXXX";
    const char* p = mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path_ = p != nullptr ? p : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// srv.serve(ln) on its own goroutine; result() waits for what it returned.
// ln: a net::Listener or a tls::Listener, which must outlive the call.
struct Serving {
  gort::Chan<absl::Status> done = gort::make_chan<absl::Status>(1);
  template <class L>
  Serving(gort::net::Server& srv, L& ln) {
    gort::go([&srv, &ln, d = done] { d.send(srv.serve(ln)); });
  }
  absl::Status result() { return done.recv().value_or(absl::InternalError("no result")); }
};

}  // namespace gort::test

// gort/tls.hpp — Go's crypto/tls over gort::net::Conn, with OpenSSL 3.
//
// A tls::Conn reads and writes like a net::Conn: a goroutine whose
// handshake, read or write would block parks on the netpoller (OpenSSL runs
// on the non-blocking socket; its WANT_READ / WANT_WRITE become parks
// through gort::RawConn), and its thread runs other goroutines meanwhile.
//
//   // A client: verifies the server's certificate against the system's roots
//   // and the host name, as Go does by default.
//   auto c = gort::tls::dial(ctx, "tcp", "example.com:443", gort::tls::Config{});
//   if (!c.ok()) return fail(c.status());  // e.g. x509: certificate signed by unknown authority
//   (void)c->write_string("GET / HTTP/1.0\r\nHost: example.com\r\n\r\n");
//
//   // A server.
//   gort::tls::Config cfg;
//   cfg.cert_file = "server.crt";
//   cfg.key_file = "server.key";
//   cfg.next_protos = {"h2", "http/1.1"};
//   auto ln = gort::tls::listen("tcp", ":8443", cfg);
//   auto c = ln->accept();   // the handshake happens on the first read/write
//
// Semantics follow Go's: verification is on unless insecure_skip_verify;
// the name verified (and sent as SNI) is server_name, or the host part of
// dial's address; the client may present a certificate and the server may
// require one (client_auth); ALPN picks the server's first protocol that
// the client offers, and fails the handshake when there is none; close()
// sends close_notify before closing the socket, and a peer's close_notify
// is end of stream (read returns 0). TLS 1.2 and 1.3.
//
// Errors are absl::Status values in Go's words: `tls: failed to verify
// certificate: x509: certificate signed by unknown authority`,
// `x509: certificate is valid for localhost, not example.com` (code
// Unauthenticated), `tls: no application protocol`, `tls: handshake
// failure: <OpenSSL's reason>` (Unavailable); the closed and timeout errors
// are net's exact ones (net::is_closed_error, net::is_timeout_error);
// a handshake(ctx) cut short by ctx returns ctx's error.
//
// Thread-safety: as net::Conn. One goroutine may read while another
// writes; concurrent reads (writes) are served one at a time. OpenSSL's
// object is used under a lock that is never held while a goroutine parks.
// A Config must not change once it has been used (its OpenSSL context is
// built on first use and shared by copies).
//
// Costs: the handshake's CPU and round trips; then about one system call
// per read or write of up to 16 KiB (a TLS record), plus OpenSSL's
// encryption. The OpenSSL context (certificates, roots) is built once per
// Config.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gort/chrono.hpp"
#include "gort/detail/deadlines.hpp"
#include "gort/context.hpp"
#include "gort/detail/api.hpp"
#include "gort/net.hpp"

namespace gort::net {
class ServerConn;
}  // namespace gort::net

namespace gort::tls {

// Go's tls.NewLRUClientSessionCache: the sessions a client may resume,
// keyed by the name it verifies (Config::server_name, or dial's host) or,
// without one, the peer's address; past `capacity` (< 1: 64, as Go's) the
// least recently used is dropped. A resumed handshake (TLS 1.3 PSK with a
// fresh X25519 exchange, or a TLS 1.2 ticket) skips the certificate, its
// parsing and its verification: on OpenSSL 3.0 it costs about 60 % of a
// full one (docs/tls.md, "Resuming sessions").
//
//   auto cache = std::make_shared<gort::tls::ClientSessionCache>();
//   gort::tls::Config cfg;
//   cfg.client_session_cache = cache;   // share it among Configs if you like
//   auto c = gort::tls::dial("tcp", "example.com:443", cfg);  // full
//   ... read: the server's ticket arrives after the handshake ...
//   auto d = gort::tls::dial("tcp", "example.com:443", cfg);  // resumed
//   bool r = d->did_resume();
//
// As in Go, a session is stored when the server's ticket arrives: in TLS
// 1.3 that is after the handshake, so a client that closes without reading
// has nothing to resume. A session is used only by a client that verifies
// as strictly as the one that made it (one made with insecure_skip_verify
// never serves a verifying Config), and not after its server certificate
// expires; a resumption that fails drops it (Go's rules).
//
// Thread-safety: safe for concurrent use; its lock is held for a map
// lookup, never while a goroutine parks. Costs: one entry (OpenSSL's
// SSL_SESSION, about 1-2 KiB with the server's certificate) per key.
class GORT_API ClientSessionCache {
 public:
  explicit ClientSessionCache(int capacity = 64);
  ~ClientSessionCache();
  ClientSessionCache(const ClientSessionCache&) = delete;
  ClientSessionCache& operator=(const ClientSessionCache&) = delete;

  // The number of sessions held.
  size_t size() const;

  struct Impl;

 private:
  friend struct SessionCacheAccess;
  std::unique_ptr<Impl> impl_;
};

// Go's tls.ClientAuthType, the values servers use.
enum class ClientAuth : uint8_t { kNone, kRequest, kRequireAndVerify };

struct Config {
  // This side's certificate chain and private key: PEM files, or PEM text
  // (the *_pem fields win when set). A server needs one.
  std::string cert_file, key_file;
  std::string cert_pem, key_pem;
  // Roots that verify the peer's certificate: a PEM file or PEM text; both
  // empty: the system's (OpenSSL's default paths, /etc/ssl/certs).
  std::string root_ca_file, root_ca_pem;
  // Client: the name to verify and to send as SNI (default: dial's host).
  std::string server_name;
  // ALPN protocols, in order of preference.
  std::vector<std::string> next_protos;
  // Client: do not verify the server (tests only, as in Go).
  bool insecure_skip_verify = false;
  // Server: ask for (and verify against the roots above) a client
  // certificate.
  ClientAuth client_auth = ClientAuth::kNone;
  // Client: resume sessions from (and store new ones in) this cache; null:
  // every handshake is a full one (Go's ClientSessionCache).
  std::shared_ptr<ClientSessionCache> client_session_cache;

  struct Built;  // the OpenSSL context, built on first use
  mutable std::shared_ptr<Built> built_;
};

// Move-only. A default-constructed or moved-from Conn holds nothing: its
// calls return absl::InvalidArgumentError("invalid argument") at once, as a
// net::Conn's (docs/standard-cpp.md, "Copying and moving handles").
class GORT_API Conn : public ::gort::internal::ChronoDeadlines<Conn> {
 public:
  Conn();
  Conn(Conn&&) noexcept;
  Conn& operator=(Conn&&) noexcept;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  // Go's tls.Client / tls.Server: a TLS connection over c (taken over).
  // The handshake runs on the first read or write, or with handshake().
  static absl::StatusOr<Conn> client(net::Conn c, const Config& cfg);
  static absl::StatusOr<Conn> server(net::Conn c, const Config& cfg);

  // Runs the handshake if it has not run; returns its result (again on
  // later calls). The ctx form gives up when ctx is done (its error).
  absl::Status handshake();
  absl::Status handshake(const Context& ctx);

  // As net::Conn's; 0 with OK at the peer's close_notify (or end of stream).
  absl::StatusOr<size_t> read(absl::Span<char> buf);
  absl::StatusOr<size_t> write(absl::Span<const char> buf);
  // As net::Conn's: waits until a read would not block. Returns at once
  // when OpenSSL already holds input (a record read with an earlier one,
  // SSL_has_pending); otherwise waits on the socket, which a record that
  // carries no data (a TLS 1.3 session ticket) may also wake.
  absl::Status wait_readable();
  // Whether OpenSSL holds input that a read returns without the socket.
  bool input_pending() const;
  absl::StatusOr<size_t> write_string(std::string_view s) {
    return write(absl::MakeConstSpan(s.data(), s.size()));
  }
  // Sends close_notify (if the handshake completed), then closes the socket.
  absl::Status close();
  // Go's CloseWrite: sends close_notify and shuts the socket's writing
  // side; reads go on. Only after a completed handshake.
  absl::Status close_write();

  // As net::Conn's, with absl::Time or a std::chrono time point.
  absl::Status set_deadline(absl::Time t);
  absl::Status set_read_deadline(absl::Time t);
  absl::Status set_write_deadline(absl::Time t);
  using ChronoDeadlines::set_deadline;
  using ChronoDeadlines::set_read_deadline;
  using ChronoDeadlines::set_write_deadline;
  std::string local_addr() const;
  std::string remote_addr() const;
  // The socket's descriptor (-1 without one), as net::Conn's.
  int native_handle() const;

  // After the handshake: the ALPN protocol chosen ("" if none), the SNI the
  // client sent (server side), the version ("TLSv1.3"), and the peer
  // certificate's subject ("" without one).
  std::string negotiated_protocol() const;
  std::string server_name() const;
  std::string version() const;
  std::string peer_subject() const;
  // After the handshake: the cipher suite, by its standard name
  // ("TLS_AES_128_GCM_SHA256", Go's tls.CipherSuiteName), "" before. gort
  // offers and prefers Go's TLS 1.3 suites in Go's order.
  std::string cipher_suite() const;
  // After the handshake: whether it resumed an earlier session (Go's
  // ConnectionState.DidResume).
  bool did_resume() const;

  bool valid() const { return st_ != nullptr; }
  explicit operator bool() const { return valid(); }

  struct State;
  explicit Conn(std::unique_ptr<State> st);  // for tls.cpp

 private:
  friend class net::ServerConn;
  // wait_readable without a stale wake-up (a session's next turn).
  absl::Status wait_readable_strict();
  // The connection under the records (null when moved from): where a
  // session sets its timeouts.
  net::Conn* transport();

  std::unique_ptr<State> st_;
};

// Go's tls.DialWithDialer: net::dial, then the handshake, both under ctx.
GORT_API absl::StatusOr<Conn> dial(const Context& ctx, std::string_view network, std::string_view addr, const Config& cfg);
GORT_API absl::StatusOr<Conn> dial(std::string_view network, std::string_view addr, const Config& cfg);

// Go's tls.NewListener / tls.Listen: accept() returns server Conns whose
// handshake runs on their first read or write (so a slow client never
// holds up accept). Default-constructed or moved-from: as net::Listener's.
class GORT_API Listener {
 public:
  Listener() = default;
  Listener(net::Listener ln, Config cfg) : ln_(std::move(ln)), cfg_(std::move(cfg)) {}
  absl::StatusOr<Conn> accept();
  absl::Status close() { return ln_.close(); }
  std::string addr() const { return ln_.addr(); }
  bool valid() const { return ln_.valid(); }

 private:
  net::Listener ln_;
  Config cfg_;
};
GORT_API absl::StatusOr<Listener> listen(std::string_view network, std::string_view addr, const Config& cfg);

}  // namespace gort::tls

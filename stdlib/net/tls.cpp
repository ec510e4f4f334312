// stdlib/net/tls.cpp — gort::tls (Go's crypto/tls) on OpenSSL 3.
//
// OpenSSL runs on the Conn's non-blocking socket. Every SSL call goes
// through ssl_call(): the call runs inside a RawConn read or write (so the
// Conn's read or write lock is held and its deadline applies), under
// State::mu (OpenSSL's object is not safe for concurrent calls), and
// WANT_READ / WANT_WRITE make the RawConn park the goroutine until the
// socket is ready; a call that wants the other direction switches RawConn
// modes. mu is never held while a goroutine parks.
//
// The handshake runs once (State::hs_mu): the first read, write or
// handshake() performs it; its result is kept and returned by later calls.
#include "gort/tls.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <mutex>

#include "gort/chan.hpp"
#include "gort/sync.hpp"
#include "stdlib/net/net_error.hpp"
#include "stdlib/net/net_fd.hpp"
#include "stdlib/net/tls_session_cache.hpp"
#include "gmp/os/sys.hpp"

namespace gort::tls {

using internal::cat;

struct Config::Built {
  SSL_CTX* client = nullptr;
  SSL_CTX* server = nullptr;
  absl::Status client_err, server_err;
  bool client_done = false, server_done = false;
  std::string alpn_wire;  // next_protos in ALPN's wire format
  ~Built() {
    SSL_CTX_free(client);
    SSL_CTX_free(server);
  }
};

struct Conn::State {
  net::Conn conn;
  SSL* ssl = nullptr;
  std::shared_ptr<Config::Built> built;  // keeps the SSL_CTX alive
  bool is_client = false;
  std::string verify_name;  // the name checked, for error texts
  std::string leaf_names;   // the names of a leaf that failed verification
  Mutex mu;                 // OpenSSL's object: one call at a time
  Mutex hs_mu;              // the handshake runs once
  bool hs_done ABSL_GUARDED_BY(hs_mu) = false;
  absl::Status hs_err ABSL_GUARDED_BY(hs_mu);
  std::atomic<bool> hs_ok{false};
  // Client with a ClientSessionCache: where its sessions go, under which
  // key, whether it verifies, and the session it offered (a reference,
  // dropped from the cache if resuming it fails).
  std::shared_ptr<ClientSessionCache> cache;
  std::string cache_key;
  bool verifying = false;
  SSL_SESSION* offered = nullptr;

  ~State() {
    SSL_free(ssl);
    SSL_SESSION_free(offered);
  }
};

namespace {

// OpenSSL's last error reason on this thread, or `fallback`.
std::string ssl_reason(const char* fallback) {
  unsigned long e = ERR_peek_last_error();
  const char* r = e != 0 ? ERR_reason_error_string(e) : nullptr;
  return r != nullptr ? r : fallback;
}

absl::Status config_error(std::string_view what) {
  std::string msg = cat("tls: ", what, ": ", ssl_reason("unknown error"));
  ERR_clear_error();
  return absl::InvalidArgumentError(msg);
}

absl::Status check_file(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    std::fclose(f);
    return absl::OkStatus();
  }
  int e = errno;
  return absl::Status(internal::errno_code(e), cat("open ", path, ": ", internal::errno_text(e)));
}

absl::Status load_identity(SSL_CTX* ctx, const Config& cfg) {
  if (!cfg.cert_pem.empty() || !cfg.key_pem.empty()) {
    BIO* b = BIO_new_mem_buf(cfg.cert_pem.data(), static_cast<int>(cfg.cert_pem.size()));
    X509* leaf = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    bool ok = leaf != nullptr && SSL_CTX_use_certificate(ctx, leaf) == 1;
    X509_free(leaf);
    while (ok) {
      X509* extra = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
      if (extra == nullptr) break;
      if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) X509_free(extra);
    }
    BIO_free(b);
    ERR_clear_error();  // the end of the PEM text reads as an error
    if (!ok) return absl::InvalidArgumentError("tls: failed to find any PEM data in certificate input");
    b = BIO_new_mem_buf(cfg.key_pem.data(), static_cast<int>(cfg.key_pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    if (key == nullptr) {
      ERR_clear_error();
      return absl::InvalidArgumentError("tls: failed to find any PEM data in key input");
    }
    ok = SSL_CTX_use_PrivateKey(ctx, key) == 1;  // checks it against the certificate
    EVP_PKEY_free(key);
    if (!ok) {
      ERR_clear_error();
      return absl::InvalidArgumentError("tls: private key does not match public key");
    }
  } else if (!cfg.cert_file.empty() || !cfg.key_file.empty()) {
    for (const std::string* f : {&cfg.cert_file, &cfg.key_file}) {
      if (absl::Status s = check_file(*f); !s.ok()) return s;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg.cert_file.c_str()) != 1) return config_error("loading certificate");
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      return config_error("loading private key");
    }
  } else {
    return absl::OkStatus();
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("tls: private key does not match public key");
  }
  return absl::OkStatus();
}

absl::Status load_roots(SSL_CTX* ctx, const Config& cfg) {
  if (!cfg.root_ca_pem.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    BIO* b = BIO_new_mem_buf(cfg.root_ca_pem.data(), static_cast<int>(cfg.root_ca_pem.size()));
    int n = 0;
    while (X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr)) {
      if (X509_STORE_add_cert(store, c) == 1) n++;
      X509_free(c);
    }
    BIO_free(b);
    ERR_clear_error();
    if (n == 0) return absl::InvalidArgumentError("tls: no certificates in root_ca_pem");
    return absl::OkStatus();
  }
  if (!cfg.root_ca_file.empty()) {
    if (absl::Status s = check_file(cfg.root_ca_file); !s.ok()) return s;
    if (SSL_CTX_load_verify_locations(ctx, cfg.root_ca_file.c_str(), nullptr) != 1) {
      return config_error(cat("loading roots from ", cfg.root_ca_file));
    }
    return absl::OkStatus();
  }
  SSL_CTX_set_default_verify_paths(ctx);
  return absl::OkStatus();
}

constexpr const char* kGoSuites = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384";

// A client's new session (TLS 1.3: a ticket after the handshake; 1.2: at
// its end) goes to the Config's cache. Returning 1 hands it our reference.
int new_session(SSL* ssl, SSL_SESSION* sess) {
  auto* st = static_cast<Conn::State*>(SSL_get_app_data(ssl));
  if (st == nullptr || st->cache == nullptr) return 0;
  bool verified = st->verifying && SSL_get_verify_result(ssl) == X509_V_OK;
  SessionCacheAccess::put(*st->cache, st->cache_key, sess, verified);
  return 1;
}

// ALPN, server side: the server's first protocol that the client offers
// (Go's preference order); none in common fails the handshake.
int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned inlen,
                void* arg) {
  const std::string& ours = static_cast<Config::Built*>(arg)->alpn_wire;
  if (ours.empty()) return SSL_TLSEXT_ERR_NOACK;
  unsigned char* sel = nullptr;
  if (SSL_select_next_proto(&sel, outlen, reinterpret_cast<const unsigned char*>(ours.data()),
                            static_cast<unsigned>(ours.size()), in, inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

absl::StatusOr<SSL_CTX*> build(const Config& cfg, bool client, Config::Built* b) {
  SSL_CTX* ctx = SSL_CTX_new(client ? TLS_client_method() : TLS_server_method());
  if (ctx == nullptr) return config_error("creating a context");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // A peer that closes without close_notify reads as end of stream.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  // RELEASE_BUFFERS: a connection with nothing in flight gives its record
  // buffers (about 34 KiB: read and write) back to the allocator, so that an
  // idle connection does not hold them (docs/tls.md).
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  // Read whatever the socket holds, not a record header and then its body:
  // one recv per record instead of two (Go's Conn reads through a buffer
  // too). Safe with the poller: every read calls SSL_read before it parks,
  // so records already buffered are never waited for.
  SSL_CTX_set_read_ahead(ctx, 1);
  // Go's TLS 1.3 suites in Go's order (with AES hardware, which every
  // x86-64 and arm64 server has), its server choosing by its own order:
  // two gort peers settle on AES-128-GCM with SHA-256, as two Go peers do,
  // not OpenSSL's AES-256-GCM with SHA-384 (more AES rounds per record,
  // a costlier key schedule).
  SSL_CTX_set_ciphersuites(ctx, kGoSuites);
  if (!client) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (client) {
    // Sessions go to a ClientSessionCache (new_session), not OpenSSL's.
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, new_session);
  } else {
    // One TLS 1.3 ticket per handshake, as Go's server sends (OpenSSL's
    // default is two): each costs the server an encryption and the client
    // a session copy, and a client resumes with one.
    SSL_CTX_set_num_tickets(ctx, 1);
  }
  absl::Status s = load_identity(ctx, cfg);
  if (s.ok() && !client && cfg.cert_file.empty() && cfg.cert_pem.empty()) {
    s = absl::InvalidArgumentError("tls: neither Certificates, GetCertificate, nor GetConfigForClient set in Config");
  }
  bool verify = client ? !cfg.insecure_skip_verify : cfg.client_auth != ClientAuth::kNone;
  if (s.ok() && verify) s = load_roots(ctx, cfg);
  if (!s.ok()) {
    SSL_CTX_free(ctx);
    return s;
  }
  int mode = SSL_VERIFY_NONE;
  if (client && verify) mode = SSL_VERIFY_PEER;
  if (!client && cfg.client_auth == ClientAuth::kRequest) mode = SSL_VERIFY_PEER;
  if (!client && cfg.client_auth == ClientAuth::kRequireAndVerify) {
    mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  }
  SSL_CTX_set_verify(ctx, mode, nullptr);
  if (!client) SSL_CTX_set_alpn_select_cb(ctx, select_alpn, b);
  return ctx;
}

// The OpenSSL context for cfg in this role, built on first use.
absl::StatusOr<std::pair<SSL_CTX*, std::shared_ptr<Config::Built>>> context_of(const Config& cfg, bool client) {
  static std::mutex build_mu;  // building is rare; never held across a park
  std::lock_guard lock(build_mu);
  if (cfg.built_ == nullptr) {
    auto b = std::make_shared<Config::Built>();
    for (const std::string& p : cfg.next_protos) {
      if (p.empty() || p.size() > 255) return absl::InvalidArgumentError("tls: invalid NextProtos value");
      b->alpn_wire += static_cast<char>(p.size());
      b->alpn_wire += p;
    }
    cfg.built_ = std::move(b);
  }
  Config::Built& b = *cfg.built_;
  SSL_CTX*& ctx = client ? b.client : b.server;
  bool& done = client ? b.client_done : b.server_done;
  absl::Status& err = client ? b.client_err : b.server_err;
  if (!done) {
    absl::StatusOr<SSL_CTX*> c = build(cfg, client, &b);
    if (c.ok()) ctx = *c;
    else err = c.status();
    done = true;
  }
  if (!err.ok()) return err;
  return std::make_pair(ctx, cfg.built_);
}

bool is_ip(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The DNS and IP names of a certificate, as Go lists them.
std::string names_of(X509* cert) {
  std::string out;
  auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); i++) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans, i);
    std::string name;
    if (n->type == GEN_DNS) {
      name.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName)),
                  static_cast<size_t>(ASN1_STRING_length(n->d.dNSName)));
    } else if (n->type == GEN_IPADD) {
      char buf[64];
      int len = ASN1_STRING_length(n->d.iPAddress);
      const unsigned char* d = ASN1_STRING_get0_data(n->d.iPAddress);
      if (inet_ntop(len == 4 ? AF_INET : AF_INET6, d, buf, sizeof buf) != nullptr) name = buf;
    }
    if (name.empty()) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  GENERAL_NAMES_free(sans);
  return out;
}

// Records the names of a leaf certificate that fails verification (OpenSSL
// drops the peer's certificate when the handshake fails), for Go's "valid
// for X, not Y".
int note_failed_leaf(int ok, X509_STORE_CTX* store) {
  if (ok == 0 && X509_STORE_CTX_get_error_depth(store) == 0) {
    auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
    auto* st = ssl != nullptr ? static_cast<Conn::State*>(SSL_get_app_data(ssl)) : nullptr;
    X509* leaf = X509_STORE_CTX_get_current_cert(store);
    if (st != nullptr && leaf != nullptr) st->leaf_names = names_of(leaf);
  }
  return ok;
}

// Go's texts for a failed certificate verification.
absl::Status verify_error(const Conn::State& st, long code, const std::string& name) {
  std::string why;
  switch (code) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH: {
      const std::string& names = st.leaf_names;
      why = names.empty() ? cat("x509: certificate is not valid for any names, but wanted to match ", name)
                          : cat("x509: certificate is valid for ", names, ", not ", name);
      break;
    }
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
      why = "x509: certificate has expired or is not yet valid";
      break;
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      why = "x509: certificate signed by unknown authority";
      break;
    default:
      why = cat("x509: ", X509_verify_cert_error_string(code));
  }
  return absl::UnauthenticatedError(cat("tls: failed to verify certificate: ", why));
}

// OpenSSL's socket BIO writes with write(2), which raises SIGPIPE (death,
// by default) when the peer has gone; this one sends with MSG_NOSIGNAL, as
// gort's sockets do, and is otherwise the same: the descriptor is the
// BIO's number, non-blocking, EAGAIN a retry.
int bio_write(BIO* b, const char* p, int n) {
  BIO_clear_retry_flags(b);
  ssize_t r = internal::sys::send(BIO_get_fd(b, nullptr), p, static_cast<size_t>(n), MSG_NOSIGNAL);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) BIO_set_retry_write(b);
  return static_cast<int>(r);
}

int bio_read(BIO* b, char* p, int n) {
  BIO_clear_retry_flags(b);
  ssize_t r = internal::sys::recv(BIO_get_fd(b, nullptr), p, static_cast<size_t>(n), 0);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) BIO_set_retry_read(b);
  return static_cast<int>(r);
}

long bio_ctrl(BIO* b, int cmd, long num, void* ptr) {
  switch (cmd) {
    case BIO_C_SET_FD:
      BIO_set_data(b, reinterpret_cast<void*>(static_cast<intptr_t>(*static_cast<int*>(ptr))));
      BIO_set_init(b, 1);
      return 1;
    case BIO_C_GET_FD: {
      int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b)));
      if (ptr != nullptr) *static_cast<int*>(ptr) = fd;
      return fd;
    }
    case BIO_CTRL_FLUSH:
      return 1;
    default:
      (void)num;
      return 0;
  }
}

BIO_METHOD* nosigpipe_socket_method() {
  static BIO_METHOD* m = [] {
    BIO_METHOD* bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "gort socket");
    BIO_meth_set_write(bm, bio_write);
    BIO_meth_set_read(bm, bio_read);
    BIO_meth_set_ctrl(bm, bio_ctrl);
    return bm;
  }();
  return m;
}

// The result of one SSL call.
struct SslResult {
  int ret = 0;
  int err = SSL_ERROR_NONE;
  std::string reason;  // OpenSSL's, for SSL_ERROR_SSL
  int sys_errno = 0;   // for SSL_ERROR_SYSCALL
};

}  // namespace

namespace {

// Runs op (an SSL call on st.ssl) until it completes, parking the goroutine
// while it wants the socket readable (`r`) or writable (`w`). `mode` is the
// direction to start in. Returns the RawConn's error (closed, timeout) or
// OK with *res the call's last result.
template <class Op>
absl::Status ssl_call(Conn::State& st, int mode, Op op, SslResult* res) {
  RawConn rc = st.conn.syscall_conn();
  for (;;) {
    int next = 0;
    auto attempt = [&](int) {
      st.mu.lock();
      // SSL_get_error needs an empty queue before the call: it answers
      // SSL_ERROR_SSL or _SYSCALL whenever ERR_peek_error() finds an entry.
      // Peeking an empty queue is a few loads; clearing it wipes all 16
      // slots, about 1 % of a TLS echo's CPU when done on every call.
      if (ERR_peek_error() != 0) ERR_clear_error();
      errno = 0;
      res->ret = op();
      res->err = res->ret > 0 ? SSL_ERROR_NONE : SSL_get_error(st.ssl, res->ret);
      res->sys_errno = errno;
      if (res->err == SSL_ERROR_SSL) res->reason = ssl_reason("protocol error");
      st.mu.unlock();
      int want = res->err == SSL_ERROR_WANT_READ ? 'r' : res->err == SSL_ERROR_WANT_WRITE ? 'w' : 0;
      if (want == 0) return true;  // done, or failed
      if (want == mode) return false;  // park until ready, then again
      next = want;
      return true;
    };
    absl::Status s = mode == 'r' ? rc.read(attempt) : rc.write(attempt);
    if (!s.ok() || next == 0) return s;
    mode = next;
  }
}

absl::Status handshake_locked(Conn::State& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.hs_mu) {
  SslResult r;
  absl::Status s = ssl_call(st, st.is_client ? 'w' : 'r', [&] { return SSL_do_handshake(st.ssl); }, &r);
  if (!s.ok()) return s;
  if (r.err == SSL_ERROR_NONE) return absl::OkStatus();
  long v = SSL_get_verify_result(st.ssl);
  if (st.is_client && v != X509_V_OK) return verify_error(st, v, st.verify_name);
  if (r.err == SSL_ERROR_SSL) {
    std::string why = r.reason;
    if (why == "peer did not return a certificate") return absl::UnauthenticatedError("tls: client didn't provide a certificate");
    if (why == "no application protocol" || why == "tlsv1 alert no application protocol") {
      return absl::UnavailableError("tls: no application protocol");
    }
    return absl::UnavailableError(cat("tls: handshake failure: ", why));
  }
  if (r.err == SSL_ERROR_SYSCALL || r.err == SSL_ERROR_ZERO_RETURN) {
    return absl::UnavailableError(cat("tls: handshake failure: ",
                                      r.sys_errno != 0 ? internal::errno_text(r.sys_errno) : "EOF"));
  }
  return absl::UnavailableError(cat("tls: handshake failure: SSL error ", r.err));
}

absl::Status ensure_handshake(Conn::State& st) {
  if (st.hs_ok.load(std::memory_order_acquire)) return absl::OkStatus();
  st.hs_mu.lock();
  if (!st.hs_done) {
    st.hs_err = handshake_locked(st);
    // Go's rule: a session whose resumption failed is not offered again.
    if (!st.hs_err.ok() && st.offered != nullptr) SessionCacheAccess::drop(*st.cache, st.cache_key, st.offered);
    st.hs_done = true;
    st.hs_ok.store(st.hs_err.ok(), std::memory_order_release);
  }
  absl::Status s = st.hs_err;
  st.hs_mu.unlock();
  return s;
}

// Which end of the handshake a connection is.
enum class Role : bool { kServer = false, kClient = true };

absl::StatusOr<std::unique_ptr<Conn::State>> new_state(net::Conn c, const Config& cfg, Role role,
                                                        std::string default_name) {
  if (!c.valid()) return absl::InvalidArgumentError("invalid argument");
  const bool client = role == Role::kClient;
  auto ctx = context_of(cfg, client);
  if (!ctx.ok()) return ctx.status();
  auto st = std::make_unique<Conn::State>();
  st->conn = std::move(c);
  st->built = ctx->second;
  st->is_client = client;
  st->ssl = SSL_new(ctx->first);
  BIO* bio = st->ssl != nullptr ? BIO_new(nosigpipe_socket_method()) : nullptr;
  if (bio == nullptr) return config_error("creating a connection");
  int fd = st->conn.native_handle();
  BIO_ctrl(bio, BIO_C_SET_FD, BIO_NOCLOSE, &fd);
  SSL_set_bio(st->ssl, bio, bio);  // the SSL owns it now
  SSL_set_app_data(st->ssl, st.get());
  if (client) {
    SSL_set_connect_state(st->ssl);
    if (!cfg.insecure_skip_verify) SSL_set_verify(st->ssl, SSL_VERIFY_PEER, note_failed_leaf);
    std::string name = cfg.server_name.empty() ? std::move(default_name) : cfg.server_name;
    if (name.empty() && !cfg.insecure_skip_verify) {
      return absl::InvalidArgumentError("tls: either ServerName or InsecureSkipVerify must be specified in the tls.Config");
    }
    st->verify_name = name;
    if (!name.empty()) {
      if (is_ip(name)) {
        if (!cfg.insecure_skip_verify) X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(st->ssl), name.c_str());
      } else {
        SSL_set_tlsext_host_name(st->ssl, name.c_str());
        if (!cfg.insecure_skip_verify) SSL_set1_host(st->ssl, name.c_str());
      }
    }
    if (cfg.client_session_cache != nullptr) {
      st->cache = cfg.client_session_cache;
      st->cache_key = name.empty() ? st->conn.remote_addr() : name;
      st->verifying = !cfg.insecure_skip_verify;
      st->offered = SessionCacheAccess::get(*st->cache, st->cache_key, st->verifying);
      if (st->offered != nullptr) SSL_set_session(st->ssl, st->offered);
    }
    const std::string& wire = st->built->alpn_wire;
    if (!wire.empty()) {
      SSL_set_alpn_protos(st->ssl, reinterpret_cast<const unsigned char*>(wire.data()),
                          static_cast<unsigned>(wire.size()));
    }
  } else {
    SSL_set_accept_state(st->ssl);
  }
  return st;
}

// Dial's host, for SNI and verification: "h:p", "[v6]:p".
std::string host_of(std::string_view addr) {
  size_t colon = addr.rfind(':');
  std::string_view h = colon == std::string_view::npos ? addr : addr.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  return std::string(h);
}

}  // namespace

Conn::Conn() = default;
Conn::Conn(std::unique_ptr<State> st) : st_(std::move(st)) {}
Conn::Conn(Conn&&) noexcept = default;
Conn& Conn::operator=(Conn&&) noexcept = default;
Conn::~Conn() = default;

absl::StatusOr<Conn> Conn::client(net::Conn c, const Config& cfg) {
  auto st = new_state(std::move(c), cfg, Role::kClient, "");
  if (!st.ok()) return st.status();
  return Conn(std::move(*st));
}

absl::StatusOr<Conn> Conn::server(net::Conn c, const Config& cfg) {
  auto st = new_state(std::move(c), cfg, Role::kServer, "");
  if (!st.ok()) return st.status();
  return Conn(std::move(*st));
}

absl::Status Conn::handshake() {
  if (st_ == nullptr) return internal::invalid_error();
  return ensure_handshake(*st_);
}

absl::Status Conn::handshake(const Context& ctx) {
  if (st_ == nullptr) return internal::invalid_error();
  if (absl::Status e = ctx.err(); !e.ok()) return e;
  // Go's HandshakeContext: when ctx is done first, the connection is closed
  // under the handshake, which then fails; the caller gets ctx's error.
  auto stop = make_chan<std::monostate>();
  auto watcher_done = make_chan<std::monostate>();
  State* st = st_.get();
  gort::go([ctx, stop, watcher_done, st] {
    bool cancelled = false;
    select(on_recv(ctx.done(), [&] { cancelled = true; }), on_recv(stop));
    if (cancelled) (void)st->conn.close();
    watcher_done.close();
  });
  absl::Status s = ensure_handshake(*st);
  stop.close();
  watcher_done.recv();
  if (!s.ok()) {
    if (absl::Status e = ctx.err(); !e.ok()) return e;
  }
  return s;
}

absl::StatusOr<size_t> Conn::read(absl::Span<char> buf) {
  if (st_ == nullptr) return internal::invalid_error();
  if (absl::Status s = ensure_handshake(*st_); !s.ok()) return s;
  if (buf.empty()) return size_t{0};
  size_t n = 0;
  SslResult r;
  absl::Status s = ssl_call(*st_, 'r', [&] { return SSL_read_ex(st_->ssl, buf.data(), buf.size(), &n); }, &r);
  if (!s.ok()) return s;
  if (r.err == SSL_ERROR_NONE) {
    internal::race_io_read(buf.data(), n);
    return n;
  }
  if (r.err == SSL_ERROR_ZERO_RETURN) return size_t{0};  // close_notify (or end of stream)
  if (r.err == SSL_ERROR_SYSCALL && r.sys_errno != 0) {
    return internal::io_error(r.sys_errno, internal::op_prefix("read", "tcp", local_addr(), remote_addr()),
                                 "read");
  }
  return absl::DataLossError(cat("tls: ", r.err == SSL_ERROR_SSL ? r.reason : "read failed"));
}

absl::StatusOr<size_t> Conn::write(absl::Span<const char> buf) {
  if (st_ == nullptr) return internal::invalid_error();
  if (absl::Status s = ensure_handshake(*st_); !s.ok()) return s;
  if (buf.empty()) return size_t{0};
  size_t n = 0;
  SslResult r;
  internal::race_io_write(buf.data(), buf.size());
  absl::Status s = ssl_call(*st_, 'w', [&] { return SSL_write_ex(st_->ssl, buf.data(), buf.size(), &n); }, &r);
  if (!s.ok()) return s;
  if (r.err == SSL_ERROR_NONE) return n;
  if (r.err == SSL_ERROR_SYSCALL && r.sys_errno != 0) {
    return internal::io_error(r.sys_errno, internal::op_prefix("write", "tcp", local_addr(), remote_addr()),
                                 "write");
  }
  return absl::UnavailableError(cat("tls: ", r.err == SSL_ERROR_SSL ? r.reason : "write failed"));
}

int Conn::native_handle() const { return st_ == nullptr ? -1 : st_->conn.native_handle(); }

bool Conn::input_pending() const {
  if (st_ == nullptr || !st_->hs_ok.load(std::memory_order_acquire)) return false;
  st_->mu.lock();
  bool pending = SSL_has_pending(st_->ssl) == 1;
  st_->mu.unlock();
  return pending;
}

absl::Status Conn::wait_readable() {
  if (st_ == nullptr) return internal::invalid_error();
  if (input_pending()) return absl::OkStatus();
  return st_->conn.wait_readable();
}

net::Conn* Conn::transport() { return st_ != nullptr ? &st_->conn : nullptr; }

absl::Status Conn::wait_readable_strict() {
  if (st_ == nullptr) return internal::invalid_error();
  if (input_pending()) return absl::OkStatus();
  return internal::wait_readable_strict(st_->conn);
}

absl::Status Conn::close() {
  if (st_ == nullptr) return internal::invalid_error();
  if (st_->hs_ok.load(std::memory_order_acquire)) {
    // One attempt at close_notify: never wait for the peer's (Go doesn't).
    st_->mu.lock();
    SSL_shutdown(st_->ssl);
    ERR_clear_error();
    st_->mu.unlock();
  }
  return st_->conn.close();
}

absl::Status Conn::close_write() {
  if (st_ == nullptr) return internal::invalid_error();
  if (!st_->hs_ok.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError("tls: CloseWrite called before handshake complete");
  }
  st_->mu.lock();
  SSL_shutdown(st_->ssl);
  ERR_clear_error();
  st_->mu.unlock();
  return st_->conn.close_write();
}

absl::Status Conn::set_deadline(absl::Time t) {
  return st_ == nullptr ? internal::invalid_error() : st_->conn.set_deadline(t);
}
absl::Status Conn::set_read_deadline(absl::Time t) {
  return st_ == nullptr ? internal::invalid_error() : st_->conn.set_read_deadline(t);
}
absl::Status Conn::set_write_deadline(absl::Time t) {
  return st_ == nullptr ? internal::invalid_error() : st_->conn.set_write_deadline(t);
}
std::string Conn::local_addr() const { return st_ == nullptr ? "" : st_->conn.local_addr(); }
std::string Conn::remote_addr() const { return st_ == nullptr ? "" : st_->conn.remote_addr(); }

std::string Conn::negotiated_protocol() const {
  if (st_ == nullptr || !st_->hs_ok.load()) return "";
  const unsigned char* p = nullptr;
  unsigned len = 0;
  st_->mu.lock();
  SSL_get0_alpn_selected(st_->ssl, &p, &len);
  std::string out(reinterpret_cast<const char*>(p), p != nullptr ? len : 0);
  st_->mu.unlock();
  return out;
}

std::string Conn::cipher_suite() const {
  if (st_ == nullptr || !st_->hs_ok.load()) return "";
  st_->mu.lock();
  const SSL_CIPHER* c = SSL_get_current_cipher(st_->ssl);
  const char* name = c != nullptr ? SSL_CIPHER_standard_name(c) : nullptr;
  std::string out = name != nullptr ? name : "";
  st_->mu.unlock();
  return out;
}

bool Conn::did_resume() const {
  if (st_ == nullptr || !st_->hs_ok.load()) return false;
  st_->mu.lock();
  bool r = SSL_session_reused(st_->ssl) == 1;
  st_->mu.unlock();
  return r;
}

std::string Conn::server_name() const {
  if (st_ == nullptr || !st_->hs_ok.load()) return "";
  st_->mu.lock();
  const char* n = SSL_get_servername(st_->ssl, TLSEXT_NAMETYPE_host_name);
  std::string out = n != nullptr ? n : "";
  st_->mu.unlock();
  return out;
}

std::string Conn::version() const {
  if (st_ == nullptr || !st_->hs_ok.load()) return "";
  return SSL_get_version(st_->ssl);
}

std::string Conn::peer_subject() const {
  if (st_ == nullptr || !st_->hs_ok.load()) return "";
  st_->mu.lock();
  X509* peer = SSL_get0_peer_certificate(st_->ssl);
  std::string out;
  if (peer != nullptr) {
    char buf[256];
    X509_NAME_oneline(X509_get_subject_name(peer), buf, sizeof buf);
    out = buf;
  }
  st_->mu.unlock();
  return out;
}

absl::StatusOr<Conn> dial(const Context& ctx, std::string_view network, std::string_view addr, const Config& cfg) {
  auto c = net::dial(ctx, network, addr);
  if (!c.ok()) return c.status();
  auto st = new_state(std::move(*c), cfg, Role::kClient, host_of(addr));
  if (!st.ok()) return st.status();
  Conn conn(std::move(*st));
  absl::Status s = conn.handshake(ctx);
  if (!s.ok()) return s;
  return conn;
}

absl::StatusOr<Conn> dial(std::string_view network, std::string_view addr, const Config& cfg) {
  return dial(background(), network, addr, cfg);
}

absl::StatusOr<Conn> Listener::accept() {
  auto c = ln_.accept();
  if (!c.ok()) return c.status();
  return Conn::server(std::move(*c), cfg_);
}

absl::StatusOr<Listener> listen(std::string_view network, std::string_view addr, const Config& cfg) {
  // Go checks the certificate before listening.
  auto ctx = context_of(cfg, false);
  if (!ctx.ok()) return ctx.status();
  auto ln = net::listen(network, addr);
  if (!ln.ok()) return ln.status();
  return Listener(std::move(*ln), cfg);
}

}  // namespace gort::tls

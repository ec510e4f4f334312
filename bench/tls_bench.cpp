// bench/tls_bench.cpp — gort::tls (OpenSSL 3) against Go's crypto/tls.
// Twin: bench/go/tls_bench/main.go. All traffic stays on 127.0.0.1; the
// server and its clients live in one process, so every CPU figure below
// covers both ends of each connection.
//
//   tls_echo/procs:N    a TLS echo server (a goroutine per connection, 4 KiB
//                       reads) with a P-256 ECDSA certificate, and clients
//                       that verify it (a CA of the test's, the name
//                       "localhost"). TLS 1.3 on both sides (each side's
//                       default). Run with 1 and 2 Ps.
//                       Handshakes: for 2 s (scaled by GORT_BENCH_SCALE),
//                       one client after another dials (TCP connect and
//                       the handshake) and closes (close_notify) at once:
//                       handshakes/s = handshakes / the loop's time;
//                       cpu_us/handshake = the process's CPU time (getrusage
//                       RUSAGE_SELF, user + system, client and server) over
//                       the loop / handshakes.
//                       Resumed: for half that time, a client with a
//                       ClientSessionCache (Go: NewLRUClientSessionCache)
//                       dials, writes one byte and reads it back (which
//                       takes the server's ticket for the next dial), and
//                       closes: cpu_us/resumed = the CPU time over the loop
//                       / dials (fails unless 90 % resumed).
//                       Messages: 100 clients dialled (not timed), then each
//                       writes a 64-byte message and reads it back, 50,000
//                       round trips in all: msgs/s = round trips / elapsed;
//                       cpu_us/msg = the process's CPU time over them / round
//                       trips.
//
//   tls_handshake_floor/procs:1
//                       The library's floor: the same handshake (certificate,
//                       verification, TLS 1.3, the contexts configured as
//                       gort::tls configures them) with plain OpenSSL over an
//                       in-memory BIO pair, client and server in one thread:
//                       no sockets, no gort. For 1 s (scaled), handshake
//                       after handshake: cpu_us/handshake = CPU time / handshakes.
//                       Go's twin runs crypto/tls over net.Pipe. gort's
//                       tls_echo cpu_us/handshake over this one is what gort
//                       and the kernel add to OpenSSL; this ratio to Go's is
//                       what OpenSSL costs against crypto/tls.
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <gort/gort.hpp>
#include <gort/tls.hpp>

#include "bench_util.hpp"
#include "tests/tls_pki.hpp"

namespace {

using gortbench::Stopwatch;

constexpr int64_t kRoundTrips = 50'000;
constexpr int kClients = 100;
constexpr size_t kMessage = 64;
constexpr double kHandshakeSeconds = 2.0;

void tls_echo(benchmark::State& state, int procs) {
  const int64_t per_client = std::max<int64_t>(1, gortbench::scaled(kRoundTrips) / kClients);
  const double handshake_seconds = kHandshakeSeconds * gortbench::scale();
  const gort::test::Pki& pki = gort::test::pki();
  double seconds = 0, dial_seconds = 0, dial_cpu = 0, msg_cpu = 0, resume_cpu = 0;
  int64_t handshakes = 0, resume_dials = 0;
  std::string error;
  gort::run(
      [&] {
        gort::tls::Config scfg;
        scfg.cert_pem = pki.server.cert;
        scfg.key_pem = pki.server.key;
        auto ln = gort::tls::listen("tcp", "127.0.0.1:0", scfg);
        if (!ln.ok()) {
          error = std::string(ln.status().message());
          return;
        }
        gort::WaitGroup served;
        served.add(1);
        gort::go([&] {
          for (;;) {
            auto c = ln->accept();
            if (!c.ok()) break;
            served.add(1);
            gort::go([&served](gort::tls::Conn conn) {
              char buf[4096];
              for (;;) {
                auto n = conn.read(absl::MakeSpan(buf));
                if (!n.ok() || *n == 0 || !conn.write(absl::MakeConstSpan(buf, *n)).ok()) break;
              }
              served.done();
            }, std::move(*c));
          }
          served.done();
        });
        gort::tls::Config ccfg;
        ccfg.root_ca_pem = pki.ca.cert;
        ccfg.server_name = "localhost";
        // Handshakes for a fixed time: dial, then close at once (the
        // server's side of the last few may finish just after).
        double cpu0 = gortbench::process_cpu_seconds();
        Stopwatch dial_sw;
        do {
          auto c = gort::tls::dial("tcp", ln->addr(), ccfg);
          if (!c.ok()) {
            error = std::string(c.status().message());
            break;
          }
          handshakes++;
          (void)c->close();
        } while ((dial_seconds = dial_sw.seconds()) < handshake_seconds);
        dial_cpu = gortbench::process_cpu_seconds() - cpu0;
        // Resumed handshakes for a fixed time: a client with a session
        // cache dials, echoes one byte (which also takes the server's
        // ticket), closes.
        gort::tls::Config rcfg = ccfg;
        rcfg.client_session_cache = std::make_shared<gort::tls::ClientSessionCache>();
        int64_t resumed = 0;
        cpu0 = gortbench::process_cpu_seconds();
        Stopwatch resume_sw;
        while (error.empty() && resume_sw.seconds() < handshake_seconds / 2) {
          auto c = gort::tls::dial("tcp", ln->addr(), rcfg);
          char one = 'x';
          if (!c.ok()) error = std::string(c.status().message());
          else if (!c->write(absl::MakeConstSpan(&one, 1)).ok()) error = "write failed";
          else if (auto n = c->read(absl::MakeSpan(&one, 1)); !n.ok() || *n != 1) error = "read failed";
          if (!error.empty()) break;
          if (c->did_resume()) resumed++;
          resume_dials++;
          (void)c->close();
        }
        resume_cpu = gortbench::process_cpu_seconds() - cpu0;
        if (error.empty() && resumed < resume_dials * 9 / 10) {
          error = "only " + std::to_string(resumed) + " of " + std::to_string(resume_dials) + " handshakes resumed";
        }
        // The clients of the message phase (not timed).
        std::vector<gort::tls::Conn> conns;
        for (int i = 0; i < kClients && error.empty(); i++) {
          auto c = gort::tls::dial("tcp", ln->addr(), ccfg);
          if (!c.ok()) error = std::string(c.status().message());
          else conns.push_back(std::move(*c));
        }
        std::atomic<bool> failed{false};
        gort::WaitGroup wg;
        cpu0 = gortbench::process_cpu_seconds();
        Stopwatch sw;
        for (auto& conn : conns) {
          wg.add(1);
          gort::go([&wg, &failed, &conn, per_client] {
            char msg[kMessage], back[kMessage];
            std::fill(std::begin(msg), std::end(msg), 'x');
            for (int64_t i = 0; i < per_client && !failed.load(); i++) {
              if (!conn.write(absl::MakeConstSpan(msg)).ok()) failed = true;
              for (size_t got = 0; got < kMessage && !failed.load();) {
                auto n = conn.read(absl::MakeSpan(back + got, kMessage - got));
                if (!n.ok() || *n == 0) failed = true;
                else got += *n;
              }
            }
            wg.done();
          });
        }
        wg.wait();
        seconds = sw.seconds();
        msg_cpu = gortbench::process_cpu_seconds() - cpu0;
        if (failed.load() && error.empty()) error = "an echo round trip failed";
        for (auto& c : conns) (void)c.close();
        conns.clear();
        (void)ln->close();
        served.wait();
      },
      gort::Config{.procs = procs});
  if (!error.empty()) return state.SkipWithError(("tls_echo: " + error).c_str());
  const double msgs = static_cast<double>(per_client * kClients);
  state.SetIterationTime(seconds);
  state.counters["msgs/s"] = msgs / seconds;
  state.counters["cpu_us/msg"] = msg_cpu * 1e6 / msgs;
  state.counters["handshakes/s"] = static_cast<double>(handshakes) / dial_seconds;
  state.counters["cpu_us/handshake"] = dial_cpu * 1e6 / static_cast<double>(handshakes);
  state.counters["cpu_us/resumed"] = resume_cpu * 1e6 / static_cast<double>(resume_dials);
}

// A context as gort::tls builds it (stdlib/net/tls.cpp), from PEM text.
SSL_CTX* floor_context(bool client, const gort::test::Pki& pki) {
  SSL_CTX* ctx = SSL_CTX_new(client ? TLS_client_method() : TLS_server_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384");
  if (!client) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  auto read_pem = [](const std::string& pem, auto reader) {
    BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    auto* v = reader(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    return v;
  };
  if (client) {
    X509* ca = read_pem(pki.ca.cert, PEM_read_bio_X509);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
    X509_free(ca);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  } else {
    X509* cert = read_pem(pki.server.cert, PEM_read_bio_X509);
    EVP_PKEY* key = read_pem(pki.server.key, PEM_read_bio_PrivateKey);
    SSL_CTX_use_certificate(ctx, cert);
    SSL_CTX_use_PrivateKey(ctx, key);
    X509_free(cert);
    EVP_PKEY_free(key);
    SSL_CTX_set_num_tickets(ctx, 1);
  }
  return ctx;
}

void tls_handshake_floor(benchmark::State& state, int) {
  const gort::test::Pki& pki = gort::test::pki();
  SSL_CTX* cctx = floor_context(true, pki);
  SSL_CTX* sctx = floor_context(false, pki);
  int64_t handshakes = 0;
  std::string error;
  double cpu0 = gortbench::process_cpu_seconds();
  Stopwatch sw;
  double seconds = 0;
  do {
    SSL* c = SSL_new(cctx);
    SSL* s = SSL_new(sctx);
    BIO *cb = nullptr, *sb = nullptr;
    BIO_new_bio_pair(&cb, 0, &sb, 0);
    SSL_set_bio(c, cb, cb);
    SSL_set_bio(s, sb, sb);
    SSL_set_tlsext_host_name(c, "localhost");
    SSL_set1_host(c, "localhost");
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);
    // Each side runs until it wants the other's next flight.
    for (int round = 0; round < 8 && !(SSL_is_init_finished(c) && SSL_is_init_finished(s)); round++) {
      SSL_do_handshake(c);
      SSL_do_handshake(s);
    }
    if (!SSL_is_init_finished(c) || !SSL_is_init_finished(s) || SSL_get_verify_result(c) != X509_V_OK) {
      error = "the in-memory handshake failed";
    }
    ERR_clear_error();
    SSL_free(c);
    SSL_free(s);
    handshakes++;
  } while (error.empty() && (seconds = sw.seconds()) < gortbench::scale());
  double cpu = gortbench::process_cpu_seconds() - cpu0;
  SSL_CTX_free(cctx);
  SSL_CTX_free(sctx);
  if (!error.empty()) return state.SkipWithError(("tls_handshake_floor: " + error).c_str());
  state.SetIterationTime(seconds);
  state.counters["cpu_us/handshake"] = cpu * 1e6 / static_cast<double>(handshakes);
}

}  // namespace

int main(int argc, char** argv) {
  gortbench::register_once("tls_echo", 1, tls_echo);
  gortbench::register_once("tls_echo", 2, tls_echo);
  gortbench::register_once("tls_handshake_floor", 1, tls_handshake_floor);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

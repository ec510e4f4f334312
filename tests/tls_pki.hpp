// tests/tls_pki.hpp — certificates for TLS tests and benchmarks, made in
// the process with OpenSSL: a CA, a server certificate for localhost and
// 127.0.0.1 signed by it, an expired one, a client certificate, and a
// server certificate from another CA. Header-only, so that bench/ can use
// it too (bench/tls_bench.cpp).
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <string>

namespace gort::test {

struct Pem {
  std::string cert, key;
};

inline std::string to_pem(X509* c) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, c);
  char* p;
  long n = BIO_get_mem_data(b, &p);
  std::string s(p, static_cast<size_t>(n));
  BIO_free(b);
  return s;
}

inline std::string to_pem(EVP_PKEY* k) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
  char* p;
  long n = BIO_get_mem_data(b, &p);
  std::string s(p, static_cast<size_t>(n));
  BIO_free(b);
  return s;
}

inline void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  X509_add_ext(cert, e, -1);
  X509_EXTENSION_free(e);
}

// A certificate for `cn` with subject alternative names `sans` ("DNS:x,IP:y"),
// valid from now + from_days to now + to_days; signed by (ca, ca_key), or
// self-signed (a CA) when ca is null.
struct Made {
  X509* cert;
  EVP_PKEY* key;
};
inline Made make_cert(const char* cn, const char* sans, X509* ca, EVP_PKEY* ca_key, long from_days = -1, long to_days = 30) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* c = X509_new();
  X509_set_version(c, 2);
  static std::atomic<long> serial{1};
  ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
  X509_gmtime_adj(X509_getm_notBefore(c), from_days * 86400);
  X509_gmtime_adj(X509_getm_notAfter(c), to_days * 86400);
  X509_set_pubkey(c, key);
  X509_NAME* name = X509_get_subject_name(c);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_set_issuer_name(c, ca != nullptr ? X509_get_subject_name(ca) : name);
  X509* issuer = ca != nullptr ? ca : c;
  if (ca == nullptr) {
    add_ext(c, issuer, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(c, issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_ext(c, issuer, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(c, issuer, NID_ext_key_usage, "serverAuth,clientAuth");
    if (sans != nullptr) add_ext(c, issuer, NID_subject_alt_name, sans);
  }
  X509_sign(c, ca_key != nullptr ? ca_key : key, EVP_sha256());
  return {c, key};
}

// A CA and certificates it signed, as PEM.
struct Pki {
  Pem ca, server, expired, client, other_ca_server;
  Pki() {
    Made ca_m = make_cert("gort test CA", nullptr, nullptr, nullptr);
    ca = {to_pem(ca_m.cert), to_pem(ca_m.key)};
    Made s = make_cert("localhost", "DNS:localhost,IP:127.0.0.1", ca_m.cert, ca_m.key);
    server = {to_pem(s.cert), to_pem(s.key)};
    Made e = make_cert("localhost", "DNS:localhost,IP:127.0.0.1", ca_m.cert, ca_m.key, -30, -1);
    expired = {to_pem(e.cert), to_pem(e.key)};
    Made c = make_cert("a client", "DNS:client", ca_m.cert, ca_m.key);
    client = {to_pem(c.cert), to_pem(c.key)};
    Made other = make_cert("another CA", nullptr, nullptr, nullptr);
    Made o = make_cert("localhost", "DNS:localhost,IP:127.0.0.1", other.cert, other.key);
    other_ca_server = {to_pem(o.cert), to_pem(o.key)};
    for (Made m : {ca_m, s, e, c, other, o}) {
      X509_free(m.cert);
      EVP_PKEY_free(m.key);
    }
  }
};

inline const Pki& pki() {
  static const Pki* p = new Pki;
  return *p;
}

}  // namespace gort::test

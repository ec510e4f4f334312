// stdlib/net/tls_session_cache.cpp — ClientSessionCache: Go's LRU client
// session cache, over OpenSSL's SSL_SESSION objects.
//
// A list in use order (front: most recent) and a map from key to its list
// node, under one lock taken for a lookup or an insertion, never across a
// park or an OpenSSL call that could do I/O. Freeing a dropped session
// (SSL_SESSION_free) happens after the lock is released.
#include "stdlib/net/tls_session_cache.hpp"

#include <openssl/x509.h>

#include <list>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "gort/sync.hpp"

namespace gort::tls {

struct ClientSessionCache::Impl {
  struct Entry {
    std::string key;
    SSL_SESSION* session;
    bool verified;  // made by a client that verified the server
  };
  size_t capacity;
  mutable Mutex mu;  // a leaf: held for list and map updates only
  std::list<Entry> lru ABSL_GUARDED_BY(mu);
  std::unordered_map<std::string, std::list<Entry>::iterator> index ABSL_GUARDED_BY(mu);
};

ClientSessionCache::ClientSessionCache(int capacity) : impl_(std::make_unique<Impl>()) {
  impl_->capacity = capacity < 1 ? 64 : static_cast<size_t>(capacity);
}

ClientSessionCache::~ClientSessionCache() {
  for (Impl::Entry& e : impl_->lru) SSL_SESSION_free(e.session);
}

size_t ClientSessionCache::size() const {
  impl_->mu.lock();
  size_t n = impl_->lru.size();
  impl_->mu.unlock();
  return n;
}

namespace {

// Go drops a session whose server certificate has expired rather than
// offer it.
bool expired(const SSL_SESSION* s) {
  X509* leaf = SSL_SESSION_get0_peer(const_cast<SSL_SESSION*>(s));
  return leaf != nullptr && X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0;
}

}  // namespace

SSL_SESSION* SessionCacheAccess::get(ClientSessionCache& c, const std::string& key, bool verified) {
  ClientSessionCache::Impl& m = *c.impl_;
  SSL_SESSION* stale = nullptr;
  SSL_SESSION* out = nullptr;
  m.mu.lock();
  auto it = m.index.find(key);
  // One made without verification stays for the Config that made it.
  if (it != m.index.end() && (!verified || it->second->verified)) {
    ClientSessionCache::Impl::Entry& e = *it->second;
    if (expired(e.session)) {
      stale = e.session;
      m.lru.erase(it->second);
      m.index.erase(it);
    } else {
      m.lru.splice(m.lru.begin(), m.lru, it->second);
      SSL_SESSION_up_ref(e.session);
      out = e.session;
    }
  }
  m.mu.unlock();
  SSL_SESSION_free(stale);
  return out;
}

void SessionCacheAccess::put(ClientSessionCache& c, const std::string& key, SSL_SESSION* s, bool verified) {
  ClientSessionCache::Impl& m = *c.impl_;
  SSL_SESSION* old = nullptr;
  SSL_SESSION* evicted = nullptr;
  m.mu.lock();
  auto it = m.index.find(key);
  if (it != m.index.end()) {
    old = it->second->session;
    it->second->session = s;
    it->second->verified = verified;
    m.lru.splice(m.lru.begin(), m.lru, it->second);
  } else {
    m.lru.push_front({key, s, verified});
    m.index.emplace(key, m.lru.begin());
    if (m.lru.size() > m.capacity) {
      evicted = m.lru.back().session;
      m.index.erase(m.lru.back().key);
      m.lru.pop_back();
    }
  }
  m.mu.unlock();
  SSL_SESSION_free(old);
  SSL_SESSION_free(evicted);
}

void SessionCacheAccess::drop(ClientSessionCache& c, const std::string& key, const SSL_SESSION* s) {
  ClientSessionCache::Impl& m = *c.impl_;
  SSL_SESSION* gone = nullptr;
  m.mu.lock();
  auto it = m.index.find(key);
  if (it != m.index.end() && it->second->session == s) {
    gone = it->second->session;
    m.lru.erase(it->second);
    m.index.erase(it);
  }
  m.mu.unlock();
  SSL_SESSION_free(gone);
}

}  // namespace gort::tls

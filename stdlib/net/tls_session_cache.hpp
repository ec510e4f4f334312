// stdlib/net/tls_session_cache.hpp — what tls.cpp asks of a
// ClientSessionCache (gort/tls.hpp): a session to offer, a new one to keep,
// a failed one to drop. OpenSSL's reference counts cross this boundary:
// get() returns a reference the caller frees, put() takes one.
#pragma once

#include "stdlib/net/room.hpp"

#include <openssl/ssl.h>

#include <string>

#include "gort/tls.hpp"

namespace gort::tls {

struct SessionCacheAccess {
  // The session stored under key that a client verifying as `verified`
  // may offer (one reference, the caller's), or null: none, one made
  // without verification for a verifying client, or one whose server
  // certificate has expired (dropped). Marks it most recently used.
  static SSL_SESSION* get(ClientSessionCache& c, const std::string& key, bool verified);
  // Stores s under key (its reference becomes the cache's), replacing the
  // key's earlier session; drops the least recently used past capacity.
  static void put(ClientSessionCache& c, const std::string& key, SSL_SESSION* s, bool verified);
  // Drops the session under key, if it is still `s` (a resumption of it
  // failed; a newer one stored meanwhile stays).
  static void drop(ClientSessionCache& c, const std::string& key, const SSL_SESSION* s);
};

}  // namespace gort::tls

// store.hpp — the key space: a hash map split into 16 shards, each behind
// its own gort::Mutex, with Redis-style expiry.
//
// Sharding keeps goroutines on different Ps from queueing on one lock; a
// gort::Mutex parks a waiting goroutine instead of blocking its thread.
// Commands that touch several keys (MGET, MSET, DEL, EXISTS) lock every
// shard involved, in shard order (so two such commands cannot deadlock),
// which makes them atomic as in Redis.
//
// Expiry is lazy plus active, as in Redis: a key past its deadline is
// removed when a command touches it, and a sweeper goroutine (see
// kv_server.cpp) calls sweep() every 100 ms to remove keys nobody touches.
// Each shard keeps a min-heap of (deadline, key); entries made stale by a
// later EXPIRE, PERSIST or SET are skipped when popped, and the heap is
// rebuilt when stale entries outnumber live ones, so it stays bounded.
//
// Nothing in here parks except Mutex::lock; no lock is held across I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gort/gort.hpp>

namespace kv {

// Milliseconds since the Unix epoch (Redis's mstime).
int64_t now_ms();

// Redis's stringmatchlen: * ? [abc] [^a-z] and \ escapes.
bool glob_match(std::string_view pattern, std::string_view s);

struct Entry {
  std::string value;
  int64_t expire_at = 0;  // ms since the epoch; 0: no expiry
};

class Store {
  struct Shard;

 public:
  static constexpr size_t kShards = 16;

  // A key in a shard locked by a Locked.
  class Ref {
   public:
    // The live entry, or nullptr.
    Entry* entry() const { return e_; }
    // The entry, created empty and without expiry if absent.
    Entry& create();
    void erase();
    // 0 removes the expiry.
    void set_expire(int64_t at);

   private:
    friend class Store;
    Ref(Shard* s, std::string_view key, Entry* e) : s_(s), key_(key), e_(e) {}
    Shard* s_;
    std::string_view key_;
    Entry* e_;
  };

  // Locks the shards of `keys` (in shard order) for its lifetime.
  class Locked {
   public:
    Locked(Store& store, std::span<const std::string_view> keys);
    ~Locked();
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;
    // One of the keys: expired entries are removed on the way (lazy expiry).
    Ref ref(std::string_view key);

   private:
    Store& store_;
    uint32_t mask_ = 0;  // bit i: shard i is locked
    int64_t now_;
  };

  // Runs f(Ref&) with the key's shard locked; returns what f returns.
  template <class F>
  decltype(auto) with(std::string_view key, F&& f) {
    std::string_view keys[1] = {key};
    Locked lock(*this, keys);
    Ref r = lock.ref(key);
    return std::forward<F>(f)(r);
  }

  // Live keys that match a glob pattern (KEYS).
  std::vector<std::string> keys(std::string_view pattern);
  // Number of keys, expired ones not yet removed included (as Redis's DBSIZE).
  int64_t size();
  void flush();
  // Removes up to max_per_shard expired keys per shard; returns how many.
  size_t sweep(size_t max_per_shard);

 private:
  // Transparent hashing: look up std::string keys by std::string_view.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  using Deadline = std::pair<int64_t, std::string>;

  struct Shard {
    gort::Mutex mu;
    std::unordered_map<std::string, Entry, Hash, std::equal_to<>> map;  // guarded by mu
    std::priority_queue<Deadline, std::vector<Deadline>, std::greater<>> deadlines;  // guarded by mu
    size_t volatile_keys = 0;  // entries with expire_at != 0; guarded by mu

    void erase(std::unordered_map<std::string, Entry, Hash, std::equal_to<>>::iterator it);
    void push_deadline(int64_t at, std::string_view key);
  };

  static size_t shard_index(std::string_view key) { return Hash()(key) % kShards; }

  Shard shards_[kShards];
};

}  // namespace kv

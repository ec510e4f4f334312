// store.cpp — see store.hpp.
#include "store.hpp"

#include <mutex>

namespace kv {

int64_t now_ms() { return absl::ToUnixMillis(absl::Now()); }

namespace {

// One pattern element at p[*pi] against c; advances *pi past it. Classes:
// [abc], [^abc], [a-z]; \x escapes x. An unterminated class ends with the
// pattern, as in Redis.
bool match_one(std::string_view p, size_t* pi, char c) {
  size_t i = *pi;
  if (p[i] == '?') {
    *pi = i + 1;
    return true;
  }
  if (p[i] == '\\' && i + 1 < p.size()) {
    *pi = i + 2;
    return p[i + 1] == c;
  }
  if (p[i] != '[') {
    *pi = i + 1;
    return p[i] == c;
  }
  i++;
  bool negate = i < p.size() && p[i] == '^';
  if (negate) i++;
  bool match = false;
  while (i < p.size() && p[i] != ']') {
    if (p[i] == '\\' && i + 1 < p.size()) {
      match |= p[i + 1] == c;
      i += 2;
    } else if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
      char lo = p[i], hi = p[i + 2];
      if (lo > hi) std::swap(lo, hi);
      match |= c >= lo && c <= hi;
      i += 3;
    } else {
      match |= p[i] == c;
      i++;
    }
  }
  *pi = i < p.size() ? i + 1 : i;  // past ']'
  return match != negate;
}

}  // namespace

// Iterative, backtracking only to the last '*': O(|p|·|s|) at worst, never
// exponential (every other element matches exactly one character).
bool glob_match(std::string_view p, std::string_view s) {
  size_t pi = 0, si = 0;
  size_t star = std::string_view::npos, star_si = 0;
  while (si < s.size()) {
    if (pi < p.size() && p[pi] == '*') {
      while (pi < p.size() && p[pi] == '*') pi++;
      if (pi == p.size()) return true;
      star = pi;
      star_si = si;
      continue;
    }
    size_t next = pi;
    if (pi < p.size() && match_one(p, &next, s[si])) {
      pi = next;
      si++;
      continue;
    }
    if (star == std::string_view::npos) return false;
    pi = star;
    si = ++star_si;
  }
  while (pi < p.size() && p[pi] == '*') pi++;
  return pi == p.size();
}

void Store::Shard::erase(std::unordered_map<std::string, Entry, Hash, std::equal_to<>>::iterator it) {
  if (it->second.expire_at != 0) volatile_keys--;
  map.erase(it);
}

void Store::Shard::push_deadline(int64_t at, std::string_view key) {
  deadlines.emplace(at, std::string(key));
  // Stale entries (overwritten or removed deadlines) outnumber live ones:
  // rebuild from the map so that the heap stays O(volatile keys).
  if (deadlines.size() > 2 * volatile_keys + 1024) {
    std::vector<Deadline> live;
    live.reserve(volatile_keys);
    for (const auto& [k, e] : map) {
      if (e.expire_at != 0) live.emplace_back(e.expire_at, k);
    }
    deadlines = decltype(deadlines)(std::greater<>(), std::move(live));
  }
}

Entry& Store::Ref::create() {
  if (e_ == nullptr) e_ = &s_->map.try_emplace(std::string(key_)).first->second;
  return *e_;
}

void Store::Ref::erase() {
  if (e_ == nullptr) return;
  s_->erase(s_->map.find(key_));
  e_ = nullptr;
}

void Store::Ref::set_expire(int64_t at) {
  if (e_ == nullptr || e_->expire_at == at) return;
  if (e_->expire_at == 0) s_->volatile_keys++;
  if (at == 0) s_->volatile_keys--;
  e_->expire_at = at;
  if (at != 0) s_->push_deadline(at, key_);
}

Store::Locked::Locked(Store& store, std::span<const std::string_view> keys)
    : store_(store), now_(now_ms()) {
  for (std::string_view k : keys) mask_ |= 1u << shard_index(k);
  for (size_t i = 0; i < kShards; i++) {
    if (mask_ & (1u << i)) store_.shards_[i].mu.lock();
  }
}

Store::Locked::~Locked() {
  for (size_t i = kShards; i-- > 0;) {
    if (mask_ & (1u << i)) store_.shards_[i].mu.unlock();
  }
}

Store::Ref Store::Locked::ref(std::string_view key) {
  Shard& s = store_.shards_[shard_index(key)];
  auto it = s.map.find(key);
  if (it == s.map.end()) return Ref(&s, key, nullptr);
  if (it->second.expire_at != 0 && it->second.expire_at <= now_) {
    s.erase(it);  // lazy expiry
    return Ref(&s, key, nullptr);
  }
  return Ref(&s, key, &it->second);
}

std::vector<std::string> Store::keys(std::string_view pattern) {
  std::vector<std::string> out;
  int64_t now = now_ms();
  bool all = pattern == "*";
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    for (const auto& [k, e] : s.map) {
      if (e.expire_at != 0 && e.expire_at <= now) continue;
      if (all || glob_match(pattern, k)) out.push_back(k);
    }
  }
  return out;
}

int64_t Store::size() {
  int64_t n = 0;
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    n += static_cast<int64_t>(s.map.size());
  }
  return n;
}

void Store::flush() {
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    s.map.clear();
    s.deadlines = {};
    s.volatile_keys = 0;
  }
}

size_t Store::sweep(size_t max_per_shard) {
  size_t removed = 0;
  for (Shard& s : shards_) {
    int64_t now = now_ms();
    std::lock_guard lock(s.mu);
    for (size_t n = 0; n < max_per_shard && !s.deadlines.empty(); n++) {
      const Deadline& d = s.deadlines.top();
      if (d.first > now) break;
      auto it = s.map.find(d.second);
      // Skip stale entries: the key was removed or its deadline changed.
      if (it != s.map.end() && it->second.expire_at == d.first) {
        s.erase(it);
        removed++;
      }
      s.deadlines.pop();
    }
  }
  return removed;
}

}  // namespace kv

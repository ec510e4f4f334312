// resp.hpp — the Redis protocol (RESP2): an incremental request parser and
// reply writers. No gort here: the parser works on a byte buffer that the
// connection goroutine fills with Conn::read.
//
// Requests come in two forms, told apart by the first byte:
//   multibulk  *2\r\n$3\r\nGET\r\n$3\r\nkey\r\n   (what clients send)
//   inline     GET key\r\n                       (telnet/nc; "quotes" work)
// The parser keeps its position between calls, so a command that arrives in
// many pieces is scanned once, not once per read (no quadratic re-parsing).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kv {

// Limits, as in Redis (proto-max-bulk-len is lower here: a sample's bound).
inline constexpr int64_t kMaxMultibulk = 1024 * 1024;        // arguments per command
inline constexpr int64_t kMaxBulk = 16 * 1024 * 1024;        // bytes per argument
inline constexpr size_t kMaxInline = 64 * 1024;              // bytes per inline command
inline constexpr size_t kMaxQueryBuffer = 64 * 1024 * 1024;  // unparsed bytes per client

// Redis's string2ll: an optional '-', digits, no leading zeros, no '+', no
// spaces, within int64.
inline bool parse_int64(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  if (s == "0") {
    *out = 0;
    return true;
  }
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size() || s[i] < '1' || s[i] > '9') return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

class Parser {
 public:
  enum class Result { kCommand, kNeedMore, kError };

  // Parses the next command from buf[pos()...]. kCommand: *args views into
  // buf (valid until buf changes) and pos() moves past the command (args
  // may be empty: an empty line or "*0", to be ignored). kNeedMore: read
  // more and call again. kError: *error is Redis's protocol error text; the
  // connection should reply with it and close.
  Result next(const std::string& buf, std::vector<std::string_view>* args, std::string* error) {
    args->clear();
    for (;;) {
      if (left_ == 0) return done(args, buf);
      if (pos_ + scan_ >= buf.size()) return Result::kNeedMore;
      if (left_ < 0) {  // start of a command
        if (buf[pos_] != '*') return parse_inline(buf, args, error);
        size_t eol = buf.find("\r\n", pos_);
        if (eol == std::string::npos) {
          if (buf.size() - pos_ > kMaxInline) return fail(error, "too big mbulk count string");
          return Result::kNeedMore;
        }
        int64_t n;
        if (!parse_int64(std::string_view(buf).substr(pos_ + 1, eol - pos_ - 1), &n) ||
            n > kMaxMultibulk) {
          return fail(error, "invalid multibulk length");
        }
        scan_ = eol + 2 - pos_;
        if (n <= 0) return done(args, buf);
        left_ = n;
        spans_.clear();
        continue;
      }
      // One bulk string: $<len>\r\n<bytes>\r\n
      size_t at = pos_ + scan_;
      if (buf[at] != '$') {
        return fail(error, std::string("expected '$', got '") + buf[at] + "'");
      }
      size_t eol = buf.find("\r\n", at);
      if (eol == std::string::npos) {
        if (buf.size() - at > kMaxInline) return fail(error, "too big bulk count string");
        return Result::kNeedMore;
      }
      int64_t len;
      if (!parse_int64(std::string_view(buf).substr(at + 1, eol - at - 1), &len) || len < 0 ||
          len > kMaxBulk) {
        return fail(error, "invalid bulk length");
      }
      size_t data = eol + 2;
      if (buf.size() < data + static_cast<size_t>(len) + 2) return Result::kNeedMore;
      spans_.push_back({data - pos_, static_cast<size_t>(len)});
      scan_ = data + static_cast<size_t>(len) + 2 - pos_;
      left_--;
    }
  }

  // Where the next command starts in the buffer.
  size_t pos() const { return pos_; }
  // The caller dropped buf[0, pos()) (after handling the commands in it).
  void consumed_prefix() { pos_ = 0; }

 private:
  Result fail(std::string* error, std::string_view what) {
    *error = "ERR Protocol error: ";
    *error += what;
    return Result::kError;
  }

  Result done(std::vector<std::string_view>* args, const std::string& buf) {
    for (auto [off, len] : spans_) args->push_back(std::string_view(buf).substr(pos_ + off, len));
    pos_ += scan_;
    scan_ = 0;
    left_ = -1;
    spans_.clear();
    return Result::kCommand;
  }

  // Redis's sdssplitargs: words separated by spaces; "double quotes" with
  // \n \r \t \b \a \\ \" \xHH escapes; 'single quotes' with \'. A closing
  // quote must be followed by a space or the end of the line.
  Result parse_inline(const std::string& buf, std::vector<std::string_view>* args,
                      std::string* error) {
    size_t nl = buf.find('\n', pos_);
    if (nl == std::string::npos) {
      if (buf.size() - pos_ > kMaxInline) return fail(error, "too big inline request");
      return Result::kNeedMore;
    }
    std::string_view line = std::string_view(buf).substr(pos_, nl - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    inline_args_.clear();
    size_t i = 0;
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; };
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    for (;;) {
      while (i < line.size() && is_space(line[i])) i++;
      if (i == line.size()) break;
      std::string word;
      char quote = 0;
      for (;;) {
        if (i == line.size()) {
          if (quote) return fail(error, "unbalanced quotes in request");
          break;
        }
        char c = line[i];
        if (quote == '"') {
          if (c == '\\' && i + 3 < line.size() && line[i + 1] == 'x' && hex(line[i + 2]) >= 0 &&
              hex(line[i + 3]) >= 0) {
            word += static_cast<char>(hex(line[i + 2]) * 16 + hex(line[i + 3]));
            i += 4;
            continue;
          }
          if (c == '\\' && i + 1 < line.size()) {
            char e = line[i + 1];
            word += e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e == 'b' ? '\b' : e == 'a' ? '\a' : e;
            i += 2;
            continue;
          }
          if (c == '"') {
            if (i + 1 < line.size() && !is_space(line[i + 1])) {
              return fail(error, "unbalanced quotes in request");
            }
            i++;
            break;
          }
          word += c;
          i++;
        } else if (quote == '\'') {
          if (c == '\\' && i + 1 < line.size() && line[i + 1] == '\'') {
            word += '\'';
            i += 2;
            continue;
          }
          if (c == '\'') {
            if (i + 1 < line.size() && !is_space(line[i + 1])) {
              return fail(error, "unbalanced quotes in request");
            }
            i++;
            break;
          }
          word += c;
          i++;
        } else {
          if (is_space(c)) break;
          if (c == '"' || c == '\'') {
            quote = c;
            i++;
            continue;
          }
          word += c;
          i++;
        }
      }
      inline_args_.push_back(std::move(word));
    }
    for (const std::string& a : inline_args_) args->push_back(a);
    pos_ = nl + 1;
    return Result::kCommand;
  }

  size_t pos_ = 0;   // start of the current command in the buffer
  size_t scan_ = 0;  // bytes of it parsed so far
  int64_t left_ = -1;  // bulk strings still expected; -1: between commands
  std::vector<std::pair<size_t, size_t>> spans_;  // parsed bulks: offset from pos_, length
  std::vector<std::string> inline_args_;          // an inline command's words (unescaped)
};

// ---- replies ----

inline void append_int(std::string& out, int64_t v) {
  char b[24];
  out.append(b, std::to_chars(b, b + sizeof b, v).ptr);
}
inline void reply_simple(std::string& out, std::string_view s) {
  out += '+';
  out += s;
  out += "\r\n";
}
// `msg` starts with the error code: "ERR ...", "WRONGTYPE ...". Line breaks
// in it become spaces (a reply is one line).
inline void reply_error(std::string& out, std::string_view msg) {
  out += '-';
  for (char c : msg) out += (c == '\r' || c == '\n') ? ' ' : c;
  out += "\r\n";
}
inline void reply_int(std::string& out, int64_t v) {
  out += ':';
  append_int(out, v);
  out += "\r\n";
}
inline void reply_bulk(std::string& out, std::string_view s) {
  out += '$';
  append_int(out, static_cast<int64_t>(s.size()));
  out += "\r\n";
  out += s;
  out += "\r\n";
}
inline void reply_null(std::string& out) { out += "$-1\r\n"; }
inline void reply_array(std::string& out, size_t n) {
  out += '*';
  append_int(out, static_cast<int64_t>(n));
  out += "\r\n";
}

}  // namespace kv

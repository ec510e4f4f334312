// chat_server — a line-based chat over TCP, built the way Go programs share
// state: by communicating. No locks guard the chat state.
//
//   reader goroutine ─┐ join / leave / message / who        ┌─> out chan ─> writer goroutine ─> client
//   reader goroutine ─┼──────────────────────> broadcaster ─┼─> out chan ─> writer goroutine ─> client
//   reader goroutine ─┘       (channels)     owns the set   └─> out chan ─> writer goroutine ─> client
//
//   - Each connection has a reader goroutine (this one reads lines and sends
//     them to the broadcaster) and a writer goroutine (drains the client's
//     buffered outgoing channel into the socket).
//   - The broadcaster goroutine alone owns the set of clients and their
//     names; joins, leaves and messages reach it over channels, and it
//     serves them one at a time in a select loop.
//   - Fan-out never blocks: the broadcaster offers each message to each
//     client's outgoing channel with a select that has a default case. A
//     client whose buffer is full (it stopped reading) is dropped, so one
//     slow client cannot stall everyone. Messages are shared, immutable
//     strings (std::shared_ptr<const std::string>): one copy per message,
//     not per recipient.
//   - Bounded: lines are cut at 4 KiB, each client buffers at most
//     -client-buffer messages, a writer gives up on a client after 10 s
//     without progress, at most -max-conns connections, 60 s to send a
//     nickname.
//   - Graceful shutdown on SIGINT/SIGTERM: the broadcaster says goodbye to
//     everyone and closes the outgoing channels; writers flush and hang up.
//
// Protocol: the first line a client sends is its nickname (an empty line
// gets "guestN"; a taken name gets a suffix). Every later line goes to all
// the others as "name: text". "/who" lists who is online, "/quit" leaves.
// Server notices start with "*** ".
//
// Usage: chat_server [-listen 127.0.0.1:7001] [-procs N] [-max-conns 10000]
//                    [-client-buffer 256]
// Prints "listening on HOST:PORT" (use -listen 127.0.0.1:0 for a free port).
// Try: chat_server & then, in two terminals, `nc 127.0.0.1 7001`.
#include <gort/gort.hpp>

#include <signal.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr size_t kMaxLine = 4096;
constexpr size_t kMaxName = 32;
constexpr absl::Duration kNameTimeout = absl::Seconds(60);
constexpr absl::Duration kWriteTimeout = absl::Seconds(10);

struct Options {
  std::string listen = "127.0.0.1:7001";
  int procs = 0;
  int max_conns = 10000;
  int client_buffer = 256;
};

// A line on its way to clients: shared by all recipients, never modified.
using Line = std::shared_ptr<const std::string>;

Line make_line(std::string s) {
  s += '\n';
  return std::make_shared<const std::string>(std::move(s));
}

// ---- the broadcaster -------------------------------------------------------

struct Join {
  int64_t id;
  std::string name;  // wanted; the broadcaster makes it unique
  gort::Chan<Line> out;
};

struct Message {
  int64_t from;
  std::string text;
};

// The broadcaster's inputs. Copies share the channels.
struct Hub {
  gort::Chan<Join> join = gort::make_chan<Join>();
  gort::Chan<int64_t> leave = gort::make_chan<int64_t>();
  gort::Chan<Message> messages = gort::make_chan<Message>(64);
  gort::Chan<int64_t> who = gort::make_chan<int64_t>();
  gort::Chan<std::monostate> shutdown = gort::make_chan<std::monostate>();  // closed by main
};

// Sends v on ch unless the hub shuts down first; false if it did.
template <class T>
bool send_to_hub(const gort::Chan<T>& ch, T v, const Hub& hub) {
  bool sent = false;
  gort::select(gort::on_send(ch, std::move(v), [&] { sent = true; }), gort::on_recv(hub.shutdown));
  return sent;
}

void broadcaster(Hub hub) {
  struct Client {
    std::string name;
    gort::Chan<Line> out;
  };
  std::map<int64_t, Client> clients;  // only this goroutine touches it: no lock

  // Offers a line to one client without blocking; false if its buffer is full.
  auto offer = [](const Client& c, const Line& line) {
    bool sent = false;
    gort::select(gort::on_send(c.out, line, [&] { sent = true; }), gort::on_default());
    return sent;
  };
  // Removes a client; closing its channel tells its writer to finish.
  auto remove = [&](int64_t id) {
    auto it = clients.find(id);
    std::string name = std::move(it->second.name);
    it->second.out.close();
    clients.erase(it);
    return name;
  };
  // Sends to everyone but `except`; drops the clients that cannot keep up
  // and tells everyone, which may drop more.
  auto broadcast = [&](std::string text, int64_t except) {
    std::vector<Line> pending{make_line(std::move(text))};
    while (!pending.empty()) {
      Line line = pending.back();
      pending.pop_back();
      std::vector<int64_t> slow;
      for (const auto& [id, c] : clients) {
        if (id != except && !offer(c, line)) slow.push_back(id);
      }
      for (int64_t id : slow) {
        pending.push_back(make_line("*** " + remove(id) + " was dropped (too slow)"));
      }
      except = -1;  // notices go to everyone
    }
  };
  auto names = [&] {
    std::string s;
    for (const auto& [id, c] : clients) s += (s.empty() ? "" : ", ") + c.name;
    return s;
  };

  for (bool running = true; running;) {
    gort::select(
        gort::on_recv(hub.join, [&](std::optional<Join> j) {
          if (!j) return;  // (never closed)
          std::string name = j->name;
          for (const auto& [id, c] : clients) {
            if (c.name == name) {
              name += "_" + std::to_string(j->id);
              break;
            }
          }
          clients[j->id] = Client{name, j->out};
          std::string online = names();
          offer(clients[j->id], make_line("*** welcome, " + name + "! online: " + online));
          broadcast("*** " + name + " has joined", j->id);
        }),
        gort::on_recv(hub.leave, [&](std::optional<int64_t> id) {
          // Unknown if it was dropped already.
          if (id && clients.count(*id)) broadcast("*** " + remove(*id) + " has left", -1);
        }),
        gort::on_recv(hub.messages, [&](std::optional<Message> m) {
          if (!m) return;
          auto it = clients.find(m->from);
          if (it != clients.end()) broadcast(it->second.name + ": " + m->text, m->from);
        }),
        gort::on_recv(hub.who, [&](std::optional<int64_t> id) {
          auto it = id ? clients.find(*id) : clients.end();
          if (it != clients.end()) offer(it->second, make_line("*** online: " + names()));
        }),
        gort::on_recv(hub.shutdown, [&] {
          Line bye = make_line("*** server shutting down");
          for (auto& [id, c] : clients) {
            offer(c, bye);
            c.out.close();
          }
          clients.clear();
          running = false;
        }));
  }
}

// ---- one connection ------------------------------------------------------------

// Reads lines of at most kMaxLine bytes (the rest of a longer line is
// dropped), without "\r\n"; control characters become '?'.
class LineReader {
 public:
  explicit LineReader(gort::net::Conn& c) : c_(c) {}

  // The next line; nullopt at end of stream, on an error or a timeout.
  std::optional<std::string> next() {
    for (;;) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (skipping_) {  // the tail of an overlong line
          skipping_ = false;
          continue;
        }
        return clean(std::move(line));
      }
      if (buf_.size() >= kMaxLine) {
        std::string line = buf_.substr(0, kMaxLine);
        buf_.clear();
        bool was_skipping = skipping_;
        skipping_ = true;
        if (!was_skipping) return clean(std::move(line));
        continue;
      }
      char chunk[4096];
      auto n = c_.read(absl::MakeSpan(chunk));
      if (!n.ok() || *n == 0) return std::nullopt;
      buf_.append(chunk, *n);
    }
  }

 private:
  static std::string clean(std::string s) {
    if (!s.empty() && s.back() == '\r') s.pop_back();
    for (char& ch : s) {
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
    }
    return s;
  }

  gort::net::Conn& c_;
  std::string buf_;
  bool skipping_ = false;
};

// Drains the client's outgoing channel into its socket until the channel is
// closed (the client left, was dropped, or the server shuts down), then
// hangs up, which also wakes the reader if it is still blocked.
void writer(gort::net::Conn* c, gort::Chan<Line> out, gort::Chan<std::monostate> done) {
  bool ok = true;
  for (Line line : out) {
    if (!ok) continue;  // keep draining; the broadcaster will drop us
    (void)c->set_write_deadline(absl::Now() + kWriteTimeout);
    if (!c->write(absl::MakeConstSpan(*line)).ok()) {
      ok = false;
      (void)c->close();  // wakes the reader: it sends leave
    }
  }
  (void)c->close();
  done.close();
}

std::string nickname(std::string_view line, int64_t id) {
  std::string name;
  for (char ch : line) {
    if (name.size() == kMaxName) break;
    if (ch == ' ' || ch == '\t') {
      if (!name.empty() && name.back() != '_') name += '_';
    } else {
      name += ch;
    }
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  if (name.empty() || name.starts_with("***")) name = "guest" + std::to_string(id);
  return name;
}

void handle(gort::net::Conn& conn, const Hub& hub, int64_t id, size_t client_buffer) {
  LineReader lines(conn);
  (void)conn.set_read_deadline(absl::Now() + kNameTimeout);
  std::optional<std::string> first = lines.next();
  if (!first) return;
  (void)conn.set_read_deadline(absl::InfiniteFuture());  // chat clients may idle

  auto out = gort::make_chan<Line>(client_buffer);
  auto writer_done = gort::make_chan<std::monostate>();
  gort::go(writer, &conn, out, writer_done);

  if (send_to_hub(hub.join, Join{id, nickname(*first, id), out}, hub)) {
    while (std::optional<std::string> line = lines.next()) {
      if (*line == "/quit") break;
      if (*line == "/who") {
        if (!send_to_hub(hub.who, id, hub)) break;
        continue;
      }
      if (line->empty()) continue;
      if (!send_to_hub(hub.messages, Message{id, std::move(*line)}, hub)) break;
    }
    // The broadcaster closes `out` when it processes the leave (or has
    // already, if it dropped us or shut down).
    send_to_hub(hub.leave, id, hub);
  } else {
    out.close();  // never joined: nobody else will close it
  }
  writer_done.recv();  // the writer is done with conn before conn goes away
}

// ---- the server: gort::net::Server, shutdown ------------------------------

bool parse_int(std::string_view s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && *out >= 0;
}

bool parse_flags(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; i++) {
    std::string_view a = argv[i];
    if (a.starts_with("--")) a.remove_prefix(2);
    else if (a.starts_with("-")) a.remove_prefix(1);
    else return false;
    std::string_view name = a, value;
    if (size_t eq = a.find('='); eq != std::string_view::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    } else if (i + 1 < argc && name != "h" && name != "help") {
      value = argv[++i];
    } else {
      return false;
    }
    if (name == "listen") o->listen = std::string(value);
    else if (name == "procs") { if (!parse_int(value, &o->procs)) return false; }
    else if (name == "max-conns") { if (!parse_int(value, &o->max_conns) || o->max_conns < 1) return false; }
    else if (name == "client-buffer") { if (!parse_int(value, &o->client_buffer) || o->client_buffer < 1) return false; }
    else return false;
  }
  return true;
}

int serve(const Options& o) {
  auto ln = gort::net::listen("tcp", o.listen);
  if (!ln.ok()) {
    std::fprintf(stderr, "chat_server: %s\n", gort::error_text(ln).c_str());
    return 1;
  }
  // From here on SIGINT and SIGTERM arrive on this channel (Go's
  // signal.Notify) instead of ending the process: set up before the port
  // is announced.
  auto sigs = gort::make_chan<int>(1);
  gort::signal::notify(sigs, {SIGINT, SIGTERM});
  std::printf("listening on %s\n", ln->addr().c_str());
  std::fflush(stdout);

  Hub hub;
  auto broadcaster_done = gort::make_chan<std::monostate>();
  gort::go([hub, broadcaster_done] {
    broadcaster(hub);
    broadcaster_done.close();
  });

  // A connection per client (gort/server.hpp): the server runs the accept
  // loop and the connection limit, and keeps the set of live connections.
  size_t client_buffer = static_cast<size_t>(o.client_buffer);
  std::atomic<int64_t> next_id{1};
  gort::net::ServerConfig scfg;
  scfg.max_conns = o.max_conns;
  gort::net::Server srv(
      [&hub, &next_id, client_buffer](gort::net::ServerConn& c) {
        handle(*c.net_conn(), hub, next_id.fetch_add(1), client_buffer);
      },
      scfg);
  auto served = gort::make_chan<absl::Status>(1);
  gort::go([&, served] { served.send(srv.serve(*ln)); });

  // Wait for SIGINT or SIGTERM (a channel value: gort::signal) or for the
  // accept loop to fail.
  bool stopping = false;
  absl::Status accept_err;
  gort::select(gort::on_recv(sigs, [&](std::optional<int>) { stopping = true; }),
               gort::on_recv(served, [&](std::optional<absl::Status> s) { accept_err = *s; }));
  gort::signal::stop(sigs);
  (void)ln->close();     // no one joins from here on (serve returns)
  hub.shutdown.close();  // the broadcaster says goodbye and closes every outgoing channel
  broadcaster_done.recv();
  {
    // Writers flush the goodbye and hang up; then the rest (e.g. still to
    // send a nickname) are cut off.
    auto [ctx, cancel] = gort::with_timeout(gort::background(), absl::Seconds(2));
    if (!srv.shutdown(ctx).ok()) (void)srv.close();
    cancel();
  }
  if (stopping) (void)served.recv();
  if (stopping) {
    std::fprintf(stderr, "chat_server: shutting down\n");
    return 0;
  }
  std::fprintf(stderr, "chat_server: accept: %s\n", gort::error_text(accept_err).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_flags(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [-listen 127.0.0.1:7001] [-procs N] [-max-conns N] "
                 "[-client-buffer N]\n",
                 argv[0]);
    return 2;
  }
  gort::Config cfg;
  cfg.procs = o.procs;
  return gort::run([&o] { return serve(o); }, cfg);
}

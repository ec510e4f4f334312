// stdlib/net/server_impl.hpp — the server's state (gort/server.hpp), shared by
// server.cpp (the lifecycle) and server_idle.cpp (idle connections without a
// goroutine, and the pooled read buffers). Internal to stdlib/net.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gort/chan.hpp"
#include "gort/context.hpp"
#include "gort/server.hpp"
#include "gort/sync.hpp"
#include "stdlib/net/net_fd.hpp"
#include "stdlib/net/room.hpp"

namespace gort::net {

// std::lock_guard, with the annotations clang's analysis reads.
class ABSL_SCOPED_LOCKABLE Hold {
 public:
  explicit Hold(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~Hold() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

 private:
  Mutex& mu_;
};

// Prints `gort: panic serving ADDR: TYPE: what` for the exception being
// handled (Go's `http: panic serving`).
__attribute__((visibility("hidden"))) void report_panic(const ServerConn& sc);

// A connection of a session server, on the heap: it outlives the goroutine
// of a turn. C (net::Conn or tls::Conn) is the template below.
struct __attribute__((visibility("hidden"))) IdleConn {
  IdleConn(Server* srv, net::Conn* nc, tls::Conn* tc) : sc(srv, nc, tc) {}
  virtual ~IdleConn() = default;
  int fd() { return sc.nc_ != nullptr ? sc.nc_->native_handle() : sc.tc_->native_handle(); }

  ServerConn sc;
  std::unique_ptr<Session> session;
  // While idle, under IdlePoller::mu: on the poller's list, its idle
  // deadline and its place in the deadline heap (-1: none). The small
  // fields last: an idle connection pays for every byte of padding.
  // While its goroutine is kept (KeptList), the links and the word serve
  // that list instead, under KeptList::mu: a connection is on one list at
  // a time (it leaves the kept list before it is armed).
  IdleConn* idle_prev = nullptr;
  IdleConn* idle_next = nullptr;
  union {
    // Idle: its idle deadline (nanotime; kFarDeadline: none).
    int64_t deadline;
    // Kept: > 0, on the kept list since then (nanotime); -1, taken off it
    // by the sweeper, which expired its read deadline; 0, neither.
    int64_t kept_since = 0;
  };
  int32_t heap_index = -1;
  bool armed = false;
  bool in_epoll = false;  // added to the server's epoll set once
  // When it went idle, in ticks of 0.1 ms modulo 2^16 (in the padding):
  // the watcher tells a quick answer from a long idle (KeepCredit).
  uint16_t armed_tick = 0;
};

// Which connections keep their goroutine after a turn
// (ServerConfig::keep_goroutine). At most `credit` at once: one credit per
// answer that came within keep_goroutine (a kept goroutine's wait that
// ended with input, or an idle connection woken that soon), one less per
// kept goroutine whose wait ran out. A server whose clients answer at once
// keeps a goroutine for about as many connections as answer; a burst of
// connections that stay idle keeps none (each would hold a stack for the
// wait, and the stack pool keeps the stacks after it).
struct __attribute__((visibility("hidden"))) KeepCredit {
  static constexpr int32_t kMax = 4096;
  std::atomic<int32_t> credit{0};
  std::atomic<int32_t> kept{0};  // goroutines waiting with the connection now

  // True: keep this goroutine (release() after the wait).
  bool acquire() {
    int32_t k = kept.load(std::memory_order_relaxed);
    do {
      if (k >= credit.load(std::memory_order_relaxed)) return false;
    } while (!kept.compare_exchange_weak(k, k + 1, std::memory_order_relaxed));
    return true;
  }
  void release(bool answered) {
    kept.fetch_sub(1, std::memory_order_relaxed);
    add(answered ? 1 : -1);
  }
  void earn() { add(1); }
  // credit += d, kept within [0, kMax] however many add at once.
  void add(int32_t d) {
    int32_t c = credit.load(std::memory_order_relaxed);
    while (c + d >= 0 && c + d <= kMax && !credit.compare_exchange_weak(c, c + d, std::memory_order_relaxed)) {
    }
  }
  // In 0.1 ms, modulo 2^16, of a nanotime its caller has read anyway.
  static uint16_t tick(int64_t now) { return static_cast<uint16_t>(now / 100000); }
};

// The connections whose goroutine waits for the next input after a turn
// (ServerConfig::keep_goroutine), oldest first, and the goroutine that
// ends the waits that last longer (sweep_kept): it expires such a
// connection's read deadline, and its wait returns Waited::kLimit. One
// timer per sweep for the whole server, where a deadline per wait moved
// the connection's timer in its P's heap and back on every request.
struct __attribute__((visibility("hidden"))) KeptList {
  Mutex mu;  // a leaf but for the deadline the sweeper expires
  IdleConn* head ABSL_GUARDED_BY(mu) = nullptr;
  IdleConn* tail ABSL_GUARDED_BY(mu) = nullptr;
  bool sweeping ABSL_GUARDED_BY(mu) = false;  // sweep_kept runs

  // Appends ic, kept since `now`; true if the sweeper must be started.
  bool add(IdleConn* ic, int64_t now);
  // Takes ic off the list if it is still on it; true if the sweeper took
  // it off first (its read deadline is expired).
  bool remove(IdleConn* ic);
  void unlink_locked(IdleConn* ic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

template <class C>
struct __attribute__((visibility("hidden"))) IdleConnOf final : IdleConn {
  IdleConnOf(Server* srv, C c);
  C conn;
};

// The server's own epoll set of idle connections, watched by one goroutine
// parked on it through the runtime's poller (docs/net.md, "Idle connections
// without a goroutine").
struct __attribute__((visibility("hidden"))) IdlePoller {
  Mutex mu;  // after Server::Impl::mu
  int epfd = -1;
  internal::NetFD* ep ABSL_GUARDED_BY(mu) = nullptr;  // epfd in the runtime's poller
  bool started ABSL_GUARDED_BY(mu) = false;
  bool stopped ABSL_GUARDED_BY(mu) = false;
  IdleConn* armed ABSL_GUARDED_BY(mu) = nullptr;  // the idle connections, linked
  std::vector<IdleConn*> heap ABSL_GUARDED_BY(mu);  // by deadline, soonest first

  ~IdlePoller();
  void add_locked(IdleConn* ic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void remove_locked(IdleConn* ic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void heap_push(IdleConn* ic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void heap_remove(IdleConn* ic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void heap_up(size_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void heap_down(size_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void heap_swap(size_t i, size_t j) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

// Read buffers lent to connections while they hold input (ServerConn::buffer).
struct __attribute__((visibility("hidden"))) BufferPool {
  static constexpr size_t kKeep = 256;           // buffers kept for reuse
  static constexpr size_t kMaxCapacity = 64 << 10;  // larger ones are freed
  Mutex mu;
  std::vector<std::unique_ptr<std::string>> free ABSL_GUARDED_BY(mu);
  std::string* get();
  void put(std::string* b);
  ~BufferPool();
};

// Hidden, though Server is exported whole: nothing outside the library names it.
struct __attribute__((visibility("hidden"))) Server::Impl {
  Impl(Handler h, Sessions ss, const ServerConfig& c)
      : handler(std::move(h)), sessions(std::move(ss)), cfg(c), slots(c.max_conns > 0 ? c.max_conns : 1) {
    auto [b, bc] = with_cancel(background());
    base = std::move(b);
    cancel_base = std::move(bc);
    auto [s, sc] = with_cancel(background());
    stopping = std::move(s);
    cancel_stopping = std::move(sc);
  }

  const Handler handler;    // goroutine per connection, or
  const Sessions sessions;  // sessions in turns
  const ServerConfig cfg;
  Semaphore slots;  // used only with a limit
  Context base;     // ServerConn::context(): cancelled by close
  CancelFunc cancel_base;
  Context stopping;  // cancelled when shutdown or close begins
  CancelFunc cancel_stopping;
  Chan<std::monostate> all_done = make_chan<std::monostate>();

  KeepCredit keep;

  mutable Mutex mu;
  bool shutting_down ABSL_GUARDED_BY(mu) = false;
  bool closed ABSL_GUARDED_BY(mu) = false;
  int64_t live ABSL_GUARDED_BY(mu) = 0;
  size_t nconns ABSL_GUARDED_BY(mu) = 0;
  std::atomic<bool> stopping_flag{false};  // shutting_down, read without mu
  ServerConn* conns ABSL_GUARDED_BY(mu) = nullptr;
  // The listeners being served, to close them.
  std::vector<std::pair<void*, absl::Status (*)(void*)>> listeners ABSL_GUARDED_BY(mu);

  bool limited() const { return cfg.max_conns > 0; }

  // Counts one more accept loop or connection; false once stopping.
  bool enter() {
    Hold lock(mu);
    if (shutting_down) return false;
    live++;
    return true;
  }
  // Uncounts one. The last one out of a stopping server closes `all_done`
  // only after releasing mu, on a handle of its own: whoever waits on it
  // (~Server) may destroy the server, mu and all_done included, the moment
  // it is closed. So this is the caller's last touch of the server.
  void leave() {
    Chan<std::monostate> done;
    {
      Hold lock(mu);
      if (--live == 0 && shutting_down) done = all_done;
    }
    if (done) done.close();
  }

  // Begins a shutdown (or a close): no new connection or serve from now on.
  void begin_stop_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (shutting_down) return;
    shutting_down = true;
    stopping_flag.store(true, std::memory_order_seq_cst);
    cancel_stopping();
    if (live == 0) all_done.close();
  }

  absl::Status close_listeners_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    absl::Status first;
    for (auto& [ln, close] : listeners) {
      absl::Status s = close(ln);
      if (!s.ok() && !is_closed_error(s) && first.ok()) first = s;
    }
    listeners.clear();
    return first;
  }

  template <class L>
  absl::Status serve(Server* srv, L& ln);
  template <class C>
  void run_conn(Server* srv, C conn);
  template <class C>
  void run_session(Server* srv, C conn);

  void link_locked(ServerConn* sc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    sc->next_ = conns;
    if (conns != nullptr) conns->prev_ = sc;
    conns = sc;
    nconns++;
  }
  void unlink_locked(ServerConn* sc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (sc->prev_ != nullptr) sc->prev_->next_ = sc->next_;
    else conns = sc->next_;
    if (sc->next_ != nullptr) sc->next_->prev_ = sc->prev_;
    nconns--;
  }

  // Session servers (server_idle.cpp).
  IdlePoller idle;
  BufferPool buffers;
  KeptList kept;
  // Starts sweep_kept, counted in `live` (KeptList::add said to).
  void start_sweeper();
  // Ends the kept waits that passed keep_goroutine, oldest first, until
  // none is left or the server stops.
  void sweep_kept();
  // Runs turns until the connection waits without a goroutine (armed in
  // the poller) or ends (then finishes it).
  void run_turns(IdleConn* ic);
  // Ends a connection: off the list, closed, destroyed, its slot given
  // back, uncounted.
  void finish(IdleConn* ic);
  // Registers ic as idle; false if the server is stopping (ic is not).
  bool arm(IdleConn* ic);
  // Takes every idle connection out of the poller (shutdown and close);
  // the caller finishes them.
  std::vector<IdleConn*> claim_all_idle();
  // The poller's goroutine: starts the turns of connections with input,
  // ends those past their idle timeout.
  void watch();
};


}  // namespace gort::net

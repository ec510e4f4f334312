// tests/netpoll/hook_beast_test.cpp — Boost.Asio's synchronous API and
// Boost.Beast's synchronous HTTP client and server on goroutines: a
// blocking accept loop with a goroutine per connection, and many blocking
// clients, all parked on the poller (docs/blocking-libraries.md); and the
// client against the http_server sample.
// Boost 1.74's asio/awaitable.hpp uses std::exchange without <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include <atomic>
#include <string>

#include "gort/sync.hpp"
#include "tests/netpoll/hook_helpers.hpp"
#include "tests/netpoll/servers.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

using gort::test::ms_created;

class HookBeast : public gort::test::ProcsTest {};
INSTANTIATE_TEST_SUITE_P(Procs, HookBeast, ::testing::Values(1, 2), gort::test::procs_name);

// One GET on a fresh connection per round; the body of each answer.
std::string get(asio::io_context& ioc, const tcp::endpoint& ep, const std::string& target, int rounds) {
  tcp::socket s(ioc);
  s.connect(ep);
  std::string last;
  for (int k = 0; k < rounds; k++) {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(s, req);
    beast::flat_buffer b;
    http::response<http::string_body> res;
    http::read(s, b, res);
    last = res.body();
  }
  return last;
}

TEST_P(HookBeast, SynchronousServerAndClients) {
  run_test([] {
    int ms_before = ms_created();
    asio::io_context ioc;
    tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    tcp::endpoint ep = acceptor.local_endpoint();
    constexpr int kClients = 30, kRounds = 5;
    gort::WaitGroup served;
    served.add(1);
    gort::go([&] {
      for (int i = 0; i < kClients; i++) {
        auto conn = std::make_shared<tcp::socket>(ioc);
        acceptor.accept(*conn);  // blocking accept: parks
        served.add(1);
        gort::go([&, conn]() mutable {
          beast::error_code ec;
          beast::flat_buffer b;
          for (;;) {
            http::request<http::string_body> req;
            http::read(*conn, b, req, ec);
            if (ec) break;
            http::response<http::string_body> res{http::status::ok, req.version()};
            res.body() = "hello " + std::string(req.target());
            res.prepare_payload();
            http::write(*conn, res, ec);
            if (ec) break;
          }
          // The socket goes before done(): once the last done() lets the
          // test return, its io_context (which the socket's destructor
          // deregisters from) is gone.
          conn.reset();
          served.done();
        });
      }
      served.done();
    });
    std::atomic<int> ok{0};
    gort::WaitGroup clients;
    for (int i = 0; i < kClients; i++) {
      clients.add(1);
      gort::go([&, i] {
        try {
          std::string target = "/c" + std::to_string(i);
          if (get(ioc, ep, target, kRounds) == "hello " + target) ok++;
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
        }
        clients.done();
      });
    }
    clients.wait();
    served.wait();
    EXPECT_EQ(ok.load(), kClients);
    EXPECT_LE(ms_created() - ms_before, gort::procs()) << "Asio's blocking calls made threads";
  });
}

TEST_P(HookBeast, ClientAgainstTheHttpServerSample) {
  gort::test::SampleHttpServer server;
  if (!server.error().empty()) GTEST_SKIP() << server.error();
  run_test([&] {
    asio::io_context ioc;
    tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(server.port()));
    std::atomic<int> ok{0};
    gort::WaitGroup wg;
    for (int i = 0; i < 20; i++) {
      wg.add(1);
      gort::go([&] {
        try {
          if (get(ioc, ep, "/sleep?ms=10", 3).find("slept") != std::string::npos) ok++;
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(ok.load(), 20);
  });
}

}  // namespace

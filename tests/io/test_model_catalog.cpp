// The model catalog's asks of upstreams that do not answer (RS-13); an answering upstream is covered
// end to end by tests/integration/responses_models.test.mjs.
#include "io/model_catalog.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

using namespace troupe;
using namespace std::chrono_literals;
namespace net = boost::asio;

namespace {

protocol::model_config two_entries() {
  protocol::model_config m;
  protocol::upstream_config a;
  a.name = "a";
  a.models.any = false;
  a.models.names = {"alpha"};
  m.upstreams = {a, a};
  m.models.any = false;
  m.models.names = {"scripted"};
  return m;
}

// Seconds until refresh's `done` runs.
double refresh_seconds(io::model_catalog& catalog) {
  auto started = std::chrono::steady_clock::now();
  std::promise<void> asked;
  catalog.refresh([&asked] { asked.set_value(); });
  auto f = asked.get_future();
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

} // namespace

TEST_CASE("a catalog without discovering upstreams answers refresh at once with the configured names",
          "[io][routing]") {
  io::model_catalog catalog(two_entries(), {});
  CHECK(refresh_seconds(catalog) < 1);
  CHECK(catalog.listed() == std::vector<std::string>{"alpha", "scripted"});
  CHECK(catalog.route("scripted") == std::optional<std::size_t>(2));
  CHECK_FALSE(catalog.route("beta").has_value());
}

TEST_CASE("an upstream that accepts but never answers is given up after its timeout, keeping the configured names",
          "[io][routing]") {
  net::io_context ioc;
  net::ip::tcp::acceptor silent(ioc, {net::ip::make_address("127.0.0.1"), 0});
  net::ip::tcp::socket held(ioc);
  silent.async_accept(held, [](boost::system::error_code) {}); // accepted, never read or answered
  std::thread server([&] { ioc.run(); });

  auto port = std::to_string(silent.local_endpoint().port());
  std::vector<io::model_source> sources{{0, "http://127.0.0.1:" + port + "/v1", "sk", 0.3},
                                        {1, "http://127.0.0.1:1/v1", "", 0.3}}; // refused at once
  {
    io::model_catalog catalog(two_entries(), sources);
    auto seconds = refresh_seconds(catalog);
    CHECK(seconds >= 0.25);
    CHECK(seconds < 5);
    CHECK(catalog.listed() == std::vector<std::string>{"alpha", "scripted"});
  } // and the catalog stops its thread

  ioc.stop();
  server.join();
}

// WebSocket upgrades at the edge, which the workspace stream (WS-44..WS-57) is built on: a real
// http_server with test routes that upgrade, driven by a Beast client over a socket.
#include "io/http_server.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace troupe;

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace beast_ws = beast::websocket;
using tcp = net::ip::tcp;

constexpr auto patience = std::chrono::seconds(5);

// What the routes saw, for the test thread to wait on.
struct probe {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, bool>> messages;
  int closed = 0;
  int not_upgraded = 0;
  int refused_sends = 0;
  std::optional<bool> send_after_close;

  template <class F>
  void update(F change) {
    {
      std::lock_guard<std::mutex> lock(mu);
      change();
    }
    cv.notify_all();
  }

  // Waits for `ready`, woken by updates and every few milliseconds for what the server counts itself.
  template <class P>
  bool wait(P ready) {
    auto deadline = std::chrono::steady_clock::now() + patience;
    std::unique_lock<std::mutex> lock(mu);
    while (!ready()) {
      if (std::chrono::steady_clock::now() > deadline)
        return false;
      cv.wait_for(lock, std::chrono::milliseconds(10));
    }
    return true;
  }
};

// A server whose routes upgrade: /ws/echo echoes (selecting reflexr.v1 when offered, unless ?decline),
// /ws/refuse closes 4401 before start, /ws/long-reason closes with a long reason, /ws/flood overfills its
// outbox, /ws/early sends before the handshake is written.
struct ws_server {
  std::shared_ptr<probe> seen = std::make_shared<probe>();
  std::unique_ptr<io::http_server> server;
  uint16_t port = 0;

  ws_server() {
    auto routes = std::make_shared<io::router>();
    auto p = seen;
    routes->add("GET", "/ws/echo", [p](io::http_request& req, std::shared_ptr<io::http_exchange> ex) {
      bool offered = req.header("sec-websocket-protocol").find("reflexr.v1") != std::string::npos;
      bool select = offered && !req.query.count("decline");
      auto ws = ex->upgrade(select ? "reflexr.v1" : "", 16);
      if (!ws) {
        p->update([&] { ++p->not_upgraded; });
        ex->respond(io::json_response(426, R"({"error":"a WebSocket upgrade is required"})"));
        return;
      }
      std::weak_ptr<io::websocket> weak = ws;
      ws->start({[p, weak](std::string data, bool binary) {
                   p->update([&] { p->messages.emplace_back(data, binary); });
                   if (auto w = weak.lock())
                     w->send(binary ? "binary " + std::to_string(data.size()) : data);
                 },
                 [p] { p->update([&] { ++p->closed; }); }});
    });
    routes->add("GET", "/ws/refuse", [p](io::http_request&, std::shared_ptr<io::http_exchange> ex) {
      auto ws = ex->upgrade("", 16);
      ws->close(4401, "unauthorized");
      ws->close(1000, "a second close changes nothing");
      p->update([&] { p->send_after_close = ws->send("too late"); });
    });
    routes->add("GET", "/ws/long-reason", [](io::http_request& req, std::shared_ptr<io::http_exchange> ex) {
      auto ws = ex->upgrade("", 16);
      // 122 ASCII bytes and a two-byte "é" straddling byte 123, or 200 ASCII bytes.
      auto reason = req.query.count("utf8") ? std::string(122, 'a') + "\xc3\xa9" + std::string(50, 'b')
                                            : std::string(200, 'r');
      ws->close(4400, reason);
    });
    routes->add("GET", "/ws/flood", [p](io::http_request&, std::shared_ptr<io::http_exchange> ex) {
      auto ws = ex->upgrade("", 1);
      ws->start({[](std::string, bool) {}, [p] { p->update([&] { ++p->closed; }); }});
      int refused = 0;
      for (int i = 0; i < 30; ++i)
        if (!ws->send("event " + std::to_string(i)))
          ++refused;
      p->update([&] { p->refused_sends = refused; });
      if (refused > 0)
        ws->close(4429, "the client is not keeping up");
    });
    routes->add("GET", "/ws/early", [](io::http_request&, std::shared_ptr<io::http_exchange> ex) {
      auto ws = ex->upgrade("", 16);
      ws->send("one");
      ws->send("two");
      ws->close(1000, "done");
    });
    io::http_server_options options;
    options.host = "127.0.0.1";
    options.port = 0;
    server = std::make_unique<io::http_server>(options, routes);
    port = server->start();
  }

  ~ws_server() { server->stop(); }
};

// Runs one asynchronous client operation to completion, or gives up after `patience` so that a server
// that never answers fails the test instead of hanging it.
template <class Start>
beast::error_code run_op(net::io_context& ioc, tcp::socket& socket, Start start) {
  std::optional<beast::error_code> result;
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run_for(patience);
  if (!result) {
    beast::error_code ignored;
    socket.close(ignored);
    ioc.restart();
    ioc.run();
    return net::error::timed_out;
  }
  return *result;
}

class ws_client {
public:
  explicit ws_client(uint16_t port) {
    ws_.next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  }

  beast::error_code handshake(const std::string& target, const std::string& offer = "") {
    if (!offer.empty())
      ws_.set_option(beast_ws::stream_base::decorator([offer](beast_ws::request_type& req) {
        req.set(http::field::sec_websocket_protocol, offer);
      }));
    return run_op(ioc_, ws_.next_layer(),
                  [&](auto handler) { ws_.async_handshake(response_, "127.0.0.1", target, handler); });
  }

  beast::error_code write(const std::string& data, bool binary = false) {
    ws_.binary(binary);
    return run_op(ioc_, ws_.next_layer(), [&](auto handler) { ws_.async_write(net::buffer(data), handler); });
  }

  // One message, or the error that ended the connection (then reason() says how it was closed).
  beast::error_code read(std::string& out) {
    beast::flat_buffer buffer;
    auto ec = run_op(ioc_, ws_.next_layer(), [&](auto handler) { ws_.async_read(buffer, handler); });
    out = beast::buffers_to_string(buffer.data());
    return ec;
  }

  // Reads until the connection ends; the messages read on the way.
  std::vector<std::string> read_to_end(beast::error_code& ec) {
    std::vector<std::string> got;
    std::string message;
    while (!(ec = read(message)))
      got.push_back(message);
    return got;
  }

  beast::error_code close(uint16_t code = 1000) {
    return run_op(ioc_, ws_.next_layer(), [&](auto handler) {
      ws_.async_close(beast_ws::close_reason(static_cast<beast_ws::close_code>(code)), handler);
    });
  }

  // Drops the TCP connection without a close frame.
  void vanish() {
    beast::error_code ignored;
    ws_.next_layer().close(ignored);
  }

  const beast_ws::response_type& response() const { return response_; }
  const beast_ws::close_reason& reason() const { return ws_.reason(); }
  std::string reason_text() const { return std::string(ws_.reason().reason.data(), ws_.reason().reason.size()); }

private:
  net::io_context ioc_;
  beast_ws::stream<tcp::socket> ws_{ioc_};
  beast_ws::response_type response_;
};

// How a connection that the server ends went: what was read on the way and how it was closed.
struct ending {
  std::vector<std::string> messages;
  beast::error_code error;
  uint16_t code = 0;
  std::string reason;
};

ending read_until_closed(uint16_t port, const std::string& target) {
  ws_client c(port);
  ending end;
  end.error = c.handshake(target);
  REQUIRE(!end.error);
  end.messages = c.read_to_end(end.error);
  end.code = c.reason().code;
  end.reason = c.reason_text();
  return end;
}

// A client over a raw socket that keeps writing after the server has closed: a text frame that announces
// `size` bytes, written to the end in 64 KiB pieces, then a close frame answering 1009. It records what the
// server sent and how the server's end of the connection came.
struct raw_exchange {
  beast::error_code write_error;
  std::string received;
  beast::error_code end; // net::error::eof for an orderly end, connection_reset for an RST
};

std::string frame_header(uint8_t first, uint64_t size) {
  // Masked, with an all-zero key: the payload goes as it is.
  std::string h(1, static_cast<char>(first));
  if (size < 126) {
    h += static_cast<char>(0x80 | size);
  } else {
    h += static_cast<char>(0x80 | 127);
    for (int shift = 56; shift >= 0; shift -= 8)
      h += static_cast<char>((size >> shift) & 0xff);
  }
  return h + std::string(4, '\0');
}

raw_exchange keep_writing(uint16_t port, const std::string& target, std::size_t size) {
  net::io_context ioc;
  beast_ws::stream<tcp::socket> ws(ioc);
  auto& socket = ws.next_layer();
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  REQUIRE(!run_op(ioc, socket, [&](auto handler) { ws.async_handshake("127.0.0.1", target, handler); }));
  raw_exchange got;
  auto write = [&](const std::string& bytes) {
    if (!got.write_error)
      got.write_error =
        run_op(ioc, socket, [&](auto handler) { net::async_write(socket, net::buffer(bytes), handler); });
  };
  write(frame_header(0x81, size));
  const std::string piece(64 * 1024, 'z');
  for (std::size_t sent = 0; sent < size; sent += piece.size())
    write(piece.substr(0, std::min(piece.size(), size - sent)));
  write(frame_header(0x88, 2) + "\x03\xf1");
  char buffer[4096];
  for (;;) {
    std::size_t n = 0;
    got.end = run_op(ioc, socket, [&](auto handler) {
      socket.async_read_some(net::buffer(buffer), [&n, handler](beast::error_code ec, std::size_t bytes) mutable {
        n = bytes;
        handler(ec);
      });
    });
    got.received.append(buffer, n);
    if (got.end || got.received.size() > 1024)
      break;
  }
  return got;
}

} // namespace

TEST_CASE("a text message is echoed back and the subprotocol is selected only when the route selects it",
          "[websocket]") {
  ws_server s;
  SECTION("offered and selected") { // WS-44
    ws_client c(s.port);
    REQUIRE(!c.handshake("/ws/echo", "reflexr.v1"));
    CHECK(c.response()[http::field::sec_websocket_protocol] == "reflexr.v1");
    CHECK(c.response()[http::field::server] == "troupe");
    REQUIRE(!c.write(R"({"type":"hello","protocol":"reflexr.v1"})"));
    std::string echoed;
    REQUIRE(!c.read(echoed));
    CHECK(echoed == R"({"type":"hello","protocol":"reflexr.v1"})");
    REQUIRE(s.seen->wait([&] { return s.seen->messages.size() == 1; }));
    CHECK(s.seen->messages[0].second == false);
  }
  SECTION("offered and declined") {
    ws_client c(s.port);
    REQUIRE(!c.handshake("/ws/echo?decline=1", "reflexr.v1"));
    CHECK(c.response().count(http::field::sec_websocket_protocol) == 0);
  }
  SECTION("not offered, so not selected") {
    ws_client c(s.port);
    REQUIRE(!c.handshake("/ws/echo"));
    CHECK(c.response().count(http::field::sec_websocket_protocol) == 0);
    REQUIRE(!c.write("plain"));
    std::string echoed;
    REQUIRE(!c.read(echoed));
    CHECK(echoed == "plain");
  }
}

TEST_CASE("a route that refuses before start closes with 4401 and its reason, and later sends fail",
          "[websocket]") {
  ws_server s;
  auto end = read_until_closed(s.port, "/ws/refuse"); // WS-44: the upgrade completes even when refused
  CHECK(end.messages.empty());
  CHECK(end.error == beast_ws::error::closed);
  CHECK(end.code == 4401); // WS-45
  CHECK(end.reason == "unauthorized");
  REQUIRE(s.seen->wait([&] { return s.seen->send_after_close.has_value(); }));
  CHECK(*s.seen->send_after_close == false);
  REQUIRE(s.seen->wait([&] { return s.server->open_exchanges() == 0; }));
}

TEST_CASE("a close reason longer than 123 bytes is cut to 123 bytes at a UTF-8 boundary", "[websocket]") {
  ws_server s;
  auto ascii = read_until_closed(s.port, "/ws/long-reason"); // WS-45
  CHECK(ascii.code == 4400);
  CHECK(ascii.reason == std::string(123, 'r'));
  // A two-byte character across the limit is left out whole.
  auto utf8 = read_until_closed(s.port, "/ws/long-reason?utf8=1");
  CHECK(utf8.code == 4400);
  CHECK(utf8.reason == std::string(122, 'a'));
}

TEST_CASE("frames beyond the outbox are refused and the route can then close 4429", "[websocket]") {
  ws_server s;
  auto end = read_until_closed(s.port, "/ws/flood");
  CHECK(end.error == beast_ws::error::closed);
  CHECK(end.code == 4429); // WS-56
  CHECK(end.reason == "the client is not keeping up");
  REQUIRE(s.seen->wait([&] { return s.seen->closed == 1; }));
  CHECK(s.seen->refused_sends >= 1);
  // What was accepted was written, in order, before the close.
  REQUIRE(end.messages.size() == static_cast<std::size_t>(30 - s.seen->refused_sends));
  CHECK(end.messages.front() == "event 0");
}

TEST_CASE("frames sent before the handshake is written follow it in order, then the close", "[websocket]") {
  ws_server s;
  auto end = read_until_closed(s.port, "/ws/early");
  CHECK(end.messages == std::vector<std::string>{"one", "two"});
  CHECK(end.code == 1000);
  CHECK(end.reason == "done");
}

TEST_CASE("a message of 1 MiB is read and a bigger one closes the connection with 1009", "[websocket]") {
  ws_server s;
  ws_client c(s.port);
  REQUIRE(!c.handshake("/ws/echo"));
  REQUIRE(!c.write(std::string(1024 * 1024, 'x'))); // WS-44
  std::string echoed;
  REQUIRE(!c.read(echoed));
  CHECK(echoed.size() == 1024 * 1024);
  c.write(std::string(1024 * 1024 + 1, 'y'));
  beast::error_code ec;
  auto got = c.read_to_end(ec);
  CHECK(got.empty());
  CHECK(c.reason().code == beast_ws::close_code::too_big);
  REQUIRE(s.seen->wait([&] { return s.seen->closed == 1; }));
}

// WS-44: the server closes 1009 while the client is still sending the rest of the frame; what the client
// still sends is read to its end, so the close frame is never lost to a TCP reset (an abnormal closure, 1006,
// for a browser or the `ws` client).
TEST_CASE("a client still writing a frame over 1 MiB reads the close 1009 and an orderly end, every time",
          "[websocket]") {
  ws_server s;
  const std::string close_1009 = "\x88\x02\x03\xf1"; // unmasked close frame, code 1009, no reason
  for (int i = 1; i <= 20; ++i) {
    INFO("attempt " << i);
    // More than the loopback socket buffers hold, so that the client is still writing when the server closes.
    auto got = keep_writing(s.port, "/ws/echo", 6 * 1024 * 1024 + 1);
    CHECK(got.write_error.message() == beast::error_code().message());
    CHECK(got.received == close_1009);
    CHECK(got.end.message() == beast::error_code(net::error::eof).message());
    REQUIRE(s.seen->wait([&] { return s.seen->closed == i; }));
  }
  CHECK(s.seen->messages.empty());
  REQUIRE(s.seen->wait([&] { return s.server->open_exchanges() == 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(s.seen->closed == 20);
}

// WS-45: the same for a close of the route's own (4400 here, as for 4401 and 4429) when the client keeps
// sending messages: what it sent before its answering close is dropped and the close still arrives.
TEST_CASE("a client still writing messages reads the route's close and an orderly end", "[websocket]") {
  ws_server s;
  for (int i = 1; i <= 10; ++i) {
    INFO("attempt " << i);
    net::io_context ioc;
    beast_ws::stream<tcp::socket> ws(ioc);
    auto& socket = ws.next_layer();
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port));
    REQUIRE(!run_op(ioc, socket, [&](auto handler) { ws.async_handshake("127.0.0.1", "/ws/long-reason", handler); }));
    const std::string message(64 * 1024, 'm');
    for (int m = 0; m < 32; ++m)
      CHECK(!run_op(ioc, socket, [&](auto handler) { ws.async_write(net::buffer(message), handler); }));
    // The Beast client answers the close and reads the server's end of the connection, or fails.
    beast::flat_buffer buffer;
    auto ec = run_op(ioc, socket, [&](auto handler) { ws.async_read(buffer, handler); });
    CHECK(ec == beast_ws::error::closed);
    CHECK(ws.reason().code == 4400);
  }
  REQUIRE(s.seen->wait([&] { return s.server->open_exchanges() == 0; }));
}

TEST_CASE("on_closed runs once when the client closes, vanishes, or the server stops", "[websocket]") {
  ws_server s;
  ws_client c(s.port);
  REQUIRE(!c.handshake("/ws/echo"));
  REQUIRE(!c.write("ping"));
  std::string echoed;
  REQUIRE(!c.read(echoed));
  CHECK(s.server->open_exchanges() == 1); // a live WebSocket is an open exchange until it ends

  SECTION("the client closes") {
    CHECK(!c.close());
    REQUIRE(s.seen->wait([&] { return s.seen->closed == 1; }));
  }
  SECTION("the client vanishes without a close frame") {
    c.vanish();
    REQUIRE(s.seen->wait([&] { return s.seen->closed == 1; }));
  }
  SECTION("the server stops") {
    s.server->stop();
    CHECK(s.seen->closed == 1);
    beast::error_code ec;
    c.read_to_end(ec);
    CHECK(ec);
  }
  CHECK(s.server->open_exchanges() == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(s.seen->closed == 1);
}

TEST_CASE("a binary message reaches on_message as binary", "[websocket]") {
  ws_server s;
  ws_client c(s.port);
  REQUIRE(!c.handshake("/ws/echo"));
  REQUIRE(!c.write(std::string("\x00\x01\x02", 3), true));
  std::string echoed;
  REQUIRE(!c.read(echoed));
  CHECK(echoed == "binary 3");
  REQUIRE(s.seen->wait([&] { return s.seen->messages.size() == 1; }));
  CHECK(s.seen->messages[0] == std::make_pair(std::string("\x00\x01\x02", 3), true));
}

TEST_CASE("a GET without upgrade headers gets no WebSocket and the route can still answer 426", "[websocket]") {
  ws_server s;
  net::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port));
  http::request<http::empty_body> req(http::verb::get, "/ws/echo", 11);
  req.set(http::field::host, "127.0.0.1");
  REQUIRE(!run_op(ioc, socket, [&](auto handler) { http::async_write(socket, req, handler); }));
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  REQUIRE(!run_op(ioc, socket, [&](auto handler) { http::async_read(socket, buffer, res, handler); }));
  CHECK(res.result_int() == 426);
  REQUIRE(s.seen->wait([&] { return s.seen->not_upgraded == 1; }));
  REQUIRE(s.seen->wait([&] { return s.server->open_exchanges() == 0; }));
}

// io::web_call and io::web_stream over real sockets: what `troupe run` relies on to follow a run's
// stream (issue 20 item 11) — bytes handed over as they arrive, a reader that stops, an idle stream
// given up, a refusal read whole, an unreachable server named.
#include "io/web_call.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

using namespace troupe;
using namespace std::chrono_literals;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// One connection accepted on the loopback; `answer` writes what the server says after the request's head.
class one_shot_server {
public:
  explicit one_shot_server(std::function<void(tcp::socket&)> answer)
    : acceptor_(ioc_, {net::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this, answer = std::move(answer)] {
      tcp::socket socket(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec)
        return;
      net::streambuf head;
      net::read_until(socket, head, "\r\n\r\n", ec);
      if (ec)
        return;
      request_ = std::string(net::buffers_begin(head.data()), net::buffers_end(head.data()));
      answer(socket);
    });
  }
  ~one_shot_server() { thread_.join(); }

  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + path;
  }
  const std::string& request() const { return request_; } // after the call returned

private:
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::string request_;
  std::thread thread_;
};

void say(tcp::socket& s, const std::string& text) {
  boost::system::error_code ec;
  net::write(s, net::buffer(text), ec);
}

const std::string stream_head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

web_request get(const std::string& url, double timeout_seconds = 10) {
  web_request r;
  r.method = "GET";
  r.url = url;
  r.headers = {{"Last-Event-ID", "5"}};
  r.timeout_seconds = timeout_seconds;
  return r;
}

} // namespace

TEST_CASE("web_stream hands each chunk of a 2xx stream over as it arrives, with the request's headers sent", "[io][web_call]") {
  std::promise<void> first_read;
  auto first = first_read.get_future();
  one_shot_server server([&](tcp::socket& s) {
    say(s, stream_head + "id: 6\ndata: {}\n\n");
    first.wait_for(10s); // the second chunk only once the client has the first: no batching hides it
    say(s, "id: 7\ndata: {}\n\n");
  });
  std::vector<std::string> chunks;
  std::string all;
  auto r = io::web_stream(get(server.url("/v1/runs/r1/stream")), [&](std::string_view bytes) {
    all.append(bytes);
    chunks.emplace_back(bytes);
    if (chunks.size() == 1)
      first_read.set_value();
    return true;
  });
  CHECK(r.error.empty());
  CHECK(r.response.status == 200);
  CHECK(all == "id: 6\ndata: {}\n\nid: 7\ndata: {}\n\n");
  CHECK(chunks.size() >= 2);
  CHECK(server.request().rfind("GET /v1/runs/r1/stream HTTP/1.1\r\n", 0) == 0);
  CHECK(server.request().find("\r\nLast-Event-ID: 5\r\n") != std::string::npos);
}

TEST_CASE("web_stream stops reading when its reader says so, and the stop is no error", "[io][web_call]") {
  std::promise<void> stopped;
  auto client_gone = stopped.get_future();
  one_shot_server server([&](tcp::socket& s) {
    say(s, stream_head + "event: done\ndata: [DONE]\n\n");
    client_gone.wait_for(10s); // still open: only the reader ends the call
  });
  int calls = 0;
  auto r = io::web_stream(get(server.url("/s")), [&](std::string_view) {
    ++calls;
    return false;
  });
  stopped.set_value();
  CHECK(r.error.empty());
  CHECK(calls == 1);
}

TEST_CASE("web_stream gives up a stream silent for its timeout, keeping what came before", "[io][web_call]") {
  std::promise<void> done;
  auto released = done.get_future();
  one_shot_server server([&](tcp::socket& s) {
    say(s, stream_head + ": keepalive\n\n");
    released.wait_for(10s); // then silence
  });
  std::string all;
  auto r = io::web_stream(get(server.url("/s"), 0.3), [&](std::string_view bytes) {
    all.append(bytes);
    return true;
  });
  done.set_value();
  CHECK(r.error == "timed out");
  CHECK(all == ": keepalive\n\n");
}

TEST_CASE("web_stream reads a refusal whole into the result instead of handing it to the reader", "[io][web_call]") {
  one_shot_server server([](tcp::socket& s) {
    say(s, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 26\r\n\r\n"
           "{\"detail\":\"Run not found\"}");
  });
  bool called = false;
  auto r = io::web_stream(get(server.url("/s")), [&](std::string_view) {
    called = true;
    return true;
  });
  CHECK(r.error.empty());
  CHECK(r.response.status == 404);
  CHECK(r.response.body == "{\"detail\":\"Run not found\"}");
  CHECK_FALSE(called);
}

TEST_CASE("web_call answers with the status and body, or names why there is no answer", "[io][web_call]") {
  one_shot_server server([](tcp::socket& s) {
    say(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  auto r = io::web_call(get(server.url("/v1/runs/r1")));
  CHECK(r.error.empty());
  CHECK(r.response.status == 200);
  CHECK(r.response.body == "ok");

  auto refused = io::web_call(get("http://127.0.0.1:1/x"));
  CHECK(refused.error.rfind("cannot connect", 0) == 0);
  auto bad = io::web_call(get("ftp://example/x"));
  CHECK(bad.error.find("ftp://example/x: ") == 0);
}

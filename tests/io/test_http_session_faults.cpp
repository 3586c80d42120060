// Every read and write of an HTTP session fails in turn: http_server's session over Beast's test stream
// (io/http_test_stream.hpp) with a fail_count, for a plain answer, a request with a body and
// `Expect: 100-continue`, a refusal before the body, an SSE stream and a WebSocket upgrade. Each failure
// must end that session cleanly: nothing thrown, nothing left running, its exchange and its slot given
// back, and the handler told of a client that left before its stream was done.
#include "io/http_test_stream.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

using namespace troupe;

namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace beast_ws = beast::websocket;

// What the routes saw.
struct handler_log {
  std::atomic<int> disconnects{0};
  std::atomic<int> streams_opened{0};
  std::atomic<int> ws_closed{0};
  std::atomic<int> ws_started{0};
};

std::shared_ptr<io::router> routes(const std::shared_ptr<handler_log>& log) {
  auto r = std::make_shared<io::router>();
  r->add("GET", "/plain", [](io::http_request&, std::shared_ptr<io::http_exchange> ex) {
    ex->respond(io::json_response(200, R"({"ok":true})"));
  });
  r->add("POST", "/echo", [](io::http_request& req, std::shared_ptr<io::http_exchange> ex) {
    ex->respond(io::json_response(200, req.body));
  });
  r->add("GET", "/events", [log](io::http_request&, std::shared_ptr<io::http_exchange> ex) {
    ex->on_disconnect([log] { ++log->disconnects; }); // where a run would be cancelled
    auto stream = ex->open_event_stream({});
    ++log->streams_opened;
    for (auto data : {"one", "two", "three"})
      stream->send(std::string("data: ") + data + "\n\n");
    stream->finish();
  });
  r->add("GET", "/open-events", [log](io::http_request&, std::shared_ptr<io::http_exchange> ex) {
    ex->on_disconnect([log] { ++log->disconnects; });
    ex->open_event_stream({})->send("data: first\n\n"); // and never finished
    ++log->streams_opened;
  });
  r->add("GET", "/ws", [log](io::http_request&, std::shared_ptr<io::http_exchange> ex) {
    auto ws = ex->upgrade("", 16);
    if (!ws)
      return ex->respond(io::json_response(400, "{}"));
    ++log->ws_started;
    std::weak_ptr<io::websocket> weak = ws;
    ws->start({[weak](std::string data, bool) {
                 if (auto w = weak.lock())
                   w->send("echo: " + data);
               },
               [log] { ++log->ws_closed; }});
    ws->send("hello");
  });
  return r;
}

io::http_server_options options() {
  io::http_server_options o;
  o.edge.listener_host = "127.0.0.1";
  o.max_body_bytes = 64;
  return o;
}

// One connection's run with the server's `fail_at`-th stream operation failing (0: none fails).
struct outcome {
  std::string received; // what the client read
  bool finished = false; // the io_context ran out of work: nothing hangs
  bool threw = false;
  int64_t open_exchanges = -1;
  int64_t open_connections = -1;
  std::size_t operations = 0; // the server stream's reads and writes, when none failed
  std::shared_ptr<handler_log> log = std::make_shared<handler_log>();
};

constexpr std::size_t never = 1000000;

// How many operations a run with no failure used: fail_count only says when its count is reached.
std::size_t operations_done(beast::test::fail_count& fc, std::size_t fail_at) {
  beast::error_code ec;
  std::size_t calls = 1;
  while (!fc.fail(ec))
    ++calls;
  return fail_at - calls;
}

// One connection: the server's end, whose `fail_at`-th operation fails, and the client's end.
struct connection {
  std::size_t fail_at;
  net::io_context ioc;
  beast::test::fail_count fc{fail_at};
  beast::test::stream server{ioc, fc};
  beast::test::stream client{ioc};

  explicit connection(std::size_t n) : fail_at(n) { client.connect(server); }

  // Serves the server's end, `start` starting the client's side, until nothing is left to do (10 s at
  // most), and says how the session ended.
  outcome serve(const std::function<void()>& start) {
    outcome out;
    {
      io::test_stream_sessions sessions(options(), routes(out.log));
      try {
        sessions.serve(std::move(server));
        start();
        ioc.run_for(std::chrono::seconds(10));
      } catch (...) {
        out.threw = true;
      }
      out.finished = ioc.stopped();
      out.open_exchanges = sessions.open_exchanges();
      out.open_connections = sessions.open_connections();
    }
    if (fail_at == never)
      out.operations = operations_done(fc, fail_at);
    return out;
  }
};

// Plays `request` to a session whose reads come 48 bytes at a time, the client closing its side after
// the request.
outcome serve_http(const std::string& request, std::size_t fail_at) {
  connection c(fail_at);
  c.server.read_size(48); // more reads than one: the head, the body and their pieces each count
  net::write(c.client, net::buffer(request));
  c.client.close(); // the session reads end-of-stream once the request is consumed
  auto out = c.serve([] {});
  out.received = std::string(c.client.str());
  return out;
}

// The WebSocket client's side: handshake, read "hello", send "ping", read its echo, close.
outcome serve_websocket(std::size_t fail_at, std::string* messages) {
  static const std::string ping = "ping";
  connection c(fail_at);
  beast_ws::stream<beast::test::stream&> ws(c.client);
  beast::flat_buffer buffer;
  std::function<void()> read_next = [&] {
    ws.async_read(buffer, [&](beast::error_code ec, std::size_t) {
      if (ec)
        return c.client.close();
      *messages += beast::buffers_to_string(buffer.data()) + ";";
      buffer.consume(buffer.size());
      if (*messages == "hello;")
        return ws.async_write(net::buffer(ping), [&](beast::error_code wec, std::size_t) {
          if (wec)
            return c.client.close();
          read_next();
        });
      ws.async_close(beast_ws::close_code::normal, [&](beast::error_code) { c.client.close(); });
    });
  };
  return c.serve([&] {
    ws.async_handshake("127.0.0.1", "/ws", [&](beast::error_code ec) {
      if (ec)
        return c.client.close();
      read_next();
    });
  });
}

void ended_cleanly(const outcome& o) {
  CHECK_FALSE(o.threw);
  CHECK(o.finished);
  CHECK(o.open_exchanges == 0);
  CHECK(o.open_connections == 0);
}

// Fails operation 1, 2, ... of the `whole` run's in turn; `check` sees each failed run.
template <class Run, class Check>
void fail_each_operation(const outcome& whole, Run run, Check check) {
  REQUIRE(whole.operations > 0);
  for (std::size_t n = 1; n <= whole.operations; ++n) {
    INFO("operation " << n << " of " << whole.operations << " failed");
    auto o = run(n);
    ended_cleanly(o);
    check(o);
  }
}

const std::string http_head = "Host: 127.0.0.1\r\n";

} // namespace

TEST_CASE("a plain answer over a session whose every operation fails in turn ends each session cleanly",
          "[http_session][faults]") {
  auto request = "GET /plain HTTP/1.1\r\n" + http_head + "\r\n";
  auto whole = serve_http(request, never);
  ended_cleanly(whole);
  REQUIRE(whole.received.find("200 OK") != std::string::npos);
  REQUIRE(whole.received.find(R"({"ok":true})") != std::string::npos);
  CHECK(whole.operations >= 3); // the request, the answer, the next request's end
  fail_each_operation(whole, [&](std::size_t n) { return serve_http(request, n); }, [](const outcome&) {});
}

TEST_CASE("a request with a body and Expect: 100-continue over a session whose every operation fails in turn "
          "ends each session cleanly",
          "[http_session][faults]") {
  std::string body = R"({"text":"a body read in several parts"})";
  auto request = "POST /echo HTTP/1.1\r\n" + http_head + "Content-Type: application/json\r\nExpect: 100-continue\r\n"
                 + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  auto whole = serve_http(request, never);
  ended_cleanly(whole);
  REQUIRE(whole.received.find("100 Continue") != std::string::npos);
  REQUIRE(whole.received.find(body) != std::string::npos);
  CHECK(whole.operations >= 5); // the head, the 100, the body, the answer, the next request's end
  fail_each_operation(whole, [&](std::size_t n) { return serve_http(request, n); }, [](const outcome&) {});
}

TEST_CASE("a refusal before the body over a session whose every operation fails in turn ends each session "
          "cleanly, the drain included",
          "[http_session][faults]") {
  auto request = "POST /echo HTTP/1.1\r\n" + http_head +
                 "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x');
  auto whole = serve_http(request, never);
  ended_cleanly(whole);
  REQUIRE(whole.received.find("413") != std::string::npos);
  fail_each_operation(whole, [&](std::size_t n) { return serve_http(request, n); }, [](const outcome&) {});
}

TEST_CASE("an SSE stream over a session whose every operation fails in turn ends each session cleanly, and the "
          "handler hears of every client lost before the stream's end",
          "[http_session][faults]") {
  auto request = "GET /events HTTP/1.1\r\n" + http_head + "\r\n";
  auto whole = serve_http(request, never);
  ended_cleanly(whole);
  REQUIRE(whole.received.find("text/event-stream") != std::string::npos);
  REQUIRE(whole.received.find("data: three") != std::string::npos);
  REQUIRE(whole.received.find("0\r\n\r\n") != std::string::npos);
  CHECK(whole.log->disconnects == 0);
  std::size_t cancelled = 0;
  fail_each_operation(whole, [&](std::size_t n) { return serve_http(request, n); }, [&](const outcome& o) {
                                   // The last chunk is what tells the client the stream is complete.
                                   bool complete = o.received.size() >= 5
                                                   && o.received.compare(o.received.size() - 5, 5, "0\r\n\r\n") == 0;
                                   CHECK(o.log->disconnects == (o.log->streams_opened && !complete ? 1 : 0));
                                   cancelled += o.log->disconnects;
                                 });
  CHECK(cancelled >= 1);
}

TEST_CASE("a WebSocket upgraded from a session whose every operation fails in turn ends cleanly, and its "
          "route hears of its end once",
          "[http_session][faults]") {
  std::string whole_messages;
  auto whole = serve_websocket(never, &whole_messages);
  ended_cleanly(whole);
  REQUIRE(whole_messages == "hello;echo: ping;");
  CHECK(whole.log->ws_closed == 1);
  fail_each_operation(whole, [&](std::size_t n) {
    std::string messages;
    return serve_websocket(n, &messages);
  }, [](const outcome& o) { CHECK(o.log->ws_closed == o.log->ws_started); });
}

TEST_CASE("stopping the server ends a session in the middle of an SSE stream and its handler hears the client is "
          "gone",
          "[http_session]") {
  net::io_context ioc;
  beast::test::stream server(ioc);
  beast::test::stream client(ioc);
  client.connect(server);
  auto log = std::make_shared<handler_log>();
  io::test_stream_sessions sessions(options(), routes(log));
  net::write(client, net::buffer("GET /open-events HTTP/1.1\r\n" + http_head + "\r\n"));
  sessions.serve(std::move(server));
  // The stream stays open (its heartbeat timer is armed): run only what is ready until the frame is out.
  while (client.str().find("data: first") == beast::string_view::npos)
    REQUIRE(ioc.poll_one() > 0);
  CHECK(sessions.open_exchanges() == 1);
  CHECK(log->disconnects == 0);
  sessions.close_all();
  ioc.run_for(std::chrono::seconds(10));
  CHECK(ioc.stopped());
  CHECK(log->disconnects == 1);
  CHECK(sessions.open_exchanges() == 0);
  CHECK(sessions.open_connections() == 0);
}

// The chat-completions client against the fake upstream (tests/fake_upstream), over real sockets.
#include "io/openai_chat_client.hpp"
#include "protocol/json.hpp"
#include "protocol/responses_request.hpp"
#include "protocol/round_reply.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <mutex>
#include <future>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef TROUPE_SOURCE_DIR
#error "TROUPE_SOURCE_DIR must name the source tree (tests/CMakeLists.txt)"
#endif

namespace json = troupe::protocol::json;
namespace http = boost::beast::http;
using troupe::io::openai_chat_client;
using troupe::io::openai_chat_options;
using troupe::protocol::model_outcome;
using troupe::protocol::model_request;
using namespace std::chrono_literals;

namespace {

// The fake upstream as a child process on an ephemeral port, stopped with SIGTERM.
class fake_upstream {
public:
  fake_upstream() {
    int fds[2];
    if (::pipe(fds) != 0)
      throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      const char* script = TROUPE_SOURCE_DIR "/tests/fake_upstream/fake_upstream.mjs";
      ::execlp("node", "node", script, "--port", "0", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
    std::string line = read_line(10s);
    std::smatch m;
    if (!std::regex_search(line, m, std::regex("listening on http://127\\.0\\.0\\.1:(\\d+)")))
      throw std::runtime_error("fake upstream did not start: \"" + line + "\"");
    port_ = std::stoi(m[1]);
  }

  ~fake_upstream() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    ::close(out_);
  }

  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

  // One control call (/__script, /__requests, /__active); returns the body.
  std::string call(http::verb verb, const std::string& target, const std::string& body = "") const {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)});
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(socket, req);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    return res.body();
  }

  void script(const std::string& script_json) const {
    call(http::verb::post, "/__script", script_json);
  }

  json::document requests() const {
    auto doc = json::parse(call(http::verb::get, "/__requests"));
    REQUIRE(doc);
    return std::move(*doc);
  }

  int64_t active() const {
    auto doc = json::parse(call(http::verb::get, "/__active"));
    REQUIRE(doc);
    return json::get_int(*doc, "active").value_or(-1);
  }

  // Polls /__active until it equals `n`; the fake upstream notices a closed socket asynchronously.
  bool wait_active(int64_t n, std::chrono::milliseconds limit = 3000ms) const {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (active() == n)
        return true;
      std::this_thread::sleep_for(5ms);
    }
    return active() == n;
  }

private:
  std::string read_line(std::chrono::milliseconds limit) {
    std::string line;
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      char c;
      if (::read(out_, &c, 1) != 1)
        break;
      if (c == '\n')
        return line;
      line.push_back(c);
    }
    return line;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = 0;
};

openai_chat_options options_for(const fake_upstream& upstream) {
  openai_chat_options options;
  options.base_url = upstream.base_url();
  options.api_key = "sk-test";
  options.timeout_seconds = 10;
  options.retry_base_ms = 10;
  return options;
}

model_request simple_request(bool stream = true) {
  model_request request;
  request.model = "fake-model";
  request.stream = stream;
  troupe::protocol::chat_message hello;
  hello.role = "user";
  hello.content = "hello";
  request.messages.push_back(hello);
  return request;
}

// Starts one round of `request` through the model port, reading on after every batch; the future
// holds the round's events folded into the outcome the agent loop acts on.
std::future<model_outcome> start_round(openai_chat_client& client, const model_request& request) {
  troupe::protocol::responses::round_request round;
  round.model = request.model;
  round.history = troupe::protocol::responses::items_of(request.messages);
  for (auto& t : request.tools)
    round.tools.push_back({t.name, t.description, t.parameters, {}});
  round.stream = request.stream;
  struct reading {
    std::mutex mu;
    troupe::protocol::reply_assembler assembler;
    std::shared_ptr<troupe::model_round> handle;
    std::promise<model_outcome> done;
  };
  auto r = std::make_shared<reading>();
  auto future = r->done.get_future();
  std::lock_guard<std::mutex> lock(r->mu); // a batch that comes at once waits until the handle is kept
  r->handle = client.open(round, [r](std::vector<troupe::protocol::responses::upstream_event> events) {
    std::lock_guard<std::mutex> lock(r->mu);
    for (auto& e : events)
      r->assembler.feed(e);
    if (r->assembler.ended())
      r->done.set_value(r->assembler.outcome());
    else
      r->handle->resume();
  });
  return future;
}

model_outcome infer(openai_chat_client& client, const model_request& request) {
  auto future = start_round(client, request);
  REQUIRE(future.wait_for(20s) == std::future_status::ready);
  return future.get();
}

// A port nothing listens on: bind an ephemeral port, then release it.
int closed_port() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acceptor(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

} // namespace

TEST_CASE("a streamed reply is assembled from its content chunks", "[openai_client]") {
  // AS-17
  fake_upstream upstream;
  upstream.script(R"({"replies":[{"content":"Hello from the fake upstream","chunk_size":4,"chunk_delay_ms":2,
                      "usage":{"prompt_tokens":7,"completion_tokens":6,"total_tokens":13}}]})");
  openai_chat_client client(options_for(upstream));
  auto out = infer(client, simple_request());
  REQUIRE(out.ok);
  CHECK(out.reply.content == "Hello from the fake upstream");
  CHECK(out.reply.finish_reason == "stop");
  CHECK(out.reply.usage.total_tokens == 13);
  auto requests = upstream.requests();
  REQUIRE(requests.Size() == 1);
  CHECK(json::get_bool(requests[0], "stream") == true);
  CHECK(json::get_string(requests[0]["messages"][0], "content") == "hello");
}

TEST_CASE("a tool call streamed in pieces of three characters arrives whole", "[openai_client]") {
  // AS-17, AS-18
  fake_upstream upstream;
  upstream.script(R"({"replies":[{"chunk_size":3,"tool_calls":[
                      {"id":"call_1","name":"exec","arguments":"{\"command\":\"ls -la /tmp\"}"},
                      {"name":"read_file","arguments":"{\"path\":\"notes.md\"}"}]}]})");
  openai_chat_client client(options_for(upstream));
  auto request = simple_request();
  request.tools.push_back({"exec", "Run a command", R"({"type":"object"})"});
  auto out = infer(client, request);
  REQUIRE(out.ok);
  REQUIRE(out.reply.tool_calls.size() == 2);
  CHECK(out.reply.tool_calls[0].id == "call_1");
  CHECK(out.reply.tool_calls[0].name == "exec");
  CHECK(out.reply.tool_calls[0].arguments == R"({"command":"ls -la /tmp"})");
  CHECK(std::regex_match(out.reply.tool_calls[1].id, std::regex("call_[0-9a-f]{12}")));
  CHECK(out.reply.tool_calls[1].arguments == R"({"path":"notes.md"})");
  CHECK(out.reply.finish_reason == "tool_calls");
  auto requests = upstream.requests();
  CHECK(json::get_string(requests[0], "tool_choice") == "auto");
}

// A Responses round read through the model port, batch by batch, with resume() in the test's hands.
class round_reader {
public:
  round_reader(openai_chat_client& client, const troupe::protocol::responses::request& req) {
    troupe::protocol::responses::round_request round;
    troupe::protocol::responses::fill_round(round, req);
    troupe::protocol::responses::item hello;
    hello.type = troupe::protocol::responses::item_kind::message;
    hello.role = "user";
    troupe::protocol::responses::content_part text;
    text.type = troupe::protocol::responses::part_kind::input_text;
    text.text = "hello";
    hello.content.push_back(text);
    round.history.push_back(hello);
    round_ = client.open(round, [this](std::vector<troupe::protocol::responses::upstream_event> events) {
      std::lock_guard<std::mutex> lock(mu_);
      batches_.push_back(std::move(events));
      cv_.notify_all();
    });
  }

  // Waits until `n` batches came; false after `limit`.
  bool wait_batches(std::size_t n, std::chrono::milliseconds limit = 10000ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return batches_.size() >= n; });
  }
  // Takes every batch so far (resuming the reader once for each) and returns them.
  std::vector<std::vector<troupe::protocol::responses::upstream_event>> take() {
    std::vector<std::vector<troupe::protocol::responses::upstream_event>> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      out.swap(batches_);
    }
    for (std::size_t i = 0; i < out.size(); ++i)
      round_->resume();
    return out;
  }

private:
  std::shared_ptr<troupe::model_round> round_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<troupe::protocol::responses::upstream_event>> batches_;
};

bool ends_round(const std::vector<troupe::protocol::responses::upstream_event>& batch) {
  using kind = troupe::protocol::responses::upstream_event::kind;
  return !batch.empty() && (batch.back().what == kind::finish || batch.back().what == kind::failure);
}

// Answers one request with a whole chat-completions SSE stream of `chunks` text chunks, written
// in one piece (each event its own HTTP chunk, as streaming servers send them), then closes.
class burst_server {
public:
  explicit burst_server(int chunks) : acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    std::string body;
    auto event = [&](const std::string& data) {
      auto frame = "data: " + data + "\n\n";
      char size[16];
      std::snprintf(size, sizeof size, "%zx\r\n", frame.size());
      body += size + frame + "\r\n";
    };
    for (int i = 0; i < chunks; ++i)
      event(R"({"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"abcd"}}]})");
    event(R"({"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})");
    event("[DONE]");
    response_ = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + body + "0\r\n\r\n";
    thread_ = std::thread([this] {
      boost::asio::ip::tcp::socket socket(ioc_);
      acceptor_.accept(socket);
      boost::asio::streambuf request;
      boost::asio::read_until(socket, request, "\r\n\r\n");
      boost::asio::write(socket, boost::asio::buffer(response_));
      boost::system::error_code ec;
      socket.shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
      char drain[1024];
      while (!ec)
        socket.read_some(boost::asio::buffer(drain), ec);
    });
  }
  ~burst_server() { thread_.join(); }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/v1"; }

private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::string response_;
  std::thread thread_;
};

TEST_CASE("a round's events that arrive together reach the consumer together, not one batch per event",
          "[openai_client]") {
  // RS-39, RS-48: a streaming upstream sends one HTTP chunk per event; every chunk already received
  // is handed over in one batch.
  burst_server server(400);
  openai_chat_options options;
  options.base_url = server.base_url();
  options.timeout_seconds = 10;
  openai_chat_client client(options);
  troupe::protocol::responses::request req;
  req.model = "m";
  round_reader reader(client, req);
  std::size_t batches = 0, deltas = 0;
  bool ended = false;
  std::string text;
  while (!ended) {
    REQUIRE(reader.wait_batches(1));
    for (auto& batch : reader.take()) {
      ++batches;
      for (auto& e : batch)
        if (e.what == troupe::protocol::responses::upstream_event::kind::text) {
          ++deltas;
          text += e.text;
        }
      ended = ended || ends_round(batch);
    }
  }
  CHECK(deltas == 400);
  CHECK(text.size() == 1600);
  CHECK(batches < 40); // 72 KB: a handful of reads
}

TEST_CASE("a paced round hands each event over as it arrives, not when the next one comes", "[openai_client]") {
  // RS-39: reading ahead never holds back a chunk that is complete.
  fake_upstream upstream;
  upstream.script(R"({"replies":[{"content":"Hello","chunk_size":3,"chunk_delay_ms":1500}]})");
  openai_chat_client client(options_for(upstream));
  troupe::protocol::responses::request req;
  req.model = "fake-model";
  auto started = std::chrono::steady_clock::now();
  round_reader reader(client, req);
  std::string text;
  while (text.empty()) {
    REQUIRE(reader.wait_batches(1));
    for (auto& batch : reader.take())
      for (auto& e : batch)
        if (e.what == troupe::protocol::responses::upstream_event::kind::text)
          text += e.text;
  }
  // The fake pauses 1.5 s after each chunk: "Hel" comes at 1.5 s, "lo" at 3 s.
  CHECK(text == "Hel");
  CHECK(std::chrono::steady_clock::now() - started < 2800ms);
}

TEST_CASE("a non-streamed call posts stream false and decodes the JSON reply", "[openai_client]") {
  // AS-17: model.stream false gives the same result without SSE.
  fake_upstream upstream;
  upstream.script(R"({"replies":[{"content":"plain answer"}]})");
  auto options = options_for(upstream);
  options.stream = false;
  openai_chat_client client(options);
  auto out = infer(client, simple_request(true));
  REQUIRE(out.ok);
  CHECK(out.reply.content == "plain answer");
  CHECK(out.reply.usage.total_tokens > 0);
  CHECK(json::get_bool(upstream.requests()[0], "stream") == false);
}

TEST_CASE("an upstream 500 is retried and the next success is the outcome", "[openai_client]") {
  // AS-17
  fake_upstream upstream;
  upstream.script(R"({"replies":[{"status":500},{"content":"second try"}]})");
  openai_chat_client client(options_for(upstream));
  auto out = infer(client, simple_request());
  REQUIRE(out.ok);
  CHECK(out.reply.content == "second try");
  CHECK(upstream.requests().Size() == 2);
}

TEST_CASE("an upstream that keeps failing with 503 fails retryable after max_retries retries", "[openai_client]") {
  // AS-17, AS-80
  fake_upstream upstream;
  upstream.script(R"({"default":{"status":503,"message":"overloaded"}})");
  openai_chat_client client(options_for(upstream));
  auto out = infer(client, simple_request());
  CHECK_FALSE(out.ok);
  CHECK(out.retryable);
  CHECK(out.http_status == 503);
  CHECK(out.error.rfind("HTTP 503: ", 0) == 0);
  CHECK(out.error.find("overloaded") != std::string::npos);
  CHECK(upstream.requests().Size() == 3);
}

TEST_CASE("a 400 is not retried and its body is quoted", "[openai_client]") {
  // AS-17
  fake_upstream upstream;
  upstream.script(R"({"replies":[{"status":400,"message":"unknown model"}]})");
  openai_chat_client client(options_for(upstream));
  auto out = infer(client, simple_request());
  CHECK_FALSE(out.ok);
  CHECK_FALSE(out.retryable);
  CHECK(out.http_status == 400);
  CHECK(out.error.rfind("HTTP 400: ", 0) == 0);
  CHECK(out.error.find("unknown model") != std::string::npos);
  CHECK(upstream.requests().Size() == 1);
}

TEST_CASE("RS-43 an upstream 429's failure carries the upstream's own error message and its Retry-After as "
          "seconds, and an invalid Retry-After is not carried at all",
          "[openai_client]") {
  for (auto [header, expected] : {std::pair<const char*, int64_t>{"7", 7}, {"in a while", -1}}) {
    fake_upstream upstream;
    upstream.script(std::string(R"({"default":{"status":429,"message":"Rate limit reached.","retry_after":")") + header
                    + "\"}}");
    auto options = options_for(upstream);
    options.max_retries = 0;
    openai_chat_client client(options);
    troupe::protocol::responses::request req;
    req.model = "fake-model";
    round_reader reader(client, req);
    REQUIRE(reader.wait_batches(1));
    auto batches = reader.take();
    REQUIRE(batches.size() == 1);
    REQUIRE(batches[0].size() == 1);
    auto& failure = batches[0][0];
    CHECK(failure.what == troupe::protocol::responses::upstream_event::kind::failure);
    CHECK(failure.http_status == 429);
    CHECK(failure.upstream_message == "Rate limit reached.");
    CHECK(failure.text.rfind("HTTP 429: ", 0) == 0); // the agent service's text still quotes the body
    CHECK(failure.retry_after_seconds == expected);
  }
}

TEST_CASE("a refused connection fails retryable, naming the URL, after the retries", "[openai_client]") {
  // AS-17
  openai_chat_options options;
  options.base_url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1";
  options.retry_base_ms = 10;
  openai_chat_client client(options);
  auto started = std::chrono::steady_clock::now();
  auto out = infer(client, simple_request());
  CHECK_FALSE(out.ok);
  CHECK_FALSE(out.cancelled);
  CHECK(out.retryable);
  CHECK(out.http_status == 0);
  CHECK(out.error.find(options.base_url + "/chat/completions") != std::string::npos);
  CHECK(out.error.find("after 3 attempts") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - started >= 30ms); // waited 10 ms, then 20 ms
}

TEST_CASE("an upstream that never answers times out, retryable", "[openai_client]") {
  // AS-17: the timeout applies per attempt.
  fake_upstream upstream;
  upstream.script(R"({"default":{"hang":true}})");
  auto options = options_for(upstream);
  options.timeout_seconds = 1;
  options.max_retries = 0;
  openai_chat_client client(options);
  auto out = infer(client, simple_request());
  CHECK_FALSE(out.ok);
  CHECK(out.retryable);
  CHECK(out.error.find("timed out") != std::string::npos);
  CHECK(upstream.wait_active(0));
}

TEST_CASE("cancelling a hanging round closes its upstream request at once and delivers nothing after",
          "[openai_client]") {
  // AS-52: a cancelled run stops its model call.
  fake_upstream upstream;
  upstream.script(R"({"default":{"hang":true}})");
  openai_chat_client client(options_for(upstream));
  troupe::protocol::responses::round_request round;
  round.model = "fake-model";
  round.history = troupe::protocol::responses::items_of(simple_request().messages);
  auto delivered = std::make_shared<std::atomic<int>>(0);
  auto handle = client.open(round, [delivered](auto) { ++*delivered; });
  REQUIRE(upstream.wait_active(1));
  handle->cancel();
  handle->cancel(); // idempotent
  CHECK(upstream.wait_active(0));
  CHECK(*delivered == 0);
}

TEST_CASE("destroying the client cancels its outstanding rounds, which deliver nothing", "[openai_client]") {
  fake_upstream upstream;
  upstream.script(R"({"default":{"hang":true}})");
  std::future<model_outcome> pending;
  {
    openai_chat_client client(options_for(upstream));
    pending = start_round(client, simple_request());
    REQUIRE(upstream.wait_active(1));
  }
  // The round's handler was let go without an outcome: its promise is broken, never kept.
  REQUIRE(pending.wait_for(0s) == std::future_status::ready);
  CHECK_THROWS_AS(pending.get(), std::future_error);
  CHECK(upstream.wait_active(0));
}

TEST_CASE("a base URL without /v1 and with a trailing slash reaches /chat/completions", "[openai_client]") {
  fake_upstream upstream;
  openai_chat_options options = options_for(upstream);
  options.base_url = "http://127.0.0.1:" + std::to_string(upstream.port()) + "/"; // no /v1, trailing slash
  openai_chat_client client(options);
  auto out = infer(client, simple_request());
  REQUIRE(out.ok);
  CHECK(out.reply.content == "ok"); // the fake's built-in default reply
}

TEST_CASE("a malformed base URL fails without a connection attempt", "[openai_client]") {
  openai_chat_options options;
  options.base_url = "ftp://example";
  openai_chat_client client(options);
  auto out = infer(client, simple_request());
  CHECK_FALSE(out.ok);
  CHECK_FALSE(out.retryable);
  CHECK(out.error.find("model.base_url") != std::string::npos);
}

TEST_CASE("an SSE line longer than max_line_bytes fails the call instead of growing", "[openai_client]") {
  // STYLE: every bound has a key and a test; this one is the client's max_line_bytes.
  fake_upstream upstream;
  upstream.script(R"({"replies":[{"content":")" + std::string(600, 'x') + R"("}]})");
  auto options = options_for(upstream);
  options.max_line_bytes = 256;
  openai_chat_client client(options);
  auto out = infer(client, simple_request());
  CHECK_FALSE(out.ok);
  CHECK_FALSE(out.retryable);
  CHECK(out.error.find("256") != std::string::npos);
  CHECK(upstream.requests().Size() == 1);
}

TEST_CASE("a response body longer than max_body_bytes fails the call without a retry", "[openai_client]") {
  fake_upstream upstream;
  upstream.script(R"({"default":{"content":")" + std::string(5000, 'y') + R"("}})");
  auto options = options_for(upstream);
  options.stream = false;
  options.max_body_bytes = 1024;
  openai_chat_client client(options);
  auto out = infer(client, simple_request());
  CHECK_FALSE(out.ok);
  CHECK_FALSE(out.retryable);
  CHECK(out.error.find("1024") != std::string::npos);
  CHECK(upstream.requests().Size() == 1);
}

TEST_CASE("an https URL to a plain-HTTP server fails the TLS handshake without a retry", "[openai_client]") {
  // Exercises the TLS path (SNI, peer verification) without a certificate: the handshake itself fails.
  fake_upstream upstream;
  auto options = options_for(upstream);
  options.base_url = "https://127.0.0.1:" + std::to_string(upstream.port()) + "/v1";
  openai_chat_client client(options);
  auto out = infer(client, simple_request());
  CHECK_FALSE(out.ok);
  CHECK_FALSE(out.retryable);
  CHECK(out.error.find("TLS handshake failed") != std::string::npos);
  CHECK(upstream.wait_active(0));
}

TEST_CASE("many concurrent calls on several io threads each complete once", "[openai_client]") {
  fake_upstream upstream;
  upstream.script(R"({"default":{"content":"pong","chunk_size":2,"delay_ms":5}})");
  auto options = options_for(upstream);
  options.io_threads = 3;
  openai_chat_client client(options);
  constexpr int calls = 24;
  std::vector<std::future<model_outcome>> futures;
  for (int i = 0; i < calls; ++i) {
    futures.push_back(start_round(client, simple_request(i % 2 == 0)));
  }
  for (auto& f : futures) {
    REQUIRE(f.wait_for(20s) == std::future_status::ready);
    auto out = f.get();
    CHECK(out.ok);
    CHECK(out.reply.content == "pong");
  }
  CHECK(upstream.requests().Size() == calls);
}

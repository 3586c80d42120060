// What the edge answers on its own account, over a real socket: a body over service.max_body_bytes is
// refused 413 in the path's dialect before it is read (announced by Content-Length) or as soon as it
// passes the limit (chunked), and a client still uploading reads that answer rather than a reset
// (RS-2); every answer carries an x-request-id of its own (RS-1).
#include "io/http_server.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>

using namespace troupe;

namespace {

constexpr int64_t limit = 10 * 1024 * 1024;

struct edge_server {
  std::unique_ptr<io::http_server> server;
  uint16_t port = 0;

  edge_server() {
    auto routes = std::make_shared<io::router>();
    routes->add("POST", "/v1/responses", [](io::http_request&, std::shared_ptr<io::http_exchange> ex) {
      io::http_response r = io::json_response(200, R"({"ok":true})");
      r.headers.emplace_back("x-request-id", "from-the-handler"); // the edge's own id replaces it
      ex->respond(std::move(r));
    });
    routes->add("GET", "/v1/events", [](io::http_request&, std::shared_ptr<io::http_exchange> ex) {
      auto stream = ex->open_event_stream({{"x-request-id", "from-the-handler"}});
      stream->send("data: one\n\n");
      stream->finish();
    });
    routes->add("GET", "/v1/models/{model...}", [](io::http_request& req, std::shared_ptr<io::http_exchange> ex) {
      ex->respond(io::json_response(200, "{\"model\":\"" + req.params["model"] + "\"}"));
    });
    io::http_server_options options;
    options.port = 0;
    options.max_body_bytes = limit;
    // A caller without a key is refused from the head, as admission does.
    options.admit_head = [](const io::http_request& head) -> std::optional<io::http_response> {
      if (head.header("authorization").empty())
        return io::json_response(401, R"({"error":{"message":"no key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})");
      return std::nullopt;
    };
    server = std::make_unique<io::http_server>(options, routes);
    port = server->start();
  }
  ~edge_server() { server->stop(); }
};

int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

// Sends all of `bytes`; the errno that stopped it, 0 when all went out.
int send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    auto n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno;
    }
    sent += static_cast<std::size_t>(n);
  }
  return 0;
}

// One whole answer (its head and its Content-Length body, or a chunked body to its last chunk).
std::string read_answer(int fd) {
  std::string got;
  char buf[16 * 1024];
  for (;;) {
    auto head_end = got.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      std::smatch m;
      std::string head = got.substr(0, head_end);
      if (std::regex_search(head, m, std::regex("[Cc]ontent-[Ll]ength: (\\d+)"))
          && got.size() >= head_end + 4 + std::stoul(m[1]))
        return got;
      if (got.find("\r\n0\r\n\r\n", head_end) != std::string::npos)
        return got;
    }
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0)
      return got;
    got.append(buf, static_cast<std::size_t>(n));
  }
}

std::string request_id_of(const std::string& answer) {
  std::smatch m;
  if (std::regex_search(answer, m, std::regex("\r\n[Xx]-[Rr]equest-[Ii]d: ([^\r]*)\r\n")))
    return m[1];
  return {};
}

const std::regex minted_id("req_[0-9a-f]{32}");

// What the client saw after the answer: end-of-stream (0) or the error that ended its reading.
int read_end(int fd) {
  char buf[4096];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0)
      return 0;
    if (n < 0)
      return errno;
  }
}

const std::string body_too_large =
  R"({"error":{"message":"Request body exceeds 10485760 bytes.","type":"invalid_request_error","param":null,"code":"request_too_large"}})";

} // namespace

TEST_CASE("RS-2 an 11 MiB body announced by Content-Length is answered 413 in the openai dialect before it is "
          "read, and the client, still uploading, sends it all and reads the answer, not a reset",
          "[http_edge]") {
  edge_server server;
  int fd = connect_to(server.port);
  std::string body(11 * 1024 * 1024, 'x');
  auto head = "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n"
              "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  REQUIRE(send_all(fd, head) == 0);
  // The answer comes before any byte of the body was sent.
  pollfd ready{fd, POLLIN, 0};
  REQUIRE(::poll(&ready, 1, 5000) == 1);
  int upload_error = -1;
  std::thread uploader([&] { upload_error = send_all(fd, body); });
  auto answer = read_answer(fd);
  uploader.join();
  CHECK(upload_error == 0); // no EPIPE, no reset while the client uploads
  REQUIRE(answer.rfind("HTTP/1.1 413 ", 0) == 0);
  CHECK(answer.find("Connection: close") != std::string::npos);
  CHECK(answer.substr(answer.find("\r\n\r\n") + 4) == body_too_large);
  CHECK(std::regex_match(request_id_of(answer), minted_id));
  ::shutdown(fd, SHUT_WR);
  CHECK(read_end(fd) == 0); // the server closes in order once the client is done
  ::close(fd);
}

TEST_CASE("RS-2 a chunked body that passes the limit mid-stream is answered 413, and the client still sending "
          "reads the answer rather than a reset",
          "[http_edge]") {
  edge_server server;
  int fd = connect_to(server.port);
  REQUIRE(send_all(fd, "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n"
                       "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n") == 0);
  std::string piece(1024 * 1024, 'x');
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
  std::string chunks;
  for (int i = 0; i < 11; ++i)
    chunks += size + piece + "\r\n";
  chunks += "0\r\n\r\n";
  int upload_error = -1;
  std::thread uploader([&] { upload_error = send_all(fd, chunks); });
  auto answer = read_answer(fd);
  uploader.join();
  CHECK(upload_error == 0);
  REQUIRE(answer.rfind("HTTP/1.1 413 ", 0) == 0);
  CHECK(answer.substr(answer.find("\r\n\r\n") + 4) == body_too_large);
  CHECK(std::regex_match(request_id_of(answer), minted_id));
  ::shutdown(fd, SHUT_WR);
  CHECK(read_end(fd) == 0);
  ::close(fd);
}

TEST_CASE("RS-1 every answer carries a fresh x-request-id of the edge's own: a handler's answer, an event stream, "
          "a 404, a refusal from the head (401, 413), never a value the client or the handler gave",
          "[http_edge]") {
  edge_server server;
  std::set<std::string> ids;
  auto ask = [&](const std::string& request) {
    int fd = connect_to(server.port);
    REQUIRE(send_all(fd, request) == 0);
    auto answer = read_answer(fd);
    ::close(fd);
    auto id = request_id_of(answer);
    CHECK(std::regex_match(id, minted_id));
    ids.insert(id);
    return answer;
  };
  const std::string client_id = "X-Request-Id: chosen-by-the-client\r\n";
  auto ok = ask("POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n" + client_id
                + "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
  CHECK(ok.rfind("HTTP/1.1 200 ", 0) == 0);
  CHECK(ok.find("from-the-handler") == std::string::npos);
  auto events = ask("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n" + client_id + "\r\n");
  CHECK(events.find("text/event-stream") != std::string::npos);
  CHECK(events.find("from-the-handler") == std::string::npos);
  CHECK(ask("GET /v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n" + client_id + "\r\n").rfind("HTTP/1.1 404 ", 0) == 0);
  CHECK(ask("POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\n" + client_id
            + "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
          .rfind("HTTP/1.1 401 ", 0)
        == 0);
  CHECK(ask("POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n" + client_id
            + "Content-Type: application/json\r\nContent-Length: 20000000\r\n\r\n")
          .rfind("HTTP/1.1 413 ", 0)
        == 0);
  CHECK(ids.size() == 5);
  CHECK(ids.count("chosen-by-the-client") == 0);
}

TEST_CASE("RS-13 a route's last {name...} segment takes the rest of the path, slashes included, and needs one "
          "segment at least",
          "[http_edge]") {
  edge_server server;
  auto get = [&](const std::string& target) {
    int fd = connect_to(server.port);
    REQUIRE(send_all(fd, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") == 0);
    auto answer = read_answer(fd);
    ::close(fd);
    return answer;
  };
  CHECK(get("/v1/models/Qwen/Qwen3.6-35B-A3B").find(R"({"model":"Qwen/Qwen3.6-35B-A3B"})") != std::string::npos);
  CHECK(get("/v1/models/Qwen%2FQwen3.6-35B-A3B").find(R"({"model":"Qwen/Qwen3.6-35B-A3B"})") != std::string::npos);
  CHECK(get("/v1/models/plain").find(R"({"model":"plain"})") != std::string::npos);
  CHECK(get("/v1/models/").rfind("HTTP/1.1 404 ", 0) == 0);
}

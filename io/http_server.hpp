// The Beast edge: a listener that accepts connections and sessions that read requests, hand them
// to the router and write answers and event streams on their strand.
#pragma once

#include "io/router.hpp"
#include "protocol/http_edge.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace troupe::io {

struct http_server_options {
  std::string host = "127.0.0.1";
  uint16_t port = 18741; // 0 picks a free port
  int threads = 2;
  int64_t max_body_bytes = 10 * 1024 * 1024;
  double read_timeout_seconds = 30;
  double sse_heartbeat_seconds = 15;
  int64_t max_stream_buffer_bytes = 4 * 1024 * 1024;
  // Connections open at once; one more is answered 503 and closed, so descriptors never run out.
  int64_t max_connections = 1024;
  protocol::edge_policy edge; // Host, Origin and Content-Type checks of every request head
  // Asked with a request's head (no body yet) when it announces a body: an answer refuses the request
  // before its body is read (a caller that is not admitted costs no body's worth of memory).
  std::function<std::optional<http_response>(const http_request& head)> admit_head;
};

class http_server {
public:
  http_server(http_server_options options, std::shared_ptr<const router> routes);
  ~http_server();

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Binds, listens and starts the I/O threads; returns the bound port. Throws on failure.
  uint16_t start();

  // Stops accepting; open connections carry on.
  void stop_accepting();

  // Event streams and deferred answers still open.
  int64_t open_exchanges() const;

  // Closes every connection and joins the I/O threads.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::io

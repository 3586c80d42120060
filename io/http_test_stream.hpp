// A seam for tests: http_server's HTTP session run over Beast's test stream instead of an accepted
// socket, so that a test can fail each read and write of a session in turn (test::fail_count).
// Only the listener (io/http_server.cpp) and tests include it: it brings Beast's test stream.
#pragma once

#include "io/http_server.hpp"

#include <boost/beast/_experimental/test/stream.hpp>

#include <cstdint>
#include <memory>

namespace troupe::io {

class test_stream_sessions {
public:
  test_stream_sessions(http_server_options options, std::shared_ptr<const router> routes);
  ~test_stream_sessions();

  test_stream_sessions(const test_stream_sessions&) = delete;
  test_stream_sessions& operator=(const test_stream_sessions&) = delete;

  // Serves `stream` as one accepted connection, on the stream's io_context (which the test runs).
  // The session has no timeouts, no peer address and no readiness watch there: those are TCP's.
  void serve(boost::beast::test::stream stream);

  // What http_server::stop() does to the connections still open.
  void close_all();

  int64_t open_exchanges() const;
  // Connections whose slot under service.max_connections is still held: a session (or the WebSocket it
  // became) that is not yet destroyed.
  int64_t open_connections() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::io

// An HTTP session (io/http_session.cpp): reads a connection's requests, admits each from its head,
// hands it to the router with an exchange, and writes answers and event streams on the connection's
// strand; a WebSocket upgrade hands the connection on (io/websocket_session.hpp). Private to the edge's
// .cpp files: it brings Beast.
#pragma once

#include "io/http_connection.hpp"

#include <memory>

namespace troupe::io {

// Serves an accepted connection until it ends; the session keeps itself alive meanwhile and holds the
// connection's slot. Nothing is served once stop() has begun.
void serve_session(tcp::socket socket, const std::shared_ptr<server_state>& state);
// The same over Beast's test stream, on the stream's io_context (io/http_test_stream.hpp).
void serve_session(test_transport stream, const std::shared_ptr<server_state>& state);

} // namespace troupe::io

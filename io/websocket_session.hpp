// The WebSocket an HTTP session hands its connection to after an upgrade (io/websocket_session.cpp).
// Private to the edge's .cpp files: it brings Beast.
#pragma once

#include "io/http_connection.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace troupe::io {

// What the session asks of the WebSocket it becomes, on the connection's strand.
template <class Stream>
class websocket_upgrade : public websocket {
public:
  // Takes over the session's stream and answers the upgrade request. The open exchange the session
  // counted is the WebSocket's from now on.
  virtual void accept(handoff<Stream> stream, socket_slot slot,
                      const beast::http::request<beast::http::string_body>& request,
                      const std::string& subprotocol) = 0;
  // The upgrade did not happen (the connection ended or was answered first): a WebSocket that has ended.
  virtual void abandon() = 0;
};

// Instantiated in io/websocket_session.cpp for the two streams of io/http_connection.hpp.
template <class Stream>
std::shared_ptr<websocket_upgrade<Stream>> make_websocket_session(net::any_io_executor strand,
                                                                  std::shared_ptr<server_state> state,
                                                                  std::size_t outbox_frames);

} // namespace troupe::io

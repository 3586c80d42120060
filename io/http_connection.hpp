// What the edge's listener and sessions share: the server's state, the connections stop() ends, a
// connection's slot under service.max_connections, and the two streams a session runs over. It brings
// Asio and Beast, so only the edge's own .cpp files include it (http_server.hpp keeps them hidden).
#pragma once

#include "io/http_server.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>

namespace troupe::io {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

inline std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// Anything stop() has to end: an HTTP session, or a WebSocket upgraded from one.
class connection {
public:
  virtual ~connection() = default;
  // Ends the connection at once, from any thread.
  virtual void close_now() = 0;
};

struct server_state {
  http_server_options options;
  std::shared_ptr<const router> routes;
  std::atomic<int64_t> open_exchanges{0};
  std::atomic<int64_t> open_sockets{0}; // accepted and not yet closed (service.max_connections)

  // Registers a connection for stop(); false once stop() has begun, so that nothing opened during the
  // stop is missed.
  bool track(const std::shared_ptr<connection>& c) {
    std::lock_guard<std::mutex> lock(connections_mu);
    if (stopping)
      return false;
    for (auto it = connections.begin(); it != connections.end();)
      it = it->second.expired() ? connections.erase(it) : std::next(it);
    connections.emplace(c.get(), c);
    return true;
  }

  void untrack(connection* c) {
    std::lock_guard<std::mutex> lock(connections_mu);
    connections.erase(c);
  }

  void close_all() {
    std::lock_guard<std::mutex> lock(connections_mu);
    stopping = true;
    for (auto& [ptr, weak] : connections)
      if (auto c = weak.lock())
        c->close_now();
  }

  std::mutex connections_mu;
  bool stopping = false;
  std::unordered_map<connection*, std::weak_ptr<connection>> connections;
};

// One accepted socket's place under service.max_connections, given back when its last holder (the
// HTTP session, or the WebSocket it became) is gone.
using socket_slot = std::shared_ptr<void>;

inline socket_slot take_slot(const std::shared_ptr<server_state>& state) {
  ++state->open_sockets;
  return socket_slot(nullptr, [state](void*) { --state->open_sockets; });
}

// A session's stream: an accepted TCP connection, or Beast's test stream, over which tests fail each
// read and write in turn (io/http_test_stream.hpp). Timeouts, the peer's address, shutting one direction
// and the readiness watch are TCP's; over the test stream they do nothing, and a shutdown closes.
using tcp_transport = beast::tcp_stream;
using test_transport = beast::test::stream;

template <class Stream>
constexpr bool is_tcp = std::is_same_v<Stream, tcp_transport>;

// What a session hands to the WebSocket it becomes.
template <class Stream>
using handoff = std::conditional_t<is_tcp<Stream>, tcp::socket, Stream>;

} // namespace troupe::io

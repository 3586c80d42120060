// The handler's view of one request (`http_exchange`, and the `event_stream` it may open), and what it
// asks of the session that read the request, whatever stream that session runs over. No Beast here.
#pragma once

#include "io/http_types.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace troupe::io {

// What an exchange asks of its session, whatever stream the session runs over.
class session_base {
public:
  virtual ~session_base() = default;
  virtual void respond(uint64_t gen, http_response r) = 0;
  virtual void open_stream(uint64_t gen, header_list headers) = 0;
  virtual bool send_frame(uint64_t gen, std::string frame, int64_t events) = 0;
  virtual bool backlogged() const = 0;
  virtual int64_t queued_events() const = 0;
  virtual void set_events_written(uint64_t gen, std::function<void()> written) = 0;
  virtual void finish_stream(uint64_t gen) = 0;
  virtual void set_disconnect(uint64_t gen, std::function<void()> cb) = 0;
  // Hands the connection to a new WebSocket, which answers the upgrade request. Not `first` (the
  // exchange was answered already): the WebSocket returned has ended.
  virtual std::shared_ptr<websocket> upgrade(uint64_t gen, std::string subprotocol, std::size_t outbox_frames,
                                             bool first) = 0;
};

// The handler's view of one request: forwards to the session's strand, tagged with the request's
// generation so that a late answer can never reach the connection's next request.
class exchange_impl : public http_exchange, public event_stream, public std::enable_shared_from_this<exchange_impl> {
public:
  exchange_impl(std::shared_ptr<session_base> s, uint64_t gen, bool upgradable)
    : session_(std::move(s)), gen_(gen), upgradable_(upgradable) {}
  void respond(http_response response) override;
  std::shared_ptr<event_stream> open_event_stream(header_list headers) override;
  void on_disconnect(std::function<void()> callback) override;
  std::shared_ptr<websocket> upgrade(std::string subprotocol, std::size_t outbox_frames) override;
  using event_stream::send;
  bool send(std::string frame, int64_t events) override;
  void finish() override;
  bool backlogged() const override;
  int64_t queued_events() const override;
  void on_events_written(std::function<void()> written) override;

  // True once respond() was called: a whole answer is on its way and there is nothing to watch.
  bool responded() const { return responded_.load(); }

private:
  std::shared_ptr<session_base> session_;
  uint64_t gen_;
  bool upgradable_; // a WebSocket upgrade request, known when the request was read
  std::atomic<bool> answered_{false};
  std::atomic<bool> responded_{false};
};

} // namespace troupe::io

// HTTP as the handlers see it: plain request and response values, and the exchange through which
// a handler answers later, streams server-sent events or upgrades to a WebSocket. No Beast here.
#pragma once

#include "protocol/errors.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::io {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct http_request {
  std::string method; // upper case
  std::string target; // as received
  std::string path;   // without the query
  std::map<std::string, std::string> query;   // percent-decoded
  std::map<std::string, std::string> headers; // names lower case
  std::map<std::string, std::string> params;  // path parameters, filled by the router
  std::string body;
  std::string peer; // the client's IP address, as the listener saw it
  // A WebSocket upgrade whose Origin is neither troupe's own nor trusted (CO-10): the route completes
  // the upgrade (WS-44) and closes it with 4403.
  bool cross_origin = false;

  // The header's value, or "" when absent; `name` in lower case.
  const std::string& header(const std::string& name) const;
};

struct http_response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  header_list headers;
};

http_response json_response(int status, std::string body);

// The edge's one way to answer a problem: its status and body in the dialect of the mount.
http_response error_response(protocol::dialect d, const problem& p);

// A server-sent-events response in progress. Thread-safe.
class event_stream {
public:
  virtual ~event_stream() = default;
  // Queues one frame; false once the stream is closed or the client was dropped for falling
  // behind (service.max_stream_buffer_bytes). `events` counts the producer's events in the frame
  // until it is written (queued_events()); a producer that counts its events paces itself by them,
  // so its frames are never dropped for size.
  virtual bool send(std::string frame, int64_t events) = 0;
  bool send(std::string frame) { return send(std::move(frame), 0); }
  // The counted events of the frames queued and not yet written.
  virtual int64_t queued_events() const = 0;
  // `written` runs on an I/O thread after each write that took the producer's frames off the queue
  // (counted events or buffered bytes): how a producer that held back learns of room (stream_pacing).
  virtual void on_events_written(std::function<void()> written) = 0;
  // Ends the response once the queued frames are written.
  virtual void finish() = 0;
  // True while more than half of the client's buffer is queued: a producer that can re-read what it
  // skips (a run stream replays from the store) holds back instead of being dropped.
  virtual bool backlogged() const = 0;
};

struct websocket_handlers {
  std::function<void(std::string data, bool binary)> on_message;
  // Once, when the connection ends for any reason (client close, error, server close, server stop).
  std::function<void()> on_closed;
};

// An upgraded WebSocket connection. Thread-safe.
class websocket {
public:
  virtual ~websocket() = default;
  // Starts reading; call once. Messages and the end of the connection reach `handlers` on an I/O thread.
  virtual void start(websocket_handlers handlers) = 0;
  // Queues one text frame. False when the connection is closing/closed, or when `outbox_frames` frames are
  // already queued and unwritten (the caller decides what that means, e.g. close 4429).
  virtual bool send(std::string text) = 0;
  // Sends a close frame with `code` and `reason` (cut to 123 bytes, at a UTF-8 boundary) once the frames queued
  // before it are written, then ends the connection. Later sends return false. Safe to call before start() and twice.
  virtual void close(uint16_t code, std::string reason) = 0;
  // Frames queued and not yet written.
  virtual std::size_t queued() const = 0;
};

// One request's answer. Thread-safe; the first of respond/open_event_stream/upgrade wins.
class http_exchange {
public:
  virtual ~http_exchange() = default;
  virtual void respond(http_response response) = 0;
  // Sends 200 with text/event-stream headers (plus `headers`) and returns the stream.
  virtual std::shared_ptr<event_stream> open_event_stream(header_list headers) = 0;
  // Runs once, on an I/O thread, if the client goes away before the answer is complete.
  virtual void on_disconnect(std::function<void()> callback) = 0;
  // Answers this request by upgrading it to a WebSocket, selecting `subprotocol` when not empty (the caller
  // decides whether the client offered it). nullptr when the request is not a WebSocket upgrade (then the
  // exchange is still unanswered). The handshake is written asynchronously; frames sent meanwhile wait.
  // After an upgrade the WebSocket's on_closed, not on_disconnect, reports the client leaving.
  // Not pure so that exchanges that never see an upgrade (test doubles) need not say so.
  virtual std::shared_ptr<websocket> upgrade(std::string subprotocol, std::size_t outbox_frames) {
    (void)subprotocol;
    (void)outbox_frames;
    return nullptr;
  }
};

using http_handler = std::function<void(http_request& request, std::shared_ptr<http_exchange> exchange)>;

} // namespace troupe::io

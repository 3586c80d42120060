// HTTP as the handlers see it: plain request and response values, and the exchange through which
// a handler answers later, or streams server-sent events. No Beast here.
#pragma once

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

// A server-sent-events response in progress. Thread-safe.
class event_stream {
public:
  virtual ~event_stream() = default;
  // Queues one frame; false once the stream is closed or the client was dropped for falling
  // behind (service.max_stream_buffer_bytes).
  virtual bool send(std::string frame) = 0;
  // Ends the response once the queued frames are written.
  virtual void finish() = 0;
  // True while more than half of the client's buffer is queued: a producer that can re-read what it
  // skips (a run stream replays from the store) holds back instead of being dropped.
  virtual bool backlogged() const = 0;
};

// One request's answer. Thread-safe; the first of respond/open_event_stream wins.
class http_exchange {
public:
  virtual ~http_exchange() = default;
  virtual void respond(http_response response) = 0;
  // Sends 200 with text/event-stream headers (plus `headers`) and returns the stream.
  virtual std::shared_ptr<event_stream> open_event_stream(header_list headers) = 0;
  // Runs once, on an I/O thread, if the client goes away before the answer is complete.
  virtual void on_disconnect(std::function<void()> callback) = 0;
};

using http_handler = std::function<void(http_request& request, std::shared_ptr<http_exchange> exchange)>;

} // namespace troupe::io

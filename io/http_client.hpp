// Included only by io/openai_chat_client.cpp, io/mcp_http_transport.cpp and io/web_client.cpp: it names
// an Asio executor.
#pragma once

#include "protocol/http_url.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace boost::asio::ssl {
class context;
}

namespace troupe::io {

using protocol::describe;
using protocol::http_url;
using protocol::parse_http_url;
using protocol::url_problem;

// What an http_connection writes: Host (the URL's authority) and User-Agent come first, then these.
struct http_client_request {
  std::string method; // "POST", "DELETE"...
  std::string target;
  std::vector<std::pair<std::string, std::string>> fields;
  bool close = false; // Connection: close
  std::string body;
};

// Kinds of errors a caller reports in its own words.
bool is_body_limit(const boost::system::error_code& ec);
bool is_header_limit(const boost::system::error_code& ec);
bool is_tls_error(const boost::system::error_code& ec); // a refused certificate, a failed handshake...

// One request and its response, read in chunks, on a connection of its own: resolve (skipped for a
// literal address), connect and, for https, a TLS handshake with SNI that verifies the peer and its
// host name. Handlers run on the executor given, and every call must be made from it. Closing (or
// destroying) aborts what is pending: its handler then sees an error.
class http_connection {
public:
  // `what` names the step that failed ("cannot connect", "no response"...); ec is clear on success.
  using step_handler = std::function<void(const char* what, boost::system::error_code ec)>;
  // `bytes` stays valid until the next read_some. Once the response is complete, read_some calls
  // `done` at once, with no bytes.
  using body_handler =
    std::function<void(const char* what, boost::system::error_code ec, std::string_view bytes)>;

  // `tls` is needed for an https URL only; it may be null for http.
  http_connection(const boost::asio::any_io_executor& executor, boost::asio::ssl::context* tls,
                  const http_url& url, std::size_t header_limit, std::uint64_t body_limit);
  ~http_connection();
  http_connection(const http_connection&) = delete;
  http_connection& operator=(const http_connection&) = delete;

  void open(step_handler done);
  void write(const http_client_request& request, step_handler done);
  void read_header(step_handler done);
  void read_some(body_handler done);

  int status() const;
  std::string_view header(std::string_view name) const;
  bool complete() const; // the whole response has been read
  void unlimit_body();   // a stream: the caller bounds it by other means
  void close();

private:
  class impl;
  std::shared_ptr<impl> impl_;
};

} // namespace troupe::io

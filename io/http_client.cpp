#include "io/http_client.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <optional>

namespace troupe::io {

namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

constexpr std::size_t read_chunk_bytes = 16 * 1024;
constexpr std::size_t read_buffer_bytes = 16 * 1024;

} // namespace

bool is_body_limit(const boost::system::error_code& ec) {
  return ec == http::error::body_limit;
}

bool is_header_limit(const boost::system::error_code& ec) {
  return ec == http::error::header_limit;
}

bool is_tls_error(const boost::system::error_code& ec) {
  return ec.category() == net::error::get_ssl_category();
}

// Shared with the handlers of its pending operations, which keep it (stream, parser, buffers) alive.
class http_connection::impl : public std::enable_shared_from_this<impl> {
public:
  impl(const net::any_io_executor& executor, ssl::context* tls, const http_url& url, std::size_t header_limit,
       std::uint64_t body_limit)
    : executor_(executor), tls_ctx_(tls), tls_(url.tls), host_(url.host), port_(url.port),
      host_header_(url.host_header), resolver_(executor), chunk_(read_chunk_bytes) {
    parser_.header_limit(header_limit);
    parser_.body_limit(body_limit);
    // Beast reads as much as the buffer's free capacity, at least 512 bytes: a buffer left at its
    // first 512 bytes would read a streaming upstream two or three events at a time.
    buffer_.reserve(read_buffer_bytes);
  }

  void open(step_handler done) {
    // A literal address needs no resolver (whose getaddrinfo thread cannot be interrupted).
    beast::error_code ec;
    auto address = net::ip::make_address(host_, ec);
    if (!ec) {
      tcp_.emplace(executor_);
      tcp::endpoint endpoint(address, static_cast<unsigned short>(std::stoi(port_)));
      auto on_connect = [self = shared_from_this(), done = std::move(done)](beast::error_code ec) mutable {
        self->on_connect(ec, std::move(done));
      };
      tcp_->async_connect(endpoint, std::move(on_connect));
      return;
    }
    resolver_.async_resolve(
      host_, port_,
      [self = shared_from_this(), done = std::move(done)](beast::error_code ec,
                                                          tcp::resolver::results_type found) mutable {
        if (!ec && self->closed_)
          ec = net::error::operation_aborted;
        if (ec)
          return done("cannot resolve host", ec);
        self->tcp_.emplace(self->executor_);
        auto on_connect = [self, done = std::move(done)](beast::error_code ec, const tcp::endpoint&) mutable {
          self->on_connect(ec, std::move(done));
        };
        self->tcp_->async_connect(found, std::move(on_connect));
      });
  }

  void write(const http_client_request& request, step_handler done) {
    req_ = {};
    req_.method(http::string_to_verb(request.method));
    req_.target(request.target);
    req_.version(11);
    req_.set(http::field::host, host_header_);
    req_.set(http::field::user_agent, "troupe");
    for (const auto& [name, value] : request.fields)
      req_.set(name, value);
    if (request.close)
      req_.keep_alive(false);
    req_.body() = request.body;
    req_.prepare_payload();
    auto on_write = [self = shared_from_this(), done = std::move(done)](beast::error_code ec, std::size_t) {
      done(ec ? "cannot send the request" : nullptr, ec);
    };
    with_stream([&](auto& stream) { http::async_write(stream, req_, std::move(on_write)); });
  }

  void read_header(step_handler done) {
    auto on_read = [self = shared_from_this(), done = std::move(done)](beast::error_code ec, std::size_t) {
      done(ec ? "no response" : nullptr, ec);
    };
    with_stream([&](auto& stream) { http::async_read_header(stream, buffer_, parser_, std::move(on_read)); });
  }

  void read_some(body_handler done) {
    if (parser_.is_done()) { // no more body: reading on would wait for bytes that never come
      reset_chunk();
      return done(nullptr, {}, {});
    }
    reset_chunk();
    auto on_read = [self = shared_from_this(), done = std::move(done)](beast::error_code ec, std::size_t) {
      if (ec == http::error::need_buffer) // the chunk is full: consume it, then read on
        ec = {};
      if (!ec)
        self->parse_buffered(ec);
      if (ec)
        return done("response interrupted", ec, {});
      std::size_t got = self->chunk_.size() - self->parser_.get().body().size;
      done(nullptr, ec, std::string_view(self->chunk_.data(), got));
    };
    with_stream([&](auto& stream) { http::async_read_some(stream, buffer_, parser_, std::move(on_read)); });
  }

  // Parses what the buffer already holds, as far as it goes without waiting for the socket. Beast's
  // read_some hands back one HTTP chunk, and a streaming upstream sends one chunk per event; eager
  // parsing would instead hold finished chunks back until the next one's header arrives.
  void parse_buffered(beast::error_code& ec) {
    while (!parser_.is_done() && buffer_.size() > 0 && parser_.get().body().size > 0) {
      auto used = parser_.put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more || ec == http::error::need_buffer) {
        ec = {};
        return;
      }
      if (ec || used == 0)
        return;
    }
  }

  int status() const {
    return static_cast<int>(parser_.get().result_int());
  }

  std::string_view header(std::string_view name) const {
    auto value = parser_.get()[beast::string_view(name.data(), name.size())];
    return std::string_view(value.data(), value.size());
  }

  bool complete() const {
    return parser_.is_done();
  }

  void unlimit_body() {
    parser_.body_limit(boost::none);
  }

  void close() {
    closed_ = true;
    resolver_.cancel();
    if (tls_stream_)
      beast::get_lowest_layer(*tls_stream_).close();
    if (tcp_)
      tcp_->close();
  }

private:
  void on_connect(beast::error_code ec, step_handler done) {
    if (!ec && closed_)
      ec = net::error::operation_aborted;
    if (ec)
      return done("cannot connect", ec);
    if (tls_)
      handshake(std::move(done));
    else
      done(nullptr, ec);
  }

  void handshake(step_handler done) {
    tls_stream_.emplace(std::move(*tcp_), *tls_ctx_);
    tcp_.reset();
    beast::error_code not_ip;
    net::ip::make_address(host_, not_ip);
    // SNI names a host; RFC 6066 forbids sending a literal address.
    if (not_ip && !SSL_set_tlsext_host_name(tls_stream_->native_handle(), host_.c_str())) {
      beast::error_code ec{static_cast<int>(::ERR_get_error()), net::error::get_ssl_category()};
      return done("cannot set TLS server name", ec);
    }
    tls_stream_->set_verify_mode(ssl::verify_peer);
    tls_stream_->set_verify_callback(ssl::host_name_verification(host_));
    auto on_handshake = [self = shared_from_this(), done = std::move(done)](beast::error_code ec) {
      done(ec ? "TLS handshake failed" : nullptr, ec);
    };
    tls_stream_->async_handshake(ssl::stream_base::client, std::move(on_handshake));
  }

  void reset_chunk() {
    parser_.get().body().data = chunk_.data();
    parser_.get().body().size = chunk_.size();
  }

  template <class F>
  void with_stream(F&& f) {
    if (tls_stream_)
      f(*tls_stream_);
    else
      f(*tcp_);
  }

  const net::any_io_executor executor_;
  ssl::context* tls_ctx_;
  const bool tls_;
  const std::string host_;
  const std::string port_;
  const std::string host_header_;
  bool closed_ = false;
  tcp::resolver resolver_;
  std::optional<beast::tcp_stream> tcp_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_stream_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  http::response_parser<http::buffer_body> parser_;
  std::vector<char> chunk_;
};

http_connection::http_connection(const boost::asio::any_io_executor& executor, boost::asio::ssl::context* tls,
                                 const http_url& url, std::size_t header_limit, std::uint64_t body_limit)
  : impl_(std::make_shared<impl>(executor, tls, url, header_limit, body_limit)) {
}

http_connection::~http_connection() {
  impl_->close(); // as destroying a stream would
}

void http_connection::open(step_handler done) {
  impl_->open(std::move(done));
}

void http_connection::write(const http_client_request& request, step_handler done) {
  impl_->write(request, std::move(done));
}

void http_connection::read_header(step_handler done) {
  impl_->read_header(std::move(done));
}

void http_connection::read_some(body_handler done) {
  impl_->read_some(std::move(done));
}

int http_connection::status() const {
  return impl_->status();
}

std::string_view http_connection::header(std::string_view name) const {
  return impl_->header(name);
}

bool http_connection::complete() const {
  return impl_->complete();
}

void http_connection::unlimit_body() {
  impl_->unlimit_body();
}

void http_connection::close() {
  impl_->close();
}

} // namespace troupe::io

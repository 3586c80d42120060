// The listener: binds, accepts each connection onto a strand of its own and hands it to an HTTP
// session (io/http_session.cpp), within service.max_connections (one more is answered 503) and pausing
// after a failed accept (out of descriptors) instead of spinning; and the I/O threads that run it all.
#include "io/http_server.hpp"
#include "io/http_session.hpp"
#include "io/http_test_stream.hpp"
#include "protocol/ids.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace troupe::io {

using std::chrono::steady_clock;

struct http_server::impl {
  std::shared_ptr<server_state> state = std::make_shared<server_state>();
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{net::make_strand(ioc)};
  std::vector<std::thread> threads;

  net::steady_timer accept_pause{acceptor.get_executor()};

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor.is_open())
          return;
        // Out of descriptors (EMFILE, ENFILE) or another failure that a retry at once would meet again:
        // the connection stays queued in the backlog, and accepting resumes after a pause instead of
        // spinning.
        spdlog::warn("http: accept failed ({}); pausing accepts for 100 ms", ec.message());
        accept_pause.expires_after(std::chrono::milliseconds(100));
        accept_pause.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec && acceptor.is_open())
            accept();
        });
        return;
      }
      beast::error_code opt_ec;
      socket.set_option(tcp::no_delay(true), opt_ec);
      if (state->open_sockets.load() >= state->options.max_connections)
        refuse_connection(std::move(socket));
      else
        serve_session(std::move(socket), state);
      accept();
    });
  }

  // A connection over service.max_connections: a fixed 503 and a close, without reading its request.
  static void refuse_connection(tcp::socket socket) {
    auto answer = std::make_shared<std::string>(
      "HTTP/1.1 503 Service Unavailable\r\nServer: troupe\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nx-request-id: " + protocol::uuid7_id("req_") +
      "\r\nConnection: close\r\nContent-Length: 33\r\n\r\n{\"detail\":\"Too many connections\"}");
    auto s = std::make_shared<tcp::socket>(std::move(socket));
    net::async_write(*s, net::buffer(*answer), [s, answer](beast::error_code, std::size_t) {
      beast::error_code ignored;
      s->shutdown(tcp::socket::shutdown_both, ignored);
      s->close(ignored);
    });
  }
};

http_server::http_server(http_server_options options, std::shared_ptr<const router> routes)
  : impl_(std::make_unique<impl>()) {
  impl_->state->options = std::move(options);
  impl_->state->routes = std::move(routes);
}

http_server::~http_server() {
  stop();
}

uint16_t http_server::start() {
  auto& o = impl_->state->options;
  auto address = net::ip::make_address(o.host);
  tcp::endpoint endpoint{address, o.port};
  auto& acc = impl_->acceptor;
  acc.open(endpoint.protocol());
  acc.set_option(net::socket_base::reuse_address(true));
  acc.bind(endpoint);
  acc.listen(net::socket_base::max_listen_connections);
  auto port = acc.local_endpoint().port();
  impl_->work.emplace(net::make_work_guard(impl_->ioc));
  impl_->accept();
  for (int i = 0; i < std::max(1, o.threads); ++i)
    impl_->threads.emplace_back([this] {
      // A handler that throws ends only what it was doing, never the I/O thread and the process.
      for (;;) {
        try {
          impl_->ioc.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("http: an I/O handler threw: {}", e.what());
        }
      }
    });
  return port;
}

void http_server::stop_accepting() {
  net::post(impl_->acceptor.get_executor(), [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
}

int64_t http_server::open_exchanges() const {
  return impl_->state->open_exchanges.load();
}

void http_server::stop() {
  if (impl_->threads.empty())
    return;
  stop_accepting();
  impl_->state->close_all();
  impl_->work.reset();
  // Closing sockets ends their pending operations; whatever still runs after a moment is stopped.
  auto deadline = steady_clock::now() + std::chrono::seconds(2);
  while (!impl_->ioc.stopped() && steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->ioc.stop();
  for (auto& t : impl_->threads)
    t.join();
  impl_->threads.clear();
}

struct test_stream_sessions::impl {
  std::shared_ptr<server_state> state = std::make_shared<server_state>();
};

test_stream_sessions::test_stream_sessions(http_server_options options, std::shared_ptr<const router> routes)
  : impl_(std::make_unique<impl>()) {
  impl_->state->options = std::move(options);
  impl_->state->routes = std::move(routes);
}

test_stream_sessions::~test_stream_sessions() = default;

void test_stream_sessions::serve(beast::test::stream stream) {
  serve_session(std::move(stream), impl_->state);
}

void test_stream_sessions::close_all() {
  impl_->state->close_all();
}

int64_t test_stream_sessions::open_exchanges() const {
  return impl_->state->open_exchanges.load();
}

int64_t test_stream_sessions::open_connections() const {
  return impl_->state->open_sockets.load();
}

} // namespace troupe::io

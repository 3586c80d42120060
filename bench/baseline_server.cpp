// The benchmark baseline: the smallest reasonable Boost.Beast HTTP/1.1 keep-alive server. It answers
// GET /health with a small fixed JSON body (404 for anything else), one strand per connection and
// the same number of I/O threads troupe uses by default (service.io_threads = 2), so that
// bench/run can divide troupe's requests/s by this server's, measured in the same run.
//
//   troupe_bench_baseline [--host H] [--port P] [--threads N]
//
// Prints `baseline listening on http://H:P` once it accepts; stops on SIGINT or SIGTERM.
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// About the size of troupe's /health answer, so both servers write comparable bytes.
const std::string health_body = R"({"status":"healthy","agent_ready":true,)"
                                R"("service_contract":"fastreact.agent_event.v1",)"
                                R"("timestamp":"2024-01-01T00:00:00.000000+00:00"})";

class session : public std::enable_shared_from_this<session> {
public:
  explicit session(tcp::socket&& socket) : stream_(std::move(socket)) {}

  void run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

private:
  void do_read() {
    req_ = {};
    stream_.expires_after(std::chrono::seconds(30));
    http::async_read(stream_, buffer_, req_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec)
      return close();
    bool found = req_.method() == http::verb::get && req_.target() == "/health";
    res_ = {found ? http::status::ok : http::status::not_found, req_.version()};
    res_.set(http::field::server, "baseline");
    res_.set(http::field::content_type, "application/json");
    res_.keep_alive(req_.keep_alive());
    res_.body() = found ? health_body : std::string(R"({"error":"not found"})");
    res_.prepare_payload();
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec || !self->res_.keep_alive())
        return self->close();
      self->do_read();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
};

class listener {
public:
  listener(net::io_context& ioc, tcp::endpoint endpoint) : ioc_(ioc), acceptor_(net::make_strand(ioc)) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(net::socket_base::max_listen_connections);
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }

  void accept() {
    acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
      if (!ec) {
        beast::error_code opt_ec;
        socket.set_option(tcp::no_delay(true), opt_ec);
        std::make_shared<session>(std::move(socket))->run();
      }
      if (acceptor_.is_open())
        accept();
    });
  }

  void close() {
    beast::error_code ec;
    acceptor_.close(ec);
  }

private:
  net::io_context& ioc_;
  tcp::acceptor acceptor_;
};

} // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0;
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    auto arg = std::string(argv[i]);
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "baseline: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--host")
      host = value();
    else if (arg == "--port")
      port = std::atoi(value().c_str());
    else if (arg == "--threads")
      threads = std::max(1, std::atoi(value().c_str()));
    else {
      std::fprintf(stderr, "usage: %s [--host H] [--port P] [--threads N]\n", argv[0]);
      return 2;
    }
  }
  std::signal(SIGPIPE, SIG_IGN);

  net::io_context ioc{threads};
  listener l(ioc, tcp::endpoint{net::ip::make_address(host), static_cast<uint16_t>(port)});
  l.accept();
  net::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code, int) {
    l.close();
    ioc.stop();
  });
  std::printf("baseline listening on http://%s:%u\n", host.c_str(), l.port());
  std::fflush(stdout);

  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i)
    pool.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : pool)
    t.join();
  return 0;
}

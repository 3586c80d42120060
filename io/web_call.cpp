// A request driven on the calling thread: its own io_context, run until the answer ends, fails or
// times out, so the handlers below may refer to the call's locals.
#include "io/web_call.hpp"

#include "io/http_client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>

namespace troupe::io {

namespace {

namespace net = boost::asio;
using boost::system::error_code;
using bytes_handler = std::function<bool(std::string_view)>;

constexpr std::size_t header_limit = 64 * 1024;
constexpr std::uint64_t body_limit = 32 * 1024 * 1024; // an answer read whole: a page of events is far less

web_call_result drive(const web_request& req, const bytes_handler* on_bytes) {
  auto url = parse_http_url(req.url, "/?#");
  if (url.problem != url_problem::none)
    return {{}, req.url + ": " + describe(url.problem)};
  net::io_context ioc;
  net::ssl::context tls{net::ssl::context::tls_client};
  error_code ignored;
  tls.set_default_verify_paths(ignored);
  tls.set_verify_mode(net::ssl::verify_peer);
  http_connection conn(ioc.get_executor(), url.tls ? &tls : nullptr, url, header_limit, body_limit);
  http_client_request request{req.method, url.target.empty() ? "/" : url.target, req.headers, true, req.body};
  net::steady_timer deadline(ioc);
  auto timeout =
    std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(req.timeout_seconds));
  web_call_result result;
  bool done = false;
  bool streaming = false; // a 2xx answer given to on_bytes as it comes
  auto finish = [&](std::string error) {
    if (done)
      return;
    done = true;
    deadline.cancel();
    conn.close();
    result.error = std::move(error);
  };
  auto arm = [&] { // a whole call's deadline, or a stream's idle time
    deadline.expires_after(timeout);
    deadline.async_wait([&](error_code ec) {
      // A wait that expired while on_bytes held the thread may still be queued after re-arming.
      if (!ec && std::chrono::steady_clock::now() >= deadline.expiry())
        finish("timed out");
    });
  };
  std::function<void()> read_body = [&] {
    conn.read_some([&](const char* what, error_code ec, std::string_view bytes) {
      if (done)
        return;
      if (ec)
        return finish(std::string(what) + ": " + ec.message());
      if (!streaming) {
        result.response.body.append(bytes);
      } else if (!bytes.empty()) {
        if (!(*on_bytes)(bytes))
          return finish("");
        arm();
      }
      if (conn.complete())
        return finish("");
      read_body();
    });
  };
  auto step = [&](auto next) {
    return [&, next](const char* what, error_code ec) {
      if (done)
        return;
      if (ec)
        return finish(std::string(what) + ": " + ec.message());
      next();
    };
  };
  conn.open(step([&] {
    conn.write(request, step([&] {
      conn.read_header(step([&] {
        result.response.status = conn.status();
        streaming = on_bytes && result.response.status / 100 == 2;
        if (streaming)
          conn.unlimit_body(); // the caller bounds what it keeps
        read_body();
      }));
    }));
  }));
  arm();
  ioc.run();
  return result;
}

} // namespace

web_call_result web_call(const web_request& req) {
  return drive(req, nullptr);
}

web_call_result web_stream(const web_request& req, const bytes_handler& on_bytes) {
  return drive(req, &on_bytes);
}

} // namespace troupe::io

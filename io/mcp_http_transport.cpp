#include "io/mcp_http_transport.hpp"

#include "io/http_client.hpp"
#include "io/mcp_handler_call.hpp"
#include "protocol/json.hpp"
#include "protocol/sse_parser.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace troupe::io {

namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
using namespace std::chrono_literals;

constexpr auto connect_timeout = 10s;            // resolve + connect + TLS handshake
constexpr auto request_slack = 30s;              // past the call timeout, the actor has given up
constexpr auto delete_timeout = 1000ms;          // close()'s DELETE is best effort, bounded
constexpr auto shutdown_wait = 1200ms;           // close() waits this long for the DELETE at most
constexpr double default_call_timeout_seconds = 120; // mcp.call_timeout_seconds (AS-64)
constexpr double max_call_timeout_seconds = 86400;   // keeps the duration arithmetic finite
constexpr std::size_t header_limit_bytes = 64 * 1024;
constexpr std::size_t error_quote_chars = 500;
constexpr std::size_t max_held_bytes = std::size_t{16} << 20;

struct endpoint : http_url {
  std::string text; // the whole URL, for messages
  std::string error;
};

endpoint parse_endpoint(const std::string& url, const std::string& server) {
  endpoint out{parse_http_url(url, "/?#"), url, {}};
  if (out.problem != url_problem::none) {
    out.error = "mcp server " + server + ": url: " + describe(out.problem) + ", got \"" + url + "\"";
    return out;
  }
  std::string target = out.target.substr(0, out.target.find('#')); // a fragment never goes on the wire
  out.target = target.empty() ? "/" : target.front() == '/' ? target : "/" + target;
  return out;
}

bool is_method(std::string_view message, const std::string& method) {
  if (message.find("\"" + method + "\"") == std::string_view::npos)
    return false; // most messages are not: no need to parse them
  auto doc = protocol::json::parse(message);
  return doc && doc->IsObject() && protocol::json::get_string(*doc, "method") == method;
}

// An answer to a request (as opposed to a request or notification the server sends along).
bool is_response(const protocol::json::document& doc) {
  return doc.IsObject() && doc.HasMember("id") && (doc.HasMember("result") || doc.HasMember("error"));
}

std::string trimmed(std::string s) {
  auto not_space = [](char c) { return c != ' ' && c != '\t' && c != '\r' && c != '\n'; };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

// How long an exchange may wait for its answer: the call timeout and some slack (AS-64).
std::chrono::milliseconds request_timeout(const protocol::mcp_server_config& config) {
  double seconds = config.timeout_seconds.value_or(default_call_timeout_seconds);
  if (!std::isfinite(seconds))
    seconds = default_call_timeout_seconds;
  seconds = std::clamp(seconds, 0.0, max_call_timeout_seconds);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(seconds)) +
         request_slack;
}

class http_transport final : public mcp_transport {
public:
  explicit http_transport(protocol::mcp_server_config config)
    : config_(std::move(config)), url_(parse_endpoint(protocol::mcp_endpoint_url(config_.url), config_.name)),
      request_timeout_(request_timeout(config_)) {}

  ~http_transport() override { close(); }

  std::string start(handlers h) override {
    std::lock_guard<std::mutex> serial(lifecycle_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (started_ || stopping_)
        return "mcp server " + config_.name + ": transport already started";
    }
    if (!url_.error.empty())
      return url_.error;
    if (url_.tls) {
      beast::error_code ec;
      ssl_ctx_.emplace(ssl::context::tls_client);
      ssl_ctx_->set_default_verify_paths(ec);
      if (ec)
        return "mcp server " + config_.name + ": cannot load the system's CA certificates: " + ec.message();
      ssl_ctx_->set_verify_mode(ssl::verify_peer);
    }
    handlers_ = std::move(h);
    guard_.emplace(net::make_work_guard(ioc_));
    try {
      thread_ = std::thread([this] { ioc_.run(); });
    } catch (const std::system_error& e) {
      guard_.reset();
      return "mcp server " + config_.name + ": cannot create a thread: " + e.what();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    started_ = true;
    return {};
  }

  void send(std::string message) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_ || stopping_)
      return;
    net::post(ioc_, [this, m = std::move(message)]() mutable { submit(std::move(m)); });
  }

  void close() override {
    std::lock_guard<std::mutex> serial(lifecycle_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      bool was_running = started_ && !stopping_;
      stopping_ = true;
      if (!was_running && !thread_.joinable())
        return;
    }
    if (thread_.get_id() == std::this_thread::get_id()) {
      // From a handler (against the contract): stop what is in flight; the destructor joins.
      net::post(ioc_, [this] { shutdown(false); });
      return;
    }
    if (!thread_.joinable())
      return;
    net::post(ioc_, [this] { shutdown(true); });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait_for(lock, shutdown_wait, [this] { return shutdown_done_; });
    }
    guard_.reset();
    ioc_.stop(); // a DELETE still pending, or a resolver, is abandoned here
    thread_.join();
    live_.clear();
    held_.clear();
  }

private:
  class exchange;
  friend class exchange;

  // ---- on the io thread ----

  void submit(std::string message) {
    if (dead_)
      return;
    if (initializing_) {
      // The session id is not known yet; what follows initialize waits for its answer.
      held_bytes_ += message.size();
      if (held_bytes_ > max_held_bytes)
        return fail("over " + std::to_string(max_held_bytes) + " bytes of messages waiting for initialize");
      held_.push_back(std::move(message));
      return;
    }
    bool initialize = is_method(message, "initialize");
    if (initialize)
      initializing_ = true;
    begin(initialize ? kind::initialize : kind::post, std::move(message));
  }

  enum class kind { post, initialize, del };

  void begin(kind k, std::string body);

  void deliver(kind k, std::string message) {
    if (dead_)
      return;
    bool answered_initialize = false;
    if (k == kind::initialize && initializing_) {
      auto doc = protocol::json::parse(message);
      if (doc && is_response(*doc)) {
        answered_initialize = true;
        if (const auto* result = protocol::json::member(*doc, "result"))
          if (auto version = protocol::json::get_string(*result, "protocolVersion"); !version.empty())
            protocol_version_ = std::move(version);
      }
    }
    call_handler(config_.name, [&] {
      if (handlers_.on_message)
        handlers_.on_message(std::move(message));
    });
    if (answered_initialize)
      release_held();
  }

  void release_held() {
    if (!initializing_)
      return;
    initializing_ = false;
    auto held = std::move(held_);
    held_.clear();
    held_bytes_ = 0;
    for (auto& m : held)
      submit(std::move(m));
  }

  void fail(std::string reason);

  void finished(const std::shared_ptr<exchange>& ex, kind k) {
    live_.erase(ex);
    if (k == kind::del)
      mark_shutdown_done();
    else if (k == kind::initialize && !dead_)
      release_held(); // answered or not, later messages go on (and fail on their own)
  }

  void shutdown(bool send_delete);

  void mark_shutdown_done() {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_done_ = true;
    done_cv_.notify_all();
  }

  const protocol::mcp_server_config config_;
  const endpoint url_;
  const std::chrono::milliseconds request_timeout_;
  handlers handlers_;
  std::optional<ssl::context> ssl_ctx_; // https only: a plain-http server needs no TLS state
  net::io_context ioc_; // after ssl_ctx_: destroyed first, with the streams that use the context
  std::optional<net::executor_work_guard<net::io_context::executor_type>> guard_;
  std::thread thread_;

  std::mutex lifecycle_mutex_; // start() and close() one at a time
  std::mutex mutex_;           // started_, stopping_, shutdown_done_
  std::condition_variable done_cv_;
  bool started_ = false;
  bool stopping_ = false;
  bool shutdown_done_ = false;

  // io thread only
  std::string session_id_;
  std::string protocol_version_;
  bool initializing_ = false;
  bool dead_ = false; // on_closed delivered or close() called: no handler runs any more
  std::deque<std::string> held_;
  std::size_t held_bytes_ = 0;
  std::set<std::shared_ptr<exchange>> live_;
};

// One request and its answer, on a connection of its own. Touched only on the io thread.
class http_transport::exchange : public std::enable_shared_from_this<exchange> {
public:
  exchange(http_transport& owner, kind k, std::string body)
    : owner_(owner), kind_(k), deadline_(owner.ioc_),
      conn_(owner.ioc_.get_executor(), owner.ssl_ctx_ ? &*owner.ssl_ctx_ : nullptr, owner.url_, header_limit_bytes, mcp_http_max_message_bytes),
      sse_(mcp_http_max_message_bytes, mcp_http_max_message_bytes) {
    req_.method = k == kind::del ? "DELETE" : "POST";
    req_.target = owner.url_.target;
    if (k != kind::del)
      req_.fields = {{"Content-Type", "application/json"}, {"Accept", "application/json, text/event-stream"}};
    if (k != kind::initialize && !owner.session_id_.empty()) {
      req_.fields.emplace_back("Mcp-Session-Id", owner.session_id_);
      carried_session_ = true;
    }
    if (k != kind::initialize && !owner.protocol_version_.empty())
      req_.fields.emplace_back("MCP-Protocol-Version", owner.protocol_version_);
    req_.fields.insert(req_.fields.end(), owner.config_.headers.begin(), owner.config_.headers.end());
    req_.close = true; // one exchange, one connection: the server may hang up after it
    req_.body = std::move(body);
  }

  void start() {
    arm(k_is_delete() ? std::chrono::milliseconds(delete_timeout) : std::chrono::milliseconds(connect_timeout),
        phase::connecting);
    conn_.open(then(&exchange::write));
  }

  // Ends the exchange without a word to the handlers; pending operations complete as aborted.
  void abort() {
    if (done_)
      return;
    done_ = true;
    conn_.close();
  }

private:
  enum class phase { connecting, waiting };

  bool k_is_delete() const { return kind_ == kind::del; }

  void arm(std::chrono::milliseconds after, phase p) {
    phase_ = p;
    deadline_.expires_after(after);
    deadline_.async_wait([self = shared_from_this(), p](beast::error_code ec) {
      if (ec || self->done_ || self->phase_ != p)
        return;
      self->on_deadline();
    });
  }

  void on_deadline() {
    if (kind_ == kind::del)
      return finish();
    if (phase_ == phase::connecting)
      return fail("cannot connect: timed out after " + std::to_string(connect_timeout.count()) + " s");
    // The caller's own call timeout has long passed: this answer has nobody waiting for it.
    spdlog::warn("mcp: server={} abandoned a request after {} ms without an answer", owner_.config_.name,
                 owner_.request_timeout_.count());
    finish();
  }

  void write() {
    if (kind_ != kind::del)
      arm(owner_.request_timeout_, phase::waiting);
    conn_.write(req_, then(&exchange::read_header));
  }

  void read_header() {
    conn_.read_header(then(&exchange::on_header));
  }

  // The handler of a step: an ended exchange ignores it, a failure ends the exchange.
  http_connection::step_handler then(void (exchange::*next)()) {
    return [self = shared_from_this(), next](const char* what, beast::error_code ec) {
      if (self->done_)
        return;
      if (ec)
        return self->transport_failure(what, ec);
      ((*self).*next)();
    };
  }

  void on_header() {
    if (kind_ == kind::del)
      return finish();
    status_ = conn_.status();
    if (status_ == 404 && carried_session_)
      return fail_plain("session expired");
    if (status_ / 100 == 2) {
      if (kind_ == kind::initialize) {
        auto session = conn_.header("Mcp-Session-Id");
        if (!session.empty())
          owner_.session_id_ = std::string(session);
      }
      if (status_ == 202 || status_ == 204)
        return finish(); // accepted (a notification or a response): nothing comes back
      sse_body_ = conn_.header("Content-Type").find("text/event-stream") != std::string_view::npos;
      if (sse_body_)
        conn_.unlimit_body(); // a stream: the bound is per line and per event
    }
    read_body(); // at once, with no bytes, when there is no body at all
  }

  void read_body() {
    conn_.read_some([self = shared_from_this()](const char* what, beast::error_code ec, std::string_view bytes) {
      if (self->done_)
        return;
      if (ec)
        return self->transport_failure(what, ec);
      self->on_body(bytes);
    });
  }

  void on_body(std::string_view bytes) {
    bool complete = conn_.complete();
    if (status_ / 100 != 2) {
      body_.append(bytes.substr(0, error_quote_chars - std::min(error_quote_chars, body_.size())));
      if (complete || body_.size() >= error_quote_chars)
        return fail("HTTP " + std::to_string(status_) + (body_.empty() ? "" : ": " + trimmed(body_)));
      return read_body();
    }
    if (!sse_body_) {
      body_.append(bytes); // bounded by the parser's body_limit
      if (!complete)
        return read_body();
      std::string message = trimmed(std::move(body_));
      if (!message.empty())
        owner_.deliver(kind_, std::move(message));
      return finish();
    }
    events_.clear();
    bool ok = sse_.feed(bytes, events_);
    for (auto& event : events_) {
      if (done_)
        return; // a handler's message ended the transport
      if ((event.event.empty() || event.event == "message") && !event.data.empty())
        owner_.deliver(kind_, std::move(event.data));
    }
    if (done_)
      return;
    if (!ok)
      return fail("event stream: " + sse_.error());
    if (complete)
      return finish();
    read_body();
  }

  void transport_failure(const char* what, beast::error_code ec) {
    if (kind_ == kind::del)
      return finish();
    if (is_body_limit(ec))
      return fail("response body over " + std::to_string(mcp_http_max_message_bytes) + " bytes");
    if (is_header_limit(ec))
      return fail("response header over " + std::to_string(header_limit_bytes) + " bytes");
    fail(std::string(what) + ": " + ec.message());
  }

  void fail(const std::string& what) {
    fail_plain(std::string(kind_ == kind::del ? "DELETE " : "POST ") + owner_.url_.text + ": " + what);
  }

  // Closes the whole transport: the exchange ends, the owner aborts the others and reports.
  void fail_plain(std::string reason) {
    if (done_)
      return;
    auto self = shared_from_this();
    finish();
    owner_.fail(std::move(reason));
  }

  void finish() {
    if (done_)
      return;
    done_ = true;
    deadline_.cancel();
    conn_.close();
    owner_.finished(shared_from_this(), kind_);
  }

  http_transport& owner_;
  const kind kind_;
  net::steady_timer deadline_;
  phase phase_ = phase::connecting;
  http_connection conn_;
  http_client_request req_;
  bool carried_session_ = false;
  bool done_ = false;
  int status_ = 0;
  bool sse_body_ = false;
  std::string body_;
  protocol::sse_parser sse_;
  std::vector<protocol::sse_event> events_;
};

void http_transport::begin(kind k, std::string body) {
  auto ex = std::make_shared<exchange>(*this, k, std::move(body));
  live_.insert(ex);
  ex->start();
}

void http_transport::fail(std::string reason) {
  if (dead_)
    return;
  dead_ = true;
  held_.clear();
  held_bytes_ = 0;
  auto live = live_; // abort() does not call back, but keep the set stable anyway
  for (auto& ex : live)
    ex->abort();
  live_.clear();
  spdlog::debug("mcp: server={} transport closed: {}", config_.name, reason);
  call_handler(config_.name, [&] {
    if (handlers_.on_closed)
      handlers_.on_closed(std::move(reason));
  });
}

void http_transport::shutdown(bool send_delete) {
  dead_ = true;
  held_.clear();
  held_bytes_ = 0;
  auto live = live_;
  for (auto& ex : live)
    ex->abort();
  live_.clear();
  if (send_delete && !session_id_.empty()) {
    // Ends the session on the server (best effort); its end, or its deadline, releases close().
    begin(kind::del, {});
    return;
  }
  mark_shutdown_done();
}

} // namespace

std::unique_ptr<mcp_transport> make_mcp_http_transport(const protocol::mcp_server_config& config) {
  return std::make_unique<http_transport>(config);
}

} // namespace troupe::io

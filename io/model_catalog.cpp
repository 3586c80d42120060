#include "io/model_catalog.hpp"

#include "io/http_client.hpp"
#include "protocol/model_routing.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <thread>

namespace troupe::io {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;

namespace {

constexpr std::size_t header_limit_bytes = 64 * 1024;
constexpr std::uint64_t list_limit_bytes = 4 << 20;
constexpr double ask_timeout_cap_seconds = 10; // a start-up never waits longer on one upstream

// One GET {base_url}/models, bounded by the source's timeout (at most ask_timeout_cap_seconds).
class list_ask : public std::enable_shared_from_this<list_ask> {
public:
  using answer = std::function<void(std::optional<std::vector<std::string>>, const std::string& why)>;

  list_ask(net::io_context& ioc, ssl::context& tls, const model_source& source, answer done)
    : url_(parse_http_url(source.base_url, "/")), deadline_(ioc), done_(std::move(done)) {
    while (!url_.target.empty() && url_.target.back() == '/')
      url_.target.pop_back();
    req_.method = "GET";
    req_.target = url_.target + "/models";
    req_.fields = {{"Accept", "application/json"}};
    if (!source.api_key.empty())
      req_.fields.emplace_back("Authorization", "Bearer " + source.api_key);
    req_.close = true;
    timeout_ = std::min(source.timeout_seconds > 0 ? source.timeout_seconds : ask_timeout_cap_seconds,
                        ask_timeout_cap_seconds);
    if (url_.problem == url_problem::none)
      conn_.emplace(ioc.get_executor(), &tls, url_, header_limit_bytes, list_limit_bytes);
  }

  void start() {
    if (!conn_)
      return finish(std::nullopt, describe(url_.problem));
    deadline_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout_ * 1000)));
    deadline_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec && !self->finished_) {
        self->timed_out_ = true;
        self->conn_->close();
      }
    });
    conn_->open(then([this] { conn_->write(req_, then([this] { conn_->read_header(then([this] { read(); })); })); }));
  }

private:
  http_connection::step_handler then(std::function<void()> next) {
    return [self = shared_from_this(), next = std::move(next)](const char* what, boost::system::error_code ec) {
      if (ec)
        return self->failed(what, ec);
      next();
    };
  }

  void read() {
    conn_->read_some([self = shared_from_this()](const char* what, boost::system::error_code ec, std::string_view bytes) {
      if (ec)
        return self->failed(what, ec);
      self->body_.append(bytes);
      if (!self->conn_->complete())
        return self->read();
      if (self->conn_->status() / 100 != 2)
        return self->finish(std::nullopt, "HTTP " + std::to_string(self->conn_->status()));
      auto names = protocol::parse_model_list(self->body_);
      if (!names)
        return self->finish(std::nullopt, "the answer is not a model list ({\"data\":[{\"id\":…}]})");
      self->finish(std::move(names), {});
    });
  }

  void failed(const char* what, boost::system::error_code ec) {
    finish(std::nullopt, timed_out_ ? "no answer within " + std::to_string(static_cast<int>(timeout_)) + " s"
                                    : std::string(what) + ": " + ec.message());
  }

  void finish(std::optional<std::vector<std::string>> names, const std::string& why) {
    if (finished_)
      return;
    finished_ = true;
    deadline_.cancel();
    if (conn_)
      conn_->close();
    done_(std::move(names), why);
  }

  http_url url_;
  http_client_request req_;
  std::optional<http_connection> conn_;
  net::steady_timer deadline_;
  answer done_;
  std::string body_;
  double timeout_ = ask_timeout_cap_seconds;
  bool timed_out_ = false;
  bool finished_ = false;
};

} // namespace

class model_catalog::impl {
public:
  impl(protocol::model_config config, std::vector<model_source> sources, std::chrono::seconds interval)
    : config_(std::move(config)), sources_(std::move(sources)), interval_(interval),
      discovered_(config_.upstreams.size()), order_(protocol::routing_order(config_, discovered_)) {
    if (sources_.empty())
      return;
    ssl_.set_default_verify_paths();
    ssl_.set_verify_mode(ssl::verify_peer);
    thread_ = std::thread([this] { ioc_.run(); });
  }

  // Handlers run on the thread only, so after the join none runs; pending asks go with the context.
  ~impl() {
    if (!thread_.joinable())
      return;
    work_.reset();
    ioc_.stop();
    thread_.join();
  }

  std::optional<std::size_t> route(std::string_view model) const {
    std::lock_guard<std::mutex> lock(mu_);
    return protocol::route_model(order_, model);
  }

  std::vector<std::string> listed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return protocol::listed_models(config_, discovered_);
  }

  void refresh(std::function<void()> done) {
    if (sources_.empty()) {
      if (done)
        done();
      return;
    }
    net::post(ioc_, [this, done = std::move(done)] {
      ask_all(done);
      schedule();
    });
  }

private:
  // Each source once; `done` after the last answer.
  void ask_all(const std::function<void()>& done) {
    auto left = std::make_shared<std::size_t>(sources_.size());
    for (auto& source : sources_) {
      auto entry = source.entry;
      auto answered = [this, left, done, entry](std::optional<std::vector<std::string>> names, const std::string& why) {
        if (names)
          learn(entry, std::move(*names));
        else
          spdlog::warn("model.upstreams[{}] ({}): the model list could not be read: {}", entry,
                       config_.upstreams[entry].name, why);
        if (--*left == 0 && done)
          done();
      };
      std::make_shared<list_ask>(ioc_, ssl_, source, std::move(answered))->start();
    }
  }

  void schedule() {
    timer_.expires_after(interval_);
    timer_.async_wait([this](boost::system::error_code ec) {
      if (ec)
        return;
      ask_all({});
      schedule();
    });
  }

  void learn(std::size_t entry, std::vector<std::string> names) {
    std::lock_guard<std::mutex> lock(mu_);
    if (discovered_[entry] == names)
      return;
    spdlog::info("serve: upstream '{}' lists {} model(s)", config_.upstreams[entry].name, names.size());
    discovered_[entry] = std::move(names);
    order_ = protocol::routing_order(config_, discovered_);
  }

  const protocol::model_config config_;
  const std::vector<model_source> sources_;
  const std::chrono::seconds interval_;
  mutable std::mutex mu_;
  std::vector<std::vector<std::string>> discovered_; // by model.upstreams[] index
  std::vector<protocol::model_names> order_;

  ssl::context ssl_{ssl::context::tls_client};
  net::io_context ioc_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_{net::make_work_guard(ioc_)};
  net::steady_timer timer_{ioc_};
  std::thread thread_;
};

model_catalog::model_catalog(protocol::model_config config, std::vector<model_source> sources,
                             std::chrono::seconds refresh_interval)
  : impl_(std::make_unique<impl>(std::move(config), std::move(sources), refresh_interval)) {
}

model_catalog::~model_catalog() = default;

std::optional<std::size_t> model_catalog::route(std::string_view model) const { return impl_->route(model); }

std::vector<std::string> model_catalog::listed() const { return impl_->listed(); }

void model_catalog::refresh(std::function<void()> done) { impl_->refresh(std::move(done)); }

} // namespace troupe::io

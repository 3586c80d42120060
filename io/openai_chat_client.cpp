#include "io/openai_chat_client.hpp"

#include "io/http_client.hpp"
#include "protocol/model_round.hpp"
#include "protocol/upstream_readers.hpp"
#include "protocol/sse_parser.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace troupe::io {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
using protocol::model_outcome;

namespace {

constexpr std::size_t header_limit_bytes = 64 * 1024;
constexpr std::size_t error_body_bytes = 64 * 1024; // enough to quote an error, not to buffer a flood
constexpr std::size_t error_quote_chars = 500;
constexpr int round_window = 4; // batches of round events a consumer may have untaken before reading stops

// The URL of .../chat/completions, or why model.base_url gives none.
struct parsed_url : http_url {
  std::string error;
};

parsed_url parse_base_url(const std::string& url) {
  parsed_url out{parse_http_url(url, "/"), {}};
  if (out.problem != url_problem::none) {
    out.error = "model.base_url: " + std::string(describe(out.problem)) +
                (out.problem == url_problem::ipv6 ? " in \"" : ", got \"") + url + "\"";
    return out;
  }
  while (!out.target.empty() && out.target.back() == '/')
    out.target.pop_back();
  return out;
}

bool transient_status(int status) {
  return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

model_outcome failure(std::string error, int http_status, bool retryable) {
  model_outcome out;
  out.error = std::move(error);
  out.http_status = http_status;
  out.retryable = retryable;
  return out;
}

} // namespace

class openai_chat_client::impl {
public:
  explicit impl(openai_chat_options options);
  ~impl();

  std::shared_ptr<model_round> open(const protocol::responses::round_request& round,
                                    model_port::events_handler events);

  void forget(uint64_t id);

  class call;

  template <class... Ts>
  std::shared_ptr<call> launch(Ts&&... xs);

  const openai_chat_options options_;
  const parsed_url url_;
  const std::string origin_; // scheme and authority, for error messages
  ssl::context ssl_ctx_{ssl::context::tls_client};
  net::io_context ioc_;

private:
  net::executor_work_guard<net::io_context::executor_type> guard_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable idle_;
  std::unordered_map<uint64_t, std::weak_ptr<call>> live_;
  uint64_t next_id_ = 0;
  bool closing_ = false;
};

// One round with its retries. Every member is touched only on the call's strand.
class openai_chat_client::impl::call : public std::enable_shared_from_this<call> {
public:
  // A round (RS-45, RS-47): its events go to `events`, reading pauses after each batch.
  call(impl& owner, uint64_t id, const protocol::responses::round_request& round,
       model_port::events_handler events)
    : owner_(owner), id_(id), strand_(net::make_strand(owner.ioc_)), deadline_(strand_), backoff_(strand_),
      events_(std::move(events)) {
    streamed_ = owner.options_.stream && round.stream;
    auto r = round;
    r.stream = streamed_;
    responses_ = owner.options_.protocol == "responses";
    build_request(responses_ ? protocol::responses::render_responses_request(r)
                             : protocol::responses::render_chat_request(r, owner.options_.chat));
    req_.target = owner_.url_.target + (responses_ ? "/responses" : "/chat/completions");
  }

  void start() {
    net::post(strand_, [self = shared_from_this()] {
      if (self->finished_)
        return;
      if (!self->owner_.url_.error.empty())
        return self->finish(failure(self->owner_.url_.error, 0, false));
      self->start_attempt();
    });
  }

  // A batch of round events was taken (thread-safe): reading goes on if it had stopped for it.
  void resume() {
    net::post(strand_, [self = shared_from_this()] {
      if (self->finished_)
        return;
      --self->untaken_;
      if (!self->paused_ || self->untaken_ >= round_window)
        return;
      self->paused_ = false;
      if (self->body_done_)
        return self->end_round();
      self->read_body();
    });
  }

  // Thread-safe and idempotent: completion happens on the strand, once.
  void cancel() {
    net::post(strand_, [self = shared_from_this()] {
      model_outcome out;
      out.cancelled = true;
      out.error = "cancelled";
      self->finish(std::move(out));
    });
  }

private:
  void build_request(std::string body) {
    const auto& opts = owner_.options_;
    req_.method = "POST";
    req_.target = owner_.url_.target + "/chat/completions";
    req_.fields = {{"Content-Type", "application/json"},
                   {"Accept", streamed_ ? "text/event-stream" : "application/json"}};
    if (!opts.api_key.empty())
      req_.fields.emplace_back("Authorization", "Bearer " + opts.api_key);
    req_.body = std::move(body);
  }

  // Each attempt gets a fresh connection, parser and assembler, and its own deadline (AS-17).
  void start_attempt() {
    ++attempt_;
    timed_out_ = false;
    status_ = 0;
    conn_.emplace(strand_, &owner_.ssl_ctx_, owner_.url_, header_limit_bytes, owner_.options_.max_body_bytes);
    sse_.emplace(owner_.options_.max_line_bytes);
    chat_reader_.emplace();
    responses_reader_.emplace();
    plain_body_.clear();
    sse_events_.clear();

    deadline_.expires_after(std::chrono::seconds(owner_.options_.timeout_seconds));
    deadline_.async_wait([self = shared_from_this(), gen = attempt_](beast::error_code ec) {
      if (ec || self->finished_ || gen != self->attempt_)
        return;
      self->timed_out_ = true;
      self->conn_->close();
    });

    conn_->open(then(&call::write));
  }

  // The handler of a step of this attempt: a stale call ignores it, a failure ends the attempt.
  http_connection::step_handler then(void (call::*next)()) {
    return [self = shared_from_this(), gen = attempt_, next](const char* what, beast::error_code ec) {
      if (self->stale(gen))
        return;
      if (ec)
        return self->transport_failure(what, ec);
      ((*self).*next)();
    };
  }

  void write() {
    conn_->write(req_, then(&call::read_header));
  }

  void read_header() {
    conn_->read_header(then(&call::on_header));
  }

  void on_header() {
    status_ = conn_->status();
    auto type = conn_->header("Content-Type");
    sse_body_ = status_ / 100 == 2 && type.find("text/event-stream") != std::string_view::npos;
    read_body(); // at once, with no bytes, when there is no body at all
  }

  void read_body() {
    auto on_read = [self = shared_from_this(), gen = attempt_](const char* what, beast::error_code ec,
                                                               std::string_view bytes) {
      if (self->stale(gen))
        return;
      if (ec)
        return self->transport_failure(what, ec);
      self->on_body(bytes);
    };
    conn_->read_some(std::move(on_read));
  }

  void on_body(std::string_view bytes) {
    bool done = conn_->complete();
    if (status_ / 100 != 2) {
      plain_body_.append(bytes.substr(0, error_body_bytes - std::min(error_body_bytes, plain_body_.size())));
      if (done || plain_body_.size() >= error_body_bytes)
        return http_failure();
      return read_body();
    }
    if (!sse_body_) {
      plain_body_.append(bytes); // bounded by the parser's body_limit
      if (done)
        return end_round();
      return read_body();
    }
    if (!sse_->feed(bytes, sse_events_))
      return finish(failure(url_text() + ": " + sse_->error(), status_, false));
    on_round_events(done);
  }

  // A round's SSE events through its protocol's reader; the batch goes out and reading pauses.
  void on_round_events(bool done) {
    std::vector<protocol::responses::upstream_event> batch;
    for (auto& event : sse_events_) {
      bool ok = responses_ ? responses_reader_->feed(event.data, batch) : chat_reader_->feed(event.data, batch);
      if (!ok)
        break;
    }
    sse_events_.clear();
    bool failed = !batch.empty() && batch.back().what == protocol::responses::upstream_event::kind::failure;
    body_done_ = done || failed;
    if (failed)
      return deliver(std::move(batch), true);
    if (batch.empty())
      return done ? end_round() : read_body();
    delivered_ = true;
    ++untaken_;
    deliver(std::move(batch), false);
    // Reading overlaps the consumer's work up to round_window untaken batches (RS-39).
    if (untaken_ >= round_window)
      paused_ = true;
    else if (body_done_)
      end_round();
    else
      read_body();
  }

  // The end of a round's body: the reader's last word, or the events of a non-streamed answer.
  void end_round() {
    std::vector<protocol::responses::upstream_event> batch;
    if (!sse_body_)
      batch = responses_ ? protocol::responses::responses_object_events(plain_body_)
                         : protocol::responses::chat_completion_events(plain_body_);
    else if (responses_)
      responses_reader_->end(batch);
    else
      chat_reader_->end(batch);
    deliver(std::move(batch), true);
  }

  void deliver(std::vector<protocol::responses::upstream_event> batch, bool last) {
    if (last) {
      finished_ = true;
      end_attempt();
      backoff_.cancel();
    }
    events_(std::move(batch));
    if (last)
      owner_.forget(id_);
  }

  // The upstream's own words and its Retry-After travel apart from the text that quotes its body, so
  // a Responses client is told what the upstream said and never its raw body or header (RS-43).
  void http_failure() {
    std::string error = "HTTP " + std::to_string(status_) + ": " + plain_body_.substr(0, error_quote_chars);
    auto out = failure(std::move(error), status_, transient_status(status_));
    out.upstream_message = protocol::responses::upstream_error_message(plain_body_);
    auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
    if (conn_)
      out.retry_after_seconds =
        protocol::responses::retry_after_seconds(conn_->header("Retry-After"), now.count()).value_or(-1);
    retry_or_finish(std::move(out));
  }

  void transport_failure(const char* what, beast::error_code ec) {
    // A bound hit is not transient: the same reply would hit it again.
    if (is_body_limit(ec))
      return finish(failure(url_text() + ": response body longer than " +
                              std::to_string(owner_.options_.max_body_bytes) + " bytes",
                            status_, false));
    if (is_header_limit(ec))
      return finish(failure(url_text() + ": response header longer than " +
                              std::to_string(header_limit_bytes) + " bytes",
                            status_, false));
    if (timed_out_)
      return retry_or_finish(failure(url_text() + ": timed out after " +
                                       std::to_string(owner_.options_.timeout_seconds) + " s",
                                     0, true));
    // A refused certificate will not be accepted on the next attempt either.
    bool tls_refusal = is_tls_error(ec);
    retry_or_finish(failure(url_text() + ": " + what + ": " + ec.message(), 0, !tls_refusal));
  }

  // AS-17: transient failures are retried max_retries times, after base, 2·base, 4·base...
  void retry_or_finish(model_outcome out) {
    end_attempt();
    if (!out.retryable || delivered_ || attempt_ > static_cast<uint64_t>(std::max(0, owner_.options_.max_retries))) {
      if (attempt_ > 1)
        out.error += " (after " + std::to_string(attempt_) + " attempts)";
      return finish(std::move(out));
    }
    auto shift = std::min<uint64_t>(attempt_ - 1, 20);
    auto wait = std::chrono::milliseconds(int64_t{owner_.options_.retry_base_ms} << shift);
    backoff_.expires_after(wait);
    backoff_.async_wait([self = shared_from_this(), gen = attempt_](beast::error_code ec) {
      if (ec || self->stale(gen))
        return;
      self->start_attempt();
    });
  }

  void finish(model_outcome out) {
    if (finished_)
      return;
    if (out.cancelled) { // nothing is delivered after cancel()
      finished_ = true;
      end_attempt();
      backoff_.cancel();
      owner_.forget(id_);
      return;
    }
    protocol::responses::upstream_event failure;
    failure.what = protocol::responses::upstream_event::kind::failure;
    failure.text = std::move(out.error);
    failure.http_status = out.http_status;
    failure.retryable = out.retryable;
    failure.upstream_message = std::move(out.upstream_message);
    failure.retry_after_seconds = out.retry_after_seconds;
    deliver({std::move(failure)}, true);
  }

  // Closing aborts whatever operation is pending; its handler then finds the call stale.
  void end_attempt() {
    deadline_.cancel();
    if (conn_)
      conn_->close();
  }

  bool stale(uint64_t gen) const {
    return finished_ || gen != attempt_;
  }

  std::string url_text() const {
    return "POST " + owner_.origin_ + req_.target;
  }

  impl& owner_;
  const uint64_t id_;
  net::strand<net::io_context::executor_type> strand_;
  net::steady_timer deadline_;
  net::steady_timer backoff_;
  bool streamed_ = true;
  http_client_request req_;

  uint64_t attempt_ = 0;
  bool timed_out_ = false;
  bool finished_ = false;
  std::optional<http_connection> conn_;
  int status_ = 0;
  bool sse_body_ = false;
  std::string plain_body_;
  std::optional<protocol::sse_parser> sse_;
  std::vector<protocol::sse_event> sse_events_;
  model_port::events_handler events_;
  bool responses_ = false; // the upstream speaks /v1/responses
  std::optional<protocol::responses::chat_chunk_reader> chat_reader_;
  std::optional<protocol::responses::responses_event_reader> responses_reader_;
  bool delivered_ = false; // a batch went out: the round can no longer be retried
  bool paused_ = false;
  int untaken_ = 0; // batches given out and not yet taken (resumed)
  bool body_done_ = false;
};

namespace {

// The caller's handle does not own the call: a call lives only as long as its pending operations.
class round_handle : public model_round {
public:
  explicit round_handle(std::weak_ptr<openai_chat_client::impl::call> c) : call_(std::move(c)) {
  }

  void cancel() override {
    if (auto c = call_.lock())
      c->cancel();
  }

  void resume() override {
    if (auto c = call_.lock())
      c->resume();
  }

private:
  std::weak_ptr<openai_chat_client::impl::call> call_;
};

} // namespace

openai_chat_client::impl::impl(openai_chat_options options)
  : options_(std::move(options)), url_(parse_base_url(options_.base_url)),
    origin_(std::string(url_.tls ? "https://" : "http://") + url_.host_header),
    guard_(net::make_work_guard(ioc_)) {
  ssl_ctx_.set_default_verify_paths();
  ssl_ctx_.set_verify_mode(ssl::verify_peer);
  int threads = std::max(1, options_.io_threads);
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] { ioc_.run(); });
}

openai_chat_client::impl::~impl() {
  std::vector<std::shared_ptr<call>> calls;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    for (auto& [id, weak] : live_)
      if (auto c = weak.lock())
        calls.push_back(std::move(c));
  }
  for (auto& c : calls)
    c->cancel();
  calls.clear();
  {
    // Cancellation is a posted handler that runs at once; waiting here is what lets the destructor
    // promise every `done` has run.
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return live_.empty(); });
  }
  guard_.reset();
  ioc_.stop(); // handlers of aborted operations are simply destroyed
  for (auto& t : threads_)
    t.join();
}

template <class... Ts>
std::shared_ptr<openai_chat_client::impl::call> openai_chat_client::impl::launch(Ts&&... xs) {
  std::shared_ptr<call> c;
  bool closing = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t id = next_id_++;
    c = std::make_shared<call>(*this, id, std::forward<Ts>(xs)...);
    live_.emplace(id, c);
    closing = closing_;
  }
  c->start();
  if (closing) // started from a `done` while the client is being destroyed
    c->cancel();
  return c;
}

std::shared_ptr<model_round> openai_chat_client::impl::open(const protocol::responses::round_request& round,
                                                            model_port::events_handler events) {
  return std::make_shared<round_handle>(launch(round, std::move(events)));
}

void openai_chat_client::impl::forget(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  live_.erase(id);
  if (live_.empty())
    idle_.notify_all();
}

openai_chat_client::openai_chat_client(openai_chat_options options)
  : impl_(std::make_unique<impl>(std::move(options))) {
}

openai_chat_client::~openai_chat_client() = default;

std::shared_ptr<model_round> openai_chat_client::open(const protocol::responses::round_request& round,
                                                      events_handler events) {
  return impl_->open(round, std::move(events));
}

} // namespace troupe::io

#include "io/scripted_model_port.hpp"

#include "protocol/round_reply.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

namespace troupe::io {

namespace net = boost::asio;

struct scripted_model_port::impl {
  protocol::script_book book;
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work{net::make_work_guard(ioc)};
  std::thread thread{[this] { ioc.run(); }};
};

scripted_model_port::scripted_model_port(protocol::script_book book) : impl_(std::make_unique<impl>()) {
  impl_->book = std::move(book);
}

scripted_model_port::~scripted_model_port() {
  impl_->work.reset();
  impl_->ioc.stop();
  impl_->thread.join();
}

namespace {

// A Responses round in flight: the scripted reply waits for its turn's delay, then goes out whole.
struct scripted_round : model_round, std::enable_shared_from_this<scripted_round> {
  explicit scripted_round(net::io_context& ioc) : timer(ioc) {}

  void cancel() override {
    cancelled = true;
    net::post(timer.get_executor(), [self = shared_from_this()] { self->timer.cancel(); });
  }
  void resume() override {}

  net::steady_timer timer;
  std::atomic<bool> cancelled{false};
};

} // namespace

std::shared_ptr<model_round> scripted_model_port::open(const protocol::responses::round_request& round,
                                                       events_handler events) {
  auto request = protocol::responses::chat_model_request(round);
  auto r = std::make_shared<scripted_round>(impl_->ioc);
  std::vector<protocol::responses::upstream_event> batch;
  int64_t delay_ms = 0;
  if (auto script = impl_->book.find(request.model)) {
    delay_ms = protocol::scripted_turn(*script, request).delay_ms;
    auto reply = protocol::scripted_reply(*script, request);
    // A Responses client declares its tools: the script calls only those the round offers.
    auto offered = [&](const protocol::tool_call& c) {
      return std::any_of(request.tools.begin(), request.tools.end(), [&](auto& t) { return t.name == c.name; });
    };
    if (!round.keep_unoffered_calls)
      reply.tool_calls.erase(std::remove_if(reply.tool_calls.begin(), reply.tool_calls.end(),
                                            [&](auto& c) { return !offered(c); }),
                             reply.tool_calls.end());
    batch = protocol::reply_events(reply);
  } else {
    protocol::responses::upstream_event e;
    e.what = protocol::responses::upstream_event::kind::failure;
    e.text = "unknown scripted model '" + request.model + "': define it under model.scripts";
    e.http_status = 404;
    batch.push_back(std::move(e));
  }
  r->timer.expires_after(std::chrono::milliseconds(delay_ms));
  r->timer.async_wait([r, batch = std::move(batch), events = std::move(events)](const boost::system::error_code& ec) mutable {
    if (!ec && !r->cancelled)
      events(std::move(batch));
  });
  return r;
}

} // namespace troupe::io

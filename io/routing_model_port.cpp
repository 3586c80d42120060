#include "io/routing_model_port.hpp"

#include "protocol/model_routing.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <optional>
#include <thread>

namespace troupe::io {

namespace net = boost::asio;

namespace {

// The round of a model no route serves. The HTTP routes answer model_not_found before a run starts,
// so this is a backstop; it still fails the round the way the port's contract asks.
struct unrouted_round : model_round {
  void cancel() override { cancelled = true; }
  void resume() override {}
  std::atomic<bool> cancelled{false};
};

} // namespace

struct routing_model_port::impl {
  std::vector<std::shared_ptr<model_port>> ports;
  std::shared_ptr<const model_catalog> catalog;
  // Delivers the backstop failure: events never run from inside open().
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work{net::make_work_guard(ioc)};
  std::thread thread{[this] { ioc.run(); }};
};

routing_model_port::routing_model_port(std::vector<std::shared_ptr<model_port>> ports,
                                       std::shared_ptr<const model_catalog> catalog)
  : impl_(std::make_unique<impl>()) {
  impl_->ports = std::move(ports);
  impl_->catalog = std::move(catalog);
}

routing_model_port::~routing_model_port() {
  impl_->work.reset();
  impl_->ioc.stop();
  impl_->thread.join();
}

std::shared_ptr<model_round> routing_model_port::open(const protocol::responses::round_request& round,
                                                      events_handler events) {
  const auto& model = round.model;
  if (auto i = impl_->catalog->route(model); i && *i < impl_->ports.size())
    return impl_->ports[*i]->open(round, std::move(events));
  auto r = std::make_shared<unrouted_round>();
  protocol::responses::upstream_event e;
  e.what = protocol::responses::upstream_event::kind::failure;
  e.text = protocol::model_not_found(model).message;
  e.http_status = 404;
  net::post(impl_->ioc, [r, e = std::move(e), events = std::move(events)]() mutable {
    if (!r->cancelled)
      events({std::move(e)});
  });
  return r;
}

} // namespace troupe::io

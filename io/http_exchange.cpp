#include "io/http_exchange.hpp"

namespace troupe::io {

void exchange_impl::respond(http_response response) {
  responded_ = true;
  if (!answered_.exchange(true))
    session_->respond(gen_, std::move(response));
}

std::shared_ptr<event_stream> exchange_impl::open_event_stream(header_list headers) {
  if (!answered_.exchange(true))
    session_->open_stream(gen_, std::move(headers));
  return shared_from_this();
}

void exchange_impl::on_disconnect(std::function<void()> callback) {
  session_->set_disconnect(gen_, std::move(callback));
}

std::shared_ptr<websocket> exchange_impl::upgrade(std::string subprotocol, std::size_t outbox_frames) {
  if (!upgradable_)
    return nullptr;
  bool first = !answered_.exchange(true);
  if (first)
    responded_ = true; // the socket is handed over; there is no client to watch here
  return session_->upgrade(gen_, std::move(subprotocol), outbox_frames, first);
}

bool exchange_impl::send(std::string frame, int64_t events) {
  return session_->send_frame(gen_, std::move(frame), events);
}

int64_t exchange_impl::queued_events() const {
  return session_->queued_events();
}

void exchange_impl::on_events_written(std::function<void()> written) {
  session_->set_events_written(gen_, std::move(written));
}

void exchange_impl::finish() {
  session_->finish_stream(gen_);
}

bool exchange_impl::backlogged() const {
  return session_->backlogged();
}

} // namespace troupe::io

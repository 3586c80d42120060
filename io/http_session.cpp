// The HTTP session, over either stream of io/http_connection.hpp: the head first (the edge's checks, the
// body limit, admission), then the body, the exchange handed to the router, the answer or event stream
// written on the strand, and a watch for the client leaving meanwhile.
#include "io/http_session.hpp"
#include "io/http_exchange.hpp"
#include "io/http_wire.hpp"
#include "io/websocket_session.hpp"

#include "protocol/errors.hpp"
#include "protocol/ids.hpp"
#include "protocol/sse.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <spdlog/spdlog.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <optional>
#include <vector>

namespace troupe::io {

namespace http = beast::http;
namespace beast_ws = beast::websocket;
using std::chrono::steady_clock;

namespace {

// Beast's request parser, refusing a field it cannot store instead of throwing: basic_fields throws
// std::length_error for a name or value over 65,533 bytes, and chunked trailers are not bounded by
// header_limit, so a long trailer would throw out of the I/O thread. Trailers get a budget of their own.
class request_parser : public http::request_parser<http::string_body> {
  static constexpr std::size_t max_field_bytes = 65533;
  static constexpr std::size_t max_trailer_bytes = 64 * 1024;

  void on_field_impl(http::field name, beast::string_view name_string, beast::string_view value,
                     beast::error_code& ec) override {
    if (is_header_done())
      trailer_bytes_ += name_string.size() + value.size() + 4;
    if (name_string.size() > max_field_bytes || value.size() > max_field_bytes || trailer_bytes_ > max_trailer_bytes) {
      ec = http::error::header_limit;
      return;
    }
    get().insert(name, name_string, value);
  }

  std::size_t trailer_bytes_ = 0;
};

// How long, and how much, a connection closed after an answer drains what the client still sends, so
// that the close is no reset the client would see before the answer (a 413 or 401 sent before its body).
constexpr auto drain_deadline = std::chrono::seconds(5);
constexpr std::size_t drain_max_bytes = 64 * 1024 * 1024;

// Every answer carries an id of its own, minted here: never a value the client sent.
constexpr char request_id_header[] = "x-request-id";

constexpr std::size_t max_gathered_frames = 64; // IOV_MAX is 1024; 64 frames are already one large write

template <class Stream>
class session : public connection, public session_base, public std::enable_shared_from_this<session<Stream>> {
public:
  template <class Accepted>
  session(Accepted&& accepted, std::shared_ptr<server_state> state, socket_slot slot)
    : stream_(std::forward<Accepted>(accepted)), state_(std::move(state)), slot_(std::move(slot)),
      heartbeat_(stream_.get_executor()) {
    if constexpr (is_tcp<Stream>) {
      beast::error_code ec;
      auto remote = stream_.socket().remote_endpoint(ec);
      if (!ec)
        peer_ = remote.address().to_string();
    }
  }

  void run() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->do_read(); });
  }

  void close_now() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->shutdown_now(); });
  }

  // Hands the connection to a WebSocket, which answers the upgrade request; this session is then done.
  std::shared_ptr<websocket> upgrade(uint64_t gen, std::string subprotocol, std::size_t outbox_frames,
                                     bool first) override {
    auto ws = make_websocket_session<Stream>(stream_.get_executor(), state_, outbox_frames);
    if (!first) {
      ws->abandon(); // answered already: the caller gets a WebSocket that has ended
      return ws;
    }
    net::post(stream_.get_executor(), [self = this->shared_from_this(), gen, ws,
                                       sp = std::move(subprotocol)] {
      if (gen != self->gen_ || self->phase_ != phase::handling || !self->upgrade_request_) {
        ws->abandon();
        return;
      }
      // The open exchange moves to the WebSocket uncounted twice and never zero in between.
      self->exchange_open_ = false;
      self->on_disconnect_ = nullptr;
      self->phase_ = phase::closed;
      self->closed_ = true;
      self->heartbeat_.cancel();
      auto request = std::move(*self->upgrade_request_);
      self->upgrade_request_.reset();
      // Cancels the disconnect watch too; its handler finds the session closed.
      if constexpr (is_tcp<Stream>)
        ws->accept(self->stream_.release_socket(), self->slot_, request, sp);
      else
        ws->accept(std::move(self->stream_), self->slot_, request, sp);
    });
    return ws;
  }

  // dispatch: a handler that answers at once, on the session's strand, writes without a second hop.
  void respond(uint64_t gen, http_response r) override {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this(), gen, r = std::move(r)]() mutable {
      if (gen == self->gen_ && self->phase_ == phase::handling)
        self->write_response(std::move(r));
    });
  }

  void open_stream(uint64_t gen, header_list headers) override {
    net::post(stream_.get_executor(), [self = this->shared_from_this(), gen, h = std::move(headers)] {
      if (gen == self->gen_ && self->phase_ == phase::handling)
        self->start_stream(h);
    });
  }

  bool send_frame(uint64_t gen, std::string frame, int64_t events) override {
    if (closed_.load())
      return false;
    auto size = static_cast<int64_t>(frame.size());
    auto before = queued_bytes_.fetch_add(size);
    // A client that cannot keep up is dropped rather than buffered without bound. Counted frames come
    // from a producer that paces itself by queued_events(), and a frame into an empty queue is no sign
    // of a slow client: neither is dropped for its size, however large one event is.
    if (events == 0 && before > 0 && before + size > state_->options.max_stream_buffer_bytes) {
      net::post(stream_.get_executor(), [self = this->shared_from_this(), gen] {
        if (gen == self->gen_) {
          spdlog::warn("http: dropping a slow event-stream client (buffer over {} bytes)",
                       self->state_->options.max_stream_buffer_bytes);
          self->client_gone();
        }
      });
      return false;
    }
    queued_events_ += events;
    net::post(stream_.get_executor(), [self = this->shared_from_this(), gen, f = std::move(frame), size, events]() mutable {
      if (gen != self->gen_ || self->phase_ != phase::streaming || self->finishing_) {
        self->queued_bytes_ -= size;
        self->queued_events_ -= events;
        return;
      }
      self->enqueue(chunk(f), size, events);
    });
    return true;
  }

  bool backlogged() const override { return queued_bytes_.load() * 2 > state_->options.max_stream_buffer_bytes; }
  int64_t queued_events() const override { return queued_events_.load(); }

  void set_events_written(uint64_t gen, std::function<void()> written) override {
    net::post(stream_.get_executor(), [self = this->shared_from_this(), gen, written = std::move(written)]() mutable {
      if (gen == self->gen_)
        self->events_written_ = std::move(written);
    });
  }

  void finish_stream(uint64_t gen) override {
    net::post(stream_.get_executor(), [self = this->shared_from_this(), gen] {
      if (gen == self->gen_ && self->phase_ == phase::streaming && !self->finishing_) {
        self->finishing_ = true;
        self->enqueue("0\r\n\r\n", 0);
      }
    });
  }

  void set_disconnect(uint64_t gen, std::function<void()> cb) override {
    net::post(stream_.get_executor(), [self = this->shared_from_this(), gen, cb = std::move(cb)]() mutable {
      if (gen != self->gen_)
        return;
      if (self->exchange_open_)
        self->on_disconnect_ = std::move(cb);
      else if (self->phase_ == phase::closed && self->gone_gen_ == gen)
        cb(); // the client left before the handler asked
    });
  }

private:
  enum class phase { reading, handling, writing, streaming, closed };

  void do_read() {
    phase_ = phase::reading;
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(state_->options.max_body_bytes));
    parser_->header_limit(64 * 1024);
    expire_after(to_ms(state_->options.read_timeout_seconds));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_header(ec); });
  }

  // The head alone decides what needs no body: the edge's checks (Host, Origin, Content-Type), a body
  // announced over the limit, and a caller that is not admitted. Each is answered before the body is read.
  void on_header(beast::error_code ec) {
    if (phase_ == phase::closed)
      return;
    if (ec)
      return on_read(ec);
    auto& msg = parser_->get();
    head_ = http_request{};
    head_.method = std::string(msg.method_string());
    head_.target = std::string(msg.target());
    split_target(head_.target, head_);
    for (auto& field : msg)
      head_.headers[header_name(std::string(field.name_string()))] = std::string(field.value());
    head_.peer = peer_;
    auto length = parser_->content_length();
    bool has_body = parser_->chunked() || (length && *length > 0);
    auto verdict = protocol::check_request_head(state_->options.edge, head_.method, head_.headers, has_body,
                                                beast_ws::is_upgrade(msg));
    head_.cross_origin = verdict.cross_origin;
    auto d = protocol::dialect_for_path(head_.path);
    if (verdict.refusal)
      return refuse_before_body(json_response(protocol::http_status(verdict.refusal->code),
                                              protocol::error_body(d, verdict.refusal->code, verdict.refusal->message)));
    if (length && *length > static_cast<uint64_t>(state_->options.max_body_bytes))
      return refuse_before_body(body_too_large(d, state_->options.max_body_bytes));
    if (has_body && state_->options.admit_head)
      if (auto refusal = state_->options.admit_head(head_))
        return refuse_before_body(std::move(*refusal));
    // A client waiting to hear that its body is wanted (curl does for larger bodies) hears it now.
    if (has_body && beast::iequals(head_.header("expect"), "100-continue")) {
      static const std::string go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(stream_, net::buffer(go_on), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec)
          return self->shutdown_now();
        self->read_body();
      });
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  // Answers without reading the body and closes the connection once the answer is out, draining what
  // the client still sends so that it reads the answer rather than a reset.
  void refuse_before_body(http_response r) {
    keep_alive_ = false;
    ++gen_;
    write_response(std::move(r));
  }

  void on_read(beast::error_code ec) {
    if (phase_ == phase::closed)
      return;
    if (ec == http::error::body_limit) { // also from the head alone, when Content-Length is over the limit
      auto target = std::string(parser_->get().target());
      auto d = protocol::dialect_for_path(target.substr(0, target.find('?')));
      return refuse_before_body(body_too_large(d, state_->options.max_body_bytes));
    }
    if (ec) {
      if (ec != http::error::end_of_stream && ec != beast::error::timeout && ec != net::error::connection_reset
          && buffer_.size() > 0) {
        keep_alive_ = false;
        ++gen_;
        write_response(malformed_request());
        return;
      }
      shutdown_now();
      return;
    }
    auto msg = parser_->release();
    keep_alive_ = msg.keep_alive();
    http11_ = msg.version() >= 11;
    auto upgradable = beast_ws::is_upgrade(msg);
    http_request req = std::move(head_);
    req.body = std::move(msg.body());
    if (upgradable)
      upgrade_request_ = std::move(msg);
    else
      upgrade_request_.reset();

    ++gen_;
    phase_ = phase::handling;
    exchange_open_ = true;
    ++state_->open_exchanges;
    expire_never();
    auto ex = std::make_shared<exchange_impl>(this->shared_from_this(), gen_, upgradable);
    try {
      state_->routes->dispatch(req, ex);
    } catch (const std::exception& e) {
      spdlog::error("http: handler for {} {} threw: {}", req.method, req.path, e.what());
      ex->respond(json_response(500, protocol::error_body(protocol::dialect_for_path(req.path), errc::internal,
                                                          "Internal server error")));
    }
    if (!ex->responded())
      start_watch();
  }

  void write_response(http_response r) {
    if (!safe_headers(r.headers)) {
      spdlog::error("http: refusing to write a response header with CR, LF or NUL");
      r = unsafe_header_answer();
    }
    phase_ = phase::writing;
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "troupe");
    res->set(http::field::content_type, r.content_type);
    for (auto& [name, value] : r.headers)
      res->set(name, value);
    res->set(request_id_header, protocol::uuid7_id("req_")); // after the handler's: never one it echoed
    res->keep_alive(keep_alive_);
    res->body() = std::move(r.body);
    res->prepare_payload();
    expire_after(to_ms(state_->options.read_timeout_seconds));
    http::async_write(stream_, *res, [self = this->shared_from_this(), res](beast::error_code ec, std::size_t) {
      // A client gone before its answer was written hears nothing: its handler learns so
      // (on_disconnect), as it would have before the answer was ready.
      if (ec)
        return self->shutdown_now();
      self->end_exchange();
      if (!self->keep_alive_)
        self->drain_and_close();
      else
        self->resume_reading();
    });
  }

  void start_stream(const header_list& headers) {
    if (!safe_headers(headers)) {
      spdlog::error("http: refusing to write an event-stream header with CR, LF or NUL");
      keep_alive_ = false;
      return write_response(unsafe_header_answer());
    }
    phase_ = phase::streaming;
    header_list own;
    for (auto& h : headers)
      if (!beast::iequals(h.first, request_id_header))
        own.push_back(h);
    own.emplace_back(request_id_header, protocol::uuid7_id("req_"));
    enqueue(event_stream_head(own), 0);
    arm_heartbeat();
  }

  void enqueue(std::string bytes, int64_t counted, int64_t events = 0) {
    outbox_.push_back({std::move(bytes), counted, events});
    last_frame_ = steady_clock::now();
    if (!writing_)
      write_next();
  }

  void write_next() {
    if (phase_ == phase::closed)
      return;
    if (outbox_.empty()) {
      writing_ = false;
      if (finishing_)
        stream_done();
      else
        expire_never();
      return;
    }
    writing_ = true;
    expire_after(to_ms(state_->options.read_timeout_seconds));
    // Everything queued leaves in one gathered write: frames that pile up during a write cost one
    // system call together, not one each.
    std::size_t count = std::min(outbox_.size(), max_gathered_frames);
    gathered_.clear();
    for (std::size_t i = 0; i < count; ++i)
      gathered_.push_back(net::buffer(outbox_[i].bytes));
    net::async_write(stream_, gathered_, [self = this->shared_from_this(), count](beast::error_code ec, std::size_t) {
      if (ec) {
        self->client_gone();
        return;
      }
      int64_t events = 0;
      int64_t bytes = 0;
      for (std::size_t i = 0; i < count; ++i) {
        bytes += self->outbox_.front().counted;
        events += self->outbox_.front().events;
        self->outbox_.pop_front();
      }
      self->queued_bytes_ -= bytes;
      self->queued_events_ -= events;
      if ((events > 0 || bytes > 0) && self->events_written_) // the producer's frames made room
        self->events_written_();
      self->write_next();
    });
  }

  void arm_heartbeat() {
    auto period = to_ms(state_->options.sse_heartbeat_seconds);
    heartbeat_.expires_at(last_frame_ + period);
    heartbeat_.async_wait([self = this->shared_from_this(), period](beast::error_code ec) {
      if (ec || self->phase_ != phase::streaming || self->finishing_)
        return;
      if (steady_clock::now() - self->last_frame_ >= period)
        self->enqueue(chunk(protocol::sse_heartbeat()), 0);
      self->arm_heartbeat();
    });
  }

  void stream_done() {
    heartbeat_.cancel();
    finishing_ = false;
    end_exchange();
    if (keep_alive_)
      resume_reading();
    else
      drain_and_close();
  }

  // After the last answer of a connection: shuts the sending side, reads and drops what the client still
  // sends until it closes (bounded in time and bytes), then closes the socket.
  void drain_and_close() {
    if (phase_ == phase::closed)
      return;
    phase_ = phase::closed;
    closed_ = true;
    draining_ = true;
    heartbeat_.cancel();
    shut_sending();
    expire_after(drain_deadline);
    drained_ = 0;
    drain_next();
  }

  void drain_next() {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(16 * 1024), [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > drain_max_bytes) {
        self->close_stream();
        return;
      }
      self->drain_next();
    });
  }

  // While an answer is pending, a readable socket with nothing to read means the client shut its
  // sending side: it left, or it half-closed after its request and still reads the answer. Which of the
  // two shows once something reaches it: a client that left answers with a reset. So the client is
  // probed at once (an SSE comment on a stream, else an interim `102 Processing`, which HTTP/1.1
  // clients skip), and its socket is checked for that reset until the answer is done.
  void start_watch() {
    if constexpr (is_tcp<Stream>)
      watch_readable();
  }

  void watch_readable() {
    if (watching_ || phase_ == phase::closed)
      return;
    watching_ = true;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = this->shared_from_this()](beast::error_code ec) {
      self->watching_ = false;
      if (self->resume_after_watch_) {
        self->resume_after_watch_ = false;
        if (self->phase_ != phase::closed)
          self->do_read();
        return;
      }
      if (self->phase_ == phase::closed || self->phase_ == phase::reading)
        return;
      if (ec) {
        self->client_gone();
        return;
      }
      // Readiness can be reported spuriously: only end-of-stream or an error means the client left.
      char byte;
      auto n = ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        self->client_gone();
      else if (n == 0) {
        self->keep_alive_ = false; // nothing more can be read from this client
        self->probe_peer();
        self->watch_half_closed();
      } else if (n < 0)
        self->start_watch();
      // else: the client pipelined its next request; it is read once this answer is done
    });
  }

  void probe_peer() {
    if (phase_ == phase::streaming && !finishing_)
      enqueue(chunk(protocol::sse_heartbeat()), 0);
    else if (phase_ == phase::handling && http11_) {
      // Nothing else is being written in this phase, so one send of a few bytes goes out whole.
      static constexpr char interim[] = "HTTP/1.1 102 Processing\r\n\r\n";
      (void)::send(stream_.socket().native_handle(), interim, sizeof interim - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
  }

  void watch_half_closed() {
    half_closed_check_.expires_after(std::chrono::milliseconds(50));
    half_closed_check_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec || self->phase_ == phase::closed || self->phase_ == phase::reading)
        return;
      // After the client's FIN a read reports end-of-stream even once a reset has come; the
      // connection's state tells the reset.
      tcp_info info{};
      socklen_t size = sizeof info;
      if (::getsockopt(self->stream_.socket().native_handle(), IPPROTO_TCP, TCP_INFO, &info, &size) != 0
          || info.tcpi_state == TCP_CLOSE)
        return self->client_gone();
      self->watch_half_closed();
    });
  }

  void resume_reading() {
    phase_ = phase::reading;
    if (watching_) { // only ever on TCP
      resume_after_watch_ = true;
      if constexpr (is_tcp<Stream>) {
        beast::error_code ec;
        stream_.socket().cancel(ec);
      }
    } else {
      do_read();
    }
  }

  void client_gone() {
    gone_gen_ = gen_;
    shutdown_now();
  }

  void end_exchange() {
    if (!exchange_open_)
      return;
    exchange_open_ = false;
    on_disconnect_ = nullptr;
    events_written_ = nullptr; // it may hold the producer, which holds this session
    --state_->open_exchanges;
  }

  void shutdown_now() {
    if (phase_ == phase::closed) {
      if (draining_) // stop() ends a drain at once
        close_stream();
      return;
    }
    phase_ = phase::closed;
    closed_ = true;
    heartbeat_.cancel();
    if (exchange_open_) {
      auto cb = std::move(on_disconnect_);
      end_exchange();
      gone_gen_ = gen_;
      if (cb)
        cb();
    }
    if constexpr (is_tcp<Stream>) {
      beast::error_code ec;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    }
    close_stream();
  }

  template <class Duration>
  void expire_after(Duration d) {
    if constexpr (is_tcp<Stream>)
      stream_.expires_after(d);
  }

  void expire_never() {
    if constexpr (is_tcp<Stream>)
      stream_.expires_never();
  }

  // The test stream has no half-close: closing it is what the peer sees as the end of what we send.
  void shut_sending() {
    if constexpr (is_tcp<Stream>) {
      beast::error_code ec;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    } else {
      stream_.close();
    }
  }

  void close_stream() {
    if constexpr (is_tcp<Stream>) {
      beast::error_code ec;
      stream_.socket().close(ec);
    } else {
      stream_.close();
    }
  }

  struct queued {
    std::string bytes;
    int64_t counted; // bytes charged against the stream buffer bound
    int64_t events;  // the producer's events in it (queued_events())
  };

  Stream stream_;
  beast::flat_buffer buffer_;
  std::shared_ptr<server_state> state_;
  socket_slot slot_;
  std::string peer_;
  http_request head_; // the request being read: its head, then its body
  std::optional<request_parser> parser_;
  std::optional<http::request<http::string_body>> upgrade_request_; // kept for upgrade() to answer
  net::steady_timer heartbeat_;
  phase phase_ = phase::reading;
  uint64_t gen_ = 0;
  uint64_t gone_gen_ = 0;
  bool keep_alive_ = true;
  bool exchange_open_ = false;
  bool watching_ = false;
  bool resume_after_watch_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool draining_ = false;
  std::size_t drained_ = 0;
  bool http11_ = true;            // the request was HTTP/1.1: interim answers may be sent
  net::steady_timer half_closed_check_{stream_.get_executor()}; // a half-closed client's reset, looked for
  std::function<void()> on_disconnect_;
  std::deque<queued> outbox_;
  std::vector<net::const_buffer> gathered_; // the buffers of the write in flight
  steady_clock::time_point last_frame_ = steady_clock::now();
  std::atomic<int64_t> queued_bytes_{0};
  std::atomic<int64_t> queued_events_{0};
  std::function<void()> events_written_; // the event stream's producer, told of progress
  std::atomic<bool> closed_{false};
};

template <class Stream, class Accepted>
void serve(Accepted accepted, const std::shared_ptr<server_state>& state) {
  auto s = std::make_shared<session<Stream>>(std::move(accepted), state, take_slot(state));
  if (state->track(s))
    s->run();
}

} // namespace

void serve_session(tcp::socket socket, const std::shared_ptr<server_state>& state) {
  serve<tcp_transport>(std::move(socket), state);
}

void serve_session(test_transport stream, const std::shared_ptr<server_state>& state) {
  serve<test_transport>(std::move(stream), state);
}

} // namespace troupe::io

#include "io/http_server.hpp"
#include "io/http_test_stream.hpp"

#include "protocol/errors.hpp"
#include "protocol/query_string.hpp"
#include "protocol/responses_items.hpp"
#include "protocol/sse.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cctype>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <unordered_map>

namespace troupe::io {

namespace beast = boost::beast;
namespace http = beast::http;
namespace beast_ws = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using std::chrono::steady_clock;

namespace {

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

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

void split_target(std::string_view target, http_request& req) {
  auto q = target.find('?');
  req.path = protocol::percent_decode(target.substr(0, q), false);
  if (q != std::string_view::npos)
    for (auto& [key, value] : protocol::query_pairs(target.substr(q + 1)))
      req.query[std::move(key)] = std::move(value);
}

// RFC 6455 leaves 123 bytes for a close reason; a cut never splits a UTF-8 sequence.
std::string cut_reason(std::string reason) {
  constexpr std::size_t max_reason = 123;
  if (reason.size() <= max_reason)
    return reason;
  auto n = max_reason;
  while (n > 0 && (static_cast<unsigned char>(reason[n]) & 0xC0) == 0x80)
    --n;
  reason.resize(n);
  return reason;
}

std::string chunk(std::string_view payload) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
  std::string out(size);
  out.append(payload);
  out += "\r\n";
  return out;
}

// The TCP stream under a WebSocket: Beast's own, but with a teardown of our own, which Beast finds by
// argument-dependent lookup on this type.
class ws_transport : public beast::tcp_stream {
public:
  using beast::tcp_stream::tcp_stream;
};

// How long, and how many bytes, a teardown waits for the peer's end of the connection before it gives up.
constexpr auto teardown_deadline = std::chrono::seconds(5);
constexpr std::size_t teardown_max_bytes = 16 * 1024 * 1024;
constexpr std::size_t max_gathered_frames = 64; // IOV_MAX is 1024; 64 frames are already one large write

// Ends the connection after a close frame went out (an answer to the peer's close, a close of our own, or
// a failure such as 1009 for a message over read_message_max): shuts down the send side, then reads and
// drops what the peer still sends until its end of the connection, and only then closes the socket.
//
// Beast's teardown_tcp_op (Boost 1.74 here, unchanged in later releases) means to do the same but stops
// after one successful read of at most 2 KiB: it tests the coroutine's `bytes_transferred`, which its
// synchronous read_some never sets. A peer that was still sending, e.g. the rest of a frame over 1 MiB,
// leaves unread data behind, and closing a socket with unread data sends a TCP RST, which can reach the
// peer before it has read the close frame: it then sees an abnormal closure (1006) instead of 1009. Nor
// does Beast bound its drain. This one is bounded by a deadline and a byte count, past which the
// connection is closed anyway.
template <class Handler>
class teardown_op : public beast::stable_async_base<Handler, beast::executor_type<ws_transport>>,
                    public net::coroutine {
  using discard_buffer = std::array<char, 16 * 1024>;

public:
  template <class H>
  teardown_op(H&& handler, ws_transport& stream, beast::role_type role)
    : beast::stable_async_base<Handler, beast::executor_type<ws_transport>>(std::forward<H>(handler),
                                                                             stream.get_executor()),
      stream_(stream), role_(role), buffer_(beast::allocate_stable<discard_buffer>(*this)) {
    (*this)({}, 0, false);
  }

  void operator()(beast::error_code ec = {}, std::size_t bytes = 0, bool cont = true) {
    BOOST_ASIO_CORO_REENTER(*this) {
      if (role_ == beast::role_type::server)
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      if (!ec) {
        stream_.expires_after(teardown_deadline);
        for (;;) {
          BOOST_ASIO_CORO_YIELD stream_.async_read_some(net::buffer(buffer_), std::move(*this));
          if (ec)
            break;
          discarded_ += bytes;
          if (discarded_ > teardown_max_bytes) {
            ec = net::error::message_size;
            break;
          }
        }
        // The peer's end of the connection is the one success.
        if (ec == net::error::eof) {
          ec = {};
          if (role_ == beast::role_type::client)
            stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        }
      }
      {
        beast::error_code ignored;
        stream_.expires_never();
        stream_.socket().close(ignored);
      }
      this->complete(cont, ec);
    }
  }

private:
  ws_transport& stream_;
  beast::role_type role_;
  discard_buffer& buffer_;
  std::size_t discarded_ = 0;
};

template <class TeardownHandler>
void async_teardown(beast::role_type role, ws_transport& stream, TeardownHandler&& handler) {
  teardown_op<typename std::decay<TeardownHandler>::type>(std::forward<TeardownHandler>(handler), stream, role);
}

// A session's stream: an accepted TCP connection, or Beast's test stream, over which tests fail each
// read and write in turn (io/http_test_stream.hpp). Timeouts, the peer's address, shutting one direction
// and the readiness watch are TCP's; over the test stream they do nothing, and a shutdown closes.
using tcp_transport = beast::tcp_stream;
using test_transport = beast::test::stream;

template <class Stream>
constexpr bool is_tcp = std::is_same_v<Stream, tcp_transport>;

// What a session hands to the WebSocket it becomes, and the stream under that WebSocket.
template <class Stream>
using handoff = std::conditional_t<is_tcp<Stream>, tcp::socket, Stream>;
template <class Stream>
using ws_layer = std::conditional_t<is_tcp<Stream>, ws_transport, Stream>;

} // namespace

// Anything stop() has to end: an HTTP session, or a WebSocket upgraded from one.
class connection {
public:
  virtual ~connection() = default;
  // Ends the connection at once, from any thread.
  virtual void close_now() = 0;
};

struct server_state {
  http_server_options options;
  std::shared_ptr<const router> routes;
  std::atomic<int64_t> open_exchanges{0};
  std::atomic<int64_t> open_sockets{0}; // accepted and not yet closed (service.max_connections)

  // Registers a connection for stop(); false once stop() has begun, so that nothing opened during the
  // stop is missed.
  bool track(const std::shared_ptr<connection>& c) {
    std::lock_guard<std::mutex> lock(connections_mu);
    if (stopping)
      return false;
    for (auto it = connections.begin(); it != connections.end();)
      it = it->second.expired() ? connections.erase(it) : std::next(it);
    connections.emplace(c.get(), c);
    return true;
  }

  void untrack(connection* c) {
    std::lock_guard<std::mutex> lock(connections_mu);
    connections.erase(c);
  }

  void close_all() {
    std::lock_guard<std::mutex> lock(connections_mu);
    stopping = true;
    for (auto& [ptr, weak] : connections)
      if (auto c = weak.lock())
        c->close_now();
  }

  std::mutex connections_mu;
  bool stopping = false;
  std::unordered_map<connection*, std::weak_ptr<connection>> connections;
};

// One accepted socket's place under service.max_connections, given back when its last holder (the
// HTTP session, or the WebSocket it became) is gone.
using socket_slot = std::shared_ptr<void>;

socket_slot take_slot(const std::shared_ptr<server_state>& state) {
  ++state->open_sockets;
  return socket_slot(nullptr, [state](void*) { --state->open_sockets; });
}

// A WebSocket after the upgrade: it owns the TCP stream the HTTP session gave up, reads messages for the
// route and writes its bounded outbox one frame at a time, all on the connection's strand.
template <class Stream>
class websocket_session : public websocket,
                          public connection,
                          public std::enable_shared_from_this<websocket_session<Stream>> {
public:
  websocket_session(net::any_io_executor strand, std::shared_ptr<server_state> state, std::size_t outbox_frames)
    : strand_(std::move(strand)), state_(std::move(state)), outbox_frames_(outbox_frames) {}

  // A route that drops a WebSocket it never started lets it go without an end(): the exchange it counted
  // still closes.
  ~websocket_session() override {
    if (counted_)
      --state_->open_exchanges;
  }

  void start(websocket_handlers handlers) override {
    net::post(strand_, [self = this->shared_from_this(), h = std::move(handlers)]() mutable {
      if (self->started_)
        return;
      self->started_ = true;
      self->handlers_ = std::move(h);
      if (self->ended_)
        self->report_closed();
      else
        self->read_next();
    });
  }

  bool send(std::string text) override {
    if (closing_.load())
      return false;
    // Counted before queuing so that a full outbox refuses at once, on the caller's thread.
    if (queued_.fetch_add(1) >= outbox_frames_) {
      --queued_;
      return false;
    }
    net::post(strand_, [self = this->shared_from_this(), t = std::move(text)]() mutable {
      if (self->ended_ || self->close_sent_) {
        --self->queued_;
        return;
      }
      self->outbox_.push_back(std::move(t));
      self->write_next();
    });
    return true;
  }

  void close(uint16_t code, std::string reason) override {
    closing_ = true;
    if (close_called_.exchange(true))
      return;
    net::post(strand_, [self = this->shared_from_this(), code, r = cut_reason(std::move(reason))]() mutable {
      if (self->ended_)
        return;
      self->close_reason_.emplace(static_cast<beast_ws::close_code>(code), beast::string_view(r));
      self->write_next();
    });
  }

  std::size_t queued() const override { return queued_.load(); }

  void close_now() override {
    net::post(strand_, [self = this->shared_from_this()] { self->end(); });
  }

  // On the strand: takes over the HTTP session's socket and answers the upgrade request. The open
  // exchange the session counted is this WebSocket's from now on.
  void accept(handoff<Stream> stream, socket_slot slot, const http::request<http::string_body>& request,
              const std::string& subprotocol) {
    ws_.emplace(std::move(stream));
    slot_ = std::move(slot);
    counted_ = true;
    if (!state_->track(this->shared_from_this())) {
      end();
      return;
    }
    ws_->set_option(beast_ws::stream_base::timeout::suggested(beast::role_type::server));
    ws_->set_option(beast_ws::stream_base::decorator([subprotocol](beast_ws::response_type& res) {
      res.set(http::field::server, "troupe");
      if (!subprotocol.empty())
        res.set(http::field::sec_websocket_protocol, subprotocol);
    }));
    ws_->read_message_max(max_message_bytes);
    ws_->async_accept(request, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) {
        self->end();
        return;
      }
      self->accepted_ = true;
      self->read_next();
      self->write_next();
    });
  }

  // The upgrade did not happen (the connection ended or was answered first): a WebSocket that has ended.
  void abandon() { close_now(); }

private:
  // WS-44: a bigger message is refused by Beast, which closes with 1009 and then ends the connection through
  // the async_teardown above, so that the client reads the 1009 even while it is still sending.
  static constexpr uint64_t max_message_bytes = 1024 * 1024;

  void read_next() {
    if (!started_ || !accepted_ || reading_ || ended_ || close_reason_)
      return;
    reading_ = true;
    ws_->async_read(read_buffer_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
      self->reading_ = false;
      if (ec) {
        self->end();
        return;
      }
      if (self->ended_)
        return;
      auto data = beast::buffers_to_string(self->read_buffer_.data());
      self->read_buffer_.consume(self->read_buffer_.size());
      // Once the route has closed, what the client still sends is dropped.
      if (self->close_reason_)
        return;
      if (self->handlers_.on_message) {
        try {
          self->handlers_.on_message(std::move(data), self->ws_->got_binary());
        } catch (const std::exception& e) {
          spdlog::error("http: websocket message handler threw: {}", e.what());
          self->close(1011, "the server failed to handle a message"); // WS-57
        }
      }
      self->read_next();
    });
  }

  void write_next() {
    if (!accepted_ || writing_ || ended_ || close_sent_)
      return;
    if (!outbox_.empty()) {
      writing_ = true;
      ws_->text(true);
      ws_->async_write(net::buffer(outbox_.front()), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
        self->writing_ = false;
        if (ec || self->ended_) {
          self->end();
          return;
        }
        self->outbox_.pop_front();
        --self->queued_;
        self->write_next();
      });
      return;
    }
    if (close_reason_) {
      close_sent_ = true;
      writing_ = true;
      // Beast reads (and drops) up to the client's answering close frame, then ends the connection through
      // the async_teardown above.
      ws_->async_close(*close_reason_, [self = this->shared_from_this()](beast::error_code) {
        self->writing_ = false;
        self->end();
      });
    }
  }

  // The one way out: every path that ends the connection comes here, and on_closed runs once.
  void end() {
    if (ended_)
      return;
    ended_ = true;
    closing_ = true;
    queued_ -= outbox_.size();
    outbox_.clear();
    if (ws_)
      beast::get_lowest_layer(*ws_).close();
    if (counted_) {
      counted_ = false;
      --state_->open_exchanges;
    }
    state_->untrack(this);
    report_closed();
  }

  void report_closed() {
    if (!started_ || reported_)
      return;
    reported_ = true;
    // The handlers may hold this WebSocket; dropping them breaks the cycle.
    auto handlers = std::move(handlers_);
    handlers_ = {};
    if (!handlers.on_closed)
      return;
    try {
      handlers.on_closed();
    } catch (const std::exception& e) {
      spdlog::error("http: websocket close handler threw: {}", e.what());
    }
  }

  net::any_io_executor strand_;
  std::shared_ptr<server_state> state_;
  socket_slot slot_;
  const std::size_t outbox_frames_;
  std::optional<beast_ws::stream<ws_layer<Stream>>> ws_;
  beast::flat_buffer read_buffer_;
  websocket_handlers handlers_;
  std::deque<std::string> outbox_;
  std::optional<beast_ws::close_reason> close_reason_;
  bool started_ = false;
  bool accepted_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool close_sent_ = false;
  bool ended_ = false;
  bool reported_ = false;
  bool counted_ = false;
  std::atomic<std::size_t> queued_{0};
  std::atomic<bool> closing_{false};
  std::atomic<bool> close_called_{false};
};

// What an exchange asks of its session, whatever stream the session runs over.
class session_base {
public:
  virtual ~session_base() = default;
  virtual void respond(uint64_t gen, http_response r) = 0;
  virtual void open_stream(uint64_t gen, header_list headers) = 0;
  virtual bool send_frame(uint64_t gen, std::string frame, int64_t events) = 0;
  virtual bool backlogged() const = 0;
  virtual int64_t queued_events() const = 0;
  virtual void set_events_written(uint64_t gen, std::function<void()> written) = 0;
  virtual void finish_stream(uint64_t gen) = 0;
  virtual void set_disconnect(uint64_t gen, std::function<void()> cb) = 0;
  // Hands the connection to a new WebSocket, which answers the upgrade request. Not `first` (the
  // exchange was answered already): the WebSocket returned has ended.
  virtual std::shared_ptr<websocket> upgrade(uint64_t gen, std::string subprotocol, std::size_t outbox_frames,
                                             bool first) = 0;
};

// The handler's view of one request: forwards to the session's strand, tagged with the request's
// generation so that a late answer can never reach the connection's next request.
class exchange_impl : public http_exchange, public event_stream, public std::enable_shared_from_this<exchange_impl> {
public:
  exchange_impl(std::shared_ptr<session_base> s, uint64_t gen, bool upgradable)
    : session_(std::move(s)), gen_(gen), upgradable_(upgradable) {}
  void respond(http_response response) override;
  std::shared_ptr<event_stream> open_event_stream(header_list headers) override;
  void on_disconnect(std::function<void()> callback) override;
  std::shared_ptr<websocket> upgrade(std::string subprotocol, std::size_t outbox_frames) override;
  using event_stream::send;
  bool send(std::string frame, int64_t events) override;
  void finish() override;
  bool backlogged() const override;
  int64_t queued_events() const override;
  void on_events_written(std::function<void()> written) override;

  // True once respond() was called: a whole answer is on its way and there is nothing to watch.
  bool responded() const { return responded_.load(); }

private:
  std::shared_ptr<session_base> session_;
  uint64_t gen_;
  bool upgradable_; // a WebSocket upgrade request, known when the request was read
  std::atomic<bool> answered_{false};
  std::atomic<bool> responded_{false};
};

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
    auto ws = std::make_shared<websocket_session<Stream>>(stream_.get_executor(), state_, outbox_frames);
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
    for (auto& field : msg) {
      std::string name(field.name_string());
      for (auto& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      head_.headers[name] = std::string(field.value());
    }
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
      return refuse_before_body(body_too_large(d));
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

  // Each dialect's own words: AS-1's detail, RS-2's request_too_large.
  http_response body_too_large(protocol::dialect d) const {
    auto limit = std::to_string(state_->options.max_body_bytes);
    auto said = d == protocol::dialect::openai
                  ? problem{errc::payload_too_large, "Request body exceeds " + limit + " bytes.", {}, "request_too_large"}
                  : problem{errc::payload_too_large, "Request body too large"};
    auto rendered = protocol::render_error(d, said);
    return json_response(rendered.status, std::move(rendered.body));
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
      return refuse_before_body(body_too_large(protocol::dialect_for_path(target.substr(0, target.find('?')))));
    }
    if (ec) {
      if (ec != http::error::end_of_stream && ec != beast::error::timeout && ec != net::error::connection_reset
          && buffer_.size() > 0) {
        keep_alive_ = false;
        ++gen_;
        write_response(json_response(400, protocol::error_body(protocol::dialect::agent, errc::bad_request,
                                                               "Malformed HTTP request")));
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

  // No header value reaches the wire with a CR, LF or NUL: a value that would split the head makes the
  // answer a 500 instead. Ids are checked where they are admitted; this is the edge's last word.
  static bool safe_headers(const header_list& headers) {
    for (auto& [name, value] : headers)
      if (!protocol::is_header_value(name) || !protocol::is_header_value(value))
        return false;
    return true;
  }

  static http_response unsafe_header_answer() {
    return json_response(500, protocol::error_body(protocol::dialect::agent, errc::internal,
                                                   "Internal server error: a response header held a line break"));
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
    res->keep_alive(keep_alive_);
    res->body() = std::move(r.body);
    res->prepare_payload();
    expire_after(to_ms(state_->options.read_timeout_seconds));
    http::async_write(stream_, *res, [self = this->shared_from_this(), res](beast::error_code ec, std::size_t) {
      self->end_exchange();
      if (ec)
        self->shutdown_now();
      else if (!self->keep_alive_)
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
    std::string head = "HTTP/1.1 200 OK\r\nServer: troupe\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                       "Cache-Control: no-cache\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n";
    for (auto& [name, value] : headers)
      head += name + ": " + value + "\r\n";
    head += "\r\n";
    enqueue(std::move(head), 0);
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
      else {
        auto s = std::make_shared<session<tcp_transport>>(std::move(socket), state, take_slot(state));
        if (state->track(s))
          s->run();
      }
      accept();
    });
  }

  // A connection over service.max_connections: a fixed 503 and a close, without reading its request.
  static void refuse_connection(tcp::socket socket) {
    static const std::string answer =
      "HTTP/1.1 503 Service Unavailable\r\nServer: troupe\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: 33\r\n\r\n{\"detail\":\"Too many connections\"}";
    auto s = std::make_shared<tcp::socket>(std::move(socket));
    net::async_write(*s, net::buffer(answer), [s](beast::error_code, std::size_t) {
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
  auto s = std::make_shared<session<test_transport>>(std::move(stream), impl_->state, take_slot(impl_->state));
  if (impl_->state->track(s))
    s->run();
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

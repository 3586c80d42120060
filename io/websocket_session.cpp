// A WebSocket after the upgrade: it owns the stream the HTTP session gave up, reads messages for the
// route and writes its bounded outbox one frame at a time, all on the connection's strand. Its life is
// the named phases of io/websocket_state.hpp.
#include "io/websocket_session.hpp"
#include "io/websocket_state.hpp"

#include <boost/asio/coroutine.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <deque>
#include <optional>
#include <type_traits>

namespace troupe::io {

namespace http = beast::http;
namespace beast_ws = beast::websocket;

namespace {

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

// The TCP stream under a WebSocket: Beast's own, but with a teardown of our own, which Beast finds by
// argument-dependent lookup on this type.
class ws_transport : public beast::tcp_stream {
public:
  using beast::tcp_stream::tcp_stream;
};

// How long, and how many bytes, a teardown waits for the peer's end of the connection before it gives up.
constexpr auto teardown_deadline = std::chrono::seconds(5);
constexpr std::size_t teardown_max_bytes = 16 * 1024 * 1024;

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

// The stream under a WebSocket.
template <class Stream>
using ws_layer = std::conditional_t<is_tcp<Stream>, ws_transport, Stream>;

template <class Stream>
class websocket_session final : public websocket_upgrade<Stream>,
                                public connection,
                                public std::enable_shared_from_this<websocket_session<Stream>> {
public:
  websocket_session(net::any_io_executor strand, std::shared_ptr<server_state> state, std::size_t outbox_frames)
    : strand_(std::move(strand)), state_(std::move(state)), outbox_frames_(outbox_frames) {}

  // A route that drops a WebSocket it never started lets it go without an end(): the exchange it counted
  // still closes.
  ~websocket_session() override {
    if (holds_exchange())
      --state_->open_exchanges;
  }

  void start(websocket_handlers handlers) override {
    net::post(strand_, [self = this->shared_from_this(), h = std::move(handlers)]() mutable {
      if (self->started_)
        return;
      self->started_ = true;
      self->handlers_ = std::move(h);
      if (self->phase_ == ws::phase::ended)
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
      if (!ws::queues(self->phase_)) {
        --self->queued_;
        return;
      }
      self->outbox_.push_back(std::move(t));
      self->write_next();
    });
    return true;
  }

  void close(uint16_t code, std::string reason) override {
    if (closing_.exchange(true))
      return;
    net::post(strand_, [self = this->shared_from_this(), code, r = cut_reason(std::move(reason))]() mutable {
      if (self->phase_ == ws::phase::ended)
        return;
      self->close_reason_.emplace(static_cast<beast_ws::close_code>(code), beast::string_view(r));
      self->phase_ = ws::next(self->phase_, ws::event::close_asked);
      self->write_next();
    });
  }

  std::size_t queued() const override { return queued_.load(); }

  void close_now() override {
    net::post(strand_, [self = this->shared_from_this()] { self->end(); });
  }

  void accept(handoff<Stream> stream, socket_slot slot, const http::request<http::string_body>& request,
              const std::string& subprotocol) override {
    ws_.emplace(std::move(stream));
    slot_ = std::move(slot);
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
      self->phase_ = ws::next(self->phase_, ws::event::handshake_done);
      self->read_next();
      self->write_next();
    });
  }

  void abandon() override { close_now(); }

private:
  // WS-44: a bigger message is refused by Beast, which closes with 1009 and then ends the connection through
  // the async_teardown above, so that the client reads the 1009 even while it is still sending.
  static constexpr uint64_t max_message_bytes = 1024 * 1024;

  // The open exchange the session counted is this WebSocket's from the moment it took the stream until
  // it ends.
  bool holds_exchange() const { return ws_ && phase_ != ws::phase::ended; }

  void read_next() {
    if (!started_ || !ws::reads(phase_) || reading_)
      return;
    reading_ = true;
    ws_->async_read(read_buffer_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
      self->reading_ = false;
      if (ec) {
        self->end();
        return;
      }
      auto data = beast::buffers_to_string(self->read_buffer_.data());
      self->read_buffer_.consume(self->read_buffer_.size());
      // Once the route has closed, what the client still sends is dropped.
      if (!ws::reads(self->phase_))
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
    if (!ws::writes(phase_) || writing_)
      return;
    if (!outbox_.empty()) {
      writing_ = true;
      ws_->text(true);
      ws_->async_write(net::buffer(outbox_.front()), [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
        self->writing_ = false;
        if (ec || self->phase_ == ws::phase::ended) {
          self->end();
          return;
        }
        self->outbox_.pop_front();
        --self->queued_;
        self->write_next();
      });
      return;
    }
    if (phase_ == ws::phase::draining) {
      phase_ = ws::next(phase_, ws::event::outbox_drained);
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
    if (phase_ == ws::phase::ended)
      return;
    bool counted = holds_exchange();
    phase_ = ws::next(phase_, ws::event::finished);
    closing_ = true;
    queued_ -= outbox_.size();
    outbox_.clear();
    if (ws_)
      beast::get_lowest_layer(*ws_).close();
    if (counted)
      --state_->open_exchanges;
    state_->untrack(this);
    report_closed();
  }

  // Runs the route's on_closed once: from end() when the route has started, else from start().
  void report_closed() {
    if (!started_)
      return;
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
  std::optional<beast_ws::close_reason> close_reason_; // set by the route's close()
  ws::phase phase_ = ws::phase::handshake;
  bool started_ = false; // the route has called start(): its handlers are in place
  bool reading_ = false; // a read is in flight
  bool writing_ = false; // a write or the close is in flight
  std::atomic<std::size_t> queued_{0};
  std::atomic<bool> closing_{false}; // close() called or the connection ended: send() refuses
};

} // namespace

template <class Stream>
std::shared_ptr<websocket_upgrade<Stream>> make_websocket_session(net::any_io_executor strand,
                                                                  std::shared_ptr<server_state> state,
                                                                  std::size_t outbox_frames) {
  return std::make_shared<websocket_session<Stream>>(std::move(strand), std::move(state), outbox_frames);
}

template std::shared_ptr<websocket_upgrade<tcp_transport>>
make_websocket_session<tcp_transport>(net::any_io_executor, std::shared_ptr<server_state>, std::size_t);
template std::shared_ptr<websocket_upgrade<test_transport>>
make_websocket_session<test_transport>(net::any_io_executor, std::shared_ptr<server_state>, std::size_t);

} // namespace troupe::io

// The web port's adapter: each request on a connection of its own, driven on one Asio thread, its
// answer read whole (bounded) and handed back to the port's actor, which answers the caller.
#include "io/web_client.hpp"

#include "actors/errors.hpp"
#include "io/http_client.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <caf/all.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <thread>

namespace troupe::io::web_detail {

// What the Asio thread hands back: the answer, or why there is none.
struct web_outcome {
  uint64_t id = 0;
  web_response response;
  std::string error; // "" on an answer
};

} // namespace troupe::io::web_detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::io::web_detail::web_outcome)

namespace troupe::io {

namespace {

namespace net = boost::asio;
using web_detail::web_outcome;

constexpr std::size_t header_limit = 64 * 1024;
constexpr std::uint64_t body_limit = 32 * 1024 * 1024; // a page of a run's events is far less

using answered_atom = caf::atom_constant<caf::atom("web_done")>;

// What the Asio thread runs on; the thread keeps it alive until run() returned, so the engine may
// end on any thread, its own included (the port's last reference may go in an answer's handler).
struct web_core {
  net::io_context ioc;
  net::ssl::context tls{net::ssl::context::tls_client};
};

// The Asio side: a thread running an io_context for the connections in flight.
class web_engine {
public:
  web_engine() : core_(std::make_shared<web_core>()), ioc_(core_->ioc), tls_(core_->tls), guard_(net::make_work_guard(ioc_)) {
    boost::system::error_code ec;
    tls_.set_default_verify_paths(ec);
    tls_.set_verify_mode(net::ssl::verify_peer);
    thread_ = std::thread([core = core_] { core->ioc.run(); });
  }
  ~web_engine() {
    guard_.reset();
    ioc_.stop();
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach(); // run() returns once this handler does; the thread then lets the core go
    else
      thread_.join();
  }

  void start(uint64_t id, web_request req, std::function<void(web_outcome)> done) {
    net::post(ioc_, [this, id, req = std::move(req), done = std::move(done)]() mutable {
      run(id, std::move(req), std::move(done));
    });
  }

private:
  struct call {
    uint64_t id;
    http_client_request request;
    std::unique_ptr<http_connection> conn;
    net::steady_timer deadline;
    std::string body;
    bool done = false;
    std::function<void(web_outcome)> reply;
    explicit call(net::io_context& ioc) : deadline(ioc) {}
  };

  void run(uint64_t id, web_request req, std::function<void(web_outcome)> done) {
    auto url = parse_http_url(req.url, "/?#");
    if (url.problem != protocol::url_problem::none)
      return done({id, {}, req.url + ": " + describe(url.problem)});
    auto c = std::make_shared<call>(ioc_);
    c->id = id;
    c->reply = std::move(done);
    c->request.method = req.method;
    c->request.target = url.target.empty() ? "/" : url.target;
    c->request.fields = std::move(req.headers);
    c->request.close = true;
    c->request.body = std::move(req.body);
    c->conn = std::make_unique<http_connection>(ioc_.get_executor(), url.tls ? &tls_ : nullptr, url, header_limit,
                                                body_limit);
    c->deadline.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(req.timeout_seconds)));
    c->deadline.async_wait([c](boost::system::error_code ec) {
      if (!ec)
        finish(c, "timed out");
    });
    auto step = [c](auto next) {
      return [c, next](const char* what, boost::system::error_code ec) {
        if (c->done)
          return;
        if (ec)
          return finish(c, std::string(what) + ": " + ec.message());
        next();
      };
    };
    c->conn->open(step([c, step] {
      c->conn->write(c->request, step([c, step] { c->conn->read_header(step([c] { read_body(c); })); }));
    }));
  }

  static void read_body(const std::shared_ptr<call>& c) {
    c->conn->read_some([c](const char* what, boost::system::error_code ec, std::string_view bytes) {
      if (c->done)
        return;
      if (ec)
        return finish(c, std::string(what) + ": " + ec.message());
      c->body.append(bytes);
      if (!c->conn->complete())
        return read_body(c);
      web_response r;
      r.status = c->conn->status();
      r.body = std::move(c->body);
      auto retry = c->conn->header("Retry-After");
      int seconds = 0;
      if (std::from_chars(retry.data(), retry.data() + retry.size(), seconds).ec == std::errc() && seconds > 0)
        r.retry_after_seconds = seconds;
      finish(c, {}, std::move(r));
    });
  }

  static void finish(const std::shared_ptr<call>& c, std::string error, web_response r = {}) {
    if (c->done)
      return;
    c->done = true;
    c->deadline.cancel();
    c->conn->close();
    c->reply({c->id, std::move(r), std::move(error)});
  }

  std::shared_ptr<web_core> core_;
  net::io_context& ioc_;
  net::ssl::context& tls_;
  net::executor_work_guard<net::io_context::executor_type> guard_;
  std::thread thread_;
};

using web_client_actor = web_port_actor::extend<caf::reacts_to<answered_atom, web_outcome>>;

struct web_client_state {
  static inline const char* name = "web_client";
  std::shared_ptr<web_engine> engine;
  uint64_t next_id = 1;
  std::map<uint64_t, caf::typed_response_promise<web_response>> pending;
};

// `engine` travels as the spawn argument: CAF 0.17 binds a null empty tuple to a function spawned
// without arguments (UBSan reports it).
web_client_actor::behavior_type web_client(web_client_actor::stateful_pointer<web_client_state> self,
                                           std::shared_ptr<web_engine> engine) {
  self->state.engine = std::move(engine);
  return {
    [=](web_atom, web_request& req) -> caf::result<web_response> {
      auto id = self->state.next_id++;
      auto rp = self->make_response_promise<web_response>();
      self->state.pending.emplace(id, rp);
      auto me = caf::actor_cast<caf::actor>(self);
      self->state.engine->start(id, std::move(req),
                                [me](web_outcome o) { caf::anon_send(me, answered_atom::value, std::move(o)); });
      return rp;
    },
    [=](answered_atom, web_outcome& o) {
      auto it = self->state.pending.find(o.id);
      if (it == self->state.pending.end())
        return;
      if (o.error.empty())
        it->second.deliver(std::move(o.response));
      else
        it->second.deliver(make_error(errc::upstream_failed, std::move(o.error)));
      self->state.pending.erase(it);
    },
  };
}

} // namespace

web_port_actor spawn_web_client(caf::actor_system& sys) {
  return sys.spawn<caf::detached>(web_client, std::make_shared<web_engine>());
}

} // namespace troupe::io

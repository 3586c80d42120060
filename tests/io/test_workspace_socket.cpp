// The reflexr.v1 connection's outbox (workspace-stream.md WS-56, WS-133) with the real log actors and
// SQLite store, and a WebSocket double whose client takes frames only when the test says so: its
// queue of frames not yet taken is the outbox the connection sees.
#include "io/sqlite_workspace_store.hpp"
#include "io/workspace_surface.hpp"
#include "protocol/cluster.hpp"
#include "protocol/config.hpp"
#include "protocol/json.hpp"
#include "protocol/workspace_events.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

using namespace troupe;
using namespace std::chrono_literals;
namespace rx = troupe::protocol::reflexr;

namespace {

class client_socket : public io::websocket {
public:
  explicit client_socket(std::size_t limit) : limit_(limit) {}

  void start(io::websocket_handlers handlers) override {
    std::lock_guard<std::mutex> lock(mu_);
    handlers_ = std::move(handlers);
    cv_.notify_all();
  }
  bool send(std::string text) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (close_code_ || unread_.size() >= limit_)
      return false;
    unread_.push_back(std::move(text));
    cv_.notify_all();
    return true;
  }
  void close(uint16_t code, std::string reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!close_code_) {
      close_code_ = code;
      close_reason_ = std::move(reason);
    }
    cv_.notify_all();
  }
  std::size_t queued() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return unread_.size();
  }

  // The client's side, once the connection's actor has started reading.
  void say(const std::string& text) { started().on_message(text, false); }
  void leave() { started().on_closed(); }
  // The oldest frame not yet taken, once there is one; nullopt after `wait` without one.
  std::optional<std::string> take(std::chrono::milliseconds wait = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, wait, [&] { return !unread_.empty(); }))
      return std::nullopt;
    auto frame = std::move(unread_.front());
    unread_.pop_front();
    return frame;
  }
  // The close code, once the connection closes; nullopt after `wait` without a close.
  std::optional<uint16_t> closed(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, wait, [&] { return close_code_.has_value(); });
    return close_code_;
  }
  std::string close_reason() {
    std::lock_guard<std::mutex> lock(mu_);
    return close_reason_;
  }

private:
  io::websocket_handlers& started() {
    std::unique_lock<std::mutex> lock(mu_);
    REQUIRE(cv_.wait_for(lock, 10s, [&] { return handlers_.on_closed != nullptr; }));
    return handlers_;
  }

  const std::size_t limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  io::websocket_handlers handlers_;
  std::deque<std::string> unread_;
  std::optional<uint16_t> close_code_;
  std::string close_reason_;
};

class upgrade_exchange : public io::http_exchange {
public:
  void respond(io::http_response) override {}
  std::shared_ptr<io::event_stream> open_event_stream(io::header_list) override { return nullptr; }
  void on_disconnect(std::function<void()>) override {}
  std::shared_ptr<io::websocket> upgrade(std::string, std::size_t outbox_frames) override {
    socket = std::make_shared<client_socket>(outbox_frames);
    return socket;
  }
  std::shared_ptr<client_socket> socket;
};

std::string fresh_db() {
  static int n = 0;
  auto dir = std::filesystem::temp_directory_path() / ("troupe-wsocket-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / ("log" + std::to_string(++n) + ".db");
  for (auto suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path.string() + suffix);
  return path.string();
}

struct workspace_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<io::workspace_surface> surface = std::make_shared<io::workspace_surface>();
  workspace_store_actor store;

  // A node of its own over a fresh store, or, given `shared`, a second node over that store whose
  // logs tell `notifier` of their appends (CJ-10).
  explicit workspace_fixture(const std::string& stream_config, workspace_store_actor shared = {},
                             notifier_actor notifier = {}) {
    auto parsed = protocol::parse_config(
      R"({"workspaces":{"event_types":[{"name":"ops:deploy.finished","schema":{"type":"object","properties":{"service":{"type":"string"}}}}],"stream":)"
        + stream_config + "}}",
      {}, [](const std::string&) { return std::nullopt; });
    REQUIRE(parsed.errors == std::vector<std::string>{});
    surface->sys = &sys;
    surface->open = true; // no credential configured: every caller is the default one
    surface->config = parsed.value.workspaces;
    surface->types = std::get<0>(rx::event_registry::build(surface->config));
    if (shared) {
      store = shared;
    } else {
      auto spawned = io::spawn_sqlite_workspace_store(sys, fresh_db());
      REQUIRE(spawned.index() == 0);
      store = std::get<workspace_store_actor>(spawned);
    }
    surface->logs = spawn_workspaces(sys, store, {}, notifier);
  }
  std::vector<std::shared_ptr<client_socket>> clients;

  ~workspace_fixture() {
    for (auto& c : clients) // each connection's actor ends when its client leaves
      c->leave();
    caf::anon_send_exit(surface->logs, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  }

  // Appends `n` events to workspace prod in one command, as one REST batch does.
  void publish_batch(int n) {
    std::string body = R"({"events":[)";
    for (int i = 0; i < n; ++i)
      body += std::string(i ? "," : "") + R"({"event":{"type":"ops:deploy.finished","service":"s)" + std::to_string(i)
              + R"("}})";
    body += "]}";
    auto parsed = rx::parse_publish_body(body, *surface->types);
    if (auto bad = std::get_if<rx::problems>(&parsed))
      FAIL(rx::first_problem(*bad));
    rx::workspace_caller caller;
    caller.tenant = "default";
    caller.actor.kind = "user";
    caller.actor.id = "local";
    auto command = io::address_command(*surface, caller, {"default", "prod"},
                                       std::get<rx::command_request>(std::move(parsed)), "");
    caf::scoped_actor self{sys};
    bool ok = false;
    self->request(surface->logs, caf::infinite, command_atom::value, std::move(command))
      .receive([&](workspace_outcome& o) { ok = o.ok; }, [&](caf::error&) {});
    REQUIRE(ok);
  }

  // A connection to prod that has sent its hello.
  std::shared_ptr<client_socket> connect() {
    io::http_request req;
    req.method = "GET";
    req.headers["sec-websocket-protocol"] = "reflexr.v1";
    req.params["workspace_id"] = "prod";
    auto ex = std::make_shared<upgrade_exchange>();
    io::open_workspace_stream(surface, req, ex);
    REQUIRE(ex->socket);
    ex->socket->say(R"({"type":"hello","protocol":"reflexr.v1"})");
    clients.push_back(ex->socket);
    return ex->socket;
  }
};

std::string type_of(const std::string& frame) {
  auto doc = protocol::json::parse(frame);
  REQUIRE(doc);
  return protocol::json::get_string(*doc, "type");
}

int64_t seq_of(const std::string& frame) {
  auto doc = protocol::json::parse(frame);
  REQUIRE(doc);
  auto seq = protocol::json::member(*doc, "seq");
  REQUIRE(seq);
  return seq->GetInt64();
}

// Takes frames until replay_complete, returning the seqs of the events before it.
std::vector<int64_t> take_replay(client_socket& c) {
  std::vector<int64_t> seqs;
  auto welcome = c.take();
  REQUIRE(welcome);
  CHECK(type_of(*welcome) == "welcome");
  for (;;) {
    auto frame = c.take();
    REQUIRE(frame);
    if (type_of(*frame) == "replay_complete")
      return seqs;
    seqs.push_back(seq_of(*frame));
  }
}

std::vector<int64_t> seqs_from_to(int64_t first, int64_t last) {
  std::vector<int64_t> out;
  for (int64_t i = first; i <= last; ++i)
    out.push_back(i);
  return out;
}

std::vector<int64_t> one_to(int64_t n) {
  return seqs_from_to(1, n);
}

// The seqs of the next `n` frames, fewer if they stop coming.
std::vector<int64_t> take_seqs(client_socket& c, std::size_t n, std::chrono::milliseconds wait = 10s) {
  std::vector<int64_t> seqs;
  while (seqs.size() < n)
    if (auto frame = c.take(wait))
      seqs.push_back(seq_of(*frame));
    else
      break;
  return seqs;
}

// CJ-10 between two nodes in one process: what one node's logs announce is read as the listener of
// the other node reads a troupe_ws payload, and handed to that node's `workspaces` actor, unless the
// test drops it (a lost notification).
struct relay_state {
  static inline const char* name = "wakeup_relay";
};

notifier_actor::behavior_type relay(notifier_actor::stateful_pointer<relay_state>, workspaces_actor to,
                                    std::shared_ptr<std::atomic<bool>> drop) {
  return {
    [=](notify_atom, const std::string& channel, const std::string&, const std::string& payload) {
      auto h = protocol::parse_workspace_wakeup(payload); // a bad one is not passed on: the test misses frames
      if (channel == workspace_channel && h && !*drop)
        caf::anon_send(to, appended_atom::value, workspace_key{h->tenant, h->workspace}, h->head);
    },
  };
}

} // namespace

TEST_CASE("a live batch larger than the outbox reaches a client that keeps reading, in order, without a 4429",
          "[workspace][websocket]") { // issue 15 finding 15, WS-53, WS-56
  workspace_fixture f(R"({"outbox_frames":1})");
  auto c = f.connect();
  CHECK(take_replay(*c).empty());
  f.publish_batch(30);
  std::vector<int64_t> seqs;
  while (seqs.size() < 30) {
    auto frame = c->take();
    if (!frame)
      break;
    seqs.push_back(seq_of(*frame));
  }
  CHECK(seqs == one_to(30));
  CHECK_FALSE(c->closed(0ms));
}

TEST_CASE("a replay larger than the outbox reaches a client that keeps reading", "[workspace][websocket]") { // WS-51
  workspace_fixture f(R"({"outbox_frames":1})");
  f.publish_batch(30);
  auto c = f.connect();
  CHECK(take_replay(*c) == one_to(30));
  CHECK_FALSE(c->closed(0ms));
}

TEST_CASE("a client that takes nothing from a full outbox is closed 4429, in replay as live",
          "[workspace][websocket]") { // WS-56 "outbox 1, 30 events → 4429", WS-133
  workspace_fixture f(R"({"outbox_frames":1,"client_stall_timeout":0.2})");
  SECTION("replaying") {
    f.publish_batch(30);
    auto c = f.connect();
    REQUIRE(c->closed(10s) == std::optional<uint16_t>(4429));
    CHECK(c->close_reason() == "the client is not keeping up");
  }
  SECTION("live") {
    auto c = f.connect();
    CHECK(take_replay(*c).empty());
    f.publish_batch(30);
    REQUIRE(c->closed(10s) == std::optional<uint16_t>(4429));
    std::vector<int64_t> seqs;
    while (auto frame = c->take(0ms))
      seqs.push_back(seq_of(*frame));
    CHECK(seqs == one_to(static_cast<int64_t>(seqs.size()))); // what it got is in order without gaps
    CHECK(seqs.size() < 30);
  }
}

TEST_CASE("a client of one node sees what another node appends to the log, woken by its notification or the next poll",
          "[workspace][websocket][cluster]") { // CJ-10, CJ-29 (live tails elsewhere), WS-133
  workspace_fixture b("{}");
  auto drop = std::make_shared<std::atomic<bool>>(false);
  auto to_b = b.sys.spawn(relay, b.surface->logs, drop);
  workspace_fixture a("{}", b.store, to_b);
  auto c = b.connect();
  CHECK(take_replay(*c).empty());

  a.publish_batch(5); // A tells B of its new head 5
  CHECK(take_seqs(*c, 5) == one_to(5));

  *drop = true; // the next notification is lost
  a.publish_batch(3);
  CHECK_FALSE(c->take(300ms));
  caf::anon_send(b.surface->logs, appended_atom::value); // B's poll
  CHECK(take_seqs(*c, 3) == seqs_from_to(6, 8));

  b.publish_batch(2); // B's own appends follow A's without a gap
  CHECK(take_seqs(*c, 2) == seqs_from_to(9, 10));
  *drop = false;
  a.publish_batch(1);
  CHECK(take_seqs(*c, 1) == std::vector<int64_t>{11});
  CHECK_FALSE(c->closed(0ms));
  caf::anon_send_exit(to_b, caf::exit_reason::user_shutdown);
}

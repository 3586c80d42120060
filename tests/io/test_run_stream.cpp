// The resumable run stream (AS-74) over the real store and registry, through the routes, with a
// client whose buffer the test controls: a backlogged client is never sent live events, and once it
// drains it catches up from the store with every event once, in order.
#include "actors/errors.hpp"
#include "actors/fake_ports.hpp"
#include "actors/run_registry.hpp"
#include "io/run_routes.hpp"
#include "io/run_stream.hpp"
#include "io/sqlite_store.hpp"
#include "protocol/chat_request.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <regex>

#include <unistd.h>

using namespace troupe;

namespace {

std::string temp_db(const char* name) {
  auto dir = std::filesystem::temp_directory_path() / ("troupe-stream-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::filesystem::remove(path);
  return path.string();
}

// A model whose inferences wait until the test releases them, one at a time.
class gated_model : public model_port {
public:
  std::shared_ptr<model_round> open(const protocol::responses::round_request&, events_handler events) override {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.push_back(std::move(events));
    cv_.notify_all();
    return std::make_shared<noop_round>();
  }

  // Waits for the next inference and answers it.
  void release(protocol::model_outcome outcome) {
    events_handler done;
    {
      std::unique_lock<std::mutex> lock(mu_);
      REQUIRE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !waiting_.empty(); }));
      done = std::move(waiting_.front());
      waiting_.pop_front();
    }
    done(testing::outcome_events(outcome));
  }

  void wait_for_inference() {
    std::unique_lock<std::mutex> lock(mu_);
    REQUIRE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !waiting_.empty(); }));
  }

private:
  struct noop_round : model_round {
    void cancel() override {}
    void resume() override {}
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<events_handler> waiting_;
};

// One request's exchange and event stream, recording what the client would read.
class recording_exchange : public io::http_exchange,
                           public io::event_stream,
                           public std::enable_shared_from_this<recording_exchange> {
public:
  std::atomic<bool> backlog{false};
  mutable std::atomic<int> backlog_checks{0}; // how often the stream asked whether the client is full

  void respond(io::http_response r) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = r.status;
    cv_.notify_all();
  }
  std::shared_ptr<io::event_stream> open_event_stream(io::header_list) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = 200;
    return shared_from_this();
  }
  void on_disconnect(std::function<void()> callback) override {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = std::move(callback);
  }
  // The client goes away (the stream actor stops).
  void disconnect() {
    std::function<void()> gone;
    {
      std::lock_guard<std::mutex> lock(mu_);
      gone.swap(gone_);
    }
    if (gone)
      gone();
  }
  using io::event_stream::send;
  bool send(std::string frame, int64_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    frames_.push_back(std::move(frame));
    cv_.notify_all();
    return true;
  }
  int64_t queued_events() const override { return 0; }
  void on_events_written(std::function<void()> written) override {
    std::lock_guard<std::mutex> lock(mu_);
    written_ = std::move(written);
  }
  // The client reads what was queued: a write made room, as the edge tells after each write.
  void drain() {
    backlog = false;
    std::function<void()> written;
    {
      std::lock_guard<std::mutex> lock(mu_);
      written = written_;
    }
    if (written)
      written();
  }
  void finish() override {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }
  bool backlogged() const override {
    ++backlog_checks;
    return backlog.load();
  }

  // The ids of the event frames so far, and whether `done` came.
  std::vector<int64_t> ids() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int64_t> out;
    static const std::regex id_line("^id: (\\d+)\n");
    for (auto& f : frames_) {
      std::smatch m;
      if (std::regex_search(f, m, id_line))
        out.push_back(std::stoll(m[1]));
    }
    return out;
  }
  std::size_t frame_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_.size();
  }
  bool wait_until(const std::function<bool()>& ready) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return ready(); });
  }
  bool wait_finished() {
    return wait_until([this] { return finished_; });
  }
  bool ends_with_done() {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_ && !frames_.empty() && frames_.back().find("event: done") != std::string::npos;
  }
  std::size_t frames_locked() const { return frames_.size(); }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> frames_;
  int status_ = 0;
  bool finished_ = false;
  std::function<void()> gone_;
  std::function<void()> written_;
};

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<gated_model> model = std::make_shared<gated_model>();
  std::shared_ptr<testing::fake_tools> tools = std::make_shared<testing::fake_tools>();
  store_actor store;
  run_registry_actor registry;
  io::router routes;

  fixture() {
    auto spawned = io::spawn_sqlite_store(sys, temp_db("stream.db"));
    REQUIRE(std::holds_alternative<store_actor>(spawned));
    store = std::get<store_actor>(spawned);
    auto env = std::make_shared<run_environment>();
    env->model = model;
    env->tools = tools;
    env->store = store;
    env->workspaces_root = std::filesystem::temp_directory_path().string();
    registry = spawn_run_registry(sys, env, {});
    protocol::config config;
    io::add_run_routes(routes, sys, registry, store, env->metrics, config);
  }

  std::vector<std::shared_ptr<recording_exchange>> clients;

  ~fixture() {
    for (auto& c : clients)
      c->disconnect();
    caf::anon_send_exit(registry, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  }

  void submit(const std::string& run_id) {
    std::string body = R"({"messages":[{"role":"user","content":"go"}],"metadata":{"run_id":")" + run_id + "\"}}";
    auto parsed = protocol::parse_chat_request(body);
    run_spec spec;
    spec.run_id = run_id;
    spec.run_kind = "background";
    spec.request = std::get<protocol::chat_request>(parsed);
    spec.request_body = body;
    caf::scoped_actor self{sys};
    self->request(registry, std::chrono::seconds(10), submit_atom::value, spec)
      .receive([](run_record& r) { CHECK(r.status == "queued"); }, [](caf::error& err) { FAIL(message_of(err)); });
  }

  std::shared_ptr<recording_exchange> open_stream(const std::string& run_id, bool backlogged = false) {
    auto ex = std::make_shared<recording_exchange>();
    ex->backlog = backlogged;
    io::http_request req;
    req.method = "GET";
    req.path = req.target = "/v1/runs/" + run_id + "/stream";
    routes.dispatch(req, ex);
    clients.push_back(ex);
    return ex;
  }

  // Waits until `run_id` has stored `n` events, for at most 10 s: a count of tries is no bound on a
  // loaded machine, where the run's last commit can take longer than a thousand store round trips.
  void wait_stored(const std::string& run_id, int64_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (stored_events(run_id) < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  }

  int64_t stored_events(const std::string& run_id) {
    int64_t n = -1;
    caf::scoped_actor self{sys};
    self->request(store, std::chrono::seconds(10), get_run_atom::value, run_id)
      .receive([&](run_record& r) { n = r.event_count; }, [](caf::error& err) { FAIL(message_of(err)); });
    return n;
  }
};

std::vector<int64_t> sequence(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(i);
  return out;
}

} // namespace

TEST_CASE_METHOD(fixture, "a run stream follows a live run and ends with done after the terminal event", "[stream]") {
  submit("live");
  model->wait_for_inference();
  auto client = open_stream("live");
  REQUIRE(client->wait_until([&] { return client->frames_locked() >= 1; })); // session_start, replayed
  tools->push({"echoed", false});
  model->release(testing::fake_model::call("echo", "{}"));
  model->release(testing::fake_model::text("done"));
  REQUIRE(client->wait_finished());
  auto total = stored_events("live");
  CHECK(client->ids() == sequence(total));
  CHECK(client->ends_with_done());
}

TEST_CASE_METHOD(fixture, "a backlogged client gets no live events and later catches up from the store", "[stream]") {
  submit("slow");
  model->wait_for_inference();
  auto client = open_stream("slow");
  REQUIRE(client->wait_until([&] { return client->frames_locked() >= 1; }));
  client->backlog = true;
  auto before = client->frame_count();
  for (int i = 0; i < 15; ++i) { // within max_iterations (20)
    tools->push({"echoed " + std::to_string(i), false});
    model->release(testing::fake_model::call("echo", "{}", "c" + std::to_string(i)));
  }
  model->release(testing::fake_model::text("done"));
  // The run ends with 1 + 15·4 + 3 events, every one stored before it was announced.
  const int64_t total = 1 + 15 * 4 + 3;
  wait_stored("slow", total);
  REQUIRE(stored_events("slow") == total);
  CHECK(client->frame_count() == before); // nothing was queued for the backlogged client
  client->drain();
  REQUIRE(client->wait_finished());
  CHECK(client->ids() == sequence(total));
  CHECK(client->ends_with_done());
}

TEST_CASE_METHOD(fixture, "a client backlogged when its stream opens is sent nothing of a stored page until it drains",
                 "[stream]") { // AS-74
  submit("full");
  model->wait_for_inference();
  model->release(testing::fake_model::text("done"));
  const int64_t total = 4; // session_start, think, step_end, session_end
  wait_stored("full", total);
  REQUIRE(stored_events("full") == total);
  auto client = open_stream("full", true);
  // The page of stored events has been read once the stream asks about the client, or once it sent.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (client->backlog_checks.load() == 0 && client->frame_count() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  CHECK(client->frame_count() == 0);
  client->drain();
  REQUIRE(client->wait_finished());
  CHECK(client->ids() == sequence(total));
  CHECK(client->ends_with_done());
}

TEST_CASE("the run stream's phases move as the table says", "[stream]") {
  using p = io::stream_phase;
  using i = io::stream_input;
  using a = io::stream_action;
  struct row {
    p at;
    i in;
    p next;
    a action;
  };
  const row table[] = {
    {p::subscribing, i::subscribed, p::reading, a::read},
    {p::subscribing, i::run_ended, p::reading, a::read},
    {p::subscribing, i::live_seen, p::subscribing, a::none}, // no stream yet: the first page has it
    {p::subscribing, i::room, p::subscribing, a::none},
    {p::following, i::live_next, p::following, a::send},
    {p::following, i::live_seen, p::following, a::none},
    {p::following, i::live_behind, p::lagging, a::wait},
    {p::following, i::run_ended, p::reading, a::read},
    {p::following, i::room, p::following, a::none}, // a notice more than needed
    {p::following, i::subscribed, p::following, a::none},
    {p::following, i::tail_due, p::reading, a::read}, // CJ-27: what another node's attempt stored
    {p::subscribing, i::tail_due, p::subscribing, a::none},
    {p::reading, i::tail_due, p::reading, a::none}, // a page is on its way
    {p::lagging, i::tail_due, p::lagging, a::none},
    {p::done, i::tail_due, p::done, a::none},
    {p::reading, i::live_next, p::rereading, a::none},
    {p::reading, i::live_behind, p::rereading, a::none},
    {p::reading, i::live_seen, p::rereading, a::none},
    {p::reading, i::run_ended, p::rereading, a::none},
    {p::reading, i::subscribed, p::reading, a::none},
    {p::reading, i::room, p::reading, a::none},
    {p::reading, i::page_partial, p::reading, a::read},
    {p::reading, i::page_full, p::lagging, a::wait},
    {p::reading, i::page_caught_up, p::following, a::none},
    {p::reading, i::page_final, p::done, a::finish},
    {p::rereading, i::live_next, p::rereading, a::none},
    {p::rereading, i::run_ended, p::rereading, a::none},
    {p::rereading, i::page_partial, p::rereading, a::read},
    {p::rereading, i::page_full, p::lagging, a::wait},
    {p::rereading, i::page_caught_up, p::reading, a::read},
    {p::rereading, i::page_final, p::done, a::finish},
    {p::lagging, i::live_next, p::lagging, a::none},
    {p::lagging, i::live_behind, p::lagging, a::none},
    {p::lagging, i::run_ended, p::lagging, a::none}, // the page read on room shows the end
    {p::lagging, i::room, p::reading, a::read},
    {p::done, i::live_next, p::done, a::none},
    {p::done, i::run_ended, p::done, a::none},
    {p::done, i::room, p::done, a::none},
  };
  for (auto& r : table) {
    INFO("phase " << static_cast<int>(r.at) << ", input " << static_cast<int>(r.in));
    auto step = io::next_step(r.at, r.in);
    CHECK(step.next == r.next);
    CHECK(step.action == r.action);
  }
}

// A node where no attempt of the run lives: its registry feeds the stream nothing. (It takes an
// argument: CAF 0.17 spawning a function without any trips UBSan.)
caf::behavior registry_elsewhere(caf::event_based_actor*, int) {
  return {[](subscribe_atom, const std::string&, const caf::actor&) { return false; }};
}

TEST_CASE_METHOD(fixture, "a stream on a node no attempt of the run lives on follows it from the store to done",
                 "[stream]") { // CJ-27
  submit("far");
  model->wait_for_inference();
  auto client = std::make_shared<recording_exchange>();
  clients.push_back(client);
  auto elsewhere = caf::actor_cast<run_registry_actor>(sys.spawn(registry_elsewhere, 0));
  io::spawn_run_stream(sys, client, elsewhere, store, "far", -1, std::chrono::milliseconds(20));
  REQUIRE(client->wait_until([&] { return client->frames_locked() >= 1; })); // session_start
  tools->push({"echoed", false});
  model->release(testing::fake_model::call("echo", "{}"));
  model->release(testing::fake_model::text("done"));
  REQUIRE(client->wait_finished());
  CHECK(client->ids() == sequence(stored_events("far")));
  CHECK(client->ends_with_done());
  caf::anon_send_exit(elsewhere, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(fixture, "a client that falls behind mid-run is told nothing until a write makes room", "[stream]") {
  submit("paused");
  model->wait_for_inference();
  auto client = open_stream("paused");
  REQUIRE(client->wait_until([&] { return client->frames_locked() >= 1; }));
  client->backlog = true;
  tools->push({"echoed", false});
  model->release(testing::fake_model::call("echo", "{}"));
  model->wait_for_inference(); // the first step's events are stored and announced
  auto before = client->frame_count();
  CHECK(before < static_cast<std::size_t>(stored_events("paused")));
  client->drain(); // room, with the run still going: the stream catches up and follows again
  REQUIRE(client->wait_until([&] { return client->frames_locked() >= static_cast<std::size_t>(1 + 4); }));
  model->release(testing::fake_model::text("done"));
  REQUIRE(client->wait_finished());
  CHECK(client->ids() == sequence(stored_events("paused")));
  CHECK(client->ends_with_done());
}

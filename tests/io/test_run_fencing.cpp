// Lease fencing at the actor tier (AS-82, AS-83) with the real SQLite store: a run registry claims a
// background run, a simulated second worker takes its lease over, and the first attempt must write
// nothing more; the lease keeper renews the lease of a live run so recovery leaves it alone.
#include "actors/approval_registry.hpp"
#include "actors/errors.hpp"
#include "actors/fake_ports.hpp"
#include "actors/run_registry.hpp"
#include "io/sqlite_store.hpp"
#include "protocol/chat_request.hpp"
#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

std::string fresh_db(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("troupe-fencing-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / (name + ".db");
  for (auto suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path.string() + suffix);
  return path.string();
}

// A model whose inferences wait until the test answers them; a cancelled one completes as cancelled.
class gated_model : public model_port {
public:
  std::shared_ptr<model_round> open(const protocol::responses::round_request&, events_handler events) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto c = std::make_shared<call>();
    c->done = [events](protocol::model_outcome o) {
      if (!o.cancelled) // nothing is delivered after cancel()
        events(testing::outcome_events(o));
    };
    calls_.push_back(c);
    cv_.notify_all();
    auto h = std::make_shared<handle>();
    h->on_cancel = [this, c] {
      ++cancels_;
      if (!c->fired.exchange(true))
        c->done(cancelled());
    };
    return h;
  }

  // Waits until `n` inferences were started.
  bool wait_for_inferences(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return calls_.size() >= n; });
  }

  // Answers inference `i` (0 = the first ever started); false when it already completed.
  bool release(std::size_t i, protocol::model_outcome outcome) {
    std::shared_ptr<call> c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      REQUIRE(i < calls_.size());
      c = calls_[i];
    }
    if (c->fired.exchange(true))
      return false;
    c->done(std::move(outcome));
    return true;
  }

  std::size_t inferences() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_.size();
  }

  int cancels() const { return cancels_.load(); }

private:
  struct call {
    std::function<void(protocol::model_outcome)> done;
    std::atomic<bool> fired{false};
  };
  struct handle : model_round {
    std::function<void()> on_cancel;
    void cancel() override { on_cancel(); }
    void resume() override {}
  };
  static protocol::model_outcome cancelled() {
    protocol::model_outcome o;
    o.cancelled = true;
    return o;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<call>> calls_;
  std::atomic<int> cancels_{0};
};

constexpr const char* chat_body = R"({"messages":[{"role":"user","content":"hi"}]})";

// One node: the SQLite store, a registry over a gated model, and a blocking caller.
struct node {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<gated_model> model = std::make_shared<gated_model>();
  std::shared_ptr<testing::fake_tools> tools = std::make_shared<testing::fake_tools>();
  store_actor store;
  std::shared_ptr<run_environment> env = std::make_shared<run_environment>();
  run_registry_actor registry;
  caf::scoped_actor self{sys};

  node(const std::string& db, scheduler_options options, std::function<void(node&)> setup = {}) {
    auto s = io::spawn_sqlite_store(sys, db);
    if (auto err = std::get_if<std::string>(&s))
      FAIL("cannot open the store: " << *err);
    store = std::get<store_actor>(s);
    env->model = model;
    env->tools = tools;
    env->store = store;
    env->workspaces_root = (std::filesystem::path(db).parent_path() / "workspaces").string();
    if (setup)
      setup(*this);
    // no tick is sent: recovery sweeps happen only when a test asks the store for one
    registry = spawn_run_registry(sys, env, std::move(options));
  }

  ~node() {
    // background attempts still live are stopped, so the actor system can shut down
    self->send(registry, cancel_all_atom::value);
    self->request(registry, 5s, count_atom::value).receive([](uint64_t) {}, [](caf::error&) {});
    self->send_exit(registry, caf::exit_reason::user_shutdown);
    if (env->approvals)
      self->send_exit(env->approvals, caf::exit_reason::user_shutdown);
    self->send_exit(store, caf::exit_reason::user_shutdown);
  }

  static scheduler_options options(double lease_seconds) {
    scheduler_options o;
    o.run_concurrency = 4;
    o.run_max_attempts = 3;
    o.run_lease_seconds = lease_seconds;
    o.run_recovery_interval_seconds = 3600;
    o.worker_id = "worker-a";
    return o;
  }

  template <class T, class Handle, class... Ts>
  T ok(const Handle& to, Ts&&... xs) {
    T out{};
    self->request(to, 10s, std::forward<Ts>(xs)...)
      .receive([&](T& v) { out = std::move(v); }, [&](caf::error& err) { FAIL(message_of(err)); });
    return out;
  }

  template <class T, class... Ts>
  caf::error refused(Ts&&... xs) {
    caf::error out;
    self->request(store, 10s, std::forward<Ts>(xs)...)
      .receive([&](T&) { FAIL("the store accepted a write it must refuse"); }, [&](caf::error& err) { out = err; });
    return out;
  }

  run_record get(const std::string& run_id) { return ok<run_record>(store, get_run_atom::value, run_id); }

  run_events_page events(const std::string& run_id) {
    return ok<run_events_page>(store, events_atom::value, run_id, int64_t{-1}, int64_t{0});
  }

  run_record submit(const std::string& run_id, const std::string& tenant = "t") {
    auto parsed = protocol::parse_chat_request(chat_body);
    auto request = std::get_if<protocol::chat_request>(&parsed);
    REQUIRE(request != nullptr);
    run_spec spec;
    spec.run_id = run_id;
    spec.run_kind = "background";
    spec.tenant_key = tenant;
    spec.user_key = tenant + ":u";
    spec.request = *request;
    spec.request_body = chat_body;
    return ok<run_record>(registry, submit_atom::value, std::move(spec));
  }

  // Polls the stored record every 10 ms until `done` holds (false after the deadline).
  bool wait_for_run(const std::string& run_id, std::function<bool(const run_record&)> done,
                    std::chrono::milliseconds deadline = 10s) {
    auto until = std::chrono::steady_clock::now() + deadline;
    while (!done(get(run_id))) {
      if (std::chrono::steady_clock::now() > until)
        return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }

  uint64_t live_attempts() { return ok<uint64_t>(registry, count_atom::value); }

  bool wait_for_live_attempts(uint64_t n, std::chrono::milliseconds deadline = 10s) {
    auto until = std::chrono::steady_clock::now() + deadline;
    while (live_attempts() != n) {
      if (std::chrono::steady_clock::now() > until)
        return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }
};

// A subscriber of a run that also watches the live attempt's actor.
struct watcher {
  caf::scoped_actor self;
  caf::actor attempt;
  std::vector<protocol::agent_event> events;
  std::vector<run_result> ends;

  watcher(node& n, const std::string& run_id) : self(n.sys) {
    // the registry hands the subscription to the live attempt, which answers it: its sender is the attempt
    self->request(n.registry, 10s, subscribe_atom::value, run_id, caf::actor_cast<caf::actor>(self))
      .receive([&](bool) { attempt = caf::actor_cast<caf::actor>(self->current_sender()); },
               [&](caf::error& err) { FAIL(message_of(err)); });
    REQUIRE(attempt);
    self->monitor(attempt);
  }

  // Collects what the attempt publishes until it stops; false when it is still alive at the deadline.
  bool wait_until_stopped(std::chrono::seconds deadline = 10s) {
    bool down = false;
    bool timed_out = false;
    self->receive_while([&] { return !down && !timed_out; })(
      [&](event_atom, const protocol::agent_event& e) { events.push_back(e); },
      [&](run_end_atom, const run_result& r) { ends.push_back(r); },
      [&](caf::down_msg& msg) {
        if (msg.source == attempt.address())
          down = true;
      },
      caf::after(deadline) >> [&] { timed_out = true; });
    return down;
  }
};

std::string iso_plus(const std::string& iso, double seconds) {
  auto t = protocol::parse_iso_timestamp(iso);
  REQUIRE(t);
  return protocol::iso_timestamp(*t + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                        std::chrono::duration<double>(seconds)));
}

// A background run started by the registry of `n`, running, its session_start stored, its model call
// waiting for the test.
run_record start_background_run(node& n, const std::string& run_id) {
  auto queued = n.submit(run_id);
  REQUIRE(queued.status == "queued");
  REQUIRE(n.model->wait_for_inferences(1));
  run_record running;
  REQUIRE(n.wait_for_run(run_id, [&](const run_record& r) {
    running = r;
    return r.status == "running" && r.event_count >= 1;
  }));
  REQUIRE(running.worker_id == "worker-a");
  REQUIRE(running.lease_epoch == 1);
  REQUIRE(running.event_count == 1); // session_start; the model call holds the rest
  return running;
}

// Simulates a second worker: the sweep of a store whose owner is gone re-queues the run (epoch 2),
// then worker-b claims it (epoch 3). Both requests are sent at once so no renewal lands in between.
run_record take_over(node& n, const std::string& run_id) {
  auto recover = n.self->request(n.store, 10s, recover_atom::value, true, protocol::lapsed_lease_ends());
  auto claim = n.self->request(n.store, 10s, claim_atom::value, claim_request{"worker-b", 300.0, 1});
  recovery_report report;
  recover.receive([&](recovery_report& r) { report = r; }, [&](caf::error& err) { FAIL(message_of(err)); });
  run_claim taken;
  claim.receive([&](run_claim& c) { taken = std::move(c); }, [&](caf::error& err) { FAIL(message_of(err)); });
  REQUIRE(report.requeued == 1);
  REQUIRE(taken.runs.size() == 1);
  auto& r = taken.runs[0];
  REQUIRE(r.run_id == run_id);
  REQUIRE(r.worker_id == "worker-b");
  REQUIRE(r.lease_epoch == 3);
  return r;
}

protocol::model_outcome answer(std::string content) {
  protocol::model_outcome o;
  o.ok = true;
  o.reply.content = std::move(content);
  o.reply.usage = {10, 5, 15};
  return o;
}

} // namespace

TEST_CASE("a lease stolen by a simulated second worker fences the first attempt: it stores nothing more and stops "
          "(AS-82)",
          "[fencing][store][registry]") {
  node n(fresh_db("stolen"), node::options(300));
  auto running = start_background_run(n, "bg-stolen");
  watcher w(n, "bg-stolen");
  auto held = take_over(n, "bg-stolen");
  CHECK(held.attempts == 2);
  CHECK(held.event_count == running.event_count + 1); // recovery ended the first attempt with an error event

  // the first attempt now gets its model's answer and tries to finish the run at epoch 1
  REQUIRE(n.model->release(0, answer("the stale attempt's answer")));
  REQUIRE(w.wait_until_stopped());

  auto after = n.get("bg-stolen");
  CHECK(after.status == "running");
  CHECK(after.worker_id == "worker-b");
  CHECK(after.lease_epoch == 3);
  CHECK(after.attempts == 2);
  CHECK(after.event_count == held.event_count);
  CHECK(after.completed_at.empty());
  CHECK(after.lease_expires_at == held.lease_expires_at);
  auto page = n.events("bg-stolen");
  REQUIRE(page.events.size() == 2);
  CHECK(page.events[0].sequence == 0);
  CHECK(page.events[0].type == "session_start");
  CHECK(page.events[1].type == "error");
  for (auto& e : page.events)
    CHECK(e.type != "session_end");
  caf::error no_trace;
  n.self->request(n.store, 10s, get_trace_atom::value, std::string("bg-stolen"))
    .receive([&](std::string&) { FAIL("the fenced attempt wrote a trace"); }, [&](caf::error& err) { no_trace = err; });
  CHECK(code_of(no_trace) == errc::not_found);

  // nothing refused was published either (AS-90: nothing is seen before it is stored)
  for (auto& e : w.events)
    CHECK(e.sequence < running.event_count);
  CHECK(w.ends.empty());
  CHECK(n.model->inferences() == 1);
  CHECK(n.wait_for_live_attempts(0));
  // CJ-17: the refused write is counted
  auto exposition = n.env->metrics->prometheus_text({}, 0);
  CHECK(exposition.find("\ntroupe_cluster_fenced_writes_total 1\n") != std::string::npos);

  // the new holder's writes are accepted: it continues the run's sequence
  stored_event next{held.event_count, "session_start", R"({"type":"session_start"})"};
  CHECK(n.ok<bool>(n.store, append_atom::value, std::string("bg-stolen"), int64_t{3}, next));
  CHECK(n.get("bg-stolen").event_count == held.event_count + 1);
}

TEST_CASE("a fenced attempt records nothing of its end in the session store either (AS-82)",
          "[fencing][store][registry]") {
  node n(fresh_db("stolen-session"), node::options(300));
  auto running = start_background_run(n, "bg-session");
  watcher w(n, "bg-session");
  take_over(n, "bg-session");
  REQUIRE(n.model->release(0, answer("the stale attempt's answer")));
  REQUIRE(w.wait_until_stopped());
  // the attempt's end was refused (the run is still running under worker-b), so no session may say it
  // completed with the stale answer
  n.self
    ->request(n.store, 10s, get_session_atom::value, running.tenant_key, running.user_key, running.session_id)
    .receive(
      [&](session_record& s) {
        FAIL_CHECK("the fenced attempt saved the session: last_run_id=" << s.last_run_id << " last_status="
                                                                        << s.last_status << " last_answer='"
                                                                        << s.last_answer << "' run_count="
                                                                        << s.run_count);
      },
      [&](caf::error& err) { CHECK(code_of(err) == errc::not_found); });
  CHECK(n.get("bg-session").status == "running");
}

TEST_CASE("the lease keeper stops an attempt whose lease was taken over, without waiting for its model (AS-82)",
          "[fencing][store][registry]") {
  node n(fresh_db("keeper-fences"), node::options(0.6)); // renewals every 0.2 s
  start_background_run(n, "bg-keeper");
  watcher w(n, "bg-keeper");
  auto held = take_over(n, "bg-keeper");
  // the model is never answered: the failed renewal alone must stop the attempt
  REQUIRE(w.wait_until_stopped(5s));
  CHECK(n.model->cancels() == 1); // its model call was cancelled
  CHECK(w.ends.empty());
  auto after = n.get("bg-keeper");
  CHECK(after.status == "running");
  CHECK(after.worker_id == "worker-b");
  CHECK(after.lease_epoch == held.lease_epoch);
  CHECK(after.event_count == held.event_count);
  CHECK(n.events("bg-keeper").events.size() == static_cast<std::size_t>(held.event_count));
  CHECK(n.wait_for_live_attempts(0));
  CHECK(n.model->inferences() == 1); // the registry did not start another attempt of a run worker-b holds
}

TEST_CASE("the lease keeper renews a live run's lease, so recovery leaves the healthy run alone (AS-82, AS-83)",
          "[fencing][store][registry]") {
  const double lease = 0.6; // renewals every 0.2 s
  node n(fresh_db("keeper-renews"), node::options(lease));
  auto running = start_background_run(n, "bg-healthy");
  // a renewal moves the lease forward
  std::string renewed;
  REQUIRE(n.wait_for_run(
    "bg-healthy",
    [&](const run_record& r) {
      renewed = r.lease_expires_at;
      return r.lease_expires_at > running.lease_expires_at;
    },
    5s));
  CHECK(renewed > running.lease_expires_at);

  // for more than three lease lengths, recovery sweeps find nothing expired and the lease keeps moving
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(lease * 3.5);
  int sweeps = 0;
  std::string last = renewed;
  int moves = 0;
  while (std::chrono::steady_clock::now() < until) {
    auto report = n.ok<recovery_report>(n.store, recover_atom::value, false, protocol::lapsed_lease_ends());
    ++sweeps;
    CHECK(report.requeued == 0);
    CHECK(report.failed == 0);
    auto r = n.get("bg-healthy");
    REQUIRE(r.status == "running");
    REQUIRE(r.lease_epoch == running.lease_epoch);
    if (r.lease_expires_at != last) {
      CHECK(r.lease_expires_at > last);
      last = r.lease_expires_at;
      ++moves;
    }
    std::this_thread::sleep_for(50ms);
  }
  CHECK(sweeps >= 10);
  CHECK(moves >= 4);
  // the final lease reaches past the first lease by at least the time that passed
  CHECK(last > iso_plus(running.lease_expires_at, lease * 2));

  // the healthy attempt still holds the run and finishes it at its epoch
  auto held = n.get("bg-healthy");
  CHECK(held.worker_id == "worker-a");
  CHECK(held.attempts == 1);
  REQUIRE(n.model->release(0, answer("done")));
  run_record done;
  REQUIRE(n.wait_for_run("bg-healthy", [&](const run_record& r) {
    done = r;
    return protocol::is_terminal(r.status);
  }));
  CHECK(done.status == "completed");
  CHECK(done.lease_epoch == running.lease_epoch);
  std::vector<std::string> types;
  for (auto& e : n.events("bg-healthy").events)
    types.push_back(e.type);
  CHECK(types == std::vector<std::string>{"session_start", "think", "step_end", "session_end"});
  CHECK(n.model->inferences() == 1);
}

TEST_CASE("a background run waiting on an approval gives its slot to a queued run and takes one back before it "
          "continues (AS-46, AS-53)",
          "[registry][approvals]") {
  auto options = node::options(300);
  options.run_concurrency = 1;
  node n(fresh_db("approval-slot"), options, [](node& at_start) {
    at_start.env->approvals = spawn_approval_registry(at_start.sys, at_start.store);
    at_start.env->policy.tool_rules["echo"].action = "require_approval";
  });
  n.submit("bg-waiting");
  REQUIRE(n.model->wait_for_inferences(1));
  protocol::model_outcome call = answer("");
  call.reply.tool_calls.push_back({"c1", "echo", R"({"x":1})"});
  REQUIRE(n.model->release(0, call));
  // session_start, think, tool_call, step_end, ask_user: the run now waits on its approval
  REQUIRE(n.wait_for_run("bg-waiting", [](const run_record& r) { return r.event_count >= 5; }));

  // the only slot is free while it waits, so the next queued run starts
  n.submit("bg-next");
  REQUIRE(n.model->wait_for_inferences(2));

  protocol::approval_query of_run;
  of_run.filters["run_id"] = "bg-waiting";
  auto pending = n.ok<approval_list>(n.store, list_approvals_atom::value, of_run);
  REQUIRE(pending.page.size() == 1);
  n.tools->push({"echoed", false});
  auto approved = n.ok<protocol::approval_record>(n.env->approvals, resolve_atom::value, pending.page[0].request_id,
                                                  true, std::string());
  CHECK(approved.status == "approved");

  // bg-next holds the slot until it ends; only then does the approved call run
  REQUIRE(n.model->release(1, answer("next done")));
  REQUIRE(n.wait_for_run("bg-next", [](const run_record& r) { return r.status == "completed"; }));
  REQUIRE(n.model->wait_for_inferences(3));
  REQUIRE(n.model->release(2, answer("waiting done")));
  run_record done;
  REQUIRE(n.wait_for_run("bg-waiting", [&](const run_record& r) {
    done = r;
    return protocol::is_terminal(r.status);
  }));
  CHECK(done.status == "completed");
  std::string tool_ran_at;
  for (auto& e : n.events("bg-waiting").events)
    if (e.type == "tool_result") {
      auto doc = protocol::json::parse(e.json);
      REQUIRE(doc);
      tool_ran_at = protocol::json::get_string(*doc, "timestamp");
    }
  REQUIRE_FALSE(tool_ran_at.empty());
  CHECK(tool_ran_at >= n.get("bg-next").completed_at);
  CHECK(n.tools->requests().size() == 1);
  CHECK(n.wait_for_live_attempts(0));
}

TEST_CASE("a node's registry starts each claim from the tenant after the one its previous claim served last, so "
          "tenants take turns for its slots (CJ-19)",
          "[registry][claims]") {
  auto options = node::options(300);
  options.run_concurrency = 1;
  node n(fresh_db("registry-turns"), options);
  n.submit("a-1", "a"); // claimed at once: the only slot is taken until the test answers its model
  REQUIRE(n.model->wait_for_inferences(1));
  const std::vector<std::pair<std::string, std::string>> queued{
    {"a-2", "a"}, {"a-3", "a"}, {"b-1", "b"}, {"b-2", "b"}, {"b-3", "b"}};
  for (auto& [id, tenant] : queued)
    n.submit(id, tenant);
  for (std::size_t i = 0; i < 6; ++i) {
    REQUIRE(n.model->wait_for_inferences(i + 1));
    REQUIRE(n.model->release(i, answer("done")));
  }
  std::vector<run_record> runs;
  for (auto id : {"a-1", "a-2", "a-3", "b-1", "b-2", "b-3"}) {
    REQUIRE(n.wait_for_run(id, [](const run_record& r) { return r.status == "completed"; }));
    runs.push_back(n.get(id));
  }
  std::sort(runs.begin(), runs.end(), [](auto& x, auto& y) { return x.started_at < y.started_at; });
  std::string started;
  for (auto& r : runs)
    started += r.run_id + " ";
  CHECK(started == "a-1 b-1 a-2 b-2 a-3 b-3 ");
}

TEST_CASE("a run the recovery sweep fails is announced to whoever follows it, since no attempt will (AS-74, AS-83)",
          "[registry][recovery]") {
  node n(fresh_db("sweep-announces"), node::options(300));
  // a chat run whose attempt is gone: begun under a short lease that nobody renews
  run_record r;
  r.run_id = "chat-orphan";
  r.run_kind = "chat";
  r.session_id = "s1";
  r.tenant_key = "t";
  r.user_key = "t:u";
  r.max_attempts = 1;
  n.ok<run_record>(n.store, begin_chat_atom::value, r, std::string("worker-gone"), 0.2);
  caf::scoped_actor follower{n.sys};
  auto follower_handle = caf::actor_cast<caf::actor>(follower);
  CHECK_FALSE(n.ok<bool>(n.registry, subscribe_atom::value, std::string("chat-orphan"), follower_handle)); // no attempt here
  REQUIRE(n.wait_for_run("chat-orphan", [](const run_record& x) {
    auto lease = protocol::parse_iso_timestamp(x.lease_expires_at);
    return lease && *lease < std::chrono::system_clock::now();
  }));

  n.self->send(n.registry, tick_atom::value);
  run_result ended;
  follower->receive([&](run_end_atom, const run_result& res) { ended = res; },
                    caf::after(10s) >> [] { FAIL("the follower was never told the run ended"); });
  CHECK(ended.run_id == "chat-orphan");
  CHECK(ended.status == "failed");
  auto page = n.events("chat-orphan");
  REQUIRE(page.events.size() == 1);
  CHECK(page.events[0].type == "error"); // what a stream reads once told
}

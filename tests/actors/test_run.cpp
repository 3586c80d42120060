// The run actor's loop against fake model and tool ports (AS-13, AS-14, AS-20, AS-22, AS-52, AS-80), and
// the guards of a PSKA digest run (AS-70, AS-71, AS-95).
#include "actors/approval_registry.hpp"
#include "actors/errors.hpp"
#include "actors/run_registry.hpp"
#include "fake_approval_store.hpp"
#include "fake_ports.hpp"
#include "protocol/json.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

using namespace troupe;
using troupe::testing::fake_model;
using troupe::testing::fake_tools;

namespace {

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::shared_ptr<fake_model> model = std::make_shared<fake_model>();
  std::shared_ptr<fake_tools> tools = std::make_shared<fake_tools>();
  std::shared_ptr<run_environment> env = [this] {
    auto e = std::make_shared<run_environment>();
    e->model = model;
    e->tools = tools;
    e->workspaces_root = "/srv/troupe-test-root";
    return e;
  }();
  std::string metadata = "{}"; // the request's, JSON object text

  run_spec spec(std::string query = "do it") {
    run_spec s;
    s.run_id = "r1";
    s.tenant_key = "t";
    s.user_key = "t:u";
    s.request.query = std::move(query);
    s.request.session_id = "s1";
    s.request.metadata = metadata;
    return s;
  }

  struct outcome {
    std::vector<protocol::agent_event> events;
    run_result result;
    std::vector<std::string> types() const {
      std::vector<std::string> t;
      for (auto& e : events)
        t.push_back(e.type);
      return t;
    }
  };

  // Collects events until the run ends; `on_event` may act (e.g. cancel) as events arrive.
  outcome collect(caf::scoped_actor& self, std::function<void(const protocol::agent_event&)> on_event = {}) {
    outcome out;
    bool done = false;
    self->receive_while([&] { return !done; })(
      [&](event_atom, const protocol::agent_event& e) {
        out.events.push_back(e);
        if (on_event)
          on_event(e);
      },
      [&](run_end_atom, const run_result& r) {
        out.result = r;
        done = true;
      },
      caf::after(std::chrono::seconds(10)) >> [&] {
        FAIL("the run did not end within 10 s");
        done = true;
      });
    return out;
  }

  outcome run(std::function<void(const protocol::agent_event&, run_actor&)> on_event = {}) {
    caf::scoped_actor self{sys};
    auto r = spawn_run(sys, env, spec(), {caf::actor_cast<caf::actor>(self)});
    self->send(r, start_atom::value);
    return collect(self, [&](const protocol::agent_event& e) {
      if (on_event)
        on_event(e, r);
    });
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "a step with a tool call runs the tool and the next step answers", "[run]") { // AS-14
  model->push(fake_model::call("echo", R"({"x":1})"));
  model->push(fake_model::text("all done"));
  tools->push({"echoed", false});
  auto out = run();
  CHECK(out.types() == std::vector<std::string>{"session_start", "think", "tool_call", "step_end", "tool_result",
                                                "think", "step_end", "session_end"});
  CHECK(out.result.status == "completed");
  CHECK(out.result.content == "all done");
  for (std::size_t i = 0; i < out.events.size(); ++i)
    CHECK(out.events[i].sequence == static_cast<int64_t>(i));
  CHECK(out.events[1].content == "Using echo tool");
  CHECK(out.events[4].tool_call_id == std::optional<std::string>("c1")); // AS-76
  CHECK(out.events[4].content == "echoed");

  auto calls = tools->requests();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].workspace_dir == "/srv/troupe-test-root/tenants/t/users/t%3Au"); // AS-26
  auto reqs = model->requests();
  REQUIRE(reqs.size() == 2);
  auto& second = reqs[1].messages;
  REQUIRE(second.size() == 4); // system, user, assistant with the call, tool answer
  CHECK(second[2].tool_calls.at(0).id == "c1");
  CHECK(second[3].role == "tool");
  CHECK(second[3].tool_call_id == "c1");
  CHECK(second[3].content == "echoed");
  CHECK(reqs[0].tools.at(0).name == "echo");
}

TEST_CASE_METHOD(fixture, "unparseable tool arguments become an empty object", "[run]") { // AS-18
  model->push(fake_model::call("echo", "{not json"));
  model->push(fake_model::text("ok"));
  tools->push({"r", false});
  auto out = run();
  CHECK(out.events[2].tool_args == std::optional<std::string>("{}"));
}

TEST_CASE_METHOD(fixture, "the last permitted step still runs its tools, then the run stops", "[run]") { // AS-20
  env->loop.max_rounds = 2;
  for (int i = 0; i < 3; ++i) {
    model->push(fake_model::call("echo", "{}", "c" + std::to_string(i)));
    tools->push({"r", false});
  }
  auto out = run();
  CHECK(model->requests().size() == 2);
  CHECK(tools->requests().size() == 2);
  auto& end = out.events.back();
  CHECK(end.type == "session_end");
  CHECK(end.content == "[STOPPED] Task stopped due to maximum iteration limit (2).");
  CHECK(end.metadata.find(R"("stop_reason":"max_iterations")") != std::string::npos);
  CHECK(out.result.status == "completed");
}

TEST_CASE_METHOD(fixture, "an upstream failure ends the run failed with an error event", "[run]") { // AS-80
  model->push(fake_model::failure("HTTP 500: boom"));
  auto out = run();
  CHECK(out.types() == std::vector<std::string>{"session_start", "error"});
  CHECK(out.events.back().content == "LLM call failed: HTTP 500: boom");
  CHECK(out.events.back().metadata == R"({"error_type":"upstream_model_error"})");
  CHECK(out.result.status == "failed");
}

TEST_CASE_METHOD(fixture, "cancelling a run cancels its model request and ends it cancelled", "[run]") { // AS-52
  auto out = run([](const protocol::agent_event& e, run_actor& r) {
    if (e.type == "session_start")
      caf::anon_send(r, cancel_atom::value); // the model call hangs: nothing is scripted
  });
  CHECK(out.types() == std::vector<std::string>{"session_start", "error"});
  CHECK(out.events.back().content == "Run cancelled");
  CHECK(out.events.back().metadata == R"({"error_type":"CancelledError"})");
  CHECK(out.result.status == "cancelled");
  CHECK(model->cancels() == 1);
}

TEST_CASE_METHOD(fixture, "cancelling a run cancels the tool call in flight", "[run]") { // AS-52
  model->push(fake_model::call("echo", "{}"));
  auto out = run([](const protocol::agent_event& e, run_actor& r) {
    if (e.type == "step_end")
      caf::anon_send(r, cancel_atom::value); // the tool hangs: nothing is scripted
  });
  CHECK(out.result.status == "cancelled");
  caf::scoped_actor waiter{sys};
  for (int i = 0; i < 200 && tools->cancels() == 0; ++i)
    waiter->receive(caf::after(std::chrono::milliseconds(10)) >> [] {});
  CHECK(tools->cancels() == 1);
}

TEST_CASE_METHOD(fixture, "a tool call past the tool timeout is cancelled and its result says it timed out",
                 "[run]") {
  env->loop.call_timeout_seconds = 0.05;
  model->push(fake_model::call("echo", "{}"));
  model->push(fake_model::text("ok"));
  auto out = run(); // the tool hangs: nothing is scripted
  CHECK(out.events.at(4).type == "tool_result");
  CHECK(out.events.at(4).content == "[ERROR] Tool timed out after 0.05 seconds");
  CHECK(model->requests().at(1).messages.back().content == "[ERROR] Tool timed out after 0.05 seconds");
  CHECK(tools->cancels() == 1);
  CHECK(out.result.status == "completed");
}

TEST_CASE_METHOD(fixture, "tool output is truncated and the model sees the same text", "[run]") { // AS-22
  env->loop.max_tool_output_bytes = 5;
  model->push(fake_model::call("echo", "{}"));
  model->push(fake_model::text("ok"));
  tools->push({"0123456789", false});
  auto out = run();
  CHECK(out.events[4].content == "01234\n... [truncated 5 chars]");
  CHECK(model->requests().at(1).messages.back().content == "01234\n... [truncated 5 chars]");
}

TEST_CASE_METHOD(fixture, "citations in tool output reach the result and the final event", "[run]") { // AS-77
  model->push(fake_model::call("echo", "{}"));
  model->push(fake_model::text("see [1]"));
  tools->push({R"({"hits":[{"source_id":"src_1"}]})", false});
  auto out = run();
  CHECK(out.events[4].cited_source_ids == std::vector<std::string>{"src_1"});
  CHECK(out.events.back().cited_source_ids == std::vector<std::string>{"src_1"});
  CHECK(out.result.content == "see [1]"); // AS-96: bracketed answers are kept
}

TEST_CASE_METHOD(fixture, "the registry refuses a second live run with the same id", "[registry]") { // AS-10
  auto registry = spawn_run_registry(sys, env);
  caf::scoped_actor self{sys};
  auto me = caf::actor_cast<caf::actor>(self);
  bool first = false;
  self->request(registry, std::chrono::seconds(5), spawn_run_atom::value, spec(), me)
    .receive([&](run_actor&) { first = true; }, [&](caf::error& err) { FAIL(message_of(err)); });
  REQUIRE(first); // its model call hangs, so it stays live
  self->request(registry, std::chrono::seconds(5), spawn_run_atom::value, spec(), me)
    .receive([&](run_actor&) { FAIL("a duplicate id was accepted"); },
             [&](caf::error& err) {
               CHECK(code_of(err) == errc::conflict);
               CHECK(message_of(err) == "Run already exists");
             });
  self->request(registry, std::chrono::seconds(5), cancel_atom::value, std::string("r1"))
    .receive([&](run_record& r) { CHECK(r.status == "cancelled"); }, [&](caf::error& err) { FAIL(message_of(err)); });
  collect(self);
  self->send_exit(registry, caf::exit_reason::user_shutdown);
}

namespace {

// The registry's side of a run's concurrency slot: tells `observer` of each release and acquire (with
// how many tool calls had started by then) and grants every acquire.
caf::behavior fake_slots(caf::event_based_actor*, caf::actor observer, std::shared_ptr<fake_tools> tools) {
  return {
    [=](release_slot_atom, const std::string& run_id) { caf::anon_send(observer, release_slot_atom::value, run_id); },
    [=](acquire_slot_atom, const std::string& run_id) {
      caf::anon_send(observer, acquire_slot_atom::value, run_id, tools->requests().size());
      return true;
    },
  };
}

// A run whose `echo` calls need approval, from a registry over a fake store.
struct approval_fixture : fixture {
  std::shared_ptr<testing::store_contents> db = std::make_shared<testing::store_contents>();
  caf::actor store = sys.spawn(testing::fake_approval_store, db);
  caf::scoped_actor self{sys};

  approval_fixture() {
    env->approvals = spawn_approval_registry(sys, caf::actor_cast<store_actor>(store));
    env->policy.tool_rules["echo"].action = "require_approval";
    model->push(fake_model::call("echo", "{}"));
    model->push(fake_model::text("done"));
    tools->push({"ran", false});
  }

  ~approval_fixture() {
    self->send_exit(env->approvals, caf::exit_reason::user_shutdown);
    self->send_exit(store, caf::exit_reason::user_shutdown);
  }
};

} // namespace

TEST_CASE_METHOD(approval_fixture, "a run waiting on an approval gives its slot back and takes one again before "
                                   "the approved call runs",
                 "[run][approvals]") { // AS-46, AS-53
  auto slots = sys.spawn(fake_slots, caf::actor_cast<caf::actor>(self), tools);
  auto r = spawn_run(sys, env, spec(), {caf::actor_cast<caf::actor>(self)}, caf::actor_cast<run_slots_actor>(slots));
  self->send(r, start_atom::value);
  std::vector<std::string> seen; // slot messages and the events that matter here, in arrival order
  std::optional<std::size_t> calls_started_before_acquire;
  run_result result;
  bool done = false;
  self->receive_while([&] { return !done; })(
    [&](event_atom, const protocol::agent_event& e) {
      if (e.type == "ask_user") {
        seen.push_back("ask_user");
        REQUIRE(e.approval_request_id);
        caf::anon_send(env->approvals, resolve_atom::value, *e.approval_request_id, true, std::string());
      } else if (e.type == "tool_result") {
        seen.push_back("tool_result " + e.content);
      }
    },
    [&](release_slot_atom, const std::string& run_id) {
      CHECK(run_id == "r1");
      seen.push_back("release");
    },
    [&](acquire_slot_atom, const std::string& run_id, std::size_t calls_started) {
      CHECK(run_id == "r1");
      calls_started_before_acquire = calls_started;
      seen.push_back("acquire");
    },
    [&](run_end_atom, const run_result& end) {
      result = end;
      done = true;
    },
    caf::after(std::chrono::seconds(10)) >> [&] {
      FAIL("the run did not end within 10 s");
      done = true;
    });
  CHECK(result.status == "completed");
  REQUIRE(std::count(seen.begin(), seen.end(), "release") == 1);
  REQUIRE(std::count(seen.begin(), seen.end(), "acquire") == 1);
  auto at = [&](const std::string& what) { return std::find(seen.begin(), seen.end(), what) - seen.begin(); };
  CHECK(at("release") < at("acquire"));
  CHECK(at("acquire") < at("tool_result ran"));
  CHECK(calls_started_before_acquire == std::optional<std::size_t>(0));
  self->send_exit(slots, caf::exit_reason::user_shutdown);
}

TEST_CASE_METHOD(approval_fixture, "cancelling a run that waits on an approval ends it cancelled and denies the "
                                   "approval run_cancelled",
                 "[run][approvals]") { // AS-52, AS-81
  std::string request_id;
  auto out = run([&](const protocol::agent_event& e, run_actor& r) {
    if (e.type == "ask_user") {
      request_id = e.approval_request_id.value_or("");
      caf::anon_send(r, cancel_atom::value);
    }
  });
  CHECK(out.result.status == "cancelled");
  REQUIRE_FALSE(request_id.empty());
  CHECK(tools->requests().empty());
  // The run told the registry before it announced its end, so the denial is already under way.
  self->request(env->approvals, std::chrono::seconds(10), await_atom::value, request_id)
    .receive(
      [&](protocol::approval_record& r) {
        CHECK(r.status == "denied");
        CHECK(r.resolution_reason == "run_cancelled");
      },
      [&](caf::error& err) { FAIL(message_of(err)); });
}

namespace {

constexpr const char* write_tool = "pska_pska_write_candidates";
constexpr const char* claims = R"({"knowledge_claims":[{"claim":"c"}]})";

// A step calling each of `calls` (id, tool, arguments) in order.
protocol::model_outcome step(std::vector<protocol::tool_call> calls) {
  auto o = fake_model::text("");
  o.reply.tool_calls = std::move(calls);
  return o;
}

} // namespace

TEST_CASE_METHOD(fixture, "a digest run's second write is denied with a notice, never runs, and the model still "
                          "reads it answered",
                 "[run][digest]") { // AS-70, AS-95
  metadata = R"({"caller":"pska_digest_worker"})";
  model->push(step({{"c1", write_tool, claims}, {"c2", write_tool, claims}}));
  model->push(fake_model::text("done"));
  tools->push({"written", false});
  auto out = run();
  CHECK(out.types() == std::vector<std::string>{"session_start", "think", "tool_call", "think", "step_end",
                                                "tool_result", "think", "step_end", "session_end"});
  CHECK(out.events[2].tool_call_id == std::optional<std::string>("c1"));
  auto& denied = out.events[3];
  CHECK(denied.content == "[TOOL_BUDGET_DENIED] pska_pska_write_candidates exceeded per-run budget");
  CHECK(denied.metadata == R"({"tool_budget_denied":true,"tool_name":"pska_pska_write_candidates","call_id":"c2"})");
  CHECK_FALSE(denied.tool_call_id);
  CHECK(out.events[5].tool_call_id == std::optional<std::string>("c1"));
  CHECK(out.result.status == "completed");

  auto ran = tools->requests();
  REQUIRE(ran.size() == 1);
  CHECK(ran[0].call_id == "c1");
  // AS-95: the assistant message keeps both calls and each is answered before the next round.
  auto reqs = model->requests();
  REQUIRE(reqs.size() == 2);
  auto& sent = reqs[1].messages;
  REQUIRE(sent.size() == 5); // system, user, assistant with both calls, two tool answers
  REQUIRE(sent[2].tool_calls.size() == 2);
  CHECK(sent[2].tool_calls[1].id == "c2");
  CHECK(sent[3].tool_call_id == "c1");
  CHECK(sent[3].content == "written");
  CHECK(sent[4].role == "tool");
  CHECK(sent[4].tool_call_id == "c2");
  CHECK(sent[4].content == "[TOOL_BUDGET_DENIED] pska_pska_write_candidates exceeded per-run budget");
}

TEST_CASE_METHOD(fixture, "a digest write of notes without claims is shown, answered with its validation error and "
                          "not run, and the budget stays for the corrected write",
                 "[run][digest]") { // AS-71
  metadata = R"({"purpose":"digest"})";
  model->push(step({{"c1", write_tool, R"({"digest_notes":[{"note":"n"}]})"}}));
  model->push(step({{"c2", write_tool, claims}}));
  model->push(fake_model::text("done"));
  tools->push({"written", false});
  auto out = run();
  CHECK(out.types() == std::vector<std::string>{"session_start", "think", "tool_call", "step_end", "tool_result",
                                                "think", "tool_call", "step_end", "tool_result", "think",
                                                "step_end", "session_end"});
  auto& rejected = out.events[4];
  CHECK(rejected.tool_call_id == std::optional<std::string>("c1"));
  CHECK(rejected.content
        == "[PSKA_DIGEST_VALIDATION_ERROR] digest_notes need non-empty knowledge_claims in the same write");
  auto meta = protocol::json::parse(rejected.metadata);
  REQUIRE(meta);
  CHECK(protocol::json::get_bool(*meta, "digest_validation_error") == std::optional<bool>(true));
  CHECK(protocol::json::get_string(*meta, "request_id") == "c1"); // AS-13
  CHECK(protocol::json::get_bool(*meta, "approved") == std::optional<bool>(false));
  CHECK(out.events[8].content == "written");

  auto ran = tools->requests();
  REQUIRE(ran.size() == 1);
  CHECK(ran[0].call_id == "c2");
  CHECK(model->requests().at(1).messages.back().content == rejected.content); // the model reads the reason
}

TEST_CASE_METHOD(fixture, "a run that is not a digest run has no budget", "[run][digest]") { // AS-70
  metadata = R"({"caller":"someone_else","tool_budget":{"pska_pska_write_candidates":0}})";
  model->push(step({{"c1", write_tool, "{}"}, {"c2", write_tool, "{}"}}));
  model->push(fake_model::text("done"));
  tools->push({"one", false});
  tools->push({"two", false});
  auto out = run();
  CHECK(out.types() == std::vector<std::string>{"session_start", "think", "tool_call", "tool_call", "step_end",
                                                "tool_result", "tool_result", "think", "step_end", "session_end"});
  CHECK(tools->requests().size() == 2);
}

TEST_CASE_METHOD(fixture, "AS-23 AS-24 a conversation over the budget sends the system message, the first user "
                          "message and the last window upstream, and a notice says so each time",
                 "[run][context]") {
  env->loop.max_context_tokens = 3000;
  env->default_max_tokens = 100; // budget 2900
  const int steps = 14;
  for (int i = 0; i < steps; ++i) {
    model->push(fake_model::call("echo", "{}", "c" + std::to_string(i)));
    tools->push({std::string(1000, 'o'), false});
  }
  model->push(fake_model::text("done"));
  auto out = run();
  REQUIRE(out.result.status == "completed");

  auto reqs = model->requests();
  REQUIRE(reqs.size() == steps + 1);
  CHECK(reqs[0].messages.size() == 2);
  std::size_t compressed_rounds = 0;
  for (std::size_t round = 0; round < reqs.size(); ++round) {
    auto& m = reqs[round].messages;
    CHECK(m[0].role == "system");
    CHECK(m[1].content == "do it");
    if (m.size() < 2 + 2 * round) { // round n sends 2 + 2n messages when nothing is left out
      ++compressed_rounds;
      CHECK(m.size() <= 2 + 16); // the system and first user messages, the window widened by one call
    }
    for (std::size_t i = 2; i < m.size(); ++i) // AS-95: every answer still has its call right before
      if (m[i].role == "tool")
        CHECK((m[i - 1].role == "assistant" && m[i - 1].tool_calls.at(0).id == m[i].tool_call_id));
  }
  CHECK(compressed_rounds > 0);
  CHECK(reqs.back().messages.size() == 2 + 16);

  std::vector<protocol::agent_event> notices;
  for (auto& e : out.events)
    if (e.type == "think" && e.content == "[CONTEXT_COMPRESSION] Sliding-window context compression applied")
      notices.push_back(e);
  REQUIRE(notices.size() == compressed_rounds);
  auto meta = protocol::json::parse(notices.back().metadata);
  REQUIRE(meta);
  CHECK(protocol::json::get_bool(*meta, "compression_event") == std::optional<bool>(true));
  auto c = protocol::json::member(*meta, "compression");
  REQUIRE(c);
  CHECK(protocol::json::get_int(*c, "original_message_count") == std::optional<int64_t>(2 + 2 * steps));
  CHECK(protocol::json::get_int(*c, "kept_message_count")
        == std::optional<int64_t>(static_cast<int64_t>(reqs.back().messages.size())));
  CHECK(protocol::json::get_int(*c, "budget_tokens") == std::optional<int64_t>(2900));
  CHECK(*protocol::json::get_int(*c, "estimated_tokens_after") < *protocol::json::get_int(*c, "estimated_tokens_before"));
}

TEST_CASE_METHOD(fixture, "AS-23 a conversation within the budget goes whole and no notice is emitted",
                 "[run][context]") {
  model->push(fake_model::call("echo", "{}"));
  tools->push({std::string(1000, 'o'), false});
  model->push(fake_model::text("done"));
  auto out = run();
  CHECK(model->requests().back().messages.size() == 4);
  for (auto& e : out.events)
    CHECK(e.content.find("[CONTEXT_COMPRESSION]") == std::string::npos);
}

namespace {

struct fake_prompts : prompt_port {
  mutable std::vector<std::string> loaded;
  run_prompt_files load(const std::string& workspace_dir) const override {
    loaded.push_back(workspace_dir);
    run_prompt_files f;
    f.agents_md = "Answer in French.";
    f.soul_md = "You are Ada.";
    protocol::skill s;
    s.name = "alpha";
    s.body = "Alpha skill steps.";
    f.skills = {s};
    return f;
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "AS-19 AS-25 the workspace's AGENTS.md, SOUL.md and the selected skills join the one "
                          "system message after the safety layer, and missing skills are named",
                 "[run][skills]") {
  auto prompts = std::make_shared<fake_prompts>();
  env->prompts = prompts;
  caf::scoped_actor self{sys};
  auto s = spec();
  s.request.skills = std::vector<std::string>{"alpha", "nope"};
  model->push(fake_model::text("ok"));
  auto r = spawn_run(sys, env, s, {caf::actor_cast<caf::actor>(self)});
  self->send(r, start_atom::value);
  auto out = collect(self);
  REQUIRE(prompts->loaded == std::vector<std::string>{"/srv/troupe-test-root/tenants/t/users/t%3Au"});
  auto reqs = model->requests();
  auto& system = reqs.at(0).messages.at(0);
  REQUIRE(system.role == "system");
  auto safety = system.content.find("Safety policy");
  auto agents = system.content.find("Answer in French.");
  auto soul = system.content.find("You are Ada.");
  auto skill = system.content.find("Alpha skill steps.");
  CHECK(safety == 0);
  CHECK(agents != std::string::npos);
  CHECK(agents < soul);
  CHECK(soul < skill);
  CHECK(skill != std::string::npos);
  CHECK(out.events.at(0).metadata.rfind(R"({"skills":["alpha"],"missing_skills":["nope"],)", 0) == 0);
}

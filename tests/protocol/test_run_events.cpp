// Typed run events rendered as fastreact.agent_event.v1 events (AS-12, AS-13): the fields and the
// metadata bytes of each kind, key order included.
#include "protocol/run_events.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

namespace {

agent_event render(const run_event& e) {
  return render_event("r1", "s1", 3, e);
}

} // namespace

TEST_CASE("a run event is stamped with its run, session and sequence", "[event]") {
  auto e = render(run_events::think{"hmm"});
  CHECK(e.type == "think");
  CHECK(e.run_id == "r1");
  CHECK(e.session_id == "s1");
  CHECK(e.sequence == 3);
  CHECK_FALSE(e.timestamp.empty());
  CHECK(e.content == "hmm");
  CHECK(e.metadata == "{}");
}

TEST_CASE("session_start names the policy, the visible tools, the attempt and the model", "[event]") {
  auto e = render(run_events::session_start{"q", R"({"allow":["a"]})", {"a", "b"}, 2, "m", 1.5});
  CHECK(e.type == "session_start");
  CHECK(e.content == "q");
  CHECK(e.metadata
        == R"({"skills":[],"missing_skills":[],"tool_policy":{"allow":["a"]},"visible_tools":["a","b"],)"
           R"("attempt":2,"model":"m","timing":{"time_to_first_event_ms":1.5}})");
}

TEST_CASE("AS-25 session_start names the selected skills and the missing ones", "[event]") {
  run_events::session_start s{"q", "null", {}, 1, "m", 0};
  s.skills = {"pdf"};
  s.missing_skills = {"nope"};
  CHECK(render(s).metadata.rfind(R"({"skills":["pdf"],"missing_skills":["nope"],"tool_policy":null,)", 0) == 0);
}

TEST_CASE("AS-24 the compression notice carries its flag and the counts", "[event]") {
  auto e = render(run_events::compression_notice({28, 18, 7000, 2900, 3000}));
  CHECK(e.type == "think");
  CHECK(e.content == "[CONTEXT_COMPRESSION] Sliding-window context compression applied");
  CHECK(e.metadata
        == R"({"compression_event":true,"compression":{"original_message_count":28,"kept_message_count":18,)"
           R"("estimated_tokens_before":7000,"estimated_tokens_after":2900,"budget_tokens":3000}})");
}

TEST_CASE("tool_call names its call, and the policy only when it refused or scoped it", "[event]") {
  auto plain = render(run_events::tool_call{"echo", R"({"x":1})", "c1", std::nullopt, false, "null"});
  CHECK(plain.content == "Calling echo");
  CHECK(plain.tool_name == "echo");
  CHECK(plain.tool_args == R"({"x":1})");
  CHECK(plain.tool_call_id == "c1");
  CHECK(plain.metadata == R"({"call_id":"c1"})");
  auto scoped = render(run_events::tool_call{"pska_x", "{}", "c2", std::nullopt, true, R"({"p":1})"});
  CHECK(scoped.metadata == R"({"call_id":"c2","tool_policy_scope_applied":true,"tool_policy":{"p":1}})");
  auto denied = render(run_events::tool_call{"rm", "{}", "c3", std::string("hidden"), false, R"({"p":1})"});
  CHECK(denied.metadata
        == R"({"call_id":"c3","tool_policy_denied":true,"tool_policy":{"p":1},"denial_reason":"hidden"})");
}

TEST_CASE("step_end carries the step, its usage and the model", "[event]") {
  troupe::protocol::token_usage u;
  u.prompt_tokens = 3;
  u.completion_tokens = 4;
  u.total_tokens = 7;
  auto e = render(run_events::step_end{"text", 2, true, u, "m"});
  CHECK(e.content == "text");
  CHECK(e.metadata
        == R"({"step":2,"has_tool_calls":true,"llm_usage":{"prompt_tokens":3,"completion_tokens":4,)"
           R"("total_tokens":7},"model":"m"})");
}

TEST_CASE("ask_user carries the approval, empty names null", "[event]") {
  approval_record r;
  r.request_id = "approval-1";
  r.tool_name = "exec";
  r.tool_args = R"({"cmd":"ls"})";
  r.tool_call_id = "c1";
  r.reason = "dangerous";
  r.pattern_matched = "rm";
  r.timeout_seconds = 300;
  r.expires_at = "2026-01-01T00:05:00Z";
  r.policy_scope = "";
  r.policy_action = "ask";
  r.policy_matched = true;
  auto e = render(run_events::ask_user{r});
  CHECK(e.type == "ask_user");
  CHECK(e.content == "dangerous");
  CHECK(e.tool_name == "exec");
  CHECK(e.tool_args == R"({"cmd":"ls"})");
  CHECK(e.tool_call_id == "c1");
  CHECK(e.approval_request_id == "approval-1");
  CHECK(e.metadata
        == R"({"request_id":"approval-1","decision_level":"danger","pattern_matched":"rm","timeout_seconds":300.0,)"
           R"("expires_at":"2026-01-01T00:05:00Z","policy_scope":null,"policy_action":"ask","policy_matched":true})");
}

TEST_CASE("tool_result carries its decision, and the policy's refusal when there was one", "[event]") {
  auto ran = render(run_events::tool_result{"out", "echo", "{}", "c1", 2.5, {"src-1"}, "safe", true, "", std::nullopt});
  CHECK(ran.content == "out");
  CHECK(ran.duration_ms == 2.5);
  CHECK(ran.cited_source_ids == std::vector<std::string>{"src-1"});
  CHECK(ran.metadata == R"({"duration_ms":2.5,"decision_level":"safe","approved":true,"request_id":null})");
  auto denied =
    render(run_events::tool_result{"[DENIED]", "rm", "{}", "c2", 0.5, {}, "blocked", std::nullopt, "c2", std::string("no")});
  CHECK(denied.metadata
        == R"({"duration_ms":0.5,"decision_level":"blocked","approved":null,"request_id":"c2",)"
           R"("tool_policy_denied":true,"denial_reason":"no"})");
}

TEST_CASE("session_end carries the stop reason, the timing and the run's usage", "[event]") {
  auto e = render(run_events::session_end{"answer", {"a"}, "final_answer", 12.5, {}});
  CHECK(e.content == "answer");
  CHECK(e.cited_source_ids == std::vector<std::string>{"a"});
  CHECK(e.metadata
        == R"({"stop_reason":"final_answer","status":"completed","timing":{"time_to_final_ms":12.5},)"
           R"("llm_usage_total":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}})");
}

TEST_CASE("error says what ended the attempt, and error_event renders the same", "[event]") {
  auto e = render(run_events::error{"Run cancelled", "CancelledError", 4.0});
  CHECK(e.type == "error");
  CHECK(e.content == "Run cancelled");
  CHECK(e.duration_ms == 4.0);
  CHECK(e.metadata == R"({"error_type":"CancelledError"})");
  auto closing = error_event("r1", "s1", 3, "Run cancelled", "CancelledError");
  CHECK(closing.metadata == e.metadata);
  CHECK_FALSE(closing.duration_ms);
}

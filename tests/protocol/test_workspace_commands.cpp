// reflexr.v1 commands against an in-memory log (workspace-stream.md §2, §3, §5.1): publishing,
// deduplication by event id, chains, the WS-28 checks in order, frame parsing and the REST read.
#include "protocol/config.hpp"
#include "protocol/duration.hpp"
#include "protocol/ids.hpp"
#include "protocol/workspace_commands.hpp"

#include <catch2/catch.hpp>

#include <map>

using namespace troupe::protocol;
using namespace troupe::protocol::reflexr;

namespace {

// The log as the store would show it inside a transaction, applying what a command appended.
class memory_log : public log_reader {
public:
  int64_t head() override { return static_cast<int64_t>(envelopes.size()); }
  std::string last_ts() override { return envelopes.empty() ? std::string() : envelopes.back().ts; }
  std::optional<chain_link> find(const std::string& id) override {
    for (auto& e : envelopes)
      if (e.id == id)
        return chain_link{e.seq, e.correlation_id};
    return std::nullopt;
  }
  void apply(const effect& e) { envelopes.insert(envelopes.end(), e.appended.begin(), e.appended.end()); }
  std::vector<envelope> envelopes;
};

std::shared_ptr<const event_registry> registry() {
  workspaces_config c;
  c.event_types.push_back({"ops:service.error",
                           R"({"type":"object","properties":{"service":{"type":"string"},"severity":{"type":"integer"},)"
                           R"("message":{"type":"string"}},"required":["service","severity"]})",
                           false});
  c.event_types.push_back({"ops:deploy.finished", R"({"properties":{"service":{"type":"string"}},"required":["service"]})", false});
  c.event_types.push_back({"ops:verdict", "{}", true});
  c.event_types.push_back({"chat:deploy.finished", "{}", false});
  c.feedback_types.push_back({"triage", {"run", "chain"}, R"({"properties":{"useful":{"type":"boolean"}},"required":["useful"]})"});
  return std::get<std::shared_ptr<const event_registry>>(event_registry::build(c));
}

command_context context(std::string now = "2025-03-01T09:00:00.000000Z") {
  command_context ctx;
  ctx.workspace_id = "prod";
  ctx.actor.kind = "user";
  ctx.actor.id = "alice";
  ctx.now = std::move(now);
  ctx.types = registry();
  return ctx;
}

command_request frame(const std::string& text) {
  auto parsed = parse_command_frame(text, *registry());
  if (auto bad = std::get_if<problems>(&parsed))
    FAIL("not a command: " << first_problem(*bad));
  return std::get<command_request>(parsed);
}

command_request publish(const std::string& event, const std::string& extra = "") {
  return frame(R"({"type":"command","command_id":"c","command":{"type":"publish","event":)" + event + extra + "}}");
}

effect run(memory_log& log, const command_request& r, const command_context& ctx = context()) {
  auto e = carry_out(r, ctx, log);
  log.apply(e);
  return e;
}

const std::string service_error = R"({"type":"ops:service.error","service":"auth","severity":8})";

} // namespace

TEST_CASE("the first publish gets seq 1 and starts its own chain", "[workspace]") { // WS-15, WS-17, WS-18
  memory_log log;
  auto e = run(log, publish(service_error));
  REQUIRE(e.appended.size() == 1);
  auto& env = e.appended[0];
  CHECK(env.seq == 1);
  CHECK(env.id.rfind("evt_", 0) == 0);
  CHECK(env.id.size() == 20);
  CHECK(env.correlation_id == env.id);
  CHECK(e.max_seq == 1);
  CHECK(e.outcomes[0] == R"({"type":"published","seq":1,"id":")" + env.id + R"(","duplicate":false})");
  CHECK(envelope_json(env)
        == R"({"seq":1,"id":")" + env.id + R"(","ts":"2025-03-01T09:00:00.000000Z","workspace_id":"prod",)"
             R"("actor":{"kind":"user","id":"alice"},"causation":null,"correlation_id":")" + env.id
             + R"(","traceparent":null,"event":{"type":"ops:service.error","service":"auth","severity":8}})");
}

TEST_CASE("timestamps never go back even when the clock does", "[workspace]") { // WS-16
  memory_log log;
  run(log, publish(service_error), context("2025-03-01T09:00:05.000000Z"));
  auto e = run(log, publish(service_error), context("2025-03-01T09:00:01.000000Z"));
  CHECK(e.appended[0].ts == "2025-03-01T09:00:05.000000Z");
  CHECK(e.appended[0].seq == 2);
}

TEST_CASE("an id already in the log appends nothing and names the first envelope", "[workspace]") { // WS-29
  memory_log log;
  run(log, publish(service_error, R"(,"id":"d-17")"));
  auto again = run(log, publish(R"({"type":"ops:deploy.finished","service":"x"})", R"(,"id":"d-17")"));
  CHECK(again.appended.empty());
  CHECK(again.outcomes[0] == R"({"type":"published","seq":1,"id":"d-17","duplicate":true})");
  CHECK(again.max_seq == 1);
}

TEST_CASE("a batch is ordered and an id repeated in it is a duplicate of its first use", "[workspace]") { // WS-31
  memory_log log;
  auto body = parse_publish_body(R"({"events":[{"event":{"type":"ops:deploy.finished","service":"a"},"id":"x"},)"
                                 R"({"event":{"type":"ops:deploy.finished","service":"b"},"id":"x"},)"
                                 R"({"event":{"type":"ops:deploy.finished","service":"c"}}]})",
                                 *registry());
  auto e = run(log, std::get<command_request>(body));
  REQUIRE(e.appended.size() == 2);
  CHECK(e.outcomes[0] == R"({"type":"published","seq":1,"id":"x","duplicate":false})");
  CHECK(e.outcomes[1] == R"({"type":"published","seq":1,"id":"x","duplicate":true})");
  CHECK(e.appended[1].seq == 2);
}

TEST_CASE("a correlation id joins the chain its first event started and refuses any other", "[workspace]") { // WS-30
  memory_log log;
  run(log, publish(service_error, R"(,"id":"first")"));
  auto joined = run(log, publish(service_error, R"(,"id":"second","correlation_id":"first")"));
  CHECK(joined.appended[0].correlation_id == "first");
  auto unknown = run(log, publish(service_error, R"(,"correlation_id":"nope")"));
  REQUIRE(unknown.rejected);
  CHECK(rejection_json(*unknown.rejected)
        == R"({"type":"not_found","message":"chain nope does not exist","entity":"chain","id":"nope"})");
  auto later = run(log, publish(service_error, R"(,"correlation_id":"second")"));
  REQUIRE(later.rejected);
  CHECK(later.rejected->what.message == "event second did not start a causal chain: it belongs to chain first");
  CHECK(http_status(*later.rejected) == 422);
  CHECK(log.envelopes.size() == 2);
}

TEST_CASE("publish checks the name, the declaration, the reserved namespace and the publisher in order", "[workspace]") { // WS-28
  memory_log log;
  auto reject = [&](const std::string& event) {
    auto e = run(log, publish(event));
    REQUIRE(e.rejected);
    CHECK(e.appended.empty());
    return *e.rejected;
  };
  auto bare = reject(R"({"type":"deploy.finished"})");
  CHECK(bare.what.kind == "validation_failed");
  CHECK(bare.what.message == "event type 'deploy.finished' has no namespace; did you mean one of 'chat:deploy.finished', 'ops:deploy.finished'?");
  CHECK(rejection_json(bare).find(R"("errors":[])") != std::string::npos);
  auto undeclared = reject(R"({"type":"ops:unknown"})");
  CHECK(rejection_json(undeclared)
        == R"({"type":"not_found","message":"event type ops:unknown does not exist","entity":"event type","id":"ops:unknown"})");
  auto fact = reject(R"({"type":"reflexr:tick","schedule":"s","at":"2025-03-01T09:00:00.000000Z"})");
  CHECK(fact.what.kind == "forbidden");
  CHECK(fact.what.message == "reflexr:tick events are recorded by reflexr, not published");
  auto runs_only = reject(R"({"type":"ops:verdict"})");
  CHECK(runs_only.what.message == "ops:verdict events are published by runs, not clients");
  CHECK(http_status(runs_only) == 403);
  CHECK(log.envelopes.empty());
}

TEST_CASE("a batch with one refused event appends none of them", "[workspace]") { // WS-31
  memory_log log;
  auto body = parse_publish_body(R"({"events":[{"event":{"type":"ops:deploy.finished","service":"a"}},)"
                                 R"({"event":{"type":"ops:nope"}}]})",
                                 *registry());
  auto e = run(log, std::get<command_request>(body));
  REQUIRE(e.rejected);
  CHECK(e.rejected->what.kind == "not_found");
  CHECK(log.envelopes.empty());
}

TEST_CASE("an event of a declared type is checked against its schema while the frame is parsed", "[workspace]") { // WS-13, WS-37
  auto bad = parse_command_frame(
    R"({"type":"command","command_id":"c","command":{"type":"publish","event":{"type":"ops:service.error","severity":8}}})",
    *registry());
  REQUIRE(std::holds_alternative<problems>(bad));
  auto& p = std::get<problems>(bad);
  REQUIRE(p.size() == 1);
  CHECK(p[0].msg == "Value error, invalid ops:service.error event: service: Field required");
  CHECK(render_error(dialect::reflexr, invalid_frame(p)).body
        == R"({"detail":[{"type":"value_error","loc":["command","event"],"msg":"Value error, invalid ops:service.error event: service: Field required"}]})");
  auto extra = parse_command_frame(
    R"({"type":"command","command_id":"c","command":{"type":"publish","event":{"type":"ops:deploy.finished","service":"a","x":1}}})",
    *registry());
  CHECK(first_problem(std::get<problems>(extra)) == "command.event: Value error, invalid ops:deploy.finished event: x: Extra inputs are not permitted");
  auto no_type = parse_command_frame(R"({"type":"command","command_id":"c","command":{"type":"publish","event":{"service":"a"}}})",
                                     *registry());
  CHECK(std::get<problems>(no_type)[0].msg == "Value error, an event needs a string 'type'");
}

TEST_CASE("a frame with an empty command id or an unknown command is no command", "[workspace]") { // WS-37
  for (auto text : {R"({"type":"command","command_id":"","command":{"type":"retry_run","run_id":"fir_0b6a3c9e1f2d4a58"}})",
                    R"({"type":"command","command_id":"c","command":{"type":"launch"}})",
                    R"({"type":"command","command_id":"c","command":{"type":"retry_run","run_id":"fir_0b6a3c9e1f2d4a58"},"x":1})",
                    R"({"type":"hello","protocol":"reflexr.v1"})", "not json"})
    CHECK(std::holds_alternative<problems>(parse_command_frame(text, *registry())));
}

TEST_CASE("a command result carries both outcome and rejection, one of them null", "[workspace]") { // WS-3, WS-26
  memory_log log;
  auto missing = run(log, frame(R"({"type":"command","command_id":"c1","command":{"type":"skip_run","run_id":"fir_0b6a3c9e1f2d4a58"}})"));
  CHECK(command_result_json("c1", missing)
        == R"({"type":"command_result","command_id":"c1","ok":false,"outcome":null,"rejection":{"type":"not_found",)"
           R"("message":"run fir_0b6a3c9e1f2d4a58 does not exist","entity":"run","id":"fir_0b6a3c9e1f2d4a58"}})");
  auto ok = run(log, publish(service_error, R"(,"id":"e1")"));
  CHECK(command_result_json("c2", ok)
        == R"({"type":"command_result","command_id":"c2","ok":true,"outcome":{"type":"published","seq":1,"id":"e1",)"
           R"("duplicate":false},"rejection":null})");
}

TEST_CASE("feedback on a chain is recorded as a fact in that chain", "[workspace]") { // WS-32
  memory_log log;
  run(log, publish(service_error, R"(,"id":"root")"));
  auto give = [&](const std::string& target, const std::string& value) {
    return run(log, frame(R"({"type":"command","command_id":"f","command":{"type":"give_feedback","feedback_type":"triage","target":)"
                          + target + R"(,"value":)" + value + "}}"));
  };
  auto ok = give(R"({"kind":"chain","correlation_id":"root"})", R"({"useful":true})");
  REQUIRE(ok.appended.size() == 1);
  CHECK(ok.appended[0].type == "reflexr:feedback_given");
  CHECK(ok.appended[0].correlation_id == "root");
  CHECK(ok.outcomes[0] == R"({"type":"recorded","seq":2,"id":")" + ok.appended[0].id + R"("})");
  auto wrong_kind = give(R"({"kind":"firing","firing_id":"fir_0b6a3c9e1f2d4a58"})", R"({"useful":true})");
  CHECK(wrong_kind.rejected->what.message == "triage feedback is given on chain, run, not on a firing");
  auto bad_value = give(R"({"kind":"chain","correlation_id":"root"})", R"({"useful":"yes"})");
  CHECK(rejection_json(*bad_value.rejected)
        == R"({"type":"validation_failed","message":"invalid triage feedback","errors":[{"type":"bool_type","loc":["useful"],"msg":"Input should be a valid boolean"}]})");
  auto unknown = run(log, frame(R"({"type":"command","command_id":"g","command":{"type":"give_feedback","feedback_type":"nope","target":{"kind":"chain","correlation_id":"root"},"value":{}}})"));
  CHECK(unknown.rejected->what.message == "feedback type nope does not exist");
}

TEST_CASE("the events query refuses its bad parameters in the spec's order", "[workspace]") { // WS-64
  auto known = registry()->known_types();
  auto message = [&](const char* q) { return std::get<query_error>(parse_event_query(q, known)).message; };
  CHECK(message("limit=1&last=2") == "give limit or last, not both");
  CHECK(message("after_seq=-1") == "after_seq cannot be negative");
  CHECK(message("type=deploy.finished") == "event type 'deploy.finished' has no namespace; did you mean one of 'chat:deploy.finished', 'ops:deploy.finished'?");
  auto not_integer = std::get<query_error>(parse_event_query("limit=ten", known));
  REQUIRE(not_integer.problems.size() == 1);
  CHECK(not_integer.problems[0].type == "int_parsing");
  auto q = std::get<event_query>(parse_event_query("type=ops%3Adeploy.finished&type=ops:service.error&last=1&after_seq=3", known));
  CHECK(q.types == std::vector<std::string>{"ops:deploy.finished", "ops:service.error"});
  CHECK(q.last == 1);
  CHECK(q.after_seq == 3);
}

TEST_CASE("callers are open and local without credentials, and limited to their workspaces with them", "[workspace]") { // WS-59, WS-60
  workspaces_config c;
  auto open = authenticate("", c, {}, true);
  REQUIRE(open);
  CHECK(open->tenant == "default");
  CHECK(participant(open->actor) == "user:local");
  // sha256("secret-token")
  c.credentials.push_back({"", "acme", {}, "", false, {"prod"}});
  c.credentials[0].token_sha256 = "930bbdc51b6aed5c2a5678fd6e28dee7a05e8a4b643cfc0b4427c3efb86c0d94";
  c.credentials[0].actor.kind = "source";
  c.credentials[0].actor.name = "pagerduty";
  CHECK_FALSE(authenticate("", c, {}, false));
  CHECK_FALSE(authenticate("Bearer wrong", c, {}, false));
  auto pagerduty = authenticate("Bearer secret-token", c, {}, false);
  REQUIRE(pagerduty);
  CHECK(pagerduty->tenant == "acme");
  CHECK(participant(pagerduty->actor) == "source:pagerduty");
  CHECK(may_use(*pagerduty, "prod"));
  CHECK_FALSE(may_use(*pagerduty, "staging"));
  auto service = authenticate("Bearer svc", c, {"svc"}, false);
  REQUIRE(service);
  CHECK(participant(service->actor) == "user:service");
  CHECK_FALSE(is_workspace_id("Prod"));
  CHECK(is_workspace_id("prod_2-a"));
  workspace_caller acme{"acme", {}, false, {"prod"}};
  CHECK(may_use(acme, "prod"));
  CHECK_FALSE(may_use(acme, "staging"));
}

TEST_CASE("durations are read in ISO 8601 and written with zero parts omitted", "[workspace]") { // WS-2
  CHECK(parse_duration("PT1S") == 1);
  CHECK(parse_duration("PT5M") == 300);
  CHECK(parse_duration("P1D") == 86400);
  CHECK(parse_duration("P1DT2H") == 93600);
  CHECK(parse_duration("PT0.5S") == 0.5);
  for (auto bad : {"P", "PT", "1S", "PT1H1H", "PT1M1H", "P1H", "PT1.5M", "P1W"})
    CHECK_FALSE(parse_duration(bad));
  CHECK(format_duration(93600) == "P1DT2H");
  CHECK(format_duration(0) == "PT0S");
  CHECK(format_duration(90) == "PT1M30S");
  CHECK(format_duration(1.25) == "PT1.25S");
}

TEST_CASE("the workspaces configuration refuses the reserved namespace and bad credentials", "[workspace]") { // WS-8, WS-59
  auto r = parse_config(R"({"workspaces":{"event_types":[{"name":"reflexr:x"},{"name":"Bad"},{"name":"a:b","extra":1}],)"
                        R"("credentials":[{"token_sha256":"xyz","tenant":"acme","actor":{"kind":"robot"},"workspaces":"*"}],)"
                        R"("stream":{"hello_timeout":"soon"}}})",
                        {}, [](const std::string&) { return std::nullopt; });
  auto has = [&](const std::string& text) {
    for (auto& e : r.errors)
      if (e == text)
        return true;
    return false;
  };
  CHECK(has("workspaces.event_types[0].name: the reflexr namespace is reserved"));
  CHECK(has("workspaces.event_types[1].name: expected a qualified event type name such as 'ops:service.error'"));
  CHECK(has("workspaces.event_types[2].extra: unknown key"));
  CHECK(has("workspaces.credentials[0].token_sha256: expected the token's SHA-256 as 64 lowercase hex digits"));
  CHECK(has("workspaces.stream.hello_timeout: expected a duration such as \"PT10S\" or a number of seconds > 0, "
            "at most P1D, got \"soon\""));
  auto defaults = parse_config("", {}, [](const std::string&) { return std::nullopt; });
  CHECK(defaults.value.workspaces.outbox_frames == 1000);
  CHECK(defaults.value.workspaces.client_stall_timeout == 10);
  CHECK(defaults.value.workspaces.command_result_retention == 7 * 86400);
}

TEST_CASE("a workspace credential's actor is a client, and one token belongs to one credential", "[workspace]") {
  // Issue 15 findings 14 and 16, WS-22, WS-59.
  std::string a(64, 'a'), b(64, 'b'), c(64, 'c');
  auto cred = [](const std::string& hash, const std::string& tenant, const std::string& actor) {
    return R"({"token_sha256":")" + hash + R"(","tenant":")" + tenant + R"(","actor":)" + actor + R"(,"workspaces":"*"})";
  };
  auto r = parse_config(R"({"workspaces":{"credentials":[)" + cred(a, "acme", R"({"kind":"user","id":"alice"})") + ","
                          + cred(a, "globex", R"({"kind":"user","id":"bob"})") + ","
                          + cred(b, "acme", R"({"kind":"system","name":"reactor"})") + ","
                          + cred(c, "acme", R"({"kind":"agent","rule":"r","run_id":"run_1","name":"agent"})") + "]}}",
                        {}, [](const std::string&) { return std::nullopt; });
  REQUIRE(r.errors.size() == 3);
  CHECK(r.errors[0] == "workspaces.credentials[1].token_sha256: the same token as "
                       "workspaces.credentials[0].token_sha256; a token belongs to one credential");
  CHECK(r.errors[1] == "workspaces.credentials[2].actor: a credential's actor is a client: expected kind user, "
                       "source, evaluator or external_agent, not 'system'");
  CHECK(r.errors[2].rfind("workspaces.credentials[3].actor: a credential's actor is a client", 0) == 0);
  auto clients = parse_config(R"({"workspaces":{"credentials":[)" + cred(a, "acme", R"({"kind":"source","name":"pd"})") + ","
                                + cred(b, "acme", R"({"kind":"evaluator","name":"e","version":"1"})") + ","
                                + cred(c, "acme", R"({"kind":"external_agent","client_id":"bot"})") + "]}}",
                              {}, [](const std::string&) { return std::nullopt; });
  CHECK(clients.errors == std::vector<std::string>{});
}

TEST_CASE("no workspace credential may hold the service token, which is tenant default's", "[workspace]") {
  // Issue 15 finding 16, WS-59.
  auto r = parse_config(R"({"service":{"service_token":"svc"},"workspaces":{"credentials":[)"
                        R"({"token_sha256":")" + sha256_hex("svc") + R"(","tenant":"acme","actor":{"kind":"user","id":"a"},"workspaces":"*"}]}})",
                        {}, [](const std::string&) { return std::nullopt; });
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0] == "workspaces.credentials[0].token_sha256: the SHA-256 of the service token, which is tenant "
                       "default's; a token belongs to one tenant");
}

TEST_CASE("a credential's actor takes only the fields of its kind", "[workspace]") { // issue 15 finding 16, WS-21
  auto r = parse_config(R"({"workspaces":{"credentials":[{"token_sha256":")" + std::string(64, 'b')
                          + R"(","tenant":"acme","actor":{"kind":"user","id":"b","nmae":"Bob"},"workspaces":"*"},)"
                          + R"({"token_sha256":")" + std::string(64, 'c')
                          + R"(","tenant":"acme","actor":{"kind":"evaluator","name":"e","version":"1"},"workspaces":"*"}]}})",
                        {}, [](const std::string&) { return std::nullopt; });
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0] == R"(workspaces.credentials[0].actor.nmae: unknown key (did you mean "name"))");
}

TEST_CASE("null stands for an absent id or correlation id in a publish body", "[workspace]") { // WS-3
  memory_log log;
  auto single = parse_publish_body(R"({"event":{"type":"ops:deploy.finished","service":"a"},"id":null})", *registry());
  REQUIRE(std::holds_alternative<command_request>(single));
  CHECK(run(log, std::get<command_request>(single)).appended[0].id.rfind("evt_", 0) == 0);
  auto batch = parse_publish_body(R"({"events":[{"event":{"type":"ops:deploy.finished","service":"b"}}],"correlation_id":null})",
                                  *registry());
  REQUIRE(std::holds_alternative<command_request>(batch));
  auto e = run(log, std::get<command_request>(batch));
  CHECK(e.appended[0].correlation_id == e.appended[0].id);
}

TEST_CASE("an append's trace context is a child of the request's, and null without one", "[workspace]") { // WS-20
  auto parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  auto child = append_traceparent(parent);
  REQUIRE(child.size() == 55);
  CHECK(child.substr(0, 36) == "00-4bf92f3577b34da6a3ce929d0e0e4736-");
  CHECK(child.substr(36, 16) != "00f067aa0ba902b7");
  CHECK(child.substr(52) == "-01");
  for (auto bad : {"", "junk", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                   "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"})
    CHECK(append_traceparent(bad).empty());
}

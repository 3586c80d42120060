// The reflexr.v1 JSON Schema (workspace-stream.md §9): the checked-in document, its definitions, and
// the spec's examples against them.
#include "protocol/reflexr_schema.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace troupe::protocol;

namespace {

std::string problems(const std::string& instance, std::string_view def) {
  auto doc = json::parse(instance);
  REQUIRE(doc);
  return json_schema::describe(reflexr::check(*doc, def));
}

const json::value& defs() {
  return reflexr::schema_document()["$defs"];
}

void collect_refs(const json::value& v, std::set<std::string>& refs) {
  if (v.IsObject()) {
    for (auto& m : v.GetObject()) {
      if (std::string_view(m.name.GetString()) == "$ref" && m.value.IsString())
        refs.insert(m.value.GetString());
      collect_refs(m.value, refs);
    }
  } else if (v.IsArray()) {
    for (auto& item : v.GetArray())
      collect_refs(item, refs);
  }
}

} // namespace

TEST_CASE("schemas/reflexr.v1.json is the document the code builds", "[reflexr_schema]") { // WS-125
  auto path = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "schemas" / "reflexr.v1.json";
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::stringstream held;
  held << in.rdbuf();
  auto built = reflexr::schema_text();
  if (held.str() != built) {
    std::istringstream a(held.str()), b(built);
    std::string line_a, line_b;
    int line = 1;
    while (std::getline(a, line_a) && std::getline(b, line_b) && line_a == line_b)
      ++line;
    FAIL("schemas/reflexr.v1.json differs from the schema the code builds (first at line "
         << line << "): run `troupe schema protocol` at the repository's root and commit the file");
  }
}

TEST_CASE("the document is draft 2020-12 titled reflexr.v1 with client and server frames",
          "[reflexr_schema]") { // WS-125
  auto& doc = reflexr::schema_document();
  CHECK(json::get_string(doc, "$schema") == "https://json-schema.org/draft/2020-12/schema");
  CHECK(json::get_string(doc, "title") == "reflexr.v1");
  CHECK(json::get_string(doc["properties"]["client"], "$ref") == "#/$defs/ClientFrame");
  CHECK(json::get_string(doc["properties"]["server"], "$ref") == "#/$defs/ServerFrame");
  auto text = reflexr::schema_text();
  CHECK(text.substr(0, 4) == "{\n  ");
  CHECK(text.back() == '\n');
}

TEST_CASE("every definition WS-126 names exists", "[reflexr_schema]") { // WS-126
  for (auto name : {"ClientFrame", "ServerFrame", "Hello", "CommandFrame", "Welcome", "EventFrame", "ReplayComplete",
                    "CommandResult", "ErrorFrame", "Command", "Publish", "GiveFeedback", "RetryRun", "SkipRun",
                    "CancelRun", "ReplayRule", "InstallRule", "UpdateRule", "ArchiveRule", "Outcome",
                    "PublishedOutcome", "RecordedOutcome", "RunOutcome", "RuleOutcome", "RuleVersionOutcome",
                    "RuleProgress", "Run", "Rejection", "NotFoundRejection", "InvalidStateRejection",
                    "ValidationFailedRejection", "ForbiddenRejection", "DepthExceededRejection",
                    "UnsupportedProtocolRejection", "ValidationError", "Causation", "Actor", "UserActor",
                    "AgentActor", "ExternalAgentActor", "SystemActor", "SourceActor", "EvaluatorActor",
                    "FeedbackTarget", "RunTarget", "FiringTarget", "ChainTarget", "Event", "Rule", "Condition",
                    "Filter", "OnFilter", "WhereFilter", "AllFilter", "AnyFilter", "NotFilter", "PredicateFilter",
                    "Pattern", "EachPattern", "CountPattern", "SequencePattern", "AbsencePattern", "Dedupe",
                    "Throttle", "Scope", "ActionRef", "RetryPolicy", "RuleFired", "RuleErrored", "RuleReset",
                    "RuleInstalled", "RuleArchived", "RunStarted", "RunProgressed", "RunRetrying", "RunSucceeded",
                    "RunDeadLettered", "RunCancelled", "RunSkipped", "RunRequeued", "FeedbackGiven", "Tick",
                    "EventName", "QualifiedRuleName", "RuleName", "EventId", "FiringId", "RunId", "ScopeKey",
                    "TraceId", "WorkspaceId", "JsonValue"}) {
    INFO(name);
    CHECK(defs().HasMember(name));
  }
  CHECK(json::get_string(defs()["EventName"], "pattern") == "^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$");
  CHECK(json::get_string(defs()["QualifiedRuleName"], "pattern") == "^[a-z][a-z0-9_]*:[a-z0-9][a-z0-9._-]*$");
  CHECK(json::get_int(defs()["QualifiedRuleName"], "maxLength") == 100);
}

TEST_CASE("every $ref in the document names a definition", "[reflexr_schema]") {
  std::set<std::string> refs;
  collect_refs(reflexr::schema_document(), refs);
  CHECK(refs.size() > 50);
  for (auto& r : refs) {
    INFO(r);
    REQUIRE(r.rfind("#/$defs/", 0) == 0);
    CHECK(defs().HasMember(r.substr(8).c_str()));
  }
}

TEST_CASE("objects reject unknown fields except envelopes, causation, actors, events and rejections",
          "[reflexr_schema]") { // WS-3, WS-127
  std::set<std::string> open{"Envelope",          "EventFrame",         "Causation",      "UserActor",
                             "AgentActor",        "ExternalAgentActor", "SystemActor",    "SourceActor",
                             "EvaluatorActor",    "Event",              "NotFoundRejection",
                             "InvalidStateRejection", "ValidationFailedRejection", "ForbiddenRejection",
                             "DepthExceededRejection", "UnsupportedProtocolRejection", "ValidationError"};
  for (auto& d : defs().GetObject()) {
    std::string name = d.name.GetString();
    if (json::get_string(d.value, "type") != "object" || !d.value.HasMember("properties"))
      continue;
    INFO(name);
    auto additional = json::get_bool(d.value, "additionalProperties");
    if (open.count(name))
      CHECK_FALSE(additional.has_value());
    else
      CHECK(additional == false);
  }
}

TEST_CASE("unions are oneOf with a discriminator on type or kind", "[reflexr_schema]") { // WS-127, WS-131
  for (auto [name, prop, branches] : {std::tuple{"ClientFrame", "type", 2}, {"ServerFrame", "type", 5},
                                      {"Command", "type", 9}, {"Outcome", "type", 5}, {"Rejection", "type", 6},
                                      {"Actor", "kind", 6}, {"FeedbackTarget", "kind", 3}, {"Filter", "kind", 6},
                                      {"Pattern", "kind", 4}}) {
    INFO(name);
    auto& d = defs()[name];
    CHECK(json::get_string(d["discriminator"], "propertyName") == prop);
    CHECK(d["oneOf"].Size() == static_cast<rapidjson::SizeType>(branches));
  }
}

TEST_CASE("the spec's frame, command, envelope and rule examples validate", "[reflexr_schema]") { // WS-127
  struct example {
    const char* json;
    const char* def;
  };
  // The examples as the spec writes them.
  auto envelope = std::string(
      R"({"seq":42,"id":"evt_3f9c2a1b7d4e5f60","ts":"2025-03-01T09:00:00.000000Z","workspace_id":"prod",)"
      R"("actor":{"kind":"source","name":"pagerduty"},"causation":null,"correlation_id":"evt_3f9c2a1b7d4e5f60",)"
      R"("traceparent":null,"event":{"type":"ops:service.error","service":"auth","severity":8}})");
  auto event_frame = R"({"type":"event",)" + envelope.substr(1);
  auto hello = R"({"type":"hello","protocol":"reflexr.v1","resume_after_seq":41,"types":["reflexr:rule_fired"]})";
  auto command = R"({"type":"command","command_id":"cmd_7","command":{"type":"publish","event":{"type":"ops:service.error","service":"auth","severity":8}}})";
  auto result = R"({"type":"command_result","command_id":"cmd_8","ok":false,"outcome":null,"rejection":{"type":"not_found","message":"run fir_0b6a3c9e1f2d4a58 does not exist","entity":"run","id":"fir_0b6a3c9e1f2d4a58"}})";
  auto welcome = R"({"type":"welcome","protocol":"reflexr.v1","workspace_id":"prod","head_seq":57,"reset":false})";
  auto rule = R"({"name":"ops:error-spike","when":{"filter":{"kind":"on","types":["ops:service.error"]},"pattern":{"kind":"count","at_least":3,"within":"PT1M"}},"scope":{"fields":["service"]},"then":{"action":"agent","params":{"agent":"triage"}}})";
  for (auto& e : std::initializer_list<example>{
           {hello, "Hello"}, // WS-46
           {hello, "ClientFrame"},
           {command, "CommandFrame"}, // WS-23
           {command, "ClientFrame"},
           {R"({"type":"command","command_id":"c1","command":{"type":"retry_run","run_id":"fir_0b6a3c9e1f2d4a58"}})",
            "CommandFrame"}, // WS-62
           {result, "CommandResult"}, // WS-26
           {result, "ServerFrame"},
           {welcome, "Welcome"}, // WS-50
           {welcome, "ServerFrame"},
           {R"({"type":"replay_complete","up_to_seq":57})", "ServerFrame"}, // WS-52
           {R"({"type":"error","message":"not a command frame: command_id: Field required"})", "ServerFrame"}, // WS-55
           {envelope.c_str(), "Envelope"}, // WS-14
           {event_frame.c_str(), "EventFrame"}, // WS-51
           {event_frame.c_str(), "ServerFrame"},
           {rule, "Rule"}, // WS-73
           {R"({"type":"published","seq":59,"id":"evt_1","duplicate":false})", "Outcome"}, // WS-120
           {R"({"kind":"run","run_id":"fir_0b6a3c9e1f2d4a58"})", "FeedbackTarget"}, // WS-32
       }) {
    INFO(e.def << ": " << e.json);
    CHECK(problems(e.json, e.def) == "");
  }
}

TEST_CASE("outcomes, runs and facts troupe writes validate against their definitions",
          "[reflexr_schema]") { // WS-98, WS-100, WS-131
  auto run = R"({"id":"fir_0b6a3c9e1f2d4a58","rule":"ops:error-spike","scope":{"service":"auth"},)"
             R"("scope_key":"[\"auth\"]","fired_seq":44,"matched":[42,43,44],)"
             R"("correlation_id":"evt_3f9c2a1b7d4e5f60","depth":1,"status":"pending","attempts":0,)"
             R"("next_attempt_at":"2025-03-01T09:00:01.000000Z","created_at":"2025-03-01T09:00:01.000000Z",)"
             R"("updated_at":"2025-03-01T09:00:01.000000Z","error":null,"reason":null,"checkpoint":null,)"
             R"("checkpoints":0,"step":null,"output":null,"trace_ids":[]})";
  CHECK(problems(run, "Run") == "");
  CHECK(problems(std::string(R"({"type":"run","run":)") + run + "}", "Outcome") == "");
  CHECK(problems(R"({"type":"rule","rule":"ops:error-spike","progress":{"cursor":0,"generation":1,)"
                 R"("definition":"0123456789abcdef","deadlines":{"[\"auth\"]":"2025-03-01T09:05:00.000000Z"},)"
                 R"("silent_through":57}})",
                 "RuleOutcome")
        == "");
  CHECK(problems(R"({"type":"rule_version","rule":"chat:x","version":2,"seq":60,"duplicate":false})", "Outcome") == "");
  CHECK(problems(R"({"type":"validation_failed","message":"rule chat:x cannot be stored",)"
                 R"("errors":["timeout is required"]})",
                 "Rejection")
        == "");
  CHECK(problems(R"({"type":"validation_failed","message":"invalid ops:service.error event",)"
                 R"("errors":[{"type":"missing","loc":["service"],"msg":"Field required"}]})",
                 "Rejection")
        == "");
  CHECK(problems(R"({"type":"depth_exceeded",)"
                 R"("message":"the event would be at causation depth 9, beyond the limit of 8","depth":9,"limit":8})",
                 "Rejection")
        == "");
  CHECK(problems(R"({"type":"depth_exceeded","message":"too deep"})", "Rejection")
        == "depth: Field required; limit: Field required"); // WS-131
  CHECK(problems(R"({"type":"reflexr:rule_fired","rule":"ops:error-spike","scope":{"service":"auth"},)"
                 R"("scope_key":"[\"auth\"]","firing_id":"fir_0b6a3c9e1f2d4a58","matched":[42,43,44]})",
                 "RuleFired")
        == "");
  CHECK(problems(R"({"type":"reflexr:run_retrying","run_id":"fir_0b6a3c9e1f2d4a58","rule":"ops:x","attempt":1,)"
                 R"("error":"webhook answered 503","next_attempt_at":"2025-03-01T09:00:02.000000Z",)"
                 R"("reason":"webhook_failed"})",
                 "RunRetrying")
        == "");
  CHECK(problems(R"({"type":"reflexr:run_cancelled","run_id":"fir_0b6a3c9e1f2d4a58","rule":"ops:x","reason":null})",
                 "RunCancelled")
        == "");
  CHECK(problems(R"({"type":"reflexr:feedback_given","feedback_type":"triage","target":{"kind":"chain",)"
                 R"("correlation_id":"evt_1"},"value":{"ok":true}})",
                 "FeedbackGiven")
        == "");
  CHECK(problems(R"({"type":"reflexr:tick","schedule":"nightly","at":"2025-03-01T02:00:00.000000Z"})", "Tick") == "");
  CHECK(problems(R"({"type":"reflexr:tick","schedule":"nightly"})", "Tick") == "at: Field required");
  CHECK(problems(R"({"firing_id":"fir_1","run_id":"fir_0b6a3c9e1f2d4a58","depth":0,"more":1})", "Causation")
        == "firing_id: String should match pattern '^fir_[0-9a-f]{16}$'; "
           "depth: Input should be greater than or equal to 1");
  CHECK(problems(R"({"type":"welcome","protocol":"reflexr.v1","workspace_id":"Prod","head_seq":0,"reset":true})",
                 "Welcome")
        == "workspace_id: String should match pattern '^[a-z0-9][a-z0-9_-]{0,63}$'");
  CHECK(problems(R"({"kind":"agent","rule":"ops:x","run_id":"fir_0b6a3c9e1f2d4a58","name":"agent","extra":1})", "Actor")
        == ""); // WS-3: actors tolerate unknown fields
}

TEST_CASE("frames that do not parse are refused with the first problem in pydantic's words",
          "[reflexr_schema]") { // WS-37, WS-48, WS-55
  CHECK(problems(R"({"type":"command","command_id":"","command":{"type":"retry_run","run_id":"r"}})", "CommandFrame")
        == "command_id: String should have at least 1 character");
  CHECK(problems(R"({"type":"command","command_id":"c","command":{"type":"explode"}})", "CommandFrame")
        == "command: Input tag 'explode' found using 'type' does not match any of the expected tags: 'publish', "
           "'give_feedback', 'retry_run', 'skip_run', 'cancel_run', 'replay_rule', 'install_rule', 'update_rule', "
           "'archive_rule'");
  CHECK(problems(R"({"type":"command","command_id":"c","command":{"run_id":"r"}})", "ClientFrame")
        == "command: Unable to extract tag using discriminator 'type'");
  CHECK(problems(R"({"type":"hello","protocol":"reflexr.v1","x":1})", "Hello") == "x: Extra inputs are not permitted");
  CHECK(problems(R"({"type":"hello","protocol":"reflexr.v1","types":["Alert"]})", "ClientFrame")
        == "types.0: String should match pattern '^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$'"); // WS-6
  CHECK(problems(R"({"type":"hello","protocol":"reflexr.v1","resume_after_seq":-1})", "Hello")
        == "resume_after_seq: Input should be greater than or equal to 0");
  CHECK(problems(R"({"type":"hello"})", "Hello") == "protocol: Field required");
  CHECK(problems(R"({"type":"command","command_id":"c","command":{"type":"replay_rule","rule":"ops:x","from_seq":-1}})",
                 "CommandFrame")
        == "command.from_seq: Input should be greater than or equal to 0");
  CHECK(problems(R"({"type":"welcome"})", "ClientFrame")
        == "Input tag 'welcome' found using 'type' does not match any of the expected tags: 'hello', 'command'");
  CHECK(problems(R"({"type":"command","command_id":"c","command":{"type":"publish","event":{"service":"auth"}}})",
                 "CommandFrame")
        == "command.event.type: Field required");
  CHECK(problems("[]", "ClientFrame") == "Input should be a valid dictionary");
  auto unknown = reflexr::check(json::value(rapidjson::kObjectType), "NoSuchDef");
  REQUIRE(unknown.size() == 1);
  CHECK(unknown[0].type == "unknown_definition");
}

TEST_CASE("a rule is checked to its leaves, with the path to each problem", "[reflexr_schema]") { // WS-37, WS-73..78
  CHECK(problems(R"({"name":"Ops:Bad","when":{"filter":{"kind":"on","types":[]}}})", "Rule")
        == "name: String should match pattern '^[a-z][a-z0-9_]*:[a-z0-9][a-z0-9._-]*$'; "
           "when.filter.types: List should have at least 1 item after validation, not 0");
  CHECK(problems(R"({"name":"ops:x","when":{"filter":{"kind":"all","of":[{"kind":"where","field":"severity",)"
                 R"("op":"gte","value":5}]},"pattern":{"kind":"sequence","steps":[{"kind":"predicate",)"
                 R"("name":"p"}],"within":"PT1M"},"throttle":{"at_most":0,"per":60}},"retry":{"max_attempts":3,)"
                 R"("backoff":1.5,"multiplier":2},"timeout":"PT30S","ordering":"fifo"})",
                 "Rule")
        == "when.filter.of.0.op: Input should be 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'in', 'contains', 'matches' or "
           "'exists'; when.pattern.steps: List should have at least 2 items after validation, not 1; "
           "when.throttle.at_most: Input should be greater than or equal to 1; "
           "ordering: Input should be 'scope' or 'none'");
  CHECK(problems(R"({"name":"ops:x","when":{"filter":{"kind":"not","filter":{"kind":"any","of":[{"kind":"on",)"
                 R"("types":["ops:a"]}]}},"dedupe":{"key":["service"],"within":"PT5M"}},"then":{"action":"webhook",)"
                 R"("params":{"url":"https://x"}},"timeout":null,"enabled":false,"extra":1})",
                 "Rule")
        == "extra: Extra inputs are not permitted");
  CHECK(problems(R"({"type":"command","command_id":"c","command":{"type":"install_rule","rule":{"name":"chat:x",)"
                 R"("when":{"filter":{"kind":"on","types":["chat:msg"]},"pattern":{"kind":"count","at_least":2}}}}})",
                 "CommandFrame")
        == "command.rule.when.pattern.within: Field required");
}

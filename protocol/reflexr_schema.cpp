#include "protocol/reflexr_schema.hpp"

#include <rapidjson/prettywriter.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <utility>

namespace troupe::protocol::reflexr {

namespace {

// Definitions are written as JSON text composed by the small functions below, so each one reads as
// its shape in the spec: `tagged("type", "hello", strict, {req("protocol", string_t), …})`.
using text = std::string;

enum class fields_are { strict, open }; // WS-3, WS-127: additionalProperties false, or unknown fields tolerated
constexpr auto strict = fields_are::strict;
constexpr auto open = fields_are::open;

text type(const char* t) {
  return std::string(R"({"type":")") + t + R"("})";
}

const text string_t = type("string");
const text boolean_t = type("boolean");
const text number_t = type("number");
const text object_t = type("object");
const text non_empty_string = R"({"type":"string","minLength":1})";
const text json_value = "{}";

text integer(long minimum) {
  return R"({"type":"integer","minimum":)" + std::to_string(minimum) + "}";
}

text ref(const char* def) {
  return std::string(R"({"$ref":"#/$defs/)") + def + R"("})";
}

text constant(const char* v) {
  return json::object([&](json::writer& w) {
    w.Key("const");
    w.String(v);
  });
}

text one_of_values(std::initializer_list<const char*> values) {
  std::string out = R"({"enum":[)";
  for (auto v : values)
    out += (out.back() == '[' ? "" : ",") + json::quote(v);
  return out + "]}";
}

text array_of(const text& items, long min_items = 0) {
  std::string out = R"({"type":"array","items":)" + items;
  if (min_items > 0)
    out += R"(,"minItems":)" + std::to_string(min_items);
  return out + "}";
}

text nullable(const text& t) {
  return R"({"anyOf":[)" + t + R"(,{"type":"null"}]})";
}

// `schema` with the member `key: json` added last (an annotation such as a default).
text with(text schema, const char* key, const text& json) {
  schema.pop_back();
  return schema + (schema.size() > 1 ? "," : "") + json::quote(key) + ":" + json + "}";
}

text described(const char* description, const text& schema) {
  return "{" + json::quote("description") + ":" + json::quote(description) + (schema.size() > 2 ? "," : "")
         + schema.substr(1);
}

struct field {
  std::string name;
  text schema;
  bool required;
};

field req(const char* name, text schema) {
  return {name, std::move(schema), true};
}

// An optional field; `default_json`, when given, documents the value its absence means.
field opt(const char* name, text schema, const char* default_json = nullptr) {
  return {name, default_json ? with(std::move(schema), "default", default_json) : std::move(schema), false};
}

text object(const std::vector<field>& fields, fields_are openness) {
  std::string properties, required;
  for (auto& f : fields) {
    properties += (properties.empty() ? "" : ",") + json::quote(f.name) + ":" + f.schema;
    if (f.required)
      required += (required.empty() ? "" : ",") + json::quote(f.name);
  }
  std::string out = R"({"type":"object","properties":{)" + properties + "}";
  if (!required.empty())
    out += R"(,"required":[)" + required + "]";
  if (openness == strict)
    out += R"(,"additionalProperties":false)";
  return out + "}";
}

// An object whose `tag_key` member (`type` or `kind`) is the constant `tag`, required and first.
text tagged(const char* tag_key, const char* tag, fields_are openness, std::vector<field> fields) {
  fields.insert(fields.begin(), req(tag_key, constant(tag)));
  return object(fields, openness);
}

// A union told apart by its `tag_key` member (WS-127).
text union_on(const char* tag_key, std::initializer_list<const char*> defs) {
  std::string branches;
  for (auto d : defs)
    branches += (branches.empty() ? "" : ",") + ref(d);
  return R"({"oneOf":[)" + branches + R"(],"discriminator":{"propertyName":)" + json::quote(tag_key) + "}}";
}

// A fact (WS-98): an event of type `reflexr:<name>` whose fields are all written, `?` ones as null.
text fact(const char* type_name, std::vector<field> fields) {
  return tagged("type", type_name, strict, std::move(fields));
}

// A rejection (WS-26): open, so clients reading rejections as plain objects keep working (WS-131).
text rejection(const char* type_name, std::vector<field> details = {}) {
  details.insert(details.begin(), req("message", string_t));
  return tagged("type", type_name, open, std::move(details));
}

// WS-14: the envelope's members, shared by `Envelope` and the `event` frame that adds its type.
std::vector<field> envelope_fields() {
  return {
      req("seq", integer(1)),
      req("id", ref("EventId")),
      req("ts", ref("Timestamp")),
      req("workspace_id", ref("WorkspaceId")),
      req("actor", ref("Actor")),
      opt("causation", nullable(ref("Causation"))),
      req("correlation_id", ref("EventId")),
      opt("traceparent", nullable(string_t)),
      req("event", ref("Event")),
  };
}

std::vector<std::pair<std::string, text>> definitions() {
  const text rule_name = ref("RuleName");
  const text run_id = ref("RunId");
  const text seq = integer(1);
  const text count = integer(0);
  const text duration = ref("Duration");
  const text timestamp = ref("Timestamp");
  const text string_or_null = nullable(string_t);
  const text firing_id = described("fir_ and 16 hex digits; a run's id is its firing's",
                                   R"({"type":"string","pattern":"^fir_[0-9a-f]{16}$"})");
  // A fact about a run (WS-98): its id and rule, then `more`.
  auto run_fact = [&](const char* type_name, std::vector<field> more) {
    more.insert(more.begin(), {req("run_id", run_id), req("rule", rule_name)});
    return fact(type_name, std::move(more));
  };
  return {
      // Frames (§4, WS-23, WS-46, WS-50..55).
      {"ClientFrame", union_on("type", {"Hello", "CommandFrame"})},
      {"ServerFrame", union_on("type", {"Welcome", "EventFrame", "ReplayComplete", "CommandResult", "ErrorFrame"})},
      {"Hello", tagged("type", "hello", strict,
                       {req("protocol", string_t), opt("resume_after_seq", count, "0"),
                        opt("from_head", boolean_t, "false"),
                        opt("types", nullable(array_of(ref("EventName"))), "null")})},
      {"CommandFrame",
       tagged("type", "command", strict, {req("command_id", non_empty_string), req("command", ref("Command"))})},
      {"Welcome", tagged("type", "welcome", strict,
                         {req("protocol", string_t), req("workspace_id", ref("WorkspaceId")), req("head_seq", count),
                          req("reset", boolean_t)})},
      {"EventFrame", tagged("type", "event", open, envelope_fields())},
      {"ReplayComplete", tagged("type", "replay_complete", strict, {req("up_to_seq", count)})},
      {"CommandResult", tagged("type", "command_result", strict,
                               {req("command_id", non_empty_string), req("ok", boolean_t),
                                req("outcome", nullable(ref("Outcome"))),
                                req("rejection", nullable(ref("Rejection")))})},
      {"ErrorFrame", tagged("type", "error", strict, {req("message", string_t)})},
      {"Envelope", object(envelope_fields(), open)},

      // Commands (WS-24). Ids of runs and rules are plain strings here: one that names nothing is the
      // command's not_found, not an unparsable frame.
      {"Command", union_on("type", {"Publish", "GiveFeedback", "RetryRun", "SkipRun", "CancelRun", "ReplayRule",
                                    "InstallRule", "UpdateRule", "ArchiveRule"})},
      {"Publish", tagged("type", "publish", strict,
                         {req("event", ref("Event")), opt("id", nullable(string_t)),
                          opt("correlation_id", nullable(string_t))})},
      {"GiveFeedback", tagged("type", "give_feedback", strict,
                              {req("feedback_type", non_empty_string), req("target", ref("FeedbackTarget")),
                               req("value", object_t)})},
      {"RetryRun", tagged("type", "retry_run", strict, {req("run_id", string_t)})},
      {"SkipRun", tagged("type", "skip_run", strict, {req("run_id", string_t), opt("reason", string_or_null)})},
      {"CancelRun", tagged("type", "cancel_run", strict, {req("run_id", string_t), opt("reason", string_or_null)})},
      {"ReplayRule", tagged("type", "replay_rule", strict,
                            {req("rule", rule_name), opt("from_seq", count, "0"),
                             opt("mode", one_of_values({"rebuild", "refire"}), R"("rebuild")")})},
      {"InstallRule",
       tagged("type", "install_rule", strict, {req("rule", ref("Rule")), opt("provenance", object_t, "{}")})},
      {"UpdateRule", tagged("type", "update_rule", strict,
                            {req("rule", ref("Rule")), opt("expected_version", nullable(integer(1))),
                             opt("provenance", object_t, "{}")})},
      {"ArchiveRule", tagged("type", "archive_rule", strict,
                             {req("rule", ref("QualifiedRuleName")), opt("expected_version", nullable(integer(1))),
                              opt("reason", string_or_null)})},

      // Outcomes (WS-24, WS-90, WS-100).
      {"Outcome", union_on("type", {"PublishedOutcome", "RecordedOutcome", "RunOutcome", "RuleOutcome",
                                    "RuleVersionOutcome"})},
      {"PublishedOutcome",
       tagged("type", "published", strict, {req("seq", seq), req("id", ref("EventId")), req("duplicate", boolean_t)})},
      {"RecordedOutcome", tagged("type", "recorded", strict, {req("seq", seq), req("id", ref("EventId"))})},
      {"RunOutcome", tagged("type", "run", strict, {req("run", ref("Run"))})},
      {"RuleOutcome", tagged("type", "rule", strict, {req("rule", rule_name), req("progress", ref("RuleProgress"))})},
      {"RuleVersionOutcome", tagged("type", "rule_version", strict,
                                    {req("rule", rule_name), req("version", integer(1)), req("seq", count),
                                     req("duplicate", boolean_t)})},
      {"RuleProgress",
       object({req("cursor", count), req("generation", count), req("definition", string_t),
               req("deadlines", described("absence deadlines: scope key to timestamp", object_t)),
               req("silent_through", count)},
              strict)},
      {"Run", object({req("id", run_id), req("rule", rule_name), req("scope", object_t),
                      req("scope_key", ref("ScopeKey")), req("fired_seq", seq), req("matched", array_of(seq)),
                      req("correlation_id", ref("EventId")), req("depth", count),
                      req("status", one_of_values({"pending", "running", "retrying", "succeeded", "dead", "cancelled",
                                                   "skipped"})),
                      req("attempts", count), req("next_attempt_at", nullable(timestamp)), req("created_at", timestamp),
                      req("updated_at", timestamp), req("error", string_or_null), req("reason", string_or_null),
                      req("checkpoint", json_value), req("checkpoints", count), req("step", nullable(string_t)),
                      req("output", json_value), req("trace_ids", array_of(ref("TraceId")))},
                     strict)},

      // Rejections (WS-26, WS-131). `errors` holds pydantic-style errors (WS-13) or a rule's problems
      // as plain strings (WS-35, WS-121).
      {"Rejection", union_on("type", {"NotFoundRejection", "InvalidStateRejection", "ValidationFailedRejection",
                                      "ForbiddenRejection", "DepthExceededRejection", "UnsupportedProtocolRejection"})},
      {"NotFoundRejection",
       rejection("not_found", {req("entity", one_of_values({"event type", "chain", "feedback type", "run", "firing",
                                                            "rule", "stored rule"})),
                               req("id", string_t)})},
      {"InvalidStateRejection", rejection("invalid_state")},
      {"ValidationFailedRejection",
       rejection("validation_failed",
                 {req("errors", array_of(R"({"anyOf":[)" + ref("ValidationError") + "," + string_t + "]}"))})},
      {"ForbiddenRejection", rejection("forbidden")},
      {"DepthExceededRejection", rejection("depth_exceeded", {req("depth", count), req("limit", count)})},
      {"UnsupportedProtocolRejection", rejection("unsupported_protocol")},
      {"ValidationError",
       object({req("loc", array_of(R"({"type":["string","integer"]})")), req("msg", string_t), req("type", string_t)},
              open)},

      // Envelope parts (WS-14, WS-19, WS-21, WS-32).
      {"Event", described("an event of any type; declared types and facts are checked against their own schema",
                          object({req("type", string_t)}, open))},
      {"Causation", object({req("firing_id", ref("FiringId")), req("run_id", run_id), req("depth", integer(1))}, open)},
      {"Actor", union_on("kind", {"UserActor", "AgentActor", "ExternalAgentActor", "SystemActor", "SourceActor",
                                  "EvaluatorActor"})},
      {"UserActor", tagged("kind", "user", open, {req("id", string_t), opt("name", nullable(string_t))})},
      {"AgentActor",
       tagged("kind", "agent", open, {req("rule", rule_name), req("run_id", run_id), req("name", string_t)})},
      {"ExternalAgentActor",
       tagged("kind", "external_agent", open, {req("client_id", string_t), opt("name", nullable(string_t))})},
      {"SystemActor", tagged("kind", "system", open, {opt("name", string_t, R"("reflexr")")})},
      {"SourceActor", tagged("kind", "source", open, {req("name", string_t)})},
      {"EvaluatorActor", tagged("kind", "evaluator", open, {req("name", string_t), req("version", string_t)})},
      {"FeedbackTarget", union_on("kind", {"RunTarget", "FiringTarget", "ChainTarget"})},
      {"RunTarget", tagged("kind", "run", strict, {req("run_id", string_t)})},
      {"FiringTarget", tagged("kind", "firing", strict, {req("firing_id", string_t)})},
      {"ChainTarget", tagged("kind", "chain", strict, {req("correlation_id", string_t)})},

      // Rules (§6.1, WS-73..78).
      {"Rule", object({req("name", ref("QualifiedRuleName")), opt("description", string_t, R"("")"),
                       req("when", ref("Condition")), opt("scope", ref("Scope"), R"({"fields":[]})"),
                       opt("then", nullable(ref("ActionRef"))),
                       opt("retry", ref("RetryPolicy"),
                           R"({"max_attempts":5,"backoff":"PT1S","multiplier":2.0,"max_backoff":"PT5M"})"),
                       opt("ordering", one_of_values({"scope", "none"}), R"("scope")"),
                       opt("on_dead_letter", one_of_values({"continue", "block"}), R"("continue")"),
                       opt("start", one_of_values({"now", "beginning"}), R"("now")"),
                       opt("timeout", nullable(duration), "null"), opt("enabled", boolean_t, "true")},
                      strict)},
      {"Condition", object({req("filter", ref("Filter")), opt("dedupe", nullable(ref("Dedupe"))),
                            opt("pattern", ref("Pattern"), R"({"kind":"each"})"),
                            opt("throttle", nullable(ref("Throttle")))},
                           strict)},
      {"Filter",
       union_on("kind", {"OnFilter", "WhereFilter", "AllFilter", "AnyFilter", "NotFilter", "PredicateFilter"})},
      {"OnFilter", tagged("kind", "on", strict, {req("types", array_of(ref("EventName"), 1))})},
      {"WhereFilter",
       tagged("kind", "where", strict,
              {req("field", described("a dotted path into the event", non_empty_string)),
               req("op", one_of_values({"eq", "ne", "lt", "le", "gt", "ge", "in", "contains", "matches", "exists"})),
               req("value", ref("JsonValue"))})},
      {"AllFilter", tagged("kind", "all", strict, {req("of", array_of(ref("Filter"), 1))})},
      {"AnyFilter", tagged("kind", "any", strict, {req("of", array_of(ref("Filter"), 1))})},
      {"NotFilter", tagged("kind", "not", strict, {req("filter", ref("Filter"))})},
      {"PredicateFilter", tagged("kind", "predicate", strict, {req("name", non_empty_string)})},
      {"Pattern", union_on("kind", {"EachPattern", "CountPattern", "SequencePattern", "AbsencePattern"})},
      {"EachPattern", tagged("kind", "each", strict, {})},
      {"CountPattern", tagged("kind", "count", strict, {req("at_least", integer(1)), req("within", duration)})},
      {"SequencePattern",
       tagged("kind", "sequence", strict, {req("steps", array_of(ref("Filter"), 2)), req("within", duration)})},
      {"AbsencePattern", tagged("kind", "absence", strict, {req("within", duration)})},
      {"Dedupe", object({req("key", array_of(string_t)), req("within", duration)}, strict)},
      {"Throttle", object({req("at_most", integer(1)), req("per", duration)}, strict)},
      {"Scope", object({opt("fields", array_of(string_t), "[]")}, strict)},
      {"ActionRef", object({req("action", non_empty_string), opt("params", object_t, "{}")}, strict)},
      {"RetryPolicy", object({opt("max_attempts", integer(1), "5"), opt("backoff", duration, R"("PT1S")"),
                              opt("multiplier", number_t, "2.0"), opt("max_backoff", duration, R"("PT5M")")},
                             strict)},

      // Facts (WS-98).
      {"RuleFired", fact("reflexr:rule_fired", {req("rule", rule_name), req("scope", object_t),
                                                req("scope_key", ref("ScopeKey")), req("firing_id", ref("FiringId")),
                                                req("matched", array_of(seq))})},
      {"RuleErrored", fact("reflexr:rule_errored", {req("rule", rule_name), req("seq", seq), req("error", string_t)})},
      {"RuleReset", fact("reflexr:rule_reset", {req("rule", rule_name), req("generation", count),
                                                req("reason", one_of_values({"changed", "replayed"})),
                                                req("from_seq", count), req("silent_through", count)})},
      {"RuleInstalled", fact("reflexr:rule_installed", {req("rule", rule_name), req("version", integer(1)),
                                                        req("spec", ref("Rule")), req("provenance", object_t)})},
      {"RuleArchived", fact("reflexr:rule_archived", {req("rule", rule_name), req("version", integer(1)),
                                                      req("reason", string_or_null), req("cancelled", count)})},
      {"RunStarted", run_fact("reflexr:run_started", {req("scope", object_t), req("scope_key", ref("ScopeKey")),
                                                      req("attempt", integer(1))})},
      {"RunProgressed", run_fact("reflexr:run_progressed", {req("step", string_t)})},
      {"RunRetrying", run_fact("reflexr:run_retrying", {req("attempt", integer(1)), req("error", string_t),
                                                        req("next_attempt_at", timestamp),
                                                        req("reason", string_or_null)})},
      {"RunSucceeded", run_fact("reflexr:run_succeeded", {req("output", json_value)})},
      {"RunDeadLettered", run_fact("reflexr:run_dead_lettered",
                                   {req("attempts", count), req("error", string_t), req("reason", string_or_null)})},
      {"RunCancelled", run_fact("reflexr:run_cancelled", {req("reason", string_or_null)})},
      {"RunSkipped", run_fact("reflexr:run_skipped", {req("reason", string_or_null)})},
      {"RunRequeued", run_fact("reflexr:run_requeued", {})},
      {"FeedbackGiven", fact("reflexr:feedback_given", {req("feedback_type", non_empty_string),
                                                        req("target", ref("FeedbackTarget")), req("value", object_t)})},
      {"Tick", fact("reflexr:tick", {req("schedule", non_empty_string), req("at", timestamp)})},

      // Scalars (WS-2, WS-6, WS-7, WS-17, WS-94).
      {"EventName", described("a qualified event type name (WS-6)",
                              R"({"type":"string",)"
                              R"("pattern":"^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)*$"})")},
      {"QualifiedRuleName",
       described("a rule's name (WS-7)",
                 R"({"type":"string","pattern":"^[a-z][a-z0-9_]*:[a-z0-9][a-z0-9._-]*$","maxLength":100})")},
      {"RuleName", described("a reference to a rule by its name", non_empty_string)},
      {"EventId", non_empty_string},
      {"FiringId", firing_id},
      {"RunId", firing_id},
      {"ScopeKey", described("the canonical JSON array of the scope's values", string_t)},
      {"TraceId", string_t},
      {"WorkspaceId", R"({"type":"string","pattern":"^[a-z0-9][a-z0-9_-]{0,63}$"})"},
      {"JsonValue", described("any JSON value", json_value)},
      {"Timestamp", described("RFC 3339", R"({"type":"string","format":"date-time"})")},
      {"Duration", described("an ISO 8601 duration (PT5M) or a number of seconds", R"({"type":["string","number"]})")},
  };
}

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "reflexr.v1 schema: %s\n", what.c_str());
  std::abort();
}

json::document build_document() {
  json::document doc;
  doc.SetObject();
  auto& a = doc.GetAllocator();
  doc.AddMember("$schema", "https://json-schema.org/draft/2020-12/schema", a);
  doc.AddMember("$id", "https://troupe.dev/schemas/reflexr.v1.json", a);
  doc.AddMember("title", "reflexr.v1", a);
  doc.AddMember("type", "object", a);
  json::value properties(rapidjson::kObjectType);
  properties.AddMember("client", json::value(rapidjson::kObjectType).AddMember("$ref", "#/$defs/ClientFrame", a), a);
  properties.AddMember("server", json::value(rapidjson::kObjectType).AddMember("$ref", "#/$defs/ServerFrame", a), a);
  doc.AddMember("properties", properties, a);

  auto defs = definitions();
  std::sort(defs.begin(), defs.end(), [](auto& x, auto& y) { return x.first < y.first; });
  json::value members(rapidjson::kObjectType);
  for (std::size_t i = 0; i < defs.size(); ++i) {
    auto& [name, schema] = defs[i];
    if (i > 0 && defs[i - 1].first == name)
      broken(name + " is defined twice");
    auto parsed = json::parse(schema);
    if (!parsed)
      broken(name + " is not JSON: " + schema);
    members.AddMember(json::value(name.c_str(), a), json::value(*parsed, a), a);
  }
  doc.AddMember("$defs", members, a);
  return doc;
}

const json_schema::schema& compiled_document() {
  static const json_schema::schema compiled = [] {
    auto result = json_schema::compile(schema_document());
    if (auto error = std::get_if<std::string>(&result))
      broken(*error);
    return std::get<json_schema::schema>(std::move(result));
  }();
  return compiled;
}

} // namespace

const json::document& schema_document() {
  static const json::document doc = build_document();
  return doc;
}

std::string schema_text() {
  rapidjson::StringBuffer buf;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buf);
  w.SetIndent(' ', 2);
  schema_document().Accept(w);
  return std::string(buf.GetString(), buf.GetSize()) + "\n";
}

std::vector<json_schema::problem> check(const json::value& v, std::string_view def) {
  auto s = json_schema::find_def(compiled_document(), def);
  if (!s)
    return {{{}, "reflexr.v1 has no definition '" + std::string(def) + "'", "unknown_definition"}};
  return json_schema::validate(*s, v);
}

} // namespace troupe::protocol::reflexr

#include "protocol/workspace_events.hpp"

#include "protocol/ids.hpp"
#include "protocol/query_string.hpp"
#include "protocol/reflexr_schema.hpp"
#include "protocol/workspace_names.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

namespace troupe::protocol::reflexr {

namespace {

// WS-98: the 15 facts and their definitions in reflexr.v1.
const std::pair<const char*, const char*> facts[] = {
  {"reflexr:rule_fired", "RuleFired"},       {"reflexr:rule_errored", "RuleErrored"},
  {"reflexr:rule_reset", "RuleReset"},       {"reflexr:rule_installed", "RuleInstalled"},
  {"reflexr:rule_archived", "RuleArchived"}, {"reflexr:run_started", "RunStarted"},
  {"reflexr:run_progressed", "RunProgressed"}, {"reflexr:run_retrying", "RunRetrying"},
  {"reflexr:run_succeeded", "RunSucceeded"}, {"reflexr:run_dead_lettered", "RunDeadLettered"},
  {"reflexr:run_cancelled", "RunCancelled"}, {"reflexr:run_skipped", "RunSkipped"},
  {"reflexr:run_requeued", "RunRequeued"},   {"reflexr:feedback_given", "FeedbackGiven"},
  {"reflexr:tick", "Tick"},
};

void raw_member(json::writer& w, const char* key, const std::string& text) {
  w.Key(key);
  if (text.empty())
    w.Null();
  else
    json::write_raw(w, text);
}

// A configured schema compiled as a strict object unless it says otherwise (WS-12: unknown fields are
// refused unless the schema allows them).
std::variant<std::shared_ptr<const json_schema::schema>, std::string> compile_strict(const std::string& text) {
  auto doc = json::parse(text);
  if (!doc || !doc->IsObject())
    return std::string("expected a JSON Schema object");
  if (!doc->HasMember("additionalProperties"))
    doc->AddMember("additionalProperties", false, doc->GetAllocator());
  auto compiled = json_schema::compile(*doc);
  if (auto err = std::get_if<std::string>(&compiled))
    return *err;
  return std::make_shared<const json_schema::schema>(std::move(std::get<json_schema::schema>(compiled)));
}

std::optional<int64_t> integer_param(const std::string& text) {
  if (text.empty())
    return std::nullopt;
  std::size_t i = text[0] == '-' || text[0] == '+' ? 1 : 0;
  if (i == text.size() || i + 18 < text.size())
    return std::nullopt;
  for (std::size_t j = i; j < text.size(); ++j)
    if (!std::isdigit(static_cast<unsigned char>(text[j])))
      return std::nullopt;
  return std::strtoll(text.c_str(), nullptr, 10);
}

} // namespace

std::string envelope_json(const envelope& e) {
  return json::object([&](json::writer& w) {
    w.Key("seq");
    w.Int64(e.seq);
    w.Key("id");
    w.String(e.id);
    w.Key("ts");
    w.String(e.ts);
    w.Key("workspace_id");
    w.String(e.workspace_id);
    raw_member(w, "actor", e.actor);
    raw_member(w, "causation", e.causation);
    w.Key("correlation_id");
    w.String(e.correlation_id);
    json::write_nullable(w, "traceparent", e.traceparent);
    raw_member(w, "event", e.event);
  });
}

std::string event_frame(std::string_view envelope_json) {
  std::string out = "{\"type\":\"event\",";
  out.append(envelope_json.substr(1));
  return out;
}

std::string new_event_id() {
  return "evt_" + random_hex(16);
}

std::string append_traceparent(std::string_view incoming) {
  auto lower_hex = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  };
  // 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>; all-zero ids are invalid.
  bool valid = incoming.size() == 55 && incoming.substr(0, 3) == "00-" && incoming[35] == '-' && incoming[52] == '-'
               && lower_hex(incoming.substr(3, 32)) && lower_hex(incoming.substr(36, 16))
               && lower_hex(incoming.substr(53, 2)) && incoming.substr(3, 32) != std::string(32, '0')
               && incoming.substr(36, 16) != std::string(16, '0');
  if (!valid)
    return {};
  return "00-" + std::string(incoming.substr(3, 32)) + "-" + random_hex(16) + "-" + std::string(incoming.substr(53, 2));
}

std::variant<std::shared_ptr<const event_registry>, std::vector<std::string>>
event_registry::build(const workspaces_config& config) {
  auto r = std::make_shared<event_registry>();
  std::vector<std::string> errors;
  for (std::size_t i = 0; i < config.event_types.size(); ++i) {
    auto& t = config.event_types[i];
    auto path = "workspaces.event_types[" + std::to_string(i) + "]";
    auto compiled = compile_strict(t.schema);
    if (auto err = std::get_if<std::string>(&compiled)) {
      errors.push_back(path + ".schema: " + *err);
      continue;
    }
    if (r->types_.count(t.name)) {
      errors.push_back(path + ".name: " + t.name + " is declared twice");
      continue;
    }
    r->types_[t.name] = {t.name, std::get<0>(compiled), "", t.published_by_runs};
  }
  for (auto [name, def] : facts)
    r->types_[name] = {name, nullptr, def, false};
  for (std::size_t i = 0; i < config.feedback_types.size(); ++i) {
    auto& f = config.feedback_types[i];
    auto compiled = compile_strict(f.schema);
    if (auto err = std::get_if<std::string>(&compiled)) {
      errors.push_back("workspaces.feedback_types[" + std::to_string(i) + "].schema: " + *err);
      continue;
    }
    auto targets = f.targets;
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
    r->feedback_[f.name] = {f.name, std::move(targets), std::get<0>(compiled)};
  }
  if (!errors.empty())
    return errors;
  for (auto& [name, d] : r->types_)
    r->known_.push_back(name);
  return std::shared_ptr<const event_registry>(std::move(r));
}

const event_registry::declared* event_registry::find(std::string_view type) const {
  auto it = types_.find(type);
  return it == types_.end() ? nullptr : &it->second;
}

const event_registry::feedback* event_registry::find_feedback(std::string_view name) const {
  auto it = feedback_.find(name);
  return it == feedback_.end() ? nullptr : &it->second;
}

std::vector<json_schema::problem> event_registry::check(const json::value& event) const {
  if (!event.IsObject())
    return {{{}, "an event must be an object with a 'type'", "value_error"}};
  auto type = json::member(event, "type");
  if (!type || !type->IsString())
    return {{{}, "an event needs a string 'type'", "value_error"}};
  auto d = find(std::string_view(type->GetString(), type->GetStringLength()));
  if (!d)
    return {};
  if (d->fact())
    return reflexr::check(event, d->fact_def);
  json::document fields;
  fields.CopyFrom(event, fields.GetAllocator());
  fields.RemoveMember("type");
  return json_schema::validate(*d->fields, fields);
}

std::string invalid_event_message(const json::value& event, const std::vector<json_schema::problem>& problems) {
  if (problems.size() == 1 && problems[0].loc.empty() && problems[0].type == "value_error")
    return problems[0].msg;
  return "invalid " + json::get_string(event, "type") + " event: " + json_schema::describe(problems);
}

std::variant<event_query, query_error> parse_event_query(std::string_view raw_query,
                                                         const std::vector<std::string>& known_types) {
  event_query q;
  std::map<std::string, std::string> single;
  std::vector<std::string> types;
  for (auto& [key, value] : query_pairs(raw_query)) {
    if (key == "type")
      types.push_back(std::move(value));
    else
      single[key] = std::move(value);
  }
  // Values that are not integers are refused first, all together, as a FastAPI-style list.
  query_error not_integers;
  std::map<std::string, int64_t> numbers;
  for (auto name : {"after_seq", "before_seq", "limit", "last"}) {
    auto it = single.find(name);
    if (it == single.end())
      continue;
    if (auto n = integer_param(it->second))
      numbers[name] = *n;
    else
      not_integers.problems.push_back(
        {{"query", name}, "Input should be a valid integer, unable to parse string as an integer", "int_parsing"});
  }
  if (!not_integers.problems.empty())
    return not_integers;
  if (numbers.count("limit") && numbers.count("last"))
    return query_error{"give limit or last, not both", {}};
  for (auto name : {"after_seq", "before_seq", "limit", "last"})
    if (numbers.count(name) && numbers[name] < 0)
      return query_error{std::string(name) + " cannot be negative", {}};
  for (auto& t : types)
    if (auto why = type_name_rejection(t, known_types))
      return query_error{*why, {}};
  if (numbers.count("after_seq"))
    q.after_seq = numbers["after_seq"];
  if (numbers.count("before_seq"))
    q.before_seq = numbers["before_seq"];
  if (numbers.count("limit"))
    q.limit = numbers["limit"];
  if (numbers.count("last"))
    q.last = numbers["last"];
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());
  q.types = std::move(types);
  return q;
}

} // namespace troupe::protocol::reflexr

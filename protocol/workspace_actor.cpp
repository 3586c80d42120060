#include "protocol/workspace_actor.hpp"

#include <initializer_list>
#include <utility>

namespace troupe::protocol {

namespace {

using field = std::pair<const char*, std::string workspace_actor::*>;

// Each kind's fields, the required ones first (`required` of them).
struct kind_shape {
  const char* kind;
  std::initializer_list<field> fields;
  std::size_t required;
};

const kind_shape shapes[] = {
  {"user", {{"id", &workspace_actor::id}, {"name", &workspace_actor::name}}, 1},
  {"agent",
   {{"rule", &workspace_actor::rule}, {"run_id", &workspace_actor::run_id}, {"name", &workspace_actor::name}},
   3},
  {"external_agent", {{"client_id", &workspace_actor::client_id}, {"name", &workspace_actor::name}}, 1},
  {"system", {{"name", &workspace_actor::name}}, 0},
  {"source", {{"name", &workspace_actor::name}}, 1},
  {"evaluator", {{"name", &workspace_actor::name}, {"version", &workspace_actor::version}}, 2},
};

const kind_shape* shape_of(const std::string& kind) {
  for (auto& s : shapes)
    if (kind == s.kind)
      return &s;
  return nullptr;
}

std::string system_name(const workspace_actor& a) {
  return a.name.empty() ? std::string("reflexr") : a.name;
}

} // namespace

std::string participant(const workspace_actor& a) {
  if (a.kind == "user")
    return "user:" + a.id;
  if (a.kind == "agent")
    return "agent:" + a.rule;
  if (a.kind == "external_agent")
    return "external_agent:" + a.client_id;
  if (a.kind == "system")
    return "system:" + system_name(a);
  if (a.kind == "evaluator")
    return "evaluator:" + a.name + "@" + a.version;
  return a.kind + ":" + a.name; // source
}

void write_actor(json::writer& w, const workspace_actor& a) {
  w.StartObject();
  w.Key("kind");
  w.String(a.kind);
  if (auto s = shape_of(a.kind))
    for (auto [key, member] : s->fields) {
      auto value = a.kind == "system" ? system_name(a) : a.*member;
      if (value.empty())
        continue;
      w.Key(key);
      w.String(value);
    }
  w.EndObject();
}

std::variant<workspace_actor, std::string> parse_actor(const json::value& v) {
  if (!v.IsObject())
    return std::string("an actor must be an object with a 'kind'");
  workspace_actor a;
  a.kind = json::get_string(v, "kind");
  auto s = shape_of(a.kind);
  if (!s)
    return "unknown actor kind '" + a.kind
           + "'; expected user, agent, external_agent, system, source or evaluator";
  std::size_t i = 0;
  for (auto [key, member] : s->fields) {
    a.*member = json::get_string(v, key);
    if (i++ < s->required && (a.*member).empty())
      return "an actor of kind '" + a.kind + "' needs a string '" + key + "'";
  }
  return a;
}

} // namespace troupe::protocol

#include "protocol/workspace_config.hpp"

#include "protocol/duration.hpp"
#include "protocol/workspace_names.hpp"

#include <cctype>
#include <map>
#include <utility>
#include <vector>

namespace troupe::protocol {

namespace {

// An array member read element by element, each an object whose keys are those its reader asks for.
template <class Each>
void objects(config_reader& section, const char* key, Each each) {
  auto v = section.find(key);
  if (!v)
    return;
  if (!v->IsArray()) {
    section.fail(key, "expected an array of objects", *v);
    return;
  }
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    auto path = section.path_of(key) + "[" + std::to_string(i) + "]";
    auto& item = (*v)[i];
    if (!item.IsObject()) {
      section.errors().push_back(path + ": expected an object, got " + json_preview(item));
      continue;
    }
    each(section.element(item, path));
  }
}

// The keys an actor of `kind` may carry: those write_actor writes for one with every field set, so
// the kinds' fields stay in one table (WS-21).
std::vector<std::string> actor_keys(const std::string& kind) {
  workspace_actor full{kind, "x", "x", "x", "x", "x", "x"};
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  write_actor(w, full);
  std::vector<std::string> keys;
  if (auto doc = json::parse(std::string_view(buf.GetString(), buf.GetSize())); doc && doc->IsObject())
    for (auto& m : doc->GetObject())
      keys.emplace_back(m.name.GetString(), m.name.GetStringLength());
  return keys;
}

// WS-22: client commands are attributed to these; agent and system actors are troupe's own.
bool is_client_kind(const std::string& kind) {
  return kind == "user" || kind == "source" || kind == "evaluator" || kind == "external_agent";
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64)
    return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c)))
      return false;
  return true;
}

} // namespace

void read_workspaces_config(config_reader& section, workspaces_config& into) {
  objects(section, "event_types", [&](config_reader r) {
    workspace_event_type t;
    if (!r.string("name", t.name) || !is_event_type(t.name))
      r.error("name", "expected a qualified event type name such as 'ops:service.error'");
    else if (namespace_of(t.name) == reserved_namespace)
      r.error("name", reserved_namespace_message);
    r.raw("schema", t.schema, false);
    std::string by = "clients";
    r.one_of("published_by", by, {"clients", "runs"});
    t.published_by_runs = by == "runs";
    into.event_types.push_back(std::move(t));
  });
  objects(section, "feedback_types", [&](config_reader r) {
    workspace_feedback_type t;
    if (!r.string("name", t.name) || t.name.empty())
      r.error("name", "expected a non-empty string");
    r.strings("targets", t.targets);
    for (auto& k : t.targets)
      if (k != "run" && k != "firing" && k != "chain")
        r.error("targets", "expected run, firing or chain, got \"" + k + "\"");
    if (t.targets.empty())
      r.error("targets", "expected at least one of run, firing, chain");
    r.raw("schema", t.schema, false);
    into.feedback_types.push_back(std::move(t));
  });
  // WS-59: a token names one tenant and actor; the same hash twice could name two.
  std::map<std::string, std::string> token_paths;
  objects(section, "credentials", [&](config_reader r) {
    workspace_credential c;
    r.string("token_sha256", c.token_sha256);
    if (!is_sha256_hex(c.token_sha256))
      r.error("token_sha256", "expected the token's SHA-256 as 64 lowercase hex digits");
    else if (auto [first, fresh] = token_paths.emplace(c.token_sha256, r.path_of("token_sha256")); !fresh)
      r.error("token_sha256", "the same token as " + first->second + "; a token belongs to one credential");
    if (!r.string("tenant", c.tenant) || c.tenant.empty())
      r.error("tenant", "expected a non-empty string");
    if (auto a = r.find("actor")) {
      auto parsed = parse_actor(*a);
      if (auto err = std::get_if<std::string>(&parsed))
        r.error("actor", *err);
      else if (auto& actor = std::get<workspace_actor>(parsed); !is_client_kind(actor.kind))
        r.error("actor", "a credential's actor is a client: expected kind user, source, evaluator or "
                         "external_agent, not '" + actor.kind + "'");
      else {
        // Stricter than an envelope's actor (WS-3): a misspelt field here would be dropped unseen.
        auto fields = r.element(*a, r.path_of("actor"));
        for (auto& key : actor_keys(actor.kind))
          fields.find(key.c_str());
        c.actor = std::move(actor);
      }
    } else {
      r.error("actor", "expected an actor such as {\"kind\":\"user\",\"id\":\"alice\"}");
    }
    r.string("client_id", c.client_id);
    if (auto w = r.find("workspaces"); w && w->IsString() && std::string(w->GetString()) == "*")
      c.all_workspaces = true;
    else
      r.strings("workspaces", c.workspaces);
    into.credentials.push_back(std::move(c));
  });
  section.integer("max_depth", into.max_depth, 1, 1000);
  auto stream = section.child("stream");
  for (auto [key, into_seconds] : {std::pair{"hello_timeout", &into.hello_timeout},
                                   {"client_stall_timeout", &into.client_stall_timeout}})
    if (auto v = stream.find(key)) {
      auto d = duration_value(*v);
      if (d && *d > 0 && *d <= 86400) // at most a day, so it converts to a timer's duration
        *into_seconds = *d;
      else
        stream.fail(key, "expected a duration such as \"PT10S\" or a number of seconds > 0, at most P1D", *v);
    }
  stream.integer("outbox_frames", into.outbox_frames, 1, 1 << 24);
  auto results = section.child("command_results");
  if (auto v = results.find("retention")) {
    auto d = duration_value(*v);
    if (d && *d >= 3600)
      into.command_result_retention = *d;
    else
      results.fail("retention", "expected a duration of at least PT1H such as \"P7D\"", *v);
  }
  section.seconds("log_idle_timeout", into.log_idle_timeout, 0.001);
}

} // namespace troupe::protocol

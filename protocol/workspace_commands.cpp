#include "protocol/workspace_commands.hpp"

#include "protocol/auth.hpp"
#include "protocol/ids.hpp"
#include "protocol/reflexr_schema.hpp"
#include "protocol/workspace_names.hpp"

#include <algorithm>
#include <map>
#include <regex>
#include <utility>

namespace troupe::protocol::reflexr {

namespace {

json_schema::problem value_error(std::vector<std::string> loc, const std::string& message) {
  return {std::move(loc), "Value error, " + message, "value_error"};
}

// Replaces the schema's problems inside an event with the registry's own check (WS-13), which knows
// the declared type's fields.
void check_event(const json::value& event, std::vector<std::string> loc, const event_registry& types,
                 problems& out) {
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const json_schema::problem& p) {
                             return p.loc.size() >= loc.size() && std::equal(loc.begin(), loc.end(), p.loc.begin());
                           }),
            out.end());
  auto found = types.check(event);
  if (!found.empty())
    out.push_back(value_error(std::move(loc), invalid_event_message(event, found)));
}

std::shared_ptr<json::document> parse_object(std::string_view text, problems& out) {
  auto parsed = json::parse_body(text);
  if (auto failure = std::get_if<json::parse_failure>(&parsed)) {
    using reason = json::parse_failure::reason;
    if (failure->why == reason::repeated_member) {
      auto loc = failure->path;
      loc.push_back(failure->member);
      out.push_back({loc, failure->message(), "json_invalid"});
    } else
      out.push_back({{}, failure->why == reason::syntax ? "JSON decode error" : failure->message(), "json_invalid"});
    return nullptr;
  }
  return std::make_shared<json::document>(std::move(std::get<json::document>(parsed)));
}

std::string published(int64_t seq, const std::string& id, bool duplicate) {
  return json::object([&](json::writer& w) {
    w.Key("type");
    w.String("published");
    w.Key("seq");
    w.Int64(seq);
    w.Key("id");
    w.String(id);
    w.Key("duplicate");
    w.Bool(duplicate);
  });
}

std::string actor_json(const workspace_actor& a) {
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  write_actor(w, a);
  return std::string(buf.GetString(), buf.GetSize());
}

// Appends envelopes for one command: ids seen earlier in the same command count as in the log.
class appender {
public:
  appender(const command_context& ctx, log_reader& log) : ctx_(ctx), log_(log) {
    next_seq_ = log.head() + 1;
    last_ts_ = log.last_ts();
    actor_ = actor_json(ctx.actor);
  }

  std::optional<chain_link> find(const std::string& id) {
    if (auto it = pending_.find(id); it != pending_.end())
      return it->second;
    return log_.find(id);
  }

  // WS-30: the chain a correlation id names, or the rejection.
  std::optional<rejection> check_chain(const std::string& correlation_id) {
    auto first = find(correlation_id);
    if (!first)
      return not_found("chain", correlation_id);
    if (first->correlation_id != correlation_id)
      return validation_failed("event " + correlation_id + " did not start a causal chain: it belongs to chain "
                               + first->correlation_id);
    return std::nullopt;
  }

  envelope& append(std::string id, const json::value& event, std::string correlation_id) {
    envelope e;
    e.seq = next_seq_++;
    e.id = std::move(id);
    // WS-16: never before the previous envelope.
    e.ts = std::max(ctx_.now, last_ts_);
    last_ts_ = e.ts;
    e.workspace_id = ctx_.workspace_id;
    e.actor = actor_;
    e.correlation_id = correlation_id.empty() ? e.id : std::move(correlation_id);
    e.traceparent = ctx_.traceparent;
    e.event = json::serialize(event);
    e.type = json::get_string(event, "type");
    pending_[e.id] = {e.seq, e.correlation_id};
    appended_.push_back(std::move(e));
    return appended_.back();
  }

  std::vector<envelope> take() { return std::move(appended_); }

private:
  const command_context& ctx_;
  log_reader& log_;
  int64_t next_seq_ = 1;
  std::string last_ts_;
  std::string actor_;
  std::map<std::string, chain_link> pending_;
  std::vector<envelope> appended_;
};

struct publish_item {
  const json::value* event;
  std::string id;
};

// WS-28 (1)-(4): the checks made before the transaction.
std::optional<rejection> check_publishable(const json::value& event, const event_registry& types) {
  auto type = json::get_string(event, "type");
  if (auto why = type_name_rejection(type, types.known_types()))
    return validation_failed(*why);
  auto declared = types.find(type);
  if (!declared)
    return not_found("event type", type);
  if (declared->fact())
    return forbidden(type + " events are recorded by reflexr, not published");
  if (declared->published_by_runs)
    return forbidden(type + " events are published by runs, not clients");
  return std::nullopt;
}

effect publish(const std::vector<publish_item>& items, const std::string& correlation_id,
               const command_context& ctx, log_reader& log) {
  effect out;
  for (auto& item : items)
    if (auto r = check_publishable(*item.event, *ctx.types)) {
      out.rejected = std::move(r);
      return out;
    }
  appender a(ctx, log);
  if (!correlation_id.empty())
    if (auto r = a.check_chain(correlation_id)) {
      out.rejected = std::move(r);
      return out;
    }
  for (auto& item : items) {
    if (!item.id.empty())
      if (auto existing = a.find(item.id)) {
        out.outcomes.push_back(published(existing->seq, item.id, true));
        out.max_seq = std::max(out.max_seq, existing->seq);
        continue;
      }
    auto& e = a.append(item.id.empty() ? new_event_id() : item.id, *item.event, correlation_id);
    out.outcomes.push_back(published(e.seq, e.id, false));
    out.max_seq = std::max(out.max_seq, e.seq);
  }
  out.appended = a.take();
  return out;
}

// WS-32.
effect give_feedback(const json::value& cmd, const command_context& ctx, log_reader& log) {
  effect out;
  auto name = json::get_string(cmd, "feedback_type");
  auto type = ctx.types->find_feedback(name);
  if (!type) {
    out.rejected = not_found("feedback type", name);
    return out;
  }
  auto& target = *json::member(cmd, "target");
  auto kind = json::get_string(target, "kind");
  if (!std::binary_search(type->targets.begin(), type->targets.end(), kind)) {
    std::string allowed;
    for (auto& t : type->targets)
      allowed += (allowed.empty() ? "" : ", ") + t;
    out.rejected = validation_failed(name + " feedback is given on " + allowed + ", not on a " + kind);
    return out;
  }
  auto& value = *json::member(cmd, "value");
  auto bad = json_schema::validate(*type->value, value);
  if (!bad.empty()) {
    out.rejected = validation_failed("invalid " + name + " feedback", std::move(bad));
    return out;
  }
  // No runs or firings exist until rules do: such targets are unknown.
  if (kind == "run" || kind == "firing") {
    out.rejected = not_found(kind, json::get_string(target, kind == "run" ? "run_id" : "firing_id"));
    return out;
  }
  auto chain = json::get_string(target, "correlation_id");
  appender a(ctx, log);
  if (auto r = a.check_chain(chain)) {
    out.rejected = std::move(r);
    return out;
  }
  json::document fact;
  fact.SetObject();
  auto& alloc = fact.GetAllocator();
  fact.AddMember("type", "reflexr:feedback_given", alloc);
  fact.AddMember("feedback_type", json::value(name.c_str(), alloc), alloc);
  fact.AddMember("target", json::value(target, alloc), alloc);
  fact.AddMember("value", json::value(value, alloc), alloc);
  auto& e = a.append(new_event_id(), fact, chain);
  out.outcomes.push_back(json::object([&](json::writer& w) {
    w.Key("type");
    w.String("recorded");
    w.Key("seq");
    w.Int64(e.seq);
    w.Key("id");
    w.String(e.id);
  }));
  out.max_seq = e.seq;
  out.appended = a.take();
  return out;
}

} // namespace

rejection not_found(std::string entity, std::string id) {
  rejection r;
  r.what = {errc::not_found, entity + " " + id + " does not exist", {}, "not_found"};
  r.entity = std::move(entity);
  r.id = std::move(id);
  return r;
}

rejection validation_failed(std::string message, problems errors) {
  rejection r;
  r.what = {errc::validation_failed, std::move(message), {}, "validation_failed", std::move(errors)};
  return r;
}

rejection forbidden(std::string message) {
  rejection r;
  r.what = {errc::forbidden, std::move(message), {}, "forbidden"};
  return r;
}

int http_status(const rejection& r) {
  return protocol::http_status(r.what.code);
}

std::string rejection_json(const rejection& r) {
  auto& kind = r.what.kind;
  if (kind != "not_found" && kind != "depth_exceeded")
    return rejection_object(r.what);
  return json::object([&](json::writer& w) {
    w.Key("type");
    w.String(kind);
    w.Key("message");
    w.String(r.what.message);
    if (kind == "not_found") {
      w.Key("entity");
      w.String(r.entity);
      w.Key("id");
      w.String(r.id);
    } else {
      w.Key("depth");
      w.Int64(r.depth);
      w.Key("limit");
      w.Int64(r.limit);
    }
  });
}

std::string rejection_detail(const rejection& r) {
  return "{\"detail\":" + rejection_json(r) + "}";
}

troupe::problem invalid_frame(problems p) {
  return {errc::validation_failed, {}, {}, "validation_failed", std::move(p)};
}

std::string first_problem(const problems& p) {
  if (p.empty())
    return "invalid frame";
  std::string loc;
  for (auto& part : p[0].loc)
    loc += (loc.empty() ? "" : ".") + part;
  return loc.empty() ? p[0].msg : loc + ": " + p[0].msg;
}

std::variant<command_request, problems> parse_command_frame(std::string_view text, const event_registry& types) {
  problems out;
  auto doc = parse_object(text, out);
  if (!doc)
    return out;
  out = check(*doc, "CommandFrame");
  auto command = json::member(*doc, "command");
  if (command && json::get_string(*command, "type") == "publish")
    if (auto event = json::member(*command, "event"))
      check_event(*event, {"command", "event"}, types, out);
  if (!out.empty())
    return out;
  command_request r;
  r.command_id = json::get_string(*doc, "command_id");
  auto body = std::make_shared<json::document>();
  body->CopyFrom(*command, body->GetAllocator());
  r.body = std::move(body);
  return r;
}

std::variant<command_request, problems> parse_publish_body(std::string_view text, const event_registry& types) {
  problems out;
  auto doc = parse_object(text, out);
  if (!doc)
    return out;
  if (!doc->IsObject())
    return problems{{{}, "Input should be a valid dictionary", "dict_type"}};
  auto check_item = [&](const json::value& item, std::vector<std::string> loc) {
    if (!item.IsObject()) {
      out.push_back({loc, "Input should be a valid dictionary", "dict_type"});
      return;
    }
    for (auto m = item.MemberBegin(); m != item.MemberEnd(); ++m) {
      std::string key = m->name.GetString();
      auto at = loc;
      at.push_back(key);
      if (key == "id") {
        if (!m->value.IsString() && !m->value.IsNull()) // null: absent (WS-3)
          out.push_back({at, "Input should be a valid string", "string_type"});
      } else if (key == "event") {
        check_event(m->value, at, types, out);
      } else if (key != "correlation_id" || loc.size() > 1) {
        out.push_back({at, "Extra inputs are not permitted", "extra_forbidden"});
      }
    }
    if (!item.HasMember("event")) {
      loc.push_back("event");
      out.push_back({loc, "Field required", "missing"});
    }
  };
  bool batch = doc->HasMember("events");
  if (batch) {
    auto& events = (*doc)["events"];
    for (auto m = doc->MemberBegin(); m != doc->MemberEnd(); ++m) {
      std::string key = m->name.GetString();
      if (key == "correlation_id" && !m->value.IsString() && !m->value.IsNull())
        out.push_back({{"body", key}, "Input should be a valid string", "string_type"});
      else if (key != "events" && key != "correlation_id")
        out.push_back({{"body", key}, "Extra inputs are not permitted", "extra_forbidden"});
    }
    if (!events.IsArray())
      out.push_back({{"body", "events"}, "Input should be a valid list", "list_type"});
    else
      for (rapidjson::SizeType i = 0; i < events.Size(); ++i) {
        auto& item = events[i];
        if (item.IsObject() && item.HasMember("correlation_id"))
          out.push_back({{"body", "events", std::to_string(i), "correlation_id"}, "Extra inputs are not permitted",
                         "extra_forbidden"});
        check_item(item, {"body", "events", std::to_string(i)});
      }
  } else {
    // The single form takes no correlation_id (WS-63).
    check_item(*doc, {"body"});
    if (doc->HasMember("correlation_id"))
      out.push_back({{"body", "correlation_id"}, "Extra inputs are not permitted", "extra_forbidden"});
  }
  if (!out.empty())
    return out;
  command_request r;
  r.publish_body = true;
  r.body = std::move(doc);
  return r;
}

effect carry_out(const command_request& request, const command_context& ctx, log_reader& log) {
  auto& body = *request.body;
  if (request.publish_body) {
    std::vector<publish_item> items;
    if (auto events = json::member(body, "events"))
      for (auto& item : events->GetArray())
        items.push_back({json::member(item, "event"), json::get_string(item, "id")});
    else
      items.push_back({json::member(body, "event"), json::get_string(body, "id")});
    return publish(items, json::get_string(body, "correlation_id"), ctx, log);
  }
  auto type = json::get_string(body, "type");
  if (type == "publish")
    return publish({{json::member(body, "event"), json::get_string(body, "id")}},
                   json::get_string(body, "correlation_id"), ctx, log);
  if (type == "give_feedback")
    return give_feedback(body, ctx, log);
  effect out;
  // Rules and runs arrive with a later capability; until then nothing they name exists (WS-33..WS-35).
  if (type == "retry_run" || type == "skip_run" || type == "cancel_run")
    out.rejected = not_found("run", json::get_string(body, "run_id"));
  else if (type == "replay_rule")
    out.rejected = not_found("rule", json::get_string(body, "rule"));
  else
    out.rejected = forbidden("stored rules are off in these workspaces");
  return out;
}

std::string command_result_json(const std::string& command_id, const effect& e) {
  return json::object([&](json::writer& w) {
    w.Key("type");
    w.String("command_result");
    w.Key("command_id");
    w.String(command_id);
    w.Key("ok");
    w.Bool(!e.rejected);
    w.Key("outcome");
    if (e.rejected || e.outcomes.empty())
      w.Null();
    else
      json::write_raw(w, e.outcomes.front());
    w.Key("rejection");
    if (e.rejected)
      json::write_raw(w, rejection_json(*e.rejected));
    else
      w.Null();
  });
}

std::optional<workspace_caller> authenticate(std::string_view authorization, const workspaces_config& config,
                                             const std::vector<std::string>& service_tokens, bool open) {
  workspace_caller caller;
  caller.actor.kind = "user";
  if (open) {
    caller.tenant = "default";
    caller.actor.id = "local";
    return caller;
  }
  auto token = presented_token(authorization, "");
  if (token.empty())
    return std::nullopt;
  if (token_accepted(service_tokens, token)) {
    caller.tenant = "default";
    caller.actor.id = "service";
    return caller;
  }
  auto digest = sha256_hex(token);
  for (auto& c : config.credentials)
    if (token_accepted({c.token_sha256}, digest)) {
      caller.tenant = c.tenant;
      caller.actor = c.actor;
      caller.all_workspaces = c.all_workspaces;
      caller.workspaces = c.workspaces;
      return caller;
    }
  return std::nullopt;
}

bool may_use(const workspace_caller& caller, std::string_view workspace_id) {
  return caller.all_workspaces
         || std::find(caller.workspaces.begin(), caller.workspaces.end(), workspace_id) != caller.workspaces.end();
}

bool is_workspace_id(std::string_view id) {
  static const std::regex pattern("^[a-z0-9][a-z0-9_-]{0,63}$");
  return std::regex_match(id.begin(), id.end(), pattern);
}

} // namespace troupe::protocol::reflexr

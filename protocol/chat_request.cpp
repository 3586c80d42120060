#include "protocol/chat_request.hpp"

#include "protocol/digest_guard.hpp"
#include "protocol/ids.hpp"
#include "protocol/json.hpp"

#include <cerrno>
#include <cstdlib>

namespace troupe::protocol {

namespace {

using issues = std::vector<validation_issue>;

const char* json_type_name(const json::value& v) {
  if (v.IsNull())
    return "null";
  if (v.IsBool())
    return "boolean";
  if (v.IsNumber())
    return "number";
  if (v.IsString())
    return "string";
  if (v.IsArray())
    return "array";
  return "object";
}

void type_issue(issues& out, std::vector<std::string> loc, const char* expected, const json::value& got) {
  out.push_back({std::move(loc), std::string("Input should be a valid ") + expected + ", got "
                                     + json_type_name(got),
                 std::string(expected) + "_type"});
}

// Reads the content of a message: a string, null, or text parts joined with "\n" (AS-9).
bool read_content(const json::value& v, chat_message& m, issues& out, const std::string& index) {
  if (v.IsNull()) {
    m.content_null = true;
    return true;
  }
  if (v.IsString()) {
    m.content.assign(v.GetString(), v.GetStringLength());
    return true;
  }
  if (v.IsArray()) {
    bool first = true;
    for (auto& part : v.GetArray()) {
      std::string text;
      if (part.IsString())
        text.assign(part.GetString(), part.GetStringLength());
      else if (part.IsObject())
        text = json::get_string(part, "text");
      else {
        type_issue(out, {"body", "messages", index, "content"}, "string", part);
        return false;
      }
      if (!first)
        m.content += '\n';
      m.content += text;
      first = false;
    }
    return true;
  }
  type_issue(out, {"body", "messages", index, "content"}, "string", v);
  return false;
}

void read_tool_calls(const json::value& v, chat_message& m) {
  if (!v.IsArray())
    return;
  for (auto& c : v.GetArray()) {
    tool_call call;
    call.id = json::get_string(c, "id");
    auto fn = json::member(c, "function");
    if (fn) {
      call.name = json::get_string(*fn, "name");
      auto args = json::member(*fn, "arguments");
      if (args && args->IsString())
        call.arguments.assign(args->GetString(), args->GetStringLength());
      else if (args && args->IsObject())
        call.arguments = json::serialize(*args);
    }
    m.tool_calls.push_back(std::move(call));
  }
}

// AS-25: `skills` is a list of names; each a non-empty string, the list and the names bounded.
void read_skill_names(const json::value& v, issues& out, std::optional<std::vector<std::string>>& into) {
  if (!v.IsArray()) {
    out.push_back({{"body", "skills"}, "Input should be a valid list", "list_type"});
    return;
  }
  if (v.Size() > max_requested_skills) {
    out.push_back({{"body", "skills"},
                   "List should have at most " + std::to_string(max_requested_skills) + " items after validation, not "
                     + std::to_string(v.Size()),
                   "too_long"});
    return;
  }
  std::vector<std::string> names;
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    auto& name = v[i];
    std::vector<std::string> loc{"body", "skills", std::to_string(i)};
    if (!name.IsString())
      type_issue(out, std::move(loc), "string", name);
    else if (name.GetStringLength() == 0)
      out.push_back({std::move(loc), "String should have at least 1 character", "string_too_short"});
    else if (name.GetStringLength() > max_skill_name_bytes)
      out.push_back({std::move(loc), "String should have at most " + std::to_string(max_skill_name_bytes) + " characters",
                     "string_too_long"});
    else
      names.emplace_back(name.GetString(), name.GetStringLength());
  }
  into = std::move(names);
}

bool valid_role(std::string_view r) {
  return r == "system" || r == "user" || r == "assistant" || r == "tool";
}

} // namespace

request_error body_refusal(const json::parse_failure& failure) {
  using reason = json::parse_failure::reason;
  switch (failure.why) {
    case reason::syntax:
      return invalid({{{"body"}, "JSON decode error", "json_invalid"}});
    case reason::repeated_member: {
      std::vector<std::string> loc{"body"};
      loc.insert(loc.end(), failure.path.begin(), failure.path.end());
      loc.push_back(failure.member);
      return invalid({{loc, failure.message(), "json_invalid"}});
    }
    case reason::too_deep:
    case reason::invalid_utf8:
      break;
  }
  return bad_request(failure.message());
}

std::variant<chat_request, request_error> parse_chat_request(std::string_view body, request_kind kind) {
  auto parsed = json::parse_body(body);
  if (auto failure = std::get_if<json::parse_failure>(&parsed))
    return body_refusal(*failure);
  auto doc = &std::get<json::document>(parsed);
  if (!doc->IsObject())
    return request_error{invalid({{{"body"}, "Input should be a valid dictionary", "dict_type"}})};
  issues bad;
  chat_request req;
  std::vector<chat_message> messages;
  auto msgs = json::member(*doc, "messages");
  if (!msgs)
    bad.push_back({{"body", "messages"}, "Field required", "missing"});
  else if (!msgs->IsArray())
    type_issue(bad, {"body", "messages"}, "list", *msgs);
  else if (msgs->Size() > max_messages)
    bad.push_back({{"body", "messages"},
                   "List should have at most " + std::to_string(max_messages) + " items after validation, not "
                     + std::to_string(msgs->Size()),
                   "too_long"});
  else {
    std::size_t i = 0;
    for (auto& m : msgs->GetArray()) {
      auto index = std::to_string(i++);
      if (!m.IsObject()) {
        type_issue(bad, {"body", "messages", index}, "dictionary", m);
        continue;
      }
      chat_message msg;
      auto role = json::member(m, "role");
      if (!role || !role->IsString() || !valid_role(role->GetString())) {
        bad.push_back({{"body", "messages", index, "role"},
                       "Input should be 'system', 'user', 'assistant' or 'tool'", "literal_error"});
        continue;
      }
      msg.role = role->GetString();
      auto content = json::member(m, "content");
      if (content && !read_content(*content, msg, bad, index))
        continue;
      if (!content)
        msg.content_null = true;
      if (auto calls = json::member(m, "tool_calls"))
        read_tool_calls(*calls, msg);
      msg.tool_call_id = json::get_string(m, "tool_call_id");
      msg.name = json::get_string(m, "name");
      messages.push_back(std::move(msg));
    }
  }

  auto read_bool = [&](const char* key, bool& into) {
    if (auto v = json::member(*doc, key); v && !v->IsNull()) {
      if (v->IsBool())
        into = v->GetBool();
      else
        type_issue(bad, {"body", key}, "boolean", *v);
    }
  };
  auto read_string = [&](const char* key, std::optional<std::string>& into) {
    if (auto v = json::member(*doc, key); v && !v->IsNull()) {
      if (v->IsString())
        into = std::string(v->GetString(), v->GetStringLength());
      else
        type_issue(bad, {"body", key}, "string", *v);
    }
  };
  auto read_range = [&](const char* key, std::optional<double>& into, double lo, double hi) {
    auto v = json::member(*doc, key);
    if (!v || v->IsNull())
      return;
    if (!v->IsNumber()) {
      type_issue(bad, {"body", key}, "number", *v);
      return;
    }
    double x = v->GetDouble();
    if (x < lo)
      bad.push_back({{"body", key}, "Input should be greater than or equal to " + json::serialize(json::value(lo)),
                     "greater_than_equal"});
    else if (x > hi)
      bad.push_back({{"body", key}, "Input should be less than or equal to " + json::serialize(json::value(hi)),
                     "less_than_equal"});
    else
      into = x;
  };

  read_bool("stream", req.stream);
  std::optional<std::string> session_id, user_key;
  read_string("session_id", session_id);
  read_string("user_key", user_key);
  read_string("model", req.model);
  read_string("on_disconnect", req.on_disconnect);
  read_range("temperature", req.temperature, 0.0, 2.0);
  read_range("top_p", req.top_p, 0.0, 1.0);
  if (auto v = json::member(*doc, "max_tokens"); v && !v->IsNull()) {
    if (!v->IsInt64())
      type_issue(bad, {"body", "max_tokens"}, "integer", *v);
    else if (v->GetInt64() <= 0)
      bad.push_back({{"body", "max_tokens"}, "Input should be greater than 0", "greater_than"});
    else
      req.max_tokens = v->GetInt64();
  }
  if (auto v = json::member(*doc, "skills"); v && !v->IsNull())
    read_skill_names(*v, bad, req.skills);
  auto metadata = json::member(*doc, "metadata");
  if (metadata && !metadata->IsNull() && !metadata->IsObject())
    type_issue(bad, {"body", "metadata"}, "dictionary", *metadata);
  if (req.on_disconnect && *req.on_disconnect != "cancel" && *req.on_disconnect != "continue")
    bad.push_back({{"body", "on_disconnect"}, "Input should be 'cancel' or 'continue'", "literal_error"});
  // Ids travel in response headers and URLs (X-FastReAct-Run-ID, /v1/runs/{run_id}); names are stored
  // and shown: neither may carry a line break or a NUL.
  auto check_id = [&](std::vector<std::string> loc, const json::value* v) {
    if (v && v->IsString() && v->GetStringLength() > 0 && !is_id_text({v->GetString(), v->GetStringLength()}))
      bad.push_back({std::move(loc), id_text_rule, "string_pattern_mismatch"});
  };
  auto check_name = [&](std::vector<std::string> loc, const json::value* v) {
    if (v && v->IsString() && v->GetStringLength() > 0 && !is_name_text({v->GetString(), v->GetStringLength()}))
      bad.push_back({std::move(loc), name_text_rule, "string_pattern_mismatch"});
  };
  check_id({"body", "session_id"}, json::member(*doc, "session_id"));
  check_name({"body", "user_key"}, json::member(*doc, "user_key"));
  // CJ-18: a background run's priority is an integer in the range; absent or null, it is 0.
  auto priority = metadata && metadata->IsObject() && kind == request_kind::background_run
                    ? json::member(*metadata, "priority")
                    : nullptr;
  if (priority && !priority->IsNull()) {
    static const std::string range_rule = "Input should be an integer from " + std::to_string(min_run_priority)
                                          + " to " + std::to_string(max_run_priority);
    std::vector<std::string> loc{"body", "metadata", "priority"};
    if (!priority->IsInt64())
      bad.push_back({loc, range_rule, "int_type"});
    else if (priority->GetInt64() < min_run_priority)
      bad.push_back({loc, range_rule, "greater_than_equal"});
    else if (priority->GetInt64() > max_run_priority)
      bad.push_back({loc, range_rule, "less_than_equal"});
    else
      req.priority = static_cast<int>(priority->GetInt64());
  }
  if (metadata && metadata->IsObject()) {
    check_id({"body", "metadata", "run_id"}, json::member(*metadata, "run_id"));
    check_name({"body", "metadata", "tenant_key"}, json::member(*metadata, "tenant_key"));
    // AS-70: a digest run's budget is read when its calls come; a wrong one is refused here, naming it.
    if (auto budget = json::member(*metadata, "tool_budget"))
      for (auto& issue : tool_budget_issues(*budget))
        bad.push_back(std::move(issue));
    // AS-23: the run's context size, in tokens.
    if (auto v = json::member(*metadata, "max_context_tokens"); v && !v->IsNull()) {
      if (!v->IsInt64())
        type_issue(bad, {"body", "metadata", "max_context_tokens"}, "integer", *v);
      else if (v->GetInt64() <= 0)
        bad.push_back({{"body", "metadata", "max_context_tokens"}, "Input should be greater than 0", "greater_than"});
      else
        req.max_context_tokens = v->GetInt64();
    }
  }
  if (!bad.empty())
    return request_error{invalid(std::move(bad))};

  // AS-10: 400s come after the 422s, and after AS-8's 403 and 429, which need the caller.
  auto refuse = [&](std::string_view detail) {
    auto err = bad_request(detail);
    err.user_key = user_key.value_or("");
    if (metadata && metadata->IsObject())
      err.tenant_key = json::get_string(*metadata, "tenant_key");
    return err;
  };
  if (messages.empty())
    return refuse("No messages provided");
  std::size_t query_index = messages.size();
  for (std::size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "user" && !messages[i].content.empty()) {
      query_index = i;
      break;
    }
  }
  if (query_index == messages.size())
    return refuse("At least one user message with non-empty content is required");
  req.query = messages[query_index].content;
  messages.resize(query_index);
  req.history = std::move(messages);
  req.session_id = session_id ? *session_id : uuid4();
  req.user_key = user_key.value_or("");

  if (metadata && metadata->IsObject()) {
    req.metadata = json::serialize(*metadata);
    req.run_id = json::get_string(*metadata, "run_id");
    req.tenant_key = json::get_string(*metadata, "tenant_key");
    if (!req.on_disconnect) {
      auto od = json::get_string(*metadata, "on_disconnect");
      if (od == "cancel" || od == "continue")
        req.on_disconnect = od;
    }
    if (auto tp = json::member(*metadata, "tool_policy"))
      req.tool_policy = json::serialize(*tp);
  }
  if (auto tp = json::member(*doc, "tool_policy"); tp && !tp->IsNull())
    req.tool_policy = json::serialize(*tp);
  return req;
}

std::variant<int64_t, request_error> parse_query_integer(const char* key, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  auto v = std::strtoll(text.c_str(), &end, 10);
  if (!text.empty() && errno == 0 && end == text.c_str() + text.size())
    return static_cast<int64_t>(v);
  return request_error{invalid(
    {{{"query", key}, "Input should be a valid integer, unable to parse string as an integer", "int_parsing"}})};
}

request_error bad_request(std::string_view detail) {
  return request_error{problem(errc::bad_request, std::string(detail))};
}

} // namespace troupe::protocol

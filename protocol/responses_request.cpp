#include "protocol/responses_request.hpp"

#include "protocol/ids.hpp"
#include "protocol/utf8.hpp"


#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

namespace troupe::protocol::responses {

namespace {

using json::value;

constexpr std::size_t max_mcp_servers = 64; // per request (RS-30)

std::string got_type(const value& v) {
  if (v.IsNull())
    return "null";
  if (v.IsBool())
    return "a boolean";
  if (v.IsString())
    return "a string";
  if (v.IsObject())
    return "an object";
  if (v.IsArray())
    return "an array";
  if (v.IsInt64() || v.IsUint64())
    return "an integer";
  return "a decimal number";
}

problem bad(std::string param, std::string code, std::string message) {
  return {errc::bad_request, std::move(message), std::move(param), std::move(code)};
}

problem missing(const std::string& param) {
  return bad(param, "missing_required_parameter", "Missing required parameter: '" + param + "'.");
}

problem wrong_type(const std::string& param, const char* expected, const value& v) {
  return bad(param, "invalid_type",
             "Invalid type for '" + param + "': expected " + expected + ", but got " + got_type(v) + " instead.");
}

problem invalid_value(const std::string& param, const std::string& v) {
  return bad(param, "invalid_value", "Invalid value for '" + param + "': '" + v + "'.");
}

bool is_integer(const value& v) {
  return v.IsInt64() || v.IsUint64();
}

// An integer field within [min, max]; nullopt and `err` set when it is not.
std::optional<int64_t> integer_in(const value& v, const std::string& param, int64_t min, int64_t max,
                                  std::optional<problem>& err) {
  if (!is_integer(v)) {
    err = wrong_type(param, "an integer", v);
    return std::nullopt;
  }
  if (v.IsUint64() && !v.IsInt64()) {
    err = bad(param, "integer_above_max_value",
              "Invalid '" + param + "': integer above maximum value. Expected a value <= " + std::to_string(max)
                + ", but got " + json::serialize(v) + " instead.");
    return std::nullopt;
  }
  auto n = v.GetInt64();
  if (n < min) {
    err = bad(param, "integer_below_min_value",
              "Invalid '" + param + "': integer below minimum value. Expected a value >= " + std::to_string(min)
                + ", but got " + std::to_string(n) + " instead.");
    return std::nullopt;
  }
  if (n > max) {
    err = bad(param, "integer_above_max_value",
              "Invalid '" + param + "': integer above maximum value. Expected a value <= " + std::to_string(max)
                + ", but got " + std::to_string(n) + " instead.");
    return std::nullopt;
  }
  return n;
}

std::optional<double> number_in(const value& v, const std::string& param, double min, double max,
                                std::optional<problem>& err) {
  if (!v.IsNumber()) {
    err = wrong_type(param, "a number", v);
    return std::nullopt;
  }
  auto n = v.GetDouble();
  auto bound = [&](const char* which, const char* op, double limit) {
    auto text = json::serialize(value(limit));
    if (limit == std::floor(limit))
      text = std::to_string(static_cast<int64_t>(limit));
    err = bad(param, std::string("decimal_") + which + "_value",
              "Invalid '" + param + "': decimal " + (std::string(which) == "below_min" ? "below minimum" : "above maximum")
                + " value. Expected a value " + op + " " + text + ", but got " + json::serialize(v) + " instead.");
  };
  if (n < min) {
    bound("below_min", ">=", min);
    return std::nullopt;
  }
  if (n > max) {
    bound("above_max", "<=", max);
    return std::nullopt;
  }
  return n;
}

std::string str(const value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

const std::regex& name_pattern() {
  static const std::regex re("^[A-Za-z0-9_-]{1,64}$");
  return re;
}

const std::set<std::string>& input_types() {
  static const std::set<std::string> types = {
    "message",        "function_call",  "function_call_output", "reasoning",           "mcp_approval_response",
    "mcp_approval_request", "mcp_list_tools", "mcp_call",       "compaction",          "item_reference"};
  return types;
}

// One input item (RS-14), or the error naming its field.
std::variant<item, problem> parse_input_item(const value& v, const std::string& at) {
  if (!v.IsObject())
    return wrong_type(at, "an object", v);
  auto type_v = json::member(v, "type");
  std::string type = "message";
  if (type_v) {
    if (!type_v->IsString())
      return wrong_type(at + ".type", "a string", *type_v);
    type = str(*type_v);
  }
  if (!input_types().count(type))
    return invalid_value(at + ".type", type);
  if (auto id = json::member(v, "id"); id && !id->IsString())
    return wrong_type(at + ".id", "a string", *id);
  if (type == "item_reference") {
    auto id = json::get_string(v, "id");
    if (id.empty())
      return missing(at + ".id");
    item it;
    it.type = type;
    it.id = id;
    return it;
  }
  auto it = item_from_json(v);
  it.type = type;
  auto require_string = [&](const char* key) -> std::optional<problem> {
    auto f = json::member(v, key);
    if (!f)
      return missing(at + "." + key);
    if (!f->IsString())
      return wrong_type(at + "." + key, "a string", *f);
    return std::nullopt;
  };
  if (type == "message") {
    static const std::set<std::string> roles = {"user", "system", "developer", "assistant"};
    auto role = json::member(v, "role");
    if (!role)
      return missing(at + ".role");
    if (!role->IsString() || !roles.count(str(*role)))
      return invalid_value(at + ".role", role->IsString() ? str(*role) : json::serialize(*role));
    auto content = json::member(v, "content");
    if (!content)
      return missing(at + ".content");
    if (!content->IsString() && !content->IsArray())
      return wrong_type(at + ".content", "an array", *content);
    if (content->IsArray()) {
      std::size_t i = 0;
      for (auto& part : content->GetArray()) {
        auto p = at + ".content[" + std::to_string(i++) + "]";
        if (!part.IsObject())
          return wrong_type(p, "an object", part);
        static const std::set<std::string> parts = {"input_text", "output_text", "refusal", "input_image"};
        auto pt = json::get_string(part, "type");
        if (!parts.count(pt))
          return invalid_value(p + ".type", pt);
        if (pt == "input_image" && json::get_string(part, "image_url").empty())
          return missing(p + ".image_url");
      }
    }
    it.status = "completed";
  } else if (type == "function_call") {
    for (auto key : {"call_id", "name", "arguments"})
      if (auto err = require_string(key))
        return *err;
    if (it.status.empty())
      it.status = "completed";
  } else if (type == "function_call_output") {
    if (auto err = require_string("call_id"))
      return *err;
    auto out = json::member(v, "output");
    if (!out)
      return missing(at + ".output");
    if (!out->IsString() && !out->IsArray())
      return wrong_type(at + ".output", "a string", *out);
    it.status = "completed";
  } else if (type == "mcp_approval_response") {
    if (auto err = require_string("approval_request_id"))
      return *err;
    auto approve = json::member(v, "approve");
    if (!approve)
      return missing(at + ".approve");
    if (!approve->IsBool())
      return wrong_type(at + ".approve", "a boolean", *approve);
  } else if (type == "compaction") {
    if (auto err = require_string("encrypted_content"))
      return *err;
  }
  if (it.id.empty())
    it.id = mint_item_id(type);
  return it;
}

std::variant<std::vector<item>, problem> parse_input(const value& body) {
  std::vector<item> out;
  auto input = json::member(body, "input");
  if (!input || input->IsNull())
    return out;
  if (input->IsString()) {
    item it;
    it.type = "message";
    it.id = mint_item_id("message");
    it.role = "user";
    it.status = "completed";
    it.content.push_back({"input_text", str(*input), {}, "auto"});
    out.push_back(std::move(it));
    return out;
  }
  if (!input->IsArray())
    return wrong_type("input", "an array", *input);
  std::size_t i = 0;
  for (auto& entry : input->GetArray()) {
    auto parsed = parse_input_item(entry, "input[" + std::to_string(i++) + "]");
    if (auto err = std::get_if<problem>(&parsed))
      return *err;
    out.push_back(std::move(std::get<item>(parsed)));
  }
  return out;
}

const std::set<std::string>& includable() {
  static const std::set<std::string> values = {
    "message.output_text.logprobs", "reasoning.encrypted_content",   "web_search_call.action.sources",
    "web_search_call.results",      "file_search_call.results",      "message.input_image.image_url"};
  return values;
}

std::optional<problem> parse_tools(const value& tools, request& r) {
  if (!tools.IsArray())
    return wrong_type("tools", "an array", tools);
  rapidjson::Document echo(rapidjson::kArrayType);
  auto& alloc = echo.GetAllocator();
  std::set<std::string> names;
  std::set<std::string> labels;
  std::size_t i = 0;
  for (auto& t : tools.GetArray()) {
    auto at = "tools[" + std::to_string(i) + "]";
    if (!t.IsObject())
      return wrong_type(at, "an object", t);
    auto type_v = json::member(t, "type");
    if (!type_v)
      return missing(at + ".type");
    if (!type_v->IsString())
      return wrong_type(at + ".type", "a string", *type_v);
    auto type = str(*type_v);
    value copy(t, alloc);
    if (type == "function") {
      auto name_v = json::member(t, "name");
      if (!name_v)
        return missing(at + ".name");
      if (!name_v->IsString())
        return wrong_type(at + ".name", "a string", *name_v);
      auto name = str(*name_v);
      if (!std::regex_match(name, name_pattern()) || name.rfind("mcp__", 0) == 0 || !names.insert(name).second)
        return invalid_value(at + ".name", name);
      function_tool f;
      f.name = name;
      f.description = json::get_string(t, "description");
      if (auto p = json::member(t, "parameters"); p && !p->IsNull()) {
        if (!p->IsObject())
          return wrong_type(at + ".parameters", "an object", *p);
        f.parameters = json::serialize(*p);
      }
      if (auto s = json::member(t, "strict"); s && !s->IsNull()) {
        if (!s->IsBool())
          return wrong_type(at + ".strict", "a boolean", *s);
        f.strict = s->GetBool() ? "true" : "false";
      }
      r.functions.push_back(std::move(f));
    } else if (type == "mcp") {
      auto label_v = json::member(t, "server_label");
      if (!label_v)
        return missing(at + ".server_label");
      if (!label_v->IsString())
        return wrong_type(at + ".server_label", "a string", *label_v);
      mcp_declaration d;
      d.index = i;
      d.server_label = str(*label_v);
      if (d.server_label.empty() || !labels.insert(d.server_label).second)
        return invalid_value(at + ".server_label", d.server_label);
      if (auto u = json::member(t, "server_url"); u && !u->IsNull()) {
        if (!u->IsString())
          return wrong_type(at + ".server_url", "a string", *u);
        d.server_url = str(*u);
      }
      if (auto a = json::member(t, "require_approval"); a && !a->IsNull()) {
        bool ok = (a->IsString() && (str(*a) == "always" || str(*a) == "never")) || a->IsObject();
        if (!ok)
          return invalid_value(at + ".require_approval", a->IsString() ? str(*a) : json::serialize(*a));
        d.require_approval = json::serialize(*a);
      }
      if (auto a = json::member(t, "allowed_tools"); a && !a->IsNull()) {
        if (!a->IsArray() && !a->IsObject())
          return wrong_type(at + ".allowed_tools", "an array", *a);
        d.allowed_tools = json::serialize(*a);
      }
      if (auto h = json::member(t, "headers"); h && !h->IsNull()) {
        if (!h->IsObject())
          return wrong_type(at + ".headers", "an object", *h);
        d.headers = json::serialize(*h);
      }
      d.authorization = json::get_string(t, "authorization");
      // Credentials go only to the MCP server: never echoed, never stored (RS-15).
      copy.RemoveMember("headers");
      copy.RemoveMember("authorization");
      r.mcp.push_back(std::move(d));
    } else {
      return bad(at + ".type", "invalid_value", "Tool type '" + type + "' is not enabled on this server.");
    }
    echo.PushBack(copy, alloc);
    ++i;
  }
  if (r.mcp.size() > max_mcp_servers)
    return bad("tools", "invalid_value",
               "A request may declare at most " + std::to_string(max_mcp_servers) + " MCP servers; it declares "
                 + std::to_string(r.mcp.size()) + ".");
  r.tools_echo = json::serialize(echo);
  return std::nullopt;
}

std::optional<problem> parse_tool_choice(const value& v, request& r) {
  if (v.IsString()) {
    auto mode = str(v);
    if (mode != "none" && mode != "auto" && mode != "required")
      return invalid_value("tool_choice", mode);
    r.choice.mode = mode;
  } else if (v.IsObject()) {
    auto type = json::get_string(v, "type");
    if (type == "function") {
      auto name = json::get_string(v, "name");
      bool known = std::any_of(r.functions.begin(), r.functions.end(), [&](auto& f) { return f.name == name; });
      if (!known)
        return invalid_value("tool_choice.name", name);
      r.choice = {"function", name, {}};
    } else if (type == "mcp") {
      auto label = json::get_string(v, "server_label");
      bool known = std::any_of(r.mcp.begin(), r.mcp.end(), [&](auto& d) { return d.server_label == label; });
      if (!known)
        return invalid_value("tool_choice.server_label", label);
      r.choice = {"mcp", json::get_string(v, "name"), label};
    } else {
      return invalid_value("tool_choice.type", type);
    }
  } else {
    return wrong_type("tool_choice", "an object", v);
  }
  r.tool_choice_echo = json::serialize(v);
  return std::nullopt;
}

std::optional<problem> parse_text(const value& v, request& r) {
  if (!v.IsObject())
    return wrong_type("text", "an object", v);
  if (auto f = json::member(v, "format"); f && !f->IsNull()) {
    if (!f->IsObject())
      return wrong_type("text.format", "an object", *f);
    auto type = json::get_string(*f, "type");
    if (type == "json_schema") {
      auto name = json::member(*f, "name");
      if (!name)
        return missing("text.format.name");
      if (!name->IsString() || !std::regex_match(str(*name), name_pattern()))
        return invalid_value("text.format.name", name->IsString() ? str(*name) : json::serialize(*name));
      auto schema = json::member(*f, "schema");
      if (!schema)
        return missing("text.format.schema");
      if (!schema->IsObject())
        return wrong_type("text.format.schema", "an object", *schema);
    } else if (type != "text" && type != "json_object") {
      return invalid_value("text.format.type", type);
    }
  }
  r.text = json::serialize(v);
  return std::nullopt;
}

// The fields POST /v1/responses and /compact share, plus the rest of /v1/responses when `full`.
std::variant<request, problem> parse(std::string_view text, bool full, int64_t default_threshold) {
  auto parsed = parse_json_body(text);
  if (auto err = std::get_if<problem>(&parsed))
    return *err;
  auto doc = &std::get<json::document>(parsed);
  if (!doc->IsObject())
    return bad({}, "invalid_type", "Invalid type for the request body: expected an object.");
  const value& body = *doc;
  request r;
  std::optional<problem> err;
  auto model = json::member(body, "model");
  if (!model)
    return missing("model");
  if (!model->IsString())
    return wrong_type("model", "a string", *model);
  r.model = str(*model);
  auto input = parse_input(body);
  if (auto e = std::get_if<problem>(&input))
    return *e;
  r.input = std::move(std::get<std::vector<item>>(input));
  if (auto v = json::member(body, "input"); v && v->IsArray())
    for (auto& entry : v->GetArray())
      r.input_has_ids = r.input_has_ids || json::member(entry, "id");
  if (auto v = json::member(body, "instructions"); v && !v->IsNull()) {
    if (!v->IsString())
      return wrong_type("instructions", "a string", *v);
    r.instructions = str(*v);
  }
  if (auto v = json::member(body, "previous_response_id"); v && !v->IsNull()) {
    if (!v->IsString())
      return wrong_type("previous_response_id", "a string", *v);
    r.previous_response_id = str(*v);
  }
  if (!full) {
    if (r.input.empty() && r.previous_response_id.empty() && !json::member(body, "input"))
      return missing("input");
    return r;
  }
  if (auto v = json::member(body, "conversation"); v && !v->IsNull()) {
    if (v->IsString())
      r.conversation_id = str(*v);
    else if (v->IsObject() && json::member(*v, "id") && (*v)["id"].IsString())
      r.conversation_id = str((*v)["id"]);
    else
      return wrong_type("conversation", "a string", *v);
  }
  if (!r.previous_response_id.empty() && !r.conversation_id.empty())
    return bad("previous_response_id", "mutually_exclusive_parameters",
               "Only one of 'previous_response_id' or 'conversation' may be provided.");
  for (auto [key, field] : {std::pair<const char*, bool*>{"store", &r.store}, {"stream", &r.stream},
                            {"background", &r.background}}) {
    if (auto v = json::member(body, key); v && !v->IsNull()) {
      if (!v->IsBool())
        return wrong_type(key, "a boolean", *v);
      *field = v->GetBool();
    }
  }
  if (r.background && !r.store)
    return bad("background", "invalid_value", "Background mode requires 'store' to be true.");
  if (auto v = json::member(body, "tools"); v && !v->IsNull())
    if (auto e = parse_tools(*v, r))
      return *e;
  if (auto v = json::member(body, "tool_choice"); v && !v->IsNull())
    if (auto e = parse_tool_choice(*v, r))
      return *e;
  if (auto v = json::member(body, "parallel_tool_calls"); v && !v->IsNull()) {
    if (!v->IsBool())
      return wrong_type("parallel_tool_calls", "a boolean", *v);
    r.parallel_tool_calls = v->GetBool();
  }
  if (auto v = json::member(body, "max_tool_calls"); v && !v->IsNull()) {
    r.max_tool_calls = integer_in(*v, "max_tool_calls", 1, INT64_MAX, err);
    if (err)
      return *err;
  }
  if (auto v = json::member(body, "max_output_tokens"); v && !v->IsNull()) {
    r.max_output_tokens = integer_in(*v, "max_output_tokens", 16, INT64_MAX, err);
    if (err)
      return *err;
  }
  if (auto v = json::member(body, "temperature"); v && !v->IsNull()) {
    r.temperature = number_in(*v, "temperature", 0, 2, err);
    if (err)
      return *err;
  }
  if (auto v = json::member(body, "top_p"); v && !v->IsNull()) {
    r.top_p = number_in(*v, "top_p", 0, 1, err);
    if (err)
      return *err;
  }
  if (auto v = json::member(body, "text"); v && !v->IsNull())
    if (auto e = parse_text(*v, r))
      return *e;
  if (auto v = json::member(body, "reasoning"); v && !v->IsNull()) {
    if (!v->IsObject())
      return wrong_type("reasoning", "an object", *v);
    r.reasoning = json::serialize(*v);
  }
  if (auto v = json::member(body, "include"); v && !v->IsNull()) {
    if (!v->IsArray())
      return wrong_type("include", "an array", *v);
    std::size_t i = 0;
    for (auto& entry : v->GetArray()) {
      auto at = "include[" + std::to_string(i++) + "]";
      if (!entry.IsString())
        return wrong_type(at, "a string", entry);
      if (!includable().count(str(entry)))
        return invalid_value(at, str(entry));
      r.include.push_back(str(entry));
    }
  }
  if (auto v = json::member(body, "metadata"); v && !v->IsNull()) {
    if (auto e = check_metadata(*v, "metadata"))
      return *e;
    r.metadata = json::serialize(*v);
  }
  if (auto v = json::member(body, "truncation"); v && !v->IsNull()) {
    if (!v->IsString() || (str(*v) != "auto" && str(*v) != "disabled"))
      return invalid_value("truncation", v->IsString() ? str(*v) : json::serialize(*v));
    r.truncation = str(*v);
  }
  if (auto v = json::member(body, "context_management"); v && !v->IsNull()) {
    if (!v->IsArray())
      return wrong_type("context_management", "an array", *v);
    std::size_t i = 0;
    for (auto& entry : v->GetArray()) {
      auto at = "context_management[" + std::to_string(i++) + "]";
      if (!entry.IsObject())
        return wrong_type(at, "an object", entry);
      auto type = json::get_string(entry, "type");
      if (type != "compaction")
        return invalid_value(at + ".type", type);
      r.compact_threshold = default_threshold;
      if (auto t = json::member(entry, "compact_threshold"); t && !t->IsNull()) {
        r.compact_threshold = integer_in(*t, at + ".compact_threshold", 1, INT64_MAX, err);
        if (err)
          return *err;
      }
    }
  }
  return r;
}

void write_optional_number(json::writer& w, const char* key, const std::optional<double>& v) {
  w.Key(key);
  if (v)
    w.Double(*v);
  else
    w.Null();
}

void write_optional_int(json::writer& w, const char* key, const std::optional<int64_t>& v) {
  w.Key(key);
  if (v)
    w.Int64(*v);
  else
    w.Null();
}

std::string quote_error(const std::string& message) {
  return json::object([&](json::writer& w) {
    w.Key("error");
    w.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
  });
}

// The text a function_call_output (or an mcp_call) gives the model: list outputs joined by lines.
std::string output_text_of(const item& o) {
  if (o.output.empty())
    return {};
  auto doc = json::parse(o.output);
  if (!doc)
    return o.output;
  if (doc->IsString())
    return doc->GetString();
  std::string joined;
  if (doc->IsArray())
    for (auto& part : doc->GetArray()) {
      if (!joined.empty())
        joined += "\n";
      auto type = json::get_string(part, "type");
      joined += (type == "input_text" || type == "output_text" || type == "text") ? json::get_string(part, "text")
                                                                                    : "[non-text output omitted]";
    }
  return joined;
}

} // namespace

std::variant<json::document, problem> parse_json_body(std::string_view body) {
  using reason = json::parse_failure::reason;
  auto parsed = json::parse_body(body);
  auto failure = std::get_if<json::parse_failure>(&parsed);
  if (!failure)
    return std::move(std::get<json::document>(parsed));
  switch (failure->why) {
    case reason::syntax:
      return bad({}, "invalid_json", "We could not parse the JSON body of your request.");
    case reason::repeated_member: {
      std::string param;
      for (auto& part : failure->path)
        param += (param.empty() ? "" : ".") + part;
      param += (param.empty() ? "" : ".") + failure->member;
      return bad(param, "invalid_value", failure->message() + ".");
    }
    case reason::too_deep:
    case reason::invalid_utf8:
      break;
  }
  return bad({}, "invalid_json", failure->message() + ".");
}

std::variant<request, problem> parse_request(std::string_view body, int64_t default_compact_threshold) {
  return parse(body, true, default_compact_threshold);
}

std::variant<request, problem> parse_compact_request(std::string_view body) {
  return parse(body, false, 0);
}

std::optional<problem> check_metadata(const json::value& v, const std::string& param) {
  if (!v.IsObject())
    return wrong_type(param, "an object", v);
  if (v.MemberCount() > 16)
    return bad(param, "object_above_max_properties",
               "Invalid '" + param + "': too many properties. Expected an object with at most 16 properties, but got "
                 + std::to_string(v.MemberCount()) + " instead.");
  for (auto& m : v.GetObject()) {
    auto key = str(m.name);
    if (key.size() > 64)
      return bad(param, "invalid_value", "Invalid '" + param + "': key '" + key + "' is longer than 64 characters.");
    if (!m.value.IsString())
      return wrong_type(param + "." + key, "a string", m.value);
    if (m.value.GetStringLength() > 512)
      return bad(param + "." + key, "string_above_max_length",
                 "Invalid '" + param + "." + key + "': string too long. Expected a string with maximum length 512.");
  }
  return std::nullopt;
}

std::variant<std::vector<item>, problem> parse_conversation_items(const json::value& items, std::size_t min_items) {
  if (!items.IsArray())
    return wrong_type("items", "an array", items);
  if (items.Size() > 20)
    return bad("items", "array_above_max_length",
               "Invalid 'items': array too long. Expected an array with maximum length 20, but got an array with length "
                 + std::to_string(items.Size()) + " instead.");
  if (items.Size() < min_items)
    return bad("items", "array_below_min_length",
               "Invalid 'items': empty array. Expected an array with minimum length 1, but got an empty array instead.");
  std::vector<item> out;
  std::size_t i = 0;
  for (auto& entry : items.GetArray()) {
    auto at = "items[" + std::to_string(i++) + "]";
    auto given = json::get_string(entry, "id");
    auto parsed = parse_input_item(entry, at);
    if (auto err = std::get_if<problem>(&parsed))
      return *err;
    auto it = std::move(std::get<item>(parsed));
    if (!given.empty() && it.type != "item_reference") {
      auto prefix = std::string(id_prefix(it.type));
      if (given.rfind(prefix, 0) != 0)
        return bad(at + ".id", "invalid_value",
                   "Invalid '" + at + ".id': '" + given + "'. Expected an ID that begins with '" + prefix + "'.");
    }
    out.push_back(std::move(it));
  }
  return out;
}

std::string response_json(const request& r, const response_state& s) {
  return json::object([&](json::writer& w) {
    auto string = [&](const char* key, const std::string& v) {
      w.Key(key);
      w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
    };
    string("id", s.id);
    string("object", "response");
    w.Key("created_at");
    w.Int64(s.created_at);
    string("status", s.status);
    w.Key("background");
    w.Bool(r.background);
    w.Key("completed_at");
    if (s.status == "completed")
      w.Int64(s.completed_at);
    else
      w.Null();
    w.Key("error");
    if (s.error.empty())
      w.Null();
    else
      json::write_raw(w, s.error);
    w.Key("incomplete_details");
    if (s.incomplete_reason.empty()) {
      w.Null();
    } else {
      w.StartObject();
      string("reason", s.incomplete_reason);
      w.EndObject();
    }
    w.Key("instructions");
    if (r.instructions)
      w.String(r.instructions->c_str(), static_cast<rapidjson::SizeType>(r.instructions->size()));
    else
      w.Null();
    write_optional_int(w, "max_output_tokens", r.max_output_tokens);
    write_optional_int(w, "max_tool_calls", r.max_tool_calls);
    w.Key("metadata");
    json::write_raw(w, r.metadata);
    string("model", r.model);
    w.Key("output");
    w.StartArray();
    for (auto& it : s.output)
      write_item(w, it);
    w.EndArray();
    w.Key("parallel_tool_calls");
    w.Bool(r.parallel_tool_calls.value_or(true));
    json::write_nullable(w, "previous_response_id", r.previous_response_id);
    w.Key("conversation");
    if (r.conversation_id.empty()) {
      w.Null();
    } else {
      w.StartObject();
      string("id", r.conversation_id);
      w.EndObject();
    }
    w.Key("reasoning");
    if (r.reasoning.empty())
      w.Null();
    else
      json::write_raw(w, r.reasoning);
    w.Key("store");
    w.Bool(r.store);
    write_optional_number(w, "temperature", r.temperature);
    w.Key("text");
    json::write_raw(w, r.text);
    w.Key("tool_choice");
    json::write_raw(w, r.tool_choice_echo);
    w.Key("tools");
    json::write_raw(w, r.tools_echo);
    write_optional_number(w, "top_p", r.top_p);
    string("truncation", r.truncation);
    w.Key("usage");
    if (s.tokens)
      write_usage(w, *s.tokens);
    else
      w.Null();
  });
}

std::string mcp_function_name(const std::string& server_label, const std::string& tool) {
  auto full = "mcp__" + server_label + "__" + tool;
  // One `_` per character outside [A-Za-z0-9_-], however many UTF-8 bytes it takes.
  std::string name;
  for (std::size_t i = 0; i < full.size();) {
    auto c = static_cast<unsigned char>(full[i]);
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    name.push_back(keep ? full[i] : '_');
    i += std::max<std::size_t>(1, utf8_sequence_length(full, i));
  }
  if (name.size() <= 64)
    return name;
  return name.substr(0, 55) + "_" + sha256_hex(full).substr(0, 8);
}

std::optional<problem> check_history(const std::vector<item>& history, const std::vector<item>& input,
                                       const std::vector<mcp_declaration>& declared) {
  auto pairing = [](const std::string& message) { return bad("input", {}, message); };
  std::map<std::string, bool> calls; // call_id → answered
  std::vector<std::string> unanswered_order;
  std::map<std::string, const item*> requests; // approval request id → request
  std::set<std::string> answered_requests;
  auto visit = [&](const item& it, bool is_input) -> std::optional<problem> {
    if (it.type == "function_call" && it.status != "incomplete") {
      if (!calls.count(it.call_id))
        unanswered_order.push_back(it.call_id);
      calls[it.call_id] = false;
    } else if (it.type == "function_call_output") {
      auto c = calls.find(it.call_id);
      if (c == calls.end())
        return pairing("No tool call found for function call output with call_id " + it.call_id + ".");
      if (c->second)
        return pairing("Duplicate tool output for call_id " + it.call_id + ".");
      c->second = true;
    } else if (it.type == "mcp_approval_request") {
      requests[it.id] = &it;
    } else if (it.type == "mcp_approval_response") {
      auto req = requests.find(it.approval_request_id);
      if (req == requests.end())
        return pairing("No approval request found with id '" + it.approval_request_id + "'.");
      if (!answered_requests.insert(it.approval_request_id).second)
        return pairing("Approval request '" + it.approval_request_id + "' has already been answered.");
      if (is_input) {
        auto& label = req->second->server_label;
        bool known = std::any_of(declared.begin(), declared.end(), [&](auto& d) { return d.server_label == label; });
        if (!known)
          return bad("input", "invalid_value",
                     "Approval request '" + it.approval_request_id + "' is for MCP server '" + label
                       + "', which this request's tools do not declare.");
      }
    }
    return std::nullopt;
  };
  for (auto& it : history)
    if (auto err = visit(it, false))
      return err;
  for (auto& it : input)
    if (auto err = visit(it, true))
      return err;
  for (auto& id : unanswered_order)
    if (!calls[id])
      return pairing("No tool output found for function call " + id + ".");
  return std::nullopt;
}

std::vector<item> model_view(const std::vector<item>& history) {
  std::size_t start = 0;
  std::optional<std::size_t> compaction;
  for (std::size_t i = 0; i < history.size(); ++i)
    if (history[i].type == "compaction")
      compaction = i;
  std::map<std::string, const item*> responses; // approval request id → its response
  for (auto& it : history)
    if (it.type == "mcp_approval_response")
      responses[it.approval_request_id] = &it;
  std::vector<item> out;
  auto call = [&](const std::string& call_id, const std::string& name, const std::string& arguments) {
    item fc;
    fc.type = "function_call";
    fc.id = call_id;
    fc.call_id = call_id;
    fc.name = name;
    fc.arguments = arguments;
    fc.status = "completed";
    out.push_back(std::move(fc));
  };
  auto output = [&](const std::string& call_id, std::string text) {
    item o;
    o.type = "function_call_output";
    o.id = "fco_" + call_id;
    o.call_id = call_id;
    o.output = json::quote(text);
    o.status = "completed";
    out.push_back(std::move(o));
  };
  if (compaction) {
    for (std::size_t i = 0; i < *compaction; ++i)
      if (history[i].type == "message" && history[i].role == "user")
        out.push_back(history[i]);
    item summary;
    summary.type = "message";
    summary.id = history[*compaction].id;
    summary.role = "assistant";
    summary.status = "completed";
    summary.content.push_back({"output_text", history[*compaction].encrypted_content, {}, "auto"});
    out.push_back(std::move(summary));
    start = *compaction + 1;
  }
  for (std::size_t i = start; i < history.size(); ++i) {
    auto& it = history[i];
    if (it.type == "mcp_list_tools" || it.type == "mcp_approval_response" || it.type == "compaction")
      continue;
    if ((it.type == "function_call" || it.type == "mcp_call") && it.status == "incomplete")
      continue;
    if (it.type == "mcp_call") {
      auto text = output_text_of(it);
      if (!it.error.empty())
        text = json::object([&](json::writer& w) {
          w.Key("error");
          json::write_raw(w, it.error);
        });
      if (it.approval_request_id.empty()) {
        call(it.id, mcp_function_name(it.server_label, it.name), it.arguments);
        output(it.id, text);
      } else {
        output(it.approval_request_id, text);
      }
    } else if (it.type == "mcp_approval_request") {
      auto response = responses.find(it.id);
      if (response == responses.end())
        continue;
      call(it.id, mcp_function_name(it.server_label, it.name), it.arguments);
      if (!response->second->approve) {
        auto reason = response->second->reason;
        output(it.id, quote_error("Tool call was not approved by the user." + (reason.empty() ? "" : " " + reason)));
      }
    } else {
      out.push_back(it);
    }
  }
  return out;
}

namespace {

// A function tool's name, description, parameters and strict: the same in either upstream protocol,
// which differ only in where they nest them.
void write_function_members(json::writer& w, const upstream_tool& t) {
  w.Key("name");
  w.String(t.name.c_str());
  w.Key("description");
  w.String(t.description.c_str(), static_cast<rapidjson::SizeType>(t.description.size()));
  w.Key("parameters");
  json::write_raw(w, t.parameters);
  if (!t.strict.empty()) {
    w.Key("strict");
    json::write_raw(w, t.strict);
  }
}

void write_tools_chat(json::writer& w, const std::vector<upstream_tool>& tools) {
  w.Key("tools");
  w.StartArray();
  for (auto& t : tools) {
    w.StartObject();
    w.Key("type");
    w.String("function");
    w.Key("function");
    w.StartObject();
    write_function_members(w, t);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
}

// The tool_choice a round sends: the request's, or auto after gateway calls; a named MCP choice
// becomes its model-facing function name.
std::string round_choice(const round_request& r, bool chat) {
  auto& c = r.req->choice;
  if (r.force_auto || c.mode == "auto")
    return "\"auto\"";
  if (c.mode == "none" || c.mode == "required")
    return json::quote(c.mode);
  auto name = c.mode == "function" ? c.name : (c.name.empty() ? "" : mcp_function_name(c.server_label, c.name));
  if (name.empty())
    return "\"required\"";
  return chat ? R"({"type":"function","function":{"name":)" + json::quote(name) + "}}"
              : R"({"type":"function","name":)" + json::quote(name) + "}";
}

void write_common_settings(json::writer& w, const round_request& r) {
  auto& q = *r.req;
  if (q.temperature) {
    w.Key("temperature");
    w.Double(*q.temperature);
  }
  if (q.top_p) {
    w.Key("top_p");
    w.Double(*q.top_p);
  }
  if (q.parallel_tool_calls && !r.tools.empty()) {
    w.Key("parallel_tool_calls");
    w.Bool(*q.parallel_tool_calls);
  }
}

} // namespace

std::string render_chat_request(const round_request& r, const chat_options& options) {
  auto& q = *r.req;
  auto view = model_view(r.history);
  return json::object([&](json::writer& w) {
    w.Key("model");
    w.String(q.model.c_str());
    w.Key("messages");
    w.StartArray();
    auto system = r.system_override ? r.system_override : q.instructions;
    if (system) {
      w.StartObject();
      w.Key("role");
      w.String("system");
      w.Key("content");
      w.String(system->c_str(), static_cast<rapidjson::SizeType>(system->size()));
      w.EndObject();
    }
    std::map<std::string, std::string> called; // call_id → the tool, for named tool messages
    for (auto& it : view)
      if (it.type == "function_call")
        called[it.call_id] = it.name;
    std::string pending_reasoning;
    for (std::size_t i = 0; i < view.size(); ++i) {
      auto& it = view[i];
      if (it.type == "reasoning") {
        if (options.replay_reasoning)
          pending_reasoning += message_text(it);
        continue;
      }
      if (it.type == "message" && it.role != "assistant") {
        w.StartObject();
        w.Key("role");
        auto role = it.role == "user" ? std::string("user") : options.developer_role;
        w.String(role.c_str());
        w.Key("content");
        bool single_text = it.content.size() == 1 && it.content[0].type != "input_image";
        if (single_text) {
          w.String(it.content[0].text.c_str(), static_cast<rapidjson::SizeType>(it.content[0].text.size()));
        } else {
          w.StartArray();
          for (auto& p : it.content) {
            w.StartObject();
            if (p.type == "input_image") {
              w.Key("type");
              w.String("image_url");
              w.Key("image_url");
              w.StartObject();
              w.Key("url");
              w.String(p.image_url.c_str());
              w.Key("detail");
              w.String(p.detail.c_str());
              w.EndObject();
            } else {
              w.Key("type");
              w.String("text");
              w.Key("text");
              w.String(p.text.c_str(), static_cast<rapidjson::SizeType>(p.text.size()));
            }
            w.EndObject();
          }
          w.EndArray();
        }
        w.EndObject();
        continue;
      }
      if (it.type == "function_call_output") {
        w.StartObject();
        w.Key("role");
        w.String("tool");
        w.Key("tool_call_id");
        w.String(it.call_id.c_str());
        if (r.name_tool_messages)
          if (auto name = called.find(it.call_id); name != called.end()) {
            w.Key("name");
            w.String(name->second.c_str());
          }
        w.Key("content");
        auto text = output_text_of(it);
        w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
        w.EndObject();
        continue;
      }
      if (it.type != "message" && it.type != "function_call")
        continue;
      // An assistant turn: its text, then the function calls that directly follow it.
      std::string text;
      if (it.type == "message")
        text = message_text(it);
      std::size_t j = it.type == "message" ? i + 1 : i;
      w.StartObject();
      w.Key("role");
      w.String("assistant");
      w.Key("content");
      bool has_calls = j < view.size() && view[j].type == "function_call";
      if (text.empty() && has_calls)
        w.Null();
      else
        w.String(text.c_str(), static_cast<rapidjson::SizeType>(text.size()));
      if (!pending_reasoning.empty()) {
        w.Key("reasoning_content");
        w.String(pending_reasoning.c_str(), static_cast<rapidjson::SizeType>(pending_reasoning.size()));
        pending_reasoning.clear();
      }
      if (has_calls) {
        w.Key("tool_calls");
        w.StartArray();
        for (; j < view.size() && view[j].type == "function_call"; ++j) {
          w.StartObject();
          w.Key("id");
          w.String(view[j].call_id.c_str());
          w.Key("type");
          w.String("function");
          w.Key("function");
          w.StartObject();
          w.Key("name");
          w.String(view[j].name.c_str());
          w.Key("arguments");
          w.String(view[j].arguments.c_str(), static_cast<rapidjson::SizeType>(view[j].arguments.size()));
          w.EndObject();
          w.EndObject();
        }
        w.EndArray();
      }
      w.EndObject();
      i = j - 1;
    }
    w.EndArray();
    if (!r.tools.empty()) {
      write_tools_chat(w, r.tools);
      w.Key("tool_choice");
      json::write_raw(w, round_choice(r, true));
    }
    if (auto doc = json::parse(q.text)) {
      auto format = json::member(*doc, "format");
      auto type = format ? json::get_string(*format, "type") : std::string();
      if (type == "json_object") {
        w.Key("response_format");
        json::write_raw(w, R"({"type":"json_object"})");
      } else if (type == "json_schema") {
        w.Key("response_format");
        w.StartObject();
        w.Key("type");
        w.String("json_schema");
        w.Key("json_schema");
        w.StartObject();
        for (auto key : {"name", "schema", "strict", "description"})
          if (auto v = json::member(*format, key)) {
            w.Key(key);
            v->Accept(w);
          }
        w.EndObject();
        w.EndObject();
      }
    }
    if (r.max_output_tokens) {
      w.Key(options.max_tokens_field.c_str());
      w.Int64(*r.max_output_tokens);
    }
    if (!q.reasoning.empty())
      if (auto doc = json::parse(q.reasoning); doc && json::member(*doc, "effort")) {
        w.Key("reasoning_effort");
        (*doc)["effort"].Accept(w);
      }
    write_common_settings(w, r);
    if (std::count(q.include.begin(), q.include.end(), "message.output_text.logprobs")) {
      w.Key("logprobs");
      w.Bool(true);
    }
    w.Key("stream");
    w.Bool(r.stream);
    if (r.stream) {
      w.Key("stream_options");
      json::write_raw(w, R"({"include_usage":true})");
    }
  });
}

std::string render_responses_request(const round_request& r) {
  auto& q = *r.req;
  auto view = model_view(r.history);
  return json::object([&](json::writer& w) {
    w.Key("model");
    w.String(q.model.c_str());
    w.Key("input");
    w.StartArray();
    for (auto& it : view)
      write_item(w, it);
    w.EndArray();
    auto system = r.system_override ? r.system_override : q.instructions;
    if (system) {
      w.Key("instructions");
      w.String(system->c_str(), static_cast<rapidjson::SizeType>(system->size()));
    }
    if (!r.tools.empty()) {
      w.Key("tools");
      w.StartArray();
      for (auto& t : r.tools) {
        w.StartObject();
        w.Key("type");
        w.String("function");
        write_function_members(w, t);
        w.EndObject();
      }
      w.EndArray();
      w.Key("tool_choice");
      json::write_raw(w, round_choice(r, false));
    }
    if (r.max_output_tokens) {
      w.Key("max_output_tokens");
      w.Int64(*r.max_output_tokens);
    }
    write_common_settings(w, r);
    w.Key("text");
    json::write_raw(w, q.text);
    if (!q.reasoning.empty()) {
      w.Key("reasoning");
      json::write_raw(w, q.reasoning);
    }
    w.Key("truncation");
    w.String(q.truncation.c_str());
    std::vector<std::string> include;
    for (auto& i : q.include)
      if (i == "message.output_text.logprobs" || i == "reasoning.encrypted_content")
        include.push_back(i);
    if (!include.empty()) {
      w.Key("include");
      w.StartArray();
      for (auto& i : include)
        w.String(i.c_str());
      w.EndArray();
    }
    w.Key("stream");
    w.Bool(r.stream);
    w.Key("store");
    w.Bool(false);
  });
}

item compaction_request() {
  item ask;
  ask.type = "message";
  ask.id = mint_item_id("message");
  ask.role = "user";
  ask.status = "completed";
  ask.content.push_back({"input_text",
                         "Summarize the conversation so far for another assistant who will continue it without "
                         "seeing it. Keep every fact, decision, open question, file, identifier and number that "
                         "matters, and what the user wants next. Write only the summary.",
                         {},
                         "auto"});
  return ask;
}

std::vector<item> compacted_window(const std::vector<item>& history, const std::string& summary) {
  std::vector<item> out;
  for (auto& it : history)
    if (it.type == "message" && it.role == "user") {
      auto copy = it;
      copy.id = mint_item_id("message");
      out.push_back(std::move(copy));
    }
  item cmp;
  cmp.type = "compaction";
  cmp.id = mint_item_id("compaction");
  cmp.encrypted_content = summary;
  out.push_back(std::move(cmp));
  return out;
}

model_request chat_model_request(const round_request& r) {
  model_request out;
  out.model = r.req->model;
  out.stream = false;
  out.temperature = r.req->temperature;
  out.top_p = r.req->top_p;
  out.max_tokens = r.max_output_tokens;
  for (auto& t : r.tools)
    out.tools.push_back({t.name, t.description, t.parameters});
  auto system = r.system_override ? r.system_override : r.req->instructions;
  if (system)
    out.messages.push_back(text_message("system", *system));
  for (auto& m : chat_messages(r.history))
    out.messages.push_back(std::move(m));
  return out;
}

std::vector<chat_message> chat_messages(const std::vector<item>& history) {
  std::vector<chat_message> out;
  std::map<std::string, std::string> names; // call_id → the called tool
  for (auto& it : model_view(history)) {
    if (it.type == "message") {
      out.push_back(text_message(it.role == "assistant" ? "assistant" : it.role == "user" ? "user" : "system",
                                 message_text(it)));
    } else if (it.type == "function_call") {
      if (out.empty() || out.back().role != "assistant")
        out.push_back(text_message("assistant", ""));
      out.back().content_null = out.back().content.empty();
      out.back().tool_calls.push_back({it.call_id, it.name, it.arguments});
      names[it.call_id] = it.name;
    } else if (it.type == "function_call_output") {
      auto m = text_message("tool", output_text_of(it));
      m.tool_call_id = it.call_id;
      if (auto n = names.find(it.call_id); n != names.end())
        m.name = n->second;
      out.push_back(std::move(m));
    }
  }
  return out;
}

std::vector<item> items_of(const std::vector<chat_message>& messages) {
  std::vector<item> out;
  auto message = [&](const std::string& role, const char* part, const std::string& text) {
    item m;
    m.type = "message";
    m.id = mint_item_id("message");
    m.role = role;
    m.status = "completed";
    m.content.push_back({part, text, {}, "auto"});
    out.push_back(std::move(m));
  };
  for (auto& m : messages) {
    if (m.role == "tool") {
      item o;
      o.type = "function_call_output";
      o.id = mint_item_id("function_call_output");
      o.call_id = m.tool_call_id;
      o.output = json::quote(m.content);
      o.status = "completed";
      out.push_back(std::move(o));
    } else if (m.role == "assistant") {
      // Calls join the assistant message before them, so a message of calls alone that follows
      // another assistant turn keeps its own (empty) message.
      bool follows_assistant = !out.empty() && (out.back().type == "function_call"
                                                || (out.back().type == "message" && out.back().role == "assistant"));
      if (!m.content.empty() || m.tool_calls.empty() || follows_assistant)
        message("assistant", "output_text", m.content);
      for (auto& c : m.tool_calls) {
        item fc;
        fc.type = "function_call";
        fc.id = mint_item_id("function_call");
        fc.call_id = c.id;
        fc.name = c.name;
        fc.arguments = c.arguments;
        fc.status = "completed";
        out.push_back(std::move(fc));
      }
    } else {
      message(m.role, "input_text", m.content);
    }
  }
  return out;
}

int64_t estimate_tokens(const std::vector<item>& history, const std::string& instructions) {
  std::size_t bytes = instructions.size();
  int64_t items = 0;
  int64_t parts = 0;
  int64_t images = 0;
  for (auto& it : model_view(history)) {
    ++items;
    for (auto& p : it.content) {
      ++parts;
      if (p.type == "input_image")
        ++images;
      bytes += p.text.size();
    }
    // An output counts as the text the model reads, not as its stored JSON encoding.
    bytes += it.arguments.size() + output_text_of(it).size() + it.encrypted_content.size();
  }
  return static_cast<int64_t>((bytes + 3) / 4) + 12 * items + 7 * parts + 1024 * images;
}

} // namespace troupe::protocol::responses

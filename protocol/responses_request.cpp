#include "protocol/responses_request.hpp"

#include "protocol/ids.hpp"
#include "protocol/responses_search.hpp"
#include "protocol/utf8.hpp"


#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <regex>
#include <set>
#include <utility>

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
  auto kind = parse_item_kind(type); // every kind the model knows is input (RS-14) but the search calls
  if (!kind || kind == item_kind::web_search_call || kind == item_kind::file_search_call)
    return invalid_value(at + ".type", type);
  if (auto id = json::member(v, "id"); id && !id->IsString())
    return wrong_type(at + ".id", "a string", *id);
  if (kind == item_kind::item_reference) {
    auto id = json::get_string(v, "id");
    if (id.empty())
      return missing(at + ".id");
    item it;
    it.type = *kind;
    it.id = id;
    return it;
  }
  auto it = item_from_json(v);
  it.type = *kind;
  auto require_string = [&](const char* key) -> std::optional<problem> {
    auto f = json::member(v, key);
    if (!f)
      return missing(at + "." + key);
    if (!f->IsString())
      return wrong_type(at + "." + key, "a string", *f);
    return std::nullopt;
  };
  if (kind == item_kind::message) {
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
  } else if (kind == item_kind::function_call) {
    for (auto key : {"call_id", "name", "arguments"})
      if (auto err = require_string(key))
        return *err;
    if (it.status.empty())
      it.status = "completed";
  } else if (kind == item_kind::function_call_output) {
    if (auto err = require_string("call_id"))
      return *err;
    auto out = json::member(v, "output");
    if (!out)
      return missing(at + ".output");
    if (!out->IsString() && !out->IsArray())
      return wrong_type(at + ".output", "a string", *out);
    it.status = "completed";
  } else if (kind == item_kind::mcp_approval_response) {
    if (auto err = require_string("approval_request_id"))
      return *err;
    auto approve = json::member(v, "approve");
    if (!approve)
      return missing(at + ".approve");
    if (!approve->IsBool())
      return wrong_type(at + ".approve", "a boolean", *approve);
  } else if (kind == item_kind::compaction) {
    if (auto err = require_string("encrypted_content"))
      return *err;
  }
  if (it.id.empty())
    it.id = mint_item_id(*kind);
  return it;
}

std::variant<std::vector<item>, problem> parse_input(const value& body) {
  std::vector<item> out;
  auto input = json::member(body, "input");
  if (!input || input->IsNull())
    return out;
  if (input->IsString()) {
    item it;
    it.type = item_kind::message;
    it.id = mint_item_id(item_kind::message);
    it.role = "user";
    it.status = "completed";
    it.content.push_back({part_kind::input_text, str(*input), {}, "auto"});
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

// RS-2, RS-14: with no history to continue, an empty-string or empty-array `input` asks for nothing
// and is refused, worded as OpenAI words an empty string or array.
std::optional<problem> empty_input(const value& body) {
  auto input = json::member(body, "input");
  if (!input)
    return std::nullopt;
  if (input->IsString() && input->GetStringLength() == 0)
    return bad("input", "string_below_min_length",
               "Invalid 'input': string too short. Expected a string with minimum length 1, but got an empty string "
               "instead.");
  if (input->IsArray() && input->Empty())
    return bad("input", "array_below_min_length",
               "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.");
  return std::nullopt;
}

const std::set<std::string>& includable() {
  static const std::set<std::string> values = {
    "message.output_text.logprobs", "reasoning.encrypted_content",   "web_search_call.action.sources",
    "web_search_call.results",      "file_search_call.results",      "message.input_image.image_url"};
  return values;
}

// A filter as RS-30 and RS-33 write it: a list of names, or {tool_names?, read_only?}. Parts of
// another type say nothing, and names that are not strings are skipped.
tool_filter tool_filter_of(const value& v) {
  tool_filter f;
  auto names_of = [](const value& list) {
    std::vector<std::string> names;
    for (auto& n : list.GetArray())
      if (n.IsString())
        names.push_back(str(n));
    return names;
  };
  if (v.IsArray()) {
    f.tool_names = names_of(v);
    return f;
  }
  if (auto names = json::member(v, "tool_names"); names && names->IsArray())
    f.tool_names = names_of(*names);
  f.read_only = json::get_bool(v, "read_only");
  return f;
}

// A `require_approval` that passed validation: "always", "never" or {always?, never?}.
approval_policy approval_policy_of(const value& v) {
  approval_policy p;
  if (v.IsString()) {
    p.what = str(v) == "never" ? approval_policy::kind::never : approval_policy::kind::always;
    return p;
  }
  p.what = approval_policy::kind::filters;
  for (auto [key, into] : {std::pair{"always", &p.always}, std::pair{"never", &p.never}})
    if (auto filter = json::member(v, key); filter && filter->IsObject())
      *into = tool_filter_of(*filter);
  return p;
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
        d.require_approval = approval_policy_of(*a);
      }
      if (auto a = json::member(t, "allowed_tools"); a && !a->IsNull()) {
        if (!a->IsArray() && !a->IsObject())
          return wrong_type(at + ".allowed_tools", "an array", *a);
        d.allowed_tools = tool_filter_of(*a);
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
    } else if (type == "web_search" || type == "web_search_preview" || type == "file_search") {
      auto d = parse_search_tool(t, type, at, r.search);
      if (auto* p = std::get_if<problem>(&d))
        return *p;
      r.search.push_back(std::get<search_declaration>(std::move(d)));
      r.search.back().index = i;
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
  if (r.previous_response_id.empty() && r.conversation_id.empty())
    if (auto e = empty_input(body))
      return *e;
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
  if (auto v = json::member(body, "top_logprobs"); v && !v->IsNull()) {
    r.top_logprobs = integer_in(*v, "top_logprobs", 0, 20, err);
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

// A sampling setting as OpenAI echoes it: the request's value, else the default the API applies (1.0).
void write_sampling(json::writer& w, const char* key, const std::optional<double>& v) {
  w.Key(key);
  w.Double(v.value_or(1.0));
}

// An object of the response object (RS-15) as OpenAI echoes it: the request's members, with the API's
// default (raw JSON) for each of `defaults` the request left out or null; "" stands for no object.
void write_with_defaults(json::writer& w, const char* key, const std::string& given,
                         std::initializer_list<std::pair<const char*, const char*>> defaults) {
  auto doc = given.empty() ? std::nullopt : json::parse(given);
  bool object = doc && doc->IsObject();
  w.Key(key);
  w.StartObject();
  for (auto [name, fallback] : defaults) {
    w.Key(name);
    auto v = object ? json::member(*doc, name) : nullptr;
    if (v && !v->IsNull())
      v->Accept(w);
    else
      json::write_raw(w, fallback);
  }
  if (object)
    for (auto& m : doc->GetObject()) {
      auto name = str(m.name);
      bool defaulted = std::any_of(defaults.begin(), defaults.end(), [&](auto& d) { return name == d.first; });
      if (!defaulted) {
        w.Key(m.name.GetString(), m.name.GetStringLength());
        m.value.Accept(w);
      }
    }
  w.EndObject();
}

void write_optional_int(json::writer& w, const char* key, const std::optional<int64_t>& v) {
  w.Key(key);
  if (v)
    w.Int64(*v);
  else
    w.Null();
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

std::variant<std::optional<std::string>, problem> conversation_metadata(const json::value& body) {
  auto v = json::member(body, "metadata");
  if (!v)
    return std::optional<std::string>();
  if (v->IsNull())
    return std::optional<std::string>("{}");
  if (auto err = check_metadata(*v, "metadata"))
    return *err;
  return std::optional<std::string>(json::serialize(*v));
}

std::optional<problem> check_include_query(const std::vector<std::pair<std::string, std::string>>& query) {
  std::size_t i = 0;
  for (auto& [key, value] : query) {
    if (key != "include" && key != "include[]")
      continue;
    auto at = "include[" + std::to_string(i++) + "]";
    if (!includable().count(value))
      return invalid_value(at, value);
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
    if (!given.empty() && it.type != item_kind::item_reference) {
      auto prefix = std::string(id_prefix(it.type));
      if (given.rfind(prefix, 0) != 0)
        return bad(at + ".id", "invalid_value",
                   "Invalid '" + at + ".id': '" + given + "'. Expected an ID that begins with '" + prefix + "'.");
    }
    out.push_back(std::move(it));
  }
  return out;
}

namespace {

constexpr std::pair<response_status, std::string_view> status_names[] = {
  {response_status::queued, "queued"},         {response_status::in_progress, "in_progress"},
  {response_status::completed, "completed"},   {response_status::incomplete, "incomplete"},
  {response_status::failed, "failed"},         {response_status::cancelled, "cancelled"},
};

} // namespace

std::string_view to_string(response_status s) {
  for (auto& [status, name] : status_names)
    if (status == s)
      return name;
  return {};
}

std::optional<response_status> parse_response_status(std::string_view name) {
  for (auto& [status, n] : status_names)
    if (n == name)
      return status;
  return std::nullopt;
}

bool in_flight(response_status s) {
  return s == response_status::queued || s == response_status::in_progress;
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
    string("status", std::string(to_string(s.status)));
    w.Key("background");
    w.Bool(r.background);
    w.Key("completed_at");
    if (s.status == response_status::completed)
      w.Int64(s.completed_at);
    else
      w.Null();
    w.Key("error");
    if (s.error)
      json::write_raw(w, *s.error);
    else
      w.Null();
    w.Key("incomplete_details");
    if (s.incomplete_reason) {
      w.StartObject();
      string("reason", *s.incomplete_reason);
      w.EndObject();
    } else {
      w.Null();
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
    write_with_defaults(w, "reasoning", r.reasoning, {{"effort", "null"}, {"summary", "null"}});
    w.Key("store");
    w.Bool(r.store);
    write_sampling(w, "temperature", r.temperature);
    // Verbosity is only echoed: a request's own is what Responses upstreams get.
    write_with_defaults(w, "text", r.text, {{"format", R"({"type":"text"})"}, {"verbosity", R"("medium")"}});
    w.Key("tool_choice");
    json::write_raw(w, r.tool_choice_echo);
    w.Key("tools");
    json::write_raw(w, r.tools_echo);
    write_sampling(w, "top_p", r.top_p);
    string("truncation", r.truncation);
    w.Key("usage");
    if (s.tokens)
      write_usage(w, *s.tokens);
    else
      w.Null();
  });
}


std::optional<problem> check_history(const std::vector<item>& history, const std::vector<item>& input,
                                       const std::vector<mcp_declaration>& declared) {
  auto pairing = [](const std::string& message) { return bad("input", {}, message); };
  std::map<std::string, bool> calls; // call_id → answered
  std::vector<std::string> unanswered_order;
  std::map<std::string, const item*> requests; // approval request id → request
  std::set<std::string> answered_requests;
  auto visit = [&](const item& it, bool is_input) -> std::optional<problem> {
    if (it.type == item_kind::function_call && it.status != "incomplete") {
      if (!calls.count(it.call_id))
        unanswered_order.push_back(it.call_id);
      calls[it.call_id] = false;
    } else if (it.type == item_kind::function_call_output) {
      auto c = calls.find(it.call_id);
      if (c == calls.end())
        return pairing("No tool call found for function call output with call_id " + it.call_id + ".");
      if (c->second)
        return pairing("Duplicate tool output for call_id " + it.call_id + ".");
      c->second = true;
    } else if (it.type == item_kind::mcp_approval_request) {
      requests[it.id] = &it;
    } else if (it.type == item_kind::mcp_approval_response) {
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

void fill_round(round_request& round, const request& r) {
  round.model = r.model;
  round.instructions = r.instructions;
  round.temperature = r.temperature;
  round.top_p = r.top_p;
  round.parallel_tool_calls = r.parallel_tool_calls;
  round.choice = r.choice;
  round.text = r.text;
  round.reasoning = r.reasoning;
  round.include = r.include;
  round.top_logprobs = r.top_logprobs;
  round.truncation = r.truncation;
}

item compaction_request() {
  item ask;
  ask.type = item_kind::message;
  ask.id = mint_item_id(item_kind::message);
  ask.role = "user";
  ask.status = "completed";
  ask.content.push_back({part_kind::input_text,
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
    if (it.type == item_kind::message && it.role == "user") {
      auto copy = it;
      copy.id = mint_item_id(item_kind::message);
      out.push_back(std::move(copy));
    }
  item cmp;
  cmp.type = item_kind::compaction;
  cmp.id = mint_item_id(item_kind::compaction);
  cmp.encrypted_content = summary;
  out.push_back(std::move(cmp));
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
      if (p.type == part_kind::input_image)
        ++images;
      bytes += p.text.size();
    }
    // An output counts as the text the model reads, not as its stored JSON encoding.
    bytes += it.arguments.size() + output_text_of(it).size() + it.encrypted_content.size();
  }
  return static_cast<int64_t>((bytes + 3) / 4) + 12 * items + 7 * parts + 1024 * images;
}

} // namespace troupe::protocol::responses

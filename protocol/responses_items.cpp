#include "protocol/responses_items.hpp"

#include "protocol/ids.hpp"

#include <limits>
#include <utility>

namespace troupe::protocol::responses {

namespace {

void write_string(json::writer& w, const char* key, std::string_view v) {
  w.Key(key);
  w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
}

// JSON text, or null when empty.
void write_json_or_null(json::writer& w, const char* key, std::string_view v) {
  w.Key(key);
  if (v.empty())
    w.Null();
  else
    json::write_raw(w, v);
}

void write_part(json::writer& w, const content_part& p) {
  w.StartObject();
  write_string(w, "type", to_string(p.type));
  if (p.type == part_kind::input_image) {
    write_string(w, "image_url", p.image_url);
    write_string(w, "detail", p.detail);
  } else if (p.type == part_kind::refusal) {
    write_string(w, "refusal", p.text);
  } else {
    write_string(w, "text", p.text);
    if (p.type == part_kind::output_text) {
      w.Key("annotations");
      w.StartArray();
      w.EndArray();
      w.Key("logprobs");
      json::write_raw(w, p.logprobs.empty() ? "[]" : p.logprobs);
    }
  }
  w.EndObject();
}

void write_parts(json::writer& w, const char* key, const std::vector<content_part>& parts) {
  w.Key(key);
  w.StartArray();
  for (auto& p : parts)
    write_part(w, p);
  w.EndArray();
}

std::vector<content_part> parts_from_json(const json::value* v) {
  std::vector<content_part> out;
  if (!v || !v->IsArray())
    return out;
  for (auto& p : v->GetArray()) {
    content_part part;
    part.type = parse_part_kind(json::get_string(p, "type")).value_or(part_kind::unknown);
    part.text = part.type == part_kind::refusal ? json::get_string(p, "refusal") : json::get_string(p, "text");
    part.image_url = json::get_string(p, "image_url");
    part.detail = json::get_string(p, "detail", "auto");
    part.logprobs = logprobs_json(json::member(p, "logprobs"));
    out.push_back(std::move(part));
  }
  return out;
}

std::string raw_or_empty(const json::value* v) {
  return v && !v->IsNull() ? json::serialize(*v) : std::string();
}

int64_t saturating_add(int64_t a, int64_t b) {
  if (b > 0 && a > std::numeric_limits<int64_t>::max() - b)
    return std::numeric_limits<int64_t>::max();
  return a + b;
}

} // namespace

namespace {

struct kind_names {
  item_kind kind;
  std::string_view name;
  std::string_view prefix;
};

constexpr kind_names kinds[] = {
  {item_kind::message, "message", "msg_"},
  {item_kind::reasoning, "reasoning", "rs_"},
  {item_kind::function_call, "function_call", "fc_"},
  {item_kind::function_call_output, "function_call_output", "fco_"},
  {item_kind::mcp_call, "mcp_call", "mcp_"},
  {item_kind::mcp_list_tools, "mcp_list_tools", "mcpl_"},
  {item_kind::mcp_approval_request, "mcp_approval_request", "mcpr_"},
  {item_kind::mcp_approval_response, "mcp_approval_response", "mcpa_"},
  {item_kind::compaction, "compaction", "cmp_"},
  {item_kind::item_reference, "item_reference", ""},
  {item_kind::web_search_call, "web_search_call", "ws_"},
  {item_kind::file_search_call, "file_search_call", "fs_"},
};

constexpr std::pair<part_kind, std::string_view> part_names[] = {
  {part_kind::input_text, "input_text"},         {part_kind::output_text, "output_text"},
  {part_kind::refusal, "refusal"},               {part_kind::input_image, "input_image"},
  {part_kind::reasoning_text, "reasoning_text"}, {part_kind::summary_text, "summary_text"},
};

} // namespace

std::string_view to_string(item_kind k) {
  for (auto& e : kinds)
    if (e.kind == k)
      return e.name;
  return {};
}

std::optional<item_kind> parse_item_kind(std::string_view name) {
  for (auto& e : kinds)
    if (e.name == name)
      return e.kind;
  return std::nullopt;
}

std::string_view to_string(part_kind k) {
  for (auto& [kind, name] : part_names)
    if (kind == k)
      return name;
  return {};
}

std::optional<part_kind> parse_part_kind(std::string_view name) {
  for (auto& [kind, n] : part_names)
    if (n == name)
      return kind;
  return std::nullopt;
}

std::string_view id_prefix(item_kind type) {
  for (auto& e : kinds)
    if (e.kind == type)
      return e.prefix;
  return {};
}

std::string mint_item_id(item_kind type) {
  return uuid7_id(id_prefix(type));
}

void write_item(json::writer& w, const item& it) {
  w.StartObject();
  write_string(w, "id", it.id);
  write_string(w, "type", to_string(it.type));
  if (it.type == item_kind::message) {
    write_string(w, "role", it.role);
    write_string(w, "status", it.status);
    write_parts(w, "content", it.content);
  } else if (it.type == item_kind::reasoning) {
    write_parts(w, "summary", it.summary);
    write_parts(w, "content", it.content);
    w.Key("encrypted_content");
    w.Null();
    write_string(w, "status", it.status);
  } else if (it.type == item_kind::function_call) {
    write_string(w, "call_id", it.call_id);
    write_string(w, "name", it.name);
    write_string(w, "arguments", it.arguments);
    write_string(w, "status", it.status);
  } else if (it.type == item_kind::function_call_output) {
    write_string(w, "call_id", it.call_id);
    write_json_or_null(w, "output", it.output.empty() ? "\"\"" : it.output);
    write_string(w, "status", "completed");
  } else if (it.type == item_kind::mcp_list_tools) {
    write_string(w, "server_label", it.server_label);
    write_json_or_null(w, "tools", it.tools);
    write_json_or_null(w, "error", it.error);
  } else if (it.type == item_kind::mcp_call) {
    write_string(w, "server_label", it.server_label);
    write_string(w, "name", it.name);
    write_string(w, "arguments", it.arguments);
    write_json_or_null(w, "output", it.output);
    write_json_or_null(w, "error", it.error);
    write_string(w, "status", it.status);
    json::write_nullable(w, "approval_request_id", it.approval_request_id);
  } else if (it.type == item_kind::mcp_approval_request) {
    write_string(w, "server_label", it.server_label);
    write_string(w, "name", it.name);
    write_string(w, "arguments", it.arguments);
  } else if (it.type == item_kind::mcp_approval_response) {
    write_string(w, "approval_request_id", it.approval_request_id);
    w.Key("approve");
    w.Bool(it.approve);
    json::write_nullable(w, "reason", it.reason);
  } else if (it.type == item_kind::compaction) {
    write_string(w, "encrypted_content", it.encrypted_content);
  } else if (it.type == item_kind::web_search_call) {
    write_string(w, "status", it.status);
    w.Key("action");
    w.StartObject();
    write_string(w, "type", "search");
    write_string(w, "query", it.query);
    if (!it.results.empty()) {
      w.Key("sources");
      json::write_raw(w, it.results);
    }
    w.EndObject();
  } else if (it.type == item_kind::file_search_call) {
    write_string(w, "status", it.status);
    w.Key("queries");
    w.StartArray();
    if (!it.query.empty())
      w.String(it.query.c_str(), static_cast<rapidjson::SizeType>(it.query.size()));
    w.EndArray();
    write_json_or_null(w, "results", it.results);
  }
  w.EndObject();
}

std::string to_json(const item& it) {
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  write_item(w, it);
  return std::string(buf.GetString(), buf.GetSize());
}

item item_from_json(const json::value& v) {
  item it;
  it.id = json::get_string(v, "id");
  it.type = parse_item_kind(json::get_string(v, "type")).value_or(item_kind::unknown);
  it.status = json::get_string(v, "status");
  it.role = json::get_string(v, "role");
  if (auto c = json::member(v, "content"); c && c->IsString())
    it.content.push_back({it.role == "assistant" ? part_kind::output_text : part_kind::input_text, c->GetString(), {}, "auto"});
  else
    it.content = parts_from_json(c);
  it.summary = parts_from_json(json::member(v, "summary"));
  it.call_id = json::get_string(v, "call_id");
  it.name = json::get_string(v, "name");
  it.arguments = json::get_string(v, "arguments");
  it.output = raw_or_empty(json::member(v, "output"));
  it.server_label = json::get_string(v, "server_label");
  it.error = raw_or_empty(json::member(v, "error"));
  if (auto t = json::member(v, "tools"))
    it.tools = json::serialize(*t);
  it.approval_request_id = json::get_string(v, "approval_request_id");
  it.approve = json::get_bool(v, "approve").value_or(false);
  it.reason = json::get_string(v, "reason");
  it.encrypted_content = json::get_string(v, "encrypted_content");
  if (it.type == item_kind::web_search_call) {
    if (auto a = json::member(v, "action"); a && a->IsObject()) {
      it.query = json::get_string(*a, "query");
      if (auto s = json::member(*a, "sources"); s && s->IsArray())
        it.results = json::serialize(*s);
    }
  } else if (it.type == item_kind::file_search_call) {
    if (auto q = json::member(v, "queries"); q && q->IsArray() && !q->Empty() && (*q)[0].IsString())
      it.query = (*q)[0].GetString();
    if (auto r = json::member(v, "results"); r && r->IsArray())
      it.results = json::serialize(*r);
  }
  return it;
}

std::optional<item> item_from_json(std::string_view text) {
  auto doc = json::parse(text);
  if (!doc || !doc->IsObject())
    return std::nullopt;
  return item_from_json(static_cast<const json::value&>(*doc));
}

std::string message_text(const item& it) {
  std::string out;
  for (auto& p : it.content)
    if (p.type != part_kind::input_image)
      out += p.text;
  return out;
}

namespace {

// One token's logprob entry with only the members a client reads (RS-17): token, logprob, bytes and,
// when `alternatives`, top_logprobs. Chat choices and Responses deltas share the shape.
void write_logprob(json::writer& w, const json::value& entry, bool alternatives) {
  w.StartObject();
  w.Key("token");
  auto token = json::get_string(entry, "token");
  w.String(token.c_str(), static_cast<rapidjson::SizeType>(token.size()));
  w.Key("logprob");
  auto lp = json::member(entry, "logprob");
  w.Double(lp && lp->IsNumber() ? lp->GetDouble() : 0.0);
  w.Key("bytes");
  w.StartArray();
  if (auto bytes = json::member(entry, "bytes"); bytes && bytes->IsArray())
    for (auto& b : bytes->GetArray())
      if (b.IsInt())
        w.Int(b.GetInt());
  w.EndArray();
  if (alternatives) {
    w.Key("top_logprobs");
    w.StartArray();
    if (auto top = json::member(entry, "top_logprobs"); top && top->IsArray())
      for (auto& t : top->GetArray())
        if (t.IsObject())
          write_logprob(w, t, false);
    w.EndArray();
  }
  w.EndObject();
}

} // namespace

std::string logprobs_json(const json::value* v) {
  if (!v || !v->IsArray() || v->Empty())
    return {};
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  w.StartArray();
  for (auto& entry : v->GetArray())
    if (entry.IsObject())
      write_logprob(w, entry, true);
  w.EndArray();
  return std::string(buf.GetString(), buf.GetSize());
}

void append_logprobs(std::string& logprobs, const std::string& more) {
  if (more.size() <= 2) // "" or "[]"
    return;
  if (logprobs.size() <= 2)
    logprobs = more;
  else
    logprobs = logprobs.substr(0, logprobs.size() - 1) + "," + more.substr(1);
}

problem not_found(std::string message, std::string param) {
  return {errc::not_found, std::move(message), std::move(param), {}};
}

problem upstream_failure(std::string message, int upstream_status, bool first_round, int64_t retry_after_seconds) {
  bool client_error = upstream_status >= 400 && upstream_status < 500;
  bool rate_limited = upstream_status == 429;
  bool overloaded = upstream_status == 503 || upstream_status == 529;
  problem p;
  p.code = rate_limited               ? errc::rate_limited
           : overloaded               ? errc::unavailable
           : client_error && first_round ? errc::bad_request
                                      : errc::upstream_failed;
  p.message = std::move(message);
  p.kind = rate_limited ? "rate_limit_exceeded" : client_error ? "invalid_prompt" : "server_error";
  // Only an answer that tells a client to come back says when.
  if (rate_limited || overloaded)
    p.retry_after_seconds = retry_after_seconds;
  return p;
}

usage& usage::operator+=(const usage& o) {
  input_tokens = saturating_add(input_tokens, o.input_tokens);
  cached_tokens = saturating_add(cached_tokens, o.cached_tokens);
  output_tokens = saturating_add(output_tokens, o.output_tokens);
  reasoning_tokens = saturating_add(reasoning_tokens, o.reasoning_tokens);
  return *this;
}

void write_usage(json::writer& w, const usage& u) {
  w.StartObject();
  w.Key("input_tokens");
  w.Int64(u.input_tokens);
  w.Key("input_tokens_details");
  w.StartObject();
  w.Key("cached_tokens");
  w.Int64(u.cached_tokens);
  w.EndObject();
  w.Key("output_tokens");
  w.Int64(u.output_tokens);
  w.Key("output_tokens_details");
  w.StartObject();
  w.Key("reasoning_tokens");
  w.Int64(u.reasoning_tokens);
  w.EndObject();
  w.Key("total_tokens");
  w.Int64(saturating_add(u.input_tokens, u.output_tokens));
  w.EndObject();
}

} // namespace troupe::protocol::responses

#include "protocol/openai_chat_codec.hpp"

#include "protocol/ids.hpp"
#include "protocol/json.hpp"

#include <utility>

namespace troupe::protocol {

namespace {

constexpr const char* default_parameters = R"({"type":"object","properties":{}})";

void write_string(json::writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

void write_key(json::writer& w, const char* key) {
  w.Key(key);
}

// Tool parameters are stored as text; anything but an object would make the upstream reject the
// whole request, so an invalid schema degrades to "no parameters".
void write_parameters(json::writer& w, const std::string& parameters) {
  auto doc = json::parse(parameters);
  if (doc && doc->IsObject())
    doc->Accept(w);
  else
    json::write_raw(w, default_parameters);
}

void write_message(json::writer& w, const chat_message& m) {
  w.StartObject();
  write_key(w, "role");
  write_string(w, m.role);
  write_key(w, "content");
  if (m.content_null)
    w.Null();
  else
    write_string(w, m.content);
  if (!m.tool_calls.empty()) {
    write_key(w, "tool_calls");
    w.StartArray();
    for (const auto& call : m.tool_calls) {
      w.StartObject();
      write_key(w, "id");
      write_string(w, call.id);
      write_key(w, "type");
      w.String("function");
      write_key(w, "function");
      w.StartObject();
      write_key(w, "name");
      write_string(w, call.name);
      write_key(w, "arguments"); // a string holding JSON, as the chat API wants it
      write_string(w, call.arguments);
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
  }
  if (m.role == "tool") {
    write_key(w, "tool_call_id");
    write_string(w, m.tool_call_id);
    if (!m.name.empty()) {
      write_key(w, "name");
      write_string(w, m.name);
    }
  }
  w.EndObject();
}

std::string string_of(const json::value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// The upstream's own words when a body is an error object: {"error":{"message":...}} or {"error":"..."}.
std::optional<std::string> upstream_error(const json::value& doc) {
  auto err = json::member(doc, "error");
  if (!err || err->IsNull())
    return std::nullopt;
  if (err->IsString())
    return "upstream error: " + string_of(*err);
  auto message = json::get_string(*err, "message");
  if (!message.empty())
    return "upstream error: " + message;
  return "upstream error: " + json::serialize(*err);
}

// Arguments are normally a string holding JSON; a few servers send the object itself.
std::string arguments_text(const json::value* args) {
  if (!args || args->IsNull())
    return "";
  if (args->IsString())
    return string_of(*args);
  return json::serialize(*args);
}

token_usage usage_of(const json::value& usage) {
  token_usage u;
  u.prompt_tokens = json::get_int(usage, "prompt_tokens").value_or(0);
  u.completion_tokens = json::get_int(usage, "completion_tokens").value_or(0);
  u.total_tokens =
    json::get_int(usage, "total_tokens").value_or(u.prompt_tokens + u.completion_tokens);
  return u;
}

tool_call finished_call(std::string id, std::string name, std::string_view arguments) {
  tool_call call;
  call.id = id.empty() ? make_tool_call_id() : std::move(id);
  call.name = std::move(name);
  call.arguments = repair_arguments(arguments);
  return call;
}

bool is_object_text(std::string_view text) {
  auto doc = json::parse(text);
  return doc && doc->IsObject();
}

std::string_view trim(std::string_view s) {
  auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos)
    return {};
  auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// The text inside the first ``` fence, minus its info string (```json); `s` itself without a fence.
std::string_view strip_fences(std::string_view s) {
  auto open = s.find("```");
  if (open == std::string_view::npos)
    return s;
  auto body = s.substr(open + 3);
  auto newline = body.find('\n');
  auto brace = body.find_first_of("{[");
  if (newline != std::string_view::npos && (brace == std::string_view::npos || newline < brace))
    body.remove_prefix(newline + 1);
  auto close = body.find("```");
  if (close != std::string_view::npos)
    body = body.substr(0, close);
  return trim(body);
}

// Drops each comma that only whitespace separates from a closing } or ], outside strings.
std::string strip_trailing_commas(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == ',') {
      auto next = s.find_first_not_of(" \t\r\n", i + 1);
      if (next != std::string_view::npos && (s[next] == '}' || s[next] == ']'))
        continue;
    }
    out.push_back(c);
  }
  return out;
}

} // namespace

std::string encode_chat_request(const model_request& request) {
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  w.StartObject();
  write_key(w, "model");
  write_string(w, request.model);
  write_key(w, "messages");
  w.StartArray();
  for (const auto& m : request.messages)
    write_message(w, m);
  w.EndArray();
  if (request.temperature) {
    write_key(w, "temperature");
    w.Double(*request.temperature);
  }
  if (request.top_p) {
    write_key(w, "top_p");
    w.Double(*request.top_p);
  }
  if (request.max_tokens) {
    write_key(w, "max_tokens");
    w.Int64(*request.max_tokens);
  }
  write_key(w, "stream");
  w.Bool(request.stream);
  if (request.stream) {
    write_key(w, "stream_options");
    w.StartObject();
    write_key(w, "include_usage");
    w.Bool(true);
    w.EndObject();
  }
  if (!request.tools.empty()) {
    write_key(w, "tools");
    w.StartArray();
    for (const auto& tool : request.tools) {
      w.StartObject();
      write_key(w, "type");
      w.String("function");
      write_key(w, "function");
      w.StartObject();
      write_key(w, "name");
      write_string(w, tool.name);
      write_key(w, "description");
      write_string(w, tool.description);
      write_key(w, "parameters");
      write_parameters(w, tool.parameters);
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
    write_key(w, "tool_choice");
    w.String("auto");
  }
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

chat_decode_result decode_chat_response(std::string_view body) {
  chat_decode_result result;
  auto doc = json::parse(body);
  if (!doc || !doc->IsObject()) {
    result.error = "upstream reply is not a JSON object";
    return result;
  }
  if (auto err = upstream_error(*doc)) {
    result.error = std::move(*err);
    return result;
  }
  auto choices = json::member(*doc, "choices");
  if (!choices || !choices->IsArray() || choices->Empty()) {
    result.error = "upstream reply has no choices";
    return result;
  }
  const auto& choice = (*choices)[0];
  auto message = json::member(choice, "message");
  if (!message || !message->IsObject()) {
    result.error = "upstream reply has no choices[0].message";
    return result;
  }
  auto& reply = result.reply;
  reply.content = json::get_string(*message, "content");
  if (auto calls = json::member(*message, "tool_calls"); calls && calls->IsArray()) {
    for (const auto& call : calls->GetArray()) {
      const json::value* function = json::member(call, "function");
      if (!function)
        continue;
      reply.tool_calls.push_back(finished_call(json::get_string(call, "id"),
                                               json::get_string(*function, "name"),
                                               arguments_text(json::member(*function, "arguments"))));
    }
  }
  if (auto usage = json::member(*doc, "usage"); usage && usage->IsObject())
    reply.usage = usage_of(*usage);
  reply.model = json::get_string(*doc, "model");
  reply.finish_reason = json::get_string(choice, "finish_reason");
  result.ok = true;
  return result;
}

bool chat_stream_assembler::feed(std::string_view data) {
  if (trim(data) == "[DONE]") {
    done_ = true;
    return true;
  }
  auto doc = json::parse(data);
  if (!doc || !doc->IsObject()) {
    error_ = "upstream stream chunk is not a JSON object";
    return false;
  }
  if (auto err = upstream_error(*doc)) {
    error_ = std::move(*err);
    return false;
  }
  ++chunks_;
  if (model_.empty())
    model_ = json::get_string(*doc, "model");
  if (auto usage = json::member(*doc, "usage"); usage && usage->IsObject())
    usage_ = usage_of(*usage);
  auto choices = json::member(*doc, "choices");
  if (!choices || !choices->IsArray() || choices->Empty())
    return true; // e.g. the usage-only chunk at the end
  const auto& choice = (*choices)[0];
  if (auto reason = json::get_string(choice, "finish_reason"); !reason.empty())
    finish_reason_ = std::move(reason);
  auto delta = json::member(choice, "delta");
  if (!delta)
    return true;
  if (auto text = json::member(*delta, "content"); text && text->IsString())
    content_.append(text->GetString(), text->GetStringLength());
  auto calls = json::member(*delta, "tool_calls");
  if (!calls || !calls->IsArray())
    return true;
  for (const auto& piece : calls->GetArray()) {
    auto id = json::get_string(piece, "id");
    // Servers that omit `index` start a new call with each new id and continue the last one otherwise.
    int64_t index = 0;
    if (auto given = json::get_int(piece, "index"))
      index = *given;
    else if (last_index_ < 0 || (!id.empty() && calls_[last_index_].id != id))
      index = last_index_ + 1;
    else
      index = last_index_;
    last_index_ = index;
    auto& call = calls_[index];
    if (call.id.empty())
      call.id = std::move(id);
    auto function = json::member(piece, "function");
    if (!function)
      continue;
    if (call.name.empty())
      call.name = json::get_string(*function, "name");
    call.arguments += arguments_text(json::member(*function, "arguments"));
  }
  return true;
}

model_reply chat_stream_assembler::finish() const {
  model_reply reply;
  reply.content = content_;
  for (const auto& [index, call] : calls_)
    reply.tool_calls.push_back(finished_call(call.id, call.name, call.arguments));
  reply.usage = usage_;
  reply.model = model_;
  reply.finish_reason = finish_reason_;
  return reply;
}

std::string repair_arguments(std::string_view raw) {
  if (is_object_text(raw))
    return std::string(raw);
  auto unfenced = strip_fences(trim(raw));
  if (is_object_text(unfenced))
    return std::string(unfenced);
  auto uncomma = strip_trailing_commas(unfenced);
  if (is_object_text(uncomma))
    return uncomma;
  return "{}";
}

std::string make_tool_call_id() {
  return "call_" + random_hex(12);
}

} // namespace troupe::protocol

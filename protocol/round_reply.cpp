#include "protocol/round_reply.hpp"

#include "protocol/ids.hpp"
#include "protocol/json.hpp"

namespace troupe::protocol {

using responses::upstream_event;

namespace {

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


std::vector<upstream_event> reply_events(const model_reply& reply) {
  std::vector<upstream_event> out;
  if (!reply.content.empty()) {
    upstream_event e;
    e.what = upstream_event::kind::text;
    e.text = reply.content;
    out.push_back(std::move(e));
  }
  int64_t index = 0;
  for (auto& call : reply.tool_calls) {
    upstream_event c;
    c.what = upstream_event::kind::call;
    c.index = index;
    c.call_id = call.id;
    c.name = call.name;
    out.push_back(std::move(c));
    upstream_event a;
    a.what = upstream_event::kind::arguments;
    a.index = index++;
    a.text = call.arguments;
    out.push_back(std::move(a));
  }
  upstream_event f;
  f.what = upstream_event::kind::finish;
  f.finish = reply.finish_reason.empty() ? (reply.tool_calls.empty() ? "stop" : "tool_calls") : reply.finish_reason;
  f.tokens.input_tokens = reply.usage.prompt_tokens;
  f.tokens.output_tokens = reply.usage.completion_tokens;
  out.push_back(std::move(f));
  return out;
}

bool reply_assembler::feed(const upstream_event& e) {
  if (ended_)
    return false;
  switch (e.what) {
  case upstream_event::kind::text:
    content_ += e.text;
    break;
  case upstream_event::kind::call:
    calls_[e.index].id = e.call_id;
    calls_[e.index].name = e.name;
    break;
  case upstream_event::kind::arguments:
    calls_[e.index].arguments += e.text;
    break;
  case upstream_event::kind::finish:
    ended_ = true;
    end_.ok = true;
    end_.reply.finish_reason = e.finish;
    end_.reply.usage = {e.tokens.input_tokens, e.tokens.output_tokens, e.tokens.input_tokens + e.tokens.output_tokens};
    break;
  case upstream_event::kind::failure:
    ended_ = true;
    end_.error = e.text;
    end_.http_status = e.http_status;
    end_.retryable = e.retryable;
    break;
  default: // reasoning, refusals and item boundaries are not part of an agent step
    break;
  }
  return !ended_;
}

model_outcome reply_assembler::outcome() const {
  auto out = end_;
  if (!out.ok)
    return out;
  out.reply.content = content_;
  for (auto& [index, c] : calls_)
    out.reply.tool_calls.push_back({c.id.empty() ? make_tool_call_id() : c.id, c.name, repair_arguments(c.arguments)});
  return out;
}

} // namespace troupe::protocol

#include "protocol/round_reply.hpp"

#include "protocol/openai_chat_codec.hpp"

namespace troupe::protocol {

using responses::upstream_event;

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

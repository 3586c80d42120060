#include "protocol/context_window.hpp"

#include "protocol/agent_loop.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace troupe::protocol {

int64_t estimated_tokens(const chat_message& m) {
  std::size_t bytes = m.content.size();
  for (auto& c : m.tool_calls)
    bytes += c.name.size() + c.arguments.size();
  return static_cast<int64_t>((bytes + 3) / 4) + 4;
}

int64_t estimated_tokens(const std::vector<chat_message>& messages) {
  int64_t total = 0;
  for (auto& m : messages)
    total += estimated_tokens(m);
  return total;
}

int64_t context_budget(std::optional<int64_t> metadata_max_context_tokens, int64_t react_max_context_tokens,
                       std::optional<int64_t> request_max_tokens, int64_t model_max_tokens) {
  auto context = metadata_max_context_tokens.value_or(react_max_context_tokens);
  auto reserved = request_max_tokens.value_or(model_max_tokens);
  return std::max<int64_t>(1, context - reserved);
}

namespace {

// The first index of the window: the last `window_size` messages, moved back until each tool message
// in it has the assistant message that called it (a call can sit before other tool messages of its
// step, so this repeats until nothing moves).
std::size_t window_start(const std::vector<chat_message>& messages, std::size_t window_size) {
  auto n = messages.size();
  std::size_t start = n > window_size ? n - window_size : 0;
  std::map<std::string, std::size_t> caller; // call id → the assistant message that made it
  for (std::size_t i = 0; i < n; ++i)
    for (auto& c : messages[i].tool_calls)
      caller.emplace(c.id, i);
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t i = start; i < n; ++i) {
      if (messages[i].role != "tool")
        continue;
      auto found = caller.find(messages[i].tool_call_id);
      if (found != caller.end() && found->second < start) {
        start = found->second;
        moved = true;
        break;
      }
    }
  }
  return start;
}

} // namespace

context_window fit_context(std::vector<chat_message> messages, int64_t budget_tokens, std::size_t window_size) {
  context_window out;
  out.original_message_count = messages.size();
  out.estimated_tokens_before = estimated_tokens(messages);
  out.budget_tokens = budget_tokens;
  auto keep_all = [&] {
    out.kept_message_count = messages.size();
    out.estimated_tokens_after = out.estimated_tokens_before;
    out.messages = std::move(messages);
    return out;
  };
  if (out.estimated_tokens_before <= budget_tokens)
    return keep_all();

  auto start = window_start(messages, window_size);
  bool first_user_seen = false;
  std::vector<chat_message> kept;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    auto& m = messages[i];
    bool first_user = m.role == "user" && !first_user_seen;
    first_user_seen = first_user_seen || m.role == "user";
    if (i >= start || m.role == "system" || first_user)
      kept.push_back(std::move(m));
  }
  // What the cut left unpaired (an answer whose call went, a call whose answer went) goes too.
  kept = clean_history(std::move(kept));
  if (kept.size() >= out.original_message_count) {
    messages = std::move(kept);
    return keep_all();
  }
  out.compressed = true;
  out.kept_message_count = kept.size();
  out.estimated_tokens_after = estimated_tokens(kept);
  out.messages = std::move(kept);
  return out;
}

} // namespace troupe::protocol

// The agent service's context budget (AS-23) as pure decisions: how many tokens a conversation is
// estimated at, the budget a run has, and which messages a round sends when the conversation is over
// it. The run keeps its whole transcript; only what one round sends upstream is cut.
#pragma once

#include "protocol/chat_types.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace troupe::protocol {

// ⌈bytes/4⌉ + 4 for one message, where the bytes are its content and, for an assistant message,
// the names and arguments of its calls: what the model reads of it (AS-23).
int64_t estimated_tokens(const chat_message& m);
int64_t estimated_tokens(const std::vector<chat_message>& messages);

// budget = max(1, C − B): C the run's metadata.max_context_tokens, else react.max_context_tokens;
// B the request's max_tokens, else model.max_tokens (AS-23).
int64_t context_budget(std::optional<int64_t> metadata_max_context_tokens, int64_t react_max_context_tokens,
                       std::optional<int64_t> request_max_tokens, int64_t model_max_tokens);

// What one round sends. `compressed` when messages were left out (AS-24's notice follows).
struct context_window {
  std::vector<chat_message> messages;
  bool compressed = false;
  std::size_t original_message_count = 0;
  std::size_t kept_message_count = 0;
  int64_t estimated_tokens_before = 0;
  int64_t estimated_tokens_after = 0;
  int64_t budget_tokens = 0;
};

// Within the budget every message goes. Above it, only the system messages, the first user message
// and the last `window_size` messages go, the window widened until every tool message it keeps has
// the assistant message that called it; calls whose answer is left out are dropped with it (AS-95:
// no unanswered call goes upstream). `messages` is what the round would send, system message first.
context_window fit_context(std::vector<chat_message> messages, int64_t budget_tokens, std::size_t window_size);

} // namespace troupe::protocol

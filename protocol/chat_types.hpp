// The chat-completions message model shared by the agent loop, the model port and its codecs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe::protocol {

// One function call requested by a model. `arguments` is JSON object text.
struct tool_call {
  std::string id;
  std::string name;
  std::string arguments = "{}";
};

struct chat_message {
  std::string role; // system | user | assistant | tool
  std::string content;
  bool content_null = false; // an assistant message that only calls tools
  std::vector<tool_call> tool_calls;
  std::string tool_call_id; // role == tool
  std::string name;         // role == tool: the tool's name
};

// A tool offered to the model. `parameters` is JSON Schema text.
inline chat_message text_message(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

struct tool_schema {
  std::string name;
  std::string description;
  std::string parameters = R"({"type":"object","properties":{}})";
};

struct token_usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t total_tokens = 0;

  token_usage& operator+=(const token_usage& other) {
    prompt_tokens += other.prompt_tokens;
    completion_tokens += other.completion_tokens;
    total_tokens += other.total_tokens;
    return *this;
  }
};

struct model_request {
  std::string model;
  std::vector<chat_message> messages;
  std::vector<tool_schema> tools; // sent with tool_choice "auto" when not empty
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> max_tokens;
  bool stream = true;
};

struct model_reply {
  std::string content;
  std::vector<tool_call> tool_calls;
  token_usage usage;
  std::string finish_reason;
};

// What one inference ended with: a reply, a failure, or a cancellation.
struct model_outcome {
  bool ok = false;
  model_reply reply;
  std::string error;     // "LLM call failed: <error>" is built by the loop
  int http_status = 0;   // 0 for transport errors
  bool retryable = false; // the failure was transient (AS-17, AS-53)
  std::string upstream_message;   // an HTTP failure: the upstream's own error message (RS-43)
  int64_t retry_after_seconds = -1; // an HTTP failure: the upstream's valid Retry-After, -1 = none
  bool cancelled = false;
};

} // namespace troupe::protocol

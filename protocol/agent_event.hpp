// fastreact.agent_event.v1: the event a run emits, and its JSON payload (AS-12, AS-13).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

inline constexpr const char* agent_event_schema = "fastreact.agent_event.v1";

struct agent_event {
  std::string type;
  int64_t sequence = 0;
  std::string run_id;
  std::string session_id;
  std::string timestamp;
  std::string content;
  std::optional<std::string> tool_name;
  std::optional<std::string> tool_args; // JSON object text
  std::optional<std::string> tool_call_id;
  std::optional<double> duration_ms;
  std::vector<std::string> cited_source_ids;
  std::optional<std::string> approval_request_id;
  std::string metadata = "{}"; // JSON object text
};

// The `error` event that ends an attempt (AS-14, AS-90), stamped now: `content` is the message and
// `metadata.error_type` says what ended it.
agent_event error_event(std::string run_id, std::string session_id, int64_t sequence, std::string message,
                        std::string_view error_type);

// The one-line JSON payload with every key of AS-12; inapplicable keys are null.
std::string to_json(const agent_event& e);

// `id: <sequence>`, `event: <type>`, `data: <payload>` (AS-11, AS-73).
std::string to_sse_frame(const agent_event& e);

} // namespace troupe::protocol

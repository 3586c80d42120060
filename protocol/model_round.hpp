// The model round contract (DESIGN.md: the model port): what one round asks of the model and what it
// says back, the same for the agent service and the Responses gateway, and how a round renders for
// each upstream protocol (responses.md §8). A round carries every setting it needs; no surface's
// request travels with it. The readers of each protocol's answers are protocol/upstream_readers.hpp.
#pragma once

#include "protocol/chat_types.hpp"
#include "protocol/responses_items.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace troupe::protocol::responses {

struct tool_choice {
  std::string mode = "auto"; // none | auto | required | function | mcp
  std::string name;          // function, mcp (optional)
  std::string server_label;  // mcp
};

// A tool offered upstream: a client function or an MCP tool under its model-facing name.
struct upstream_tool {
  std::string name;
  std::string description;
  std::string parameters;
  std::string strict;
};

// One round's request, for either adapter.
struct round_request {
  std::string model;
  std::optional<std::string> instructions; // the system message
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<bool> parallel_tool_calls;
  tool_choice choice;
  std::string text = R"({"format":{"type":"text"}})"; // the output format, as a Responses `text`
  std::string reasoning;                               // a Responses `reasoning` object, "" = none
  std::vector<std::string> include;
  std::optional<int64_t> top_logprobs; // 0..20
  std::string truncation = "disabled";

  std::vector<item> history; // the working history (hidden pairs included)
  std::vector<upstream_tool> tools;
  bool force_auto = false;   // a round after gateway calls (RS-14 tool_choice)
  std::optional<int64_t> max_output_tokens;
  bool stream = true;
  // The agent service's rounds: tool messages name their tool (AS-19), and a call to a tool the round
  // did not offer still reaches the loop, which refuses it (AS-31).
  bool name_tool_messages = false;
  bool keep_unoffered_calls = false;
};

// One step of an upstream round, whatever protocol carried it (RS-45, RS-48).
struct upstream_event {
  // `item_end`: the upstream's current item ended; what follows opens a new one (RS-45: one client
  // item per upstream item).
  enum class kind { reasoning, text, refusal, call, arguments, item_end, finish, failure };
  kind what = kind::text;
  int64_t index = 0;    // call, arguments: the call's index within the round
  std::string text;     // a delta, an arguments fragment, or the failure's message
  std::string logprobs; // text: the delta's token logprobs, a JSON array's text in the Responses shape; "" = none
  std::string call_id;  // call
  std::string name;     // call
  std::string finish;   // finish: stop | tool_calls | length | content_filter
  usage tokens;         // finish
  int http_status = 0;  // failure: the upstream's HTTP status, 0 for transport and stream failures
  bool retryable = false; // failure: transient (AS-17), so a background run may try again (AS-53)
  // failure with an HTTP status: the upstream's own error message (upstream_error_message), "" when
  // it gave none, and its Retry-After in seconds (retry_after_seconds), -1 when it gave none (RS-43).
  std::string upstream_message;
  int64_t retry_after_seconds = -1;
};

struct chat_options {
  std::string developer_role = "system";
  std::string max_tokens_field = "max_tokens";
  bool replay_reasoning = false;
};

// Whether the round asks for token logprobs: `include` names message.output_text.logprobs, or
// top_logprobs asks for alternatives (RS-14).
bool wants_logprobs(const round_request& r);

// RS-47: the body of POST {base_url}/chat/completions.
std::string render_chat_request(const round_request& r, const chat_options& options);
// RS-45: the body of POST {base_url}/responses.
std::string render_responses_request(const round_request& r);

// A round as the agent loop's chat request: what the built-in scripted model answers.
model_request chat_model_request(const round_request& r);

// The model-facing name of an MCP tool (RS-31).
std::string mcp_function_name(const std::string& server_label, const std::string& tool);

// The model's view of a history (RS-46, RS-50): what the upstream is sent, in order.
std::vector<item> model_view(const std::vector<item>& history);

// The text a function_call_output (or an mcp_call) gives the model: list outputs joined by lines.
std::string output_text_of(const item& o);

// The chat messages a history renders as (its model view, without a system message): a
// function_call joins the assistant message before it, a function_call_output is a tool message
// named after its call.
std::vector<chat_message> chat_messages(const std::vector<item>& history);
// Chat messages in the item model: the agent service's history as the one loop keeps it.
std::vector<item> items_of(const std::vector<chat_message>& messages);

} // namespace troupe::protocol::responses

// The Responses dialect's requests (responses.md §2), its response object (RS-15), the checks over
// history (RS-28, RS-33) and the rendering of history for either upstream protocol (§8, RS-50).
#pragma once

#include "protocol/chat_types.hpp"
#include "protocol/responses_items.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol::responses {

struct function_tool {
  std::string name;
  std::string description;
  std::string parameters = R"({"type":"object","properties":{}})";
  std::string strict; // JSON boolean text, or "" when not given
};

// A `type:"mcp"` tool of a request (RS-30). JSON-valued fields are "" when absent.
struct mcp_declaration {
  std::size_t index = 0; // in the request's tools, for error params
  std::string server_label;
  std::string server_url;
  std::string require_approval;
  std::string allowed_tools;
  std::string headers;
  std::string authorization;
};

struct tool_choice {
  std::string mode = "auto"; // none | auto | required | function | mcp
  std::string name;          // function, mcp (optional)
  std::string server_label;  // mcp
};

// A validated POST /v1/responses body (RS-14). `input` items have ids; an item_reference keeps only
// its id and type.
struct request {
  std::string model;
  std::vector<item> input;
  bool input_has_ids = false; // some input item came with an id (it may name a stored item)
  std::optional<std::string> instructions;
  std::string previous_response_id;
  std::string conversation_id;
  bool store = true;
  bool stream = false;
  bool background = false;
  std::vector<function_tool> functions;
  std::vector<mcp_declaration> mcp;
  std::string tools_echo = "[]"; // the client's tools, without credentials (RS-15)
  tool_choice choice;
  std::string tool_choice_echo = "\"auto\"";
  std::optional<bool> parallel_tool_calls;
  std::optional<int64_t> max_tool_calls;
  std::optional<int64_t> max_output_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::string text = R"({"format":{"type":"text"}})";
  std::string reasoning; // "" = null
  std::vector<std::string> include;
  std::string metadata = "{}";
  std::string truncation = "disabled";
  std::optional<int64_t> compact_threshold; // context_management (RS-51)
};

std::variant<request, problem> parse_request(std::string_view body, int64_t default_compact_threshold = 100000);

// Any body of the gateway as JSON (json::parse_body): malformed → `invalid_json`; too deep, not UTF-8
// or a repeated member name → 400 saying which, with the member's path as `param`.
std::variant<json::document, problem> parse_json_body(std::string_view body);

// POST /v1/responses/compact (RS-10): model, input, previous_response_id, instructions.
std::variant<request, problem> parse_compact_request(std::string_view body);

// Items given to a conversation (RS-12): 1..20 (`min_items` 0 at creation), ids checked.
std::variant<std::vector<item>, problem> parse_conversation_items(const json::value& items, std::size_t min_items);

// A conversation's metadata (RS-11): an object of ≤16 string values; "" when invalid, with `error`.
std::optional<problem> check_metadata(const json::value& v, const std::string& param);

// What a response is at a point of its life (RS-15).
struct response_state {
  std::string id;
  int64_t created_at = 0;
  std::string status = "in_progress";
  int64_t completed_at = 0;          // set when completed
  std::string error;                 // {"code","message"} JSON text, "" = null
  std::string incomplete_reason;     // "" = null
  std::vector<item> output;
  std::optional<usage> tokens;       // null until terminal
};

std::string response_json(const request& r, const response_state& s);

// The model-facing name of an MCP tool (RS-31).
std::string mcp_function_name(const std::string& server_label, const std::string& tool);

// RS-28 and RS-33 over rehydrated history + new input; `declared` are the request's MCP labels.
std::optional<problem> check_history(const std::vector<item>& history, const std::vector<item>& input,
                                       const std::vector<mcp_declaration>& declared);

// The model's view of a history (RS-46, RS-50): what the upstream is sent, in order.
std::vector<item> model_view(const std::vector<item>& history);

// A tool offered upstream: a client function or an MCP tool under its model-facing name.
struct upstream_tool {
  std::string name;
  std::string description;
  std::string parameters;
  std::string strict;
};

// One round's request, for either adapter.
struct round_request {
  const request* req = nullptr;
  std::vector<item> history; // the working history (hidden pairs included)
  std::vector<upstream_tool> tools;
  bool force_auto = false;   // a round after gateway calls (RS-14 tool_choice)
  std::optional<int64_t> max_output_tokens;
  bool stream = true;
  std::optional<std::string> system_override; // a summary call's system message (RS-52)
  // The agent service's rounds: tool messages name their tool (AS-19), and a call to a tool the round
  // did not offer still reaches the loop, which refuses it (AS-31).
  bool name_tool_messages = false;
  bool keep_unoffered_calls = false;
};

struct chat_options {
  std::string developer_role = "system";
  std::string max_tokens_field = "max_tokens";
  bool replay_reasoning = false;
};

// RS-47: the body of POST {base_url}/chat/completions.
std::string render_chat_request(const round_request& r, const chat_options& options);
// RS-45: the body of POST {base_url}/responses.
std::string render_responses_request(const round_request& r);

// A round as the agent loop's chat request: what the built-in scripted model answers.
model_request chat_model_request(const round_request& r);

// The chat messages a history renders as (its model view, without a system message): a
// function_call joins the assistant message before it, a function_call_output is a tool message
// named after its call.
std::vector<chat_message> chat_messages(const std::vector<item>& history);
// Chat messages in the item model: the agent service's history as the one loop keeps it.
std::vector<item> items_of(const std::vector<chat_message>& messages);

// The user message that asks for a hand-off summary (RS-51, RS-52).
item compaction_request();
// The window after a summary (RS-51, RS-52): the history's user messages under new ids, in order,
// then one compaction item holding the summary.
std::vector<item> compacted_window(const std::vector<item>& history, const std::string& summary);

// RS-51: the estimated size of a rendered history, in tokens.
int64_t estimate_tokens(const std::vector<item>& history, const std::string& instructions);

} // namespace troupe::protocol::responses

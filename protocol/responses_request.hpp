// The Responses dialect's requests (responses.md §2), its response object (RS-15) and the checks over
// history (RS-28, RS-33). What a round asks of the model is protocol/model_round.hpp.
#pragma once

#include "protocol/model_round.hpp"
#include "protocol/responses_items.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::protocol::responses {

struct function_tool {
  std::string name;
  std::string description;
  std::string parameters = R"({"type":"object","properties":{}})";
  std::string strict; // JSON boolean text, or "" when not given
};

// A filter over an MCP server's tools (RS-30, RS-33): by name, by read-only hint, or both; a part
// not given says nothing.
struct tool_filter {
  std::optional<std::vector<std::string>> tool_names;
  std::optional<bool> read_only;
};

// RS-33's `require_approval`, read once: "always" (also when absent), "never", or {always?, never?}.
struct approval_policy {
  enum class kind { always, never, filters } what = kind::always;
  std::optional<tool_filter> always;
  std::optional<tool_filter> never;
};

// A `type:"mcp"` tool of a request (RS-30). JSON-valued fields are "" when absent.
struct mcp_declaration {
  std::size_t index = 0; // in the request's tools, for error params
  std::string server_label;
  std::string server_url;
  approval_policy require_approval;
  std::optional<tool_filter> allowed_tools; // absent: every tool
  std::string headers;
  std::string authorization;
};

// A `web_search`/`web_search_preview` or `file_search` tool of a request (RS-27): `call` is the item
// it makes (web_search_call, file_search_call). file_search carries what its provider receives.
struct search_declaration {
  std::size_t index = 0; // in the request's tools, for error params
  item_kind call = item_kind::web_search_call;
  std::vector<std::string> vector_store_ids;
  int64_t max_num_results = 10;
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
  std::vector<search_declaration> search; // RS-27; enabled or not is the server's (check_search_tools)
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
  std::optional<int64_t> top_logprobs; // 0..20, forwarded (RS-14)
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

// The metadata a conversation body sets (RS-11), as stored text: the given object, "{}" for null, and
// nullopt when the body has no `metadata` (an update then keeps what is stored).
std::variant<std::optional<std::string>, problem> conversation_metadata(const json::value& body);

// The `include` (or `include[]`) values of a GET's query (RS-5, RS-8, RS-12), checked as on create:
// an unknown one → 400 `invalid_value` naming it, param `include[<i>]`.
std::optional<problem> check_include_query(const std::vector<std::pair<std::string, std::string>>& query);

// Where a response is in its life (RS-15). Its wire name, in the response object and in the stored
// row, is only to_string's and parse_response_status's.
enum class response_status { queued, in_progress, completed, incomplete, failed, cancelled };

std::string_view to_string(response_status s);
std::optional<response_status> parse_response_status(std::string_view name);
// Still queued or in progress: not yet terminal.
bool in_flight(response_status s);

// What a response is at a point of its life (RS-15).
struct response_state {
  std::string id;
  int64_t created_at = 0;
  response_status status = response_status::in_progress;
  int64_t completed_at = 0;          // set when completed
  std::optional<std::string> error;             // {"code","message"} JSON text
  std::optional<std::string> incomplete_reason; // incomplete_details.reason
  std::vector<item> output;
  std::optional<usage> tokens;       // null until terminal
};

std::string response_json(const request& r, const response_state& s);

// What every round of a response asks of the model, from its request: model, instructions,
// sampling, output format, tool_choice (RS-14, RS-45, RS-47).
void fill_round(round_request& round, const request& r);

// RS-28 and RS-33 over rehydrated history + new input; `declared` are the request's MCP labels.
std::optional<problem> check_history(const std::vector<item>& history, const std::vector<item>& input,
                                       const std::vector<mcp_declaration>& declared);

// The user message that asks for a hand-off summary (RS-51, RS-52).
item compaction_request();
// The window after a summary (RS-51, RS-52): the history's user messages under new ids, in order,
// then one compaction item holding the summary.
std::vector<item> compacted_window(const std::vector<item>& history, const std::string& summary);

// RS-51: the estimated size of a rendered history, in tokens.
int64_t estimate_tokens(const std::vector<item>& history, const std::string& instructions);

} // namespace troupe::protocol::responses

// The Responses item model (responses.md §3): the history the one agent loop keeps, its JSON, and
// the client error object of the Responses dialect (RS-1).
#pragma once

#include "protocol/errors.hpp"
#include "protocol/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol::responses {

// What a content part is (RS-17). Its wire name is only the codec's: to_string and parse_part_kind.
enum class part_kind {
  unknown, // a type read leniently that the model does not know; written as ""
  input_text,
  output_text,
  refusal,
  input_image,
  reasoning_text,
  summary_text,
};

// The wire name of a part kind ("" for unknown).
std::string_view to_string(part_kind k);
// The part kind a wire name names; nullopt for a name no kind has.
std::optional<part_kind> parse_part_kind(std::string_view name);

// A part of a message's content, a reasoning item's content or summary (RS-17).
struct content_part {
  part_kind type = part_kind::unknown;
  std::string text; // the text, or the refusal
  std::string image_url;
  std::string detail = "auto";
  std::string logprobs; // an output_text part's token logprobs, a JSON array's text; "" = []
};

// A logprobs array (an output_text part's, a Responses delta's, a chat choice's `logprobs.content`) as
// the text of the Responses shape, each entry only its token, logprob, bytes and top_logprobs; "" when
// there are none. Whatever else an upstream or a client put there is not kept.
std::string logprobs_json(const json::value* v);
// `more` (a JSON array's text of logprobs, "" = none) appended to `logprobs`.
void append_logprobs(std::string& logprobs, const std::string& more);

// What an item is (RS-17). Its wire name is only the codec's: to_string and parse_item_kind.
enum class item_kind {
  unknown, // a type read leniently that the model does not know; written as ""
  message,
  reasoning,
  function_call,
  function_call_output,
  mcp_call,
  mcp_list_tools,
  mcp_approval_request,
  mcp_approval_response,
  compaction,
  item_reference, // an input item naming a stored one by id (RS-14)
  web_search_call, // RS-27
  file_search_call,
};

// The wire name of a kind ("" for unknown).
std::string_view to_string(item_kind k);
// The kind a wire name names; nullopt for a name no kind has.
std::optional<item_kind> parse_item_kind(std::string_view name);

// One item (RS-17). Fields a type does not use stay empty. JSON-valued fields hold JSON text; an
// empty one is written as null.
struct item {
  std::string id;
  item_kind type = item_kind::unknown;
  std::string status;
  std::string role;                   // message
  std::vector<content_part> content;  // message, reasoning (reasoning_text)
  std::vector<content_part> summary;  // reasoning (summary_text)
  std::string call_id;                // function_call, function_call_output
  std::string name;                   // function_call, mcp_call, mcp_approval_request
  std::string arguments;              // JSON object text, as the model wrote it
  std::string output;                 // function_call_output: a JSON string or array; mcp_call: string
  std::string server_label;           // mcp_*
  std::string error;                  // mcp_call, mcp_list_tools: JSON object text
  std::string tools = "[]";           // mcp_list_tools: JSON array text
  std::string approval_request_id;    // mcp_call, mcp_approval_response
  bool approve = false;               // mcp_approval_response
  std::string reason;                 // mcp_approval_response
  std::string encrypted_content;      // compaction: the plaintext summary (RS-17)
  // web_search_call, file_search_call (RS-27): the query; `results` the action's `sources` or the
  // `results` as JSON array text, "" when the request did not include them; `output` (never written)
  // the results as the model reads them, in memory for the rounds of the response that ran it.
  std::string query;
  std::string results;
};

// The id prefix of an item kind (RS-18); "" for a kind without items.
std::string_view id_prefix(item_kind type);
// A fresh id for an item of `type`.
std::string mint_item_id(item_kind type);

void write_item(json::writer& w, const item& it);
std::string to_json(const item& it);
// An item as stored or as given by a client, fields read leniently (validation is the request's).
item item_from_json(const json::value& v);
std::optional<item> item_from_json(std::string_view text);

// The concatenated text of a message's text parts (every part but images).
std::string message_text(const item& it);

// A 404 for the Responses gateway (RS-1).
problem not_found(std::string message, std::string param = {});

// How an upstream failure ends a response (RS-16, RS-43): `upstream_status` is the model server's
// HTTP status (0 when none: a transport or stream failure). Its kind names the failure (RS-16) and
// its code what a non-streaming client is answered: rate_limited for a 429 (with the upstream's
// `retry_after_seconds`, -1 when none), unavailable for an overloaded upstream (503, 529),
// bad_request for another 4xx of the first round, else upstream_failed.
problem upstream_failure(std::string message, int upstream_status, bool first_round,
                         int64_t retry_after_seconds = -1);

// Token usage of a response (RS-19): saturating sums.
struct usage {
  int64_t input_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t output_tokens = 0;
  int64_t reasoning_tokens = 0;

  usage& operator+=(const usage& o);
};

void write_usage(json::writer& w, const usage& u);

} // namespace troupe::protocol::responses

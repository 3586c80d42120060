// The Responses gateway's search tools (RS-27): web_search (alias web_search_preview) and
// file_search, served by a configured provider. What a request declares, what the model is offered,
// what a provider is sent and what its reply may be, and the text the model reads back.
#pragma once

#include "protocol/errors.hpp"
#include "protocol/json.hpp"
#include "protocol/model_round.hpp"
#include "protocol/responses_items.hpp"
#include "protocol/responses_request.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol::responses {

// Bounds on a provider's reply: it is input from outside.
constexpr std::size_t max_search_reply_bytes = std::size_t{1} << 20;
constexpr std::size_t max_search_results = 50;
constexpr std::size_t max_search_field_bytes = 4096;  // title, url, file_id, filename
constexpr std::size_t max_search_text_bytes = 16384;  // snippet, text
constexpr int64_t max_file_search_results = 50;       // file_search's max_num_results
constexpr std::size_t max_vector_store_ids = 16;

// How a search port's output says the search failed: the marker, then why.
constexpr std::string_view search_failure_marker = "[SEARCH_ERROR] ";

// A request's `web_search`/`web_search_preview`/`file_search` tool at `at` ("tools[2]"): one of each
// call type per request (`earlier` are those declared before it). file_search reads
// `vector_store_ids` (strings) and `max_num_results` (1..50, default 10).
std::variant<search_declaration, problem> parse_search_tool(const json::value& tool, const std::string& type,
                                                           const std::string& at,
                                                           const std::vector<search_declaration>& earlier);

// Whether this server serves the request's search tools (RS-27): a type without a provider is the
// 400 every unknown tool type gets, and a client function may not take a search tool's name.
std::optional<problem> check_search_tools(const request& r, bool web_search_enabled, bool file_search_enabled);

// The function the model is offered for a search call type: `web_search`/`file_search` with
// parameters {"query": string}.
upstream_tool search_function(item_kind call);
std::string search_function_name(item_kind call);
// The item type of a search function's calls, or nullopt for another name.
std::optional<item_kind> search_call_of(std::string_view function_name);
// The family of the call type's events: "response.web_search_call" or "response.file_search_call".
std::string search_event_family(item_kind call);
// Whether the request includes the call type's results in its items (`web_search_call.action.sources`,
// `file_search_call.results`).
bool includes_search_results(const request& r, item_kind call);

// The query in the model's arguments, or why there is none usable.
struct search_query {
  std::string query;
  std::string error;
};
search_query query_of(std::string_view arguments);

// What a provider is sent: {"query"} for web_search; {"query","vector_store_ids","max_num_results"}
// for file_search.
std::string provider_request(const search_declaration& d, const std::string& query);

// One result: web_search's {title,url,snippet}, file_search's {file_id,filename,score,text}.
struct search_hit {
  std::string title;
  std::string url;
  std::string snippet;
  std::string file_id;
  std::string filename;
  double score = 0;
  std::string text;
};

// A provider's reply: a JSON array of results, or an object whose `results` is one. Bounded: at most
// max_search_reply_bytes, the first max_search_results results (file_search: max_num_results), each
// string cut to its bound at a character boundary. Anything else is `error`, worded for the model
// and the log.
struct search_reply {
  std::vector<search_hit> hits;
  std::string error;
};
search_reply parse_search_reply(item_kind call, std::string_view text, std::size_t max_results = max_search_results);

// An HTTP provider's answer: its body when the status is 2xx, else why it failed.
std::optional<std::string> search_http_failure(int status, std::string_view body);

// The results as the model reads them: one numbered entry per result, or a sentence saying there
// were none.
std::string numbered_results(item_kind call, const std::string& query, const std::vector<search_hit>& hits);
// The item's optional field: web_search_call's action.sources [{type:"url",url}], file_search_call's
// results [{file_id,filename,score,text,attributes}], as JSON array text.
std::string results_json(item_kind call, const std::vector<search_hit>& hits);
// The output the model reads for a failed search (RS-25): {"error":"<message>"}.
std::string search_error_output(const std::string& message);

// A search item as the model reads it in a later response (RS-46): its numbered text when the
// response that ran it still holds it, else what the stored item carries.
std::string search_history_text(const item& it);

} // namespace troupe::protocol::responses

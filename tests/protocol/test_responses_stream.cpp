// Unit tests of Responses streaming (responses.md §7, §8): the two upstream readers and the event
// assembler, checked against the RS-37 invariants and against recorded real upstream traffic.
#include "protocol/json.hpp"
#include "protocol/responses_request.hpp"
#include "protocol/responses_stream.hpp"
#include "protocol/upstream_readers.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace json = troupe::protocol::json;
using namespace troupe::protocol::responses;

namespace {

// ---- building upstream input ----

// One chat.completion.chunk whose first choice carries `delta` (JSON object text).
std::string chunk(const std::string& delta, const char* finish = nullptr) {
  return R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":)"
         + delta + R"(,"finish_reason":)" + (finish ? json::quote(finish) : std::string("null")) + "}]}";
}

// A delta with one tool-call entry; empty id/name are left out, the arguments fragment never is.
std::string tool_delta(int index, const std::string& id, const std::string& name, const std::string& arguments) {
  std::string call = "{\"index\":" + std::to_string(index);
  if (!id.empty())
    call += ",\"id\":" + json::quote(id) + ",\"type\":\"function\"";
  call += ",\"function\":{";
  if (!name.empty())
    call += "\"name\":" + json::quote(name) + ",";
  call += "\"arguments\":" + json::quote(arguments) + "}}";
  return "{\"tool_calls\":[" + call + "]}";
}

std::string text_delta(const char* key, const std::string& text) {
  return "{\"" + std::string(key) + "\":" + json::quote(text) + "}";
}

const std::string usage_chunk =
  R"({"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}})";

// What a reader makes of a whole upstream body (its payloads, then its end).
template <class Reader>
std::vector<upstream_event> read_all(Reader& reader, const std::vector<std::string>& payloads) {
  std::vector<upstream_event> out;
  for (auto& p : payloads)
    if (!reader.feed(p, out))
      return out;
  reader.end(out);
  return out;
}

std::vector<upstream_event> read_chat(const std::vector<std::string>& payloads) {
  chat_chunk_reader reader;
  return read_all(reader, payloads);
}

std::vector<upstream_event> read_responses(const std::vector<std::string>& payloads) {
  responses_event_reader reader;
  return read_all(reader, payloads);
}

// Feeds events into the assembler until one breaks the round; false then.
bool feed_all(response_stream& s, const std::vector<upstream_event>& events) {
  for (auto& e : events)
    if (!s.feed(e))
      return false;
  return true;
}

std::optional<gateway_route> echo_route(const std::string& name) {
  if (name == "mcp__srv__echo")
    return gateway_route{"srv", "echo", false};
  return std::nullopt;
}

// ---- the response objects the lifecycle events carry ----

request test_request() {
  auto parsed = parse_request(R"({"model":"m","input":"hi"})");
  REQUIRE(std::holds_alternative<request>(parsed));
  return std::get<request>(parsed);
}

std::string response_object(const std::vector<item>& output, const std::string& status) {
  static const request req = test_request();
  response_state st;
  st.id = "resp_0000000000000000000000000000test";
  st.created_at = 1767225600;
  st.completed_at = 1767225601;
  st.status = *parse_response_status(status);
  st.output = output;
  if (status != "in_progress")
    st.tokens = usage{};
  if (status == "incomplete")
    st.incomplete_reason = "max_output_tokens";
  return response_json(req, st);
}

void begin(response_stream& s) {
  s.created(response_object({}, "in_progress"), false);
  s.in_progress(response_object({}, "in_progress"));
}

void end_as(response_stream& s, const std::string& status) {
  const char* type = status == "completed" ? "response.completed"
                     : status == "failed"  ? "response.failed"
                                           : "response.incomplete";
  s.terminal(type, response_object(s.output(), status));
}

// ---- reading the client events ----

json::document parse_doc(const std::string& text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  return std::move(*doc);
}

std::vector<std::string> types_of(const std::vector<stream_event>& events) {
  std::vector<std::string> out;
  for (auto& e : events)
    out.push_back(e.type);
  return out;
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The concatenated `delta`s of the events of `type`.
std::string joined_deltas(const std::vector<stream_event>& events, const std::string& type) {
  std::string out;
  for (auto& e : events)
    if (e.type == type)
      out += json::get_string(parse_doc(e.json), "delta");
  return out;
}

// The events of `type`, parsed.
std::vector<json::document> events_of(const std::vector<stream_event>& events, const std::string& type) {
  std::vector<json::document> out;
  for (auto& e : events)
    if (e.type == type)
      out.push_back(parse_doc(e.json));
  return out;
}

// The item type an item-scoped event belongs to (RS-37.4).
std::string family_of(const std::string& type, const json::value& ev) {
  if (type == "response.content_part.added" || type == "response.content_part.done") {
    auto part = json::member(ev, "part");
    return part && json::get_string(*part, "type") == "reasoning_text" ? "reasoning" : "message";
  }
  if (starts_with(type, "response.output_text.") || starts_with(type, "response.refusal."))
    return "message";
  if (starts_with(type, "response.reasoning_text.") || starts_with(type, "response.reasoning_summary"))
    return "reasoning";
  if (starts_with(type, "response.function_call_arguments."))
    return "function_call";
  if (starts_with(type, "response.mcp_call"))
    return "mcp_call";
  if (starts_with(type, "response.mcp_list_tools."))
    return "mcp_list_tools";
  if (starts_with(type, "response.web_search_call."))
    return "web_search_call";
  if (starts_with(type, "response.file_search_call."))
    return "file_search_call";
  return "?";
}

// The RS-37 validator: what is wrong with a whole client stream, nothing when it is valid.
// Checks numbering (1), first/last events (2, 3), dense indexes, one open item, added/done pairing
// and item-scoped ids and families (4), dense parts with their deltas inside them (5), and that the
// fold of the deltas gives each done item and the terminal output (6).
std::vector<std::string> rs37_problems(const std::vector<stream_event>& events) {
  std::vector<std::string> problems;
  auto bad = [&](std::size_t i, const std::string& what) {
    problems.push_back("event " + std::to_string(i) + " (" + (i < events.size() ? events[i].type : "") + "): " + what);
  };
  if (events.empty()) {
    problems.push_back("the stream is empty");
    return problems;
  }
  struct folded {
    std::string id;
    std::string type;
    std::vector<std::string> part_types;
    std::vector<std::string> part_texts;
    bool part_open = false;
    std::string arguments;
    bool done = false;
    std::string done_json;
  };
  std::vector<folded> items;
  std::size_t open = SIZE_MAX; // the open item's position, SIZE_MAX when none
  int in_progress = 0;
  int terminals = 0;
  std::optional<std::string> terminal_output;
  for (std::size_t i = 0; i < events.size(); ++i) {
    auto& e = events[i];
    auto parsed = json::parse(e.json);
    if (!parsed || !parsed->IsObject()) {
      bad(i, "payload is not a JSON object");
      continue;
    }
    const json::value& ev = *parsed;
    auto type = json::get_string(ev, "type");
    if (type != e.type)
      bad(i, "payload type " + type + " differs from the event type");
    if (json::get_int(ev, "sequence_number") != static_cast<int64_t>(i) || e.sequence != static_cast<int64_t>(i))
      bad(i, "sequence_number is not " + std::to_string(i));
    if (terminals > 0)
      bad(i, "follows the terminal event");
    if (i == 0 && type != "response.created")
      bad(i, "the first event is not response.created");
    if (type == "response.in_progress")
      ++in_progress;
    if (type == "response.completed" || type == "response.incomplete" || type == "response.failed" || type == "error") {
      ++terminals;
      if (auto r = json::member(ev, "response"))
        if (auto out = json::member(*r, "output"))
          terminal_output = json::serialize(*out);
      continue;
    }
    if (starts_with(type, "response.") && json::member(ev, "response"))
      continue; // created, queued, in_progress
    auto index_v = json::get_int(ev, "output_index");
    if (!index_v || *index_v < 0) {
      bad(i, "no output_index");
      continue;
    }
    auto index = static_cast<std::size_t>(*index_v);
    if (type == "response.output_item.added") {
      auto it = json::member(ev, "item");
      if (!it) {
        bad(i, "no item");
        continue;
      }
      if (index != items.size())
        bad(i, "output_index " + std::to_string(index) + " is not the next one, " + std::to_string(items.size()));
      if (open != SIZE_MAX)
        bad(i, "an item is added while item " + std::to_string(open) + " is open");
      folded f;
      f.id = json::get_string(*it, "id");
      f.type = json::get_string(*it, "type");
      if (f.type == "reasoning") {
        auto c = json::member(*it, "content");
        auto s = json::member(*it, "summary");
        if (!c || !c->IsArray() || !c->Empty() || !s || !s->IsArray() || !s->Empty())
          bad(i, "a reasoning item is not added with content [] and summary []"); // RS-37.5
      }
      items.push_back(std::move(f));
      open = items.size() - 1;
      continue;
    }
    if (index >= items.size()) {
      bad(i, "output_index " + std::to_string(index) + " names no added item");
      continue;
    }
    auto& f = items[index];
    if (type == "response.output_item.done") {
      auto it = json::member(ev, "item");
      if (!it) {
        bad(i, "no item");
        continue;
      }
      if (open != index || f.done)
        bad(i, "done for an item that is not the open one");
      if (json::get_string(*it, "id") != f.id || json::get_string(*it, "type") != f.type)
        bad(i, "done item's id or type differs from the added one");
      if (f.part_open)
        bad(i, "done while a content part is open");
      // RS-37.6: what the deltas built is what the item holds.
      if (f.type == "message" || f.type == "reasoning") {
        auto content = json::member(*it, "content");
        std::size_t n = content && content->IsArray() ? content->Size() : 0;
        if (n != f.part_types.size()) {
          bad(i, "done item has " + std::to_string(n) + " parts, the events built " + std::to_string(f.part_types.size()));
        } else {
          for (std::size_t p = 0; p < n; ++p) {
            auto& part = (*content)[static_cast<rapidjson::SizeType>(p)];
            auto ptype = json::get_string(part, "type");
            auto text = json::get_string(part, ptype == "refusal" ? "refusal" : "text");
            if (ptype != f.part_types[p] || text != f.part_texts[p])
              bad(i, "part " + std::to_string(p) + " differs from the fold of its deltas");
          }
        }
      }
      if (f.type == "function_call" || f.type == "mcp_call")
        if (json::get_string(*it, "arguments") != f.arguments)
          bad(i, "arguments differ from the fold of their deltas");
      f.done = true;
      f.done_json = json::serialize(*it);
      open = SIZE_MAX;
      continue;
    }
    // Item-scoped events.
    if (json::get_string(ev, "item_id") != f.id)
      bad(i, "item_id is not the id of the item at output_index " + std::to_string(index));
    if (open != index || f.done)
      bad(i, "outside its item's added..done");
    if (family_of(type, ev) != f.type)
      bad(i, "belongs to a " + family_of(type, ev) + " item, not a " + f.type);
    auto content_index = json::get_int(ev, "content_index");
    auto last_part = f.part_types.empty() ? -1 : static_cast<int64_t>(f.part_types.size()) - 1;
    auto in_part = [&] {
      if (!content_index || *content_index != last_part || !f.part_open)
        bad(i, "content_index is not the open part's");
    };
    if (type == "response.content_part.added") {
      if (!content_index || *content_index != last_part + 1)
        bad(i, "content_index is not dense");
      if (f.part_open)
        bad(i, "a part is added while another is open");
      auto part = json::member(ev, "part");
      f.part_types.push_back(part ? json::get_string(*part, "type") : "");
      f.part_texts.emplace_back();
      f.part_open = true;
    } else if (type == "response.content_part.done") {
      in_part();
      auto part = json::member(ev, "part");
      auto ptype = part ? json::get_string(*part, "type") : "";
      if (!f.part_texts.empty() && json::get_string(*part, ptype == "refusal" ? "refusal" : "text") != f.part_texts.back())
        bad(i, "the done part differs from the fold of its deltas");
      f.part_open = false;
    } else if (type == "response.output_text.delta" || type == "response.refusal.delta"
               || type == "response.reasoning_text.delta") {
      in_part();
      if (!f.part_texts.empty())
        f.part_texts.back() += json::get_string(ev, "delta");
      if (type == "response.output_text.delta" && !json::member(ev, "logprobs"))
        bad(i, "an output_text delta without logprobs");
    } else if (type == "response.output_text.done" || type == "response.reasoning_text.done") {
      in_part();
      if (!f.part_texts.empty() && json::get_string(ev, "text") != f.part_texts.back())
        bad(i, "text differs from the fold of the deltas");
    } else if (type == "response.refusal.done") {
      in_part();
      if (!f.part_texts.empty() && json::get_string(ev, "refusal") != f.part_texts.back())
        bad(i, "refusal differs from the fold of the deltas");
    } else if (type == "response.function_call_arguments.delta" || type == "response.mcp_call_arguments.delta") {
      f.arguments += json::get_string(ev, "delta");
    } else if (type == "response.function_call_arguments.done" || type == "response.mcp_call_arguments.done") {
      if (json::get_string(ev, "arguments") != f.arguments)
        bad(i, "arguments differ from the fold of the deltas");
    }
  }
  if (in_progress != 1)
    problems.push_back("response.in_progress came " + std::to_string(in_progress) + " times");
  auto& last = events.back().type;
  if (terminals != 1 || !(last == "response.completed" || last == "response.incomplete" || last == "response.failed"
                          || last == "error"))
    problems.push_back("the stream does not end with exactly one terminal event");
  std::string folded_output = "[";
  for (auto& f : items) {
    if (!f.done)
      problems.push_back("item " + f.id + " was added but never done");
    if (folded_output.size() > 1)
      folded_output += ",";
    folded_output += f.done_json;
  }
  folded_output += "]";
  if (terminal_output && *terminal_output != json::serialize(parse_doc(folded_output)))
    problems.push_back("the fold of the events differs from the terminal output:\n  fold:     " + folded_output
                       + "\n  terminal: " + *terminal_output);
  return problems;
}

#define CHECK_RS37(events)                                                                                             \
  do {                                                                                                                 \
    auto problems_ = rs37_problems(events);                                                                            \
    for (auto& p_ : problems_)                                                                                         \
      UNSCOPED_INFO(p_);                                                                                               \
    CHECK(problems_.empty());                                                                                          \
  } while (false)

// ---- recorded upstream streams ----
// The data payloads of real recordings from github.com/vllm-project/agentic-api (Apache-2.0),
// crates/agentic-server-core/tests/cassettes/, copied byte for byte; only where a comment says so
// are some payloads left out.

// resp-single-gpt-4o-streaming.yaml: every data payload
const std::vector<std::string> openai_text_stream = {
  R"j({"type":"response.created","response":{"id":"resp_0d119a97c73fc7550069e7450154448193b65975af8dfa2d59","object":"response","created_at":1776764161,"status":"in_progress","background":false,"completed_at":null,"error":null,"frequency_penalty":0.0,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4o-2024-08-06","output":[],"parallel_tool_calls":true,"presence_penalty":0.0,"previous_response_id":null,"prompt_cache_key":null,"prompt_cache_retention":"in_memory","reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"auto","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}},"sequence_number":0})j",
  R"j({"type":"response.in_progress","response":{"id":"resp_0d119a97c73fc7550069e7450154448193b65975af8dfa2d59","object":"response","created_at":1776764161,"status":"in_progress","background":false,"completed_at":null,"error":null,"frequency_penalty":0.0,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4o-2024-08-06","output":[],"parallel_tool_calls":true,"presence_penalty":0.0,"previous_response_id":null,"prompt_cache_key":null,"prompt_cache_retention":"in_memory","reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"auto","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}},"sequence_number":1})j",
  R"j({"type":"response.output_item.added","item":{"id":"msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611","type":"message","status":"in_progress","content":[],"role":"assistant"},"output_index":0,"sequence_number":2})j",
  R"j({"type":"response.content_part.added","content_index":0,"item_id":"msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611","output_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""},"sequence_number":3})j",
  R"j({"type":"response.output_text.delta","content_index":0,"delta":"G","item_id":"msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611","logprobs":[],"obfuscation":"NpACml1t70MBPur","output_index":0,"sequence_number":4})j",
  R"j({"type":"response.output_text.delta","content_index":0,"delta":"LO","item_id":"msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611","logprobs":[],"obfuscation":"sYltOblE7Hn8l8","output_index":0,"sequence_number":5})j",
  R"j({"type":"response.output_text.delta","content_index":0,"delta":"BE","item_id":"msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611","logprobs":[],"obfuscation":"4BnRKbDQPKERxH","output_index":0,"sequence_number":6})j",
  R"j({"type":"response.output_text.done","content_index":0,"item_id":"msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611","logprobs":[],"output_index":0,"sequence_number":7,"text":"GLOBE"})j",
  R"j({"type":"response.content_part.done","content_index":0,"item_id":"msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611","output_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"GLOBE"},"sequence_number":8})j",
  R"j({"type":"response.output_item.done","item":{"id":"msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"GLOBE"}],"role":"assistant"},"output_index":0,"sequence_number":9})j",
  R"j({"type":"response.completed","response":{"id":"resp_0d119a97c73fc7550069e7450154448193b65975af8dfa2d59","object":"response","created_at":1776764161,"status":"completed","background":false,"completed_at":1776764161,"error":null,"frequency_penalty":0.0,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4o-2024-08-06","output":[{"id":"msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"GLOBE"}],"role":"assistant"}],"parallel_tool_calls":true,"presence_penalty":0.0,"previous_response_id":null,"prompt_cache_key":null,"prompt_cache_retention":"in_memory","reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":14,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":18},"user":null,"metadata":{}},"sequence_number":10})j",
};

// function-call-vllm-gemma4.yaml: every data payload
const std::vector<std::string> gemma_call_stream = {
  R"j({"response":{"id":"resp_938d583bbec02940","created_at":1781048957,"status":"in_progress","output":[],"model":"google/gemma-4-26B-A4B-it","object":"response"},"sequence_number":0,"type":"response.created"})j",
  R"j({"response":{"id":"resp_938d583bbec02940","status":"in_progress"},"sequence_number":1,"type":"response.in_progress"})j",
  R"j({"item":{"arguments":"","call_id":"call_92fd766dcc21a19c","name":"get_weather","type":"function_call","id":"8c5375b5b08d666c","status":"in_progress"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"})j",
  R"j({"delta":"{\"","item_id":"8c5375b5b08d666c","output_index":0,"sequence_number":3,"type":"response.function_call_arguments.delta"})j",
  R"j({"delta":"city","item_id":"8c5375b5b08d666c","output_index":0,"sequence_number":4,"type":"response.function_call_arguments.delta"})j",
  R"j({"delta":"\":","item_id":"8c5375b5b08d666c","output_index":0,"sequence_number":5,"type":"response.function_call_arguments.delta"})j",
  R"j({"delta":" \"","item_id":"8c5375b5b08d666c","output_index":0,"sequence_number":6,"type":"response.function_call_arguments.delta"})j",
  R"j({"delta":"San","item_id":"8c5375b5b08d666c","output_index":0,"sequence_number":7,"type":"response.function_call_arguments.delta"})j",
  R"j({"delta":" Francisco","item_id":"8c5375b5b08d666c","output_index":0,"sequence_number":8,"type":"response.function_call_arguments.delta"})j",
  R"j({"delta":"\"","item_id":"8c5375b5b08d666c","output_index":0,"sequence_number":9,"type":"response.function_call_arguments.delta"})j",
  R"j({"delta":"}","item_id":"8c5375b5b08d666c","output_index":0,"sequence_number":10,"type":"response.function_call_arguments.delta"})j",
  R"j({"arguments":"{\"city\": \"San Francisco\"}","item_id":"8c5375b5b08d666c","name":"get_weather","output_index":0,"sequence_number":11,"type":"response.function_call_arguments.done"})j",
  R"j({"item":{"arguments":"{\"city\": \"San Francisco\"}","call_id":"call_92fd766dcc21a19c","name":"get_weather","type":"function_call","id":"8c5375b5b08d666c","status":"completed"},"output_index":0,"sequence_number":12,"type":"response.output_item.done"})j",
  R"j({"response":{"id":"resp_938d583bbec02940","status":"completed","usage":{"input_tokens":66,"output_tokens":21,"total_tokens":87}},"sequence_number":13,"type":"response.completed"})j",
};

// codex-openai-https-function-tool-gpt-4o-streaming.yaml, turn t1: every data payload
const std::vector<std::string> openai_call_stream = {
  R"j({"type":"response.created","response":{"id":"resp_0f440443492051e9006a46403dc7308198b9f18ed5a1c4ed18","object":"response","created_at":1782988861,"status":"in_progress","background":false,"completed_at":null,"error":null,"frequency_penalty":0.0,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4o-2024-08-06","moderation":null,"output":[],"parallel_tool_calls":true,"presence_penalty":0.0,"previous_response_id":null,"prompt_cache_key":null,"prompt_cache_retention":"in_memory","reasoning":{"context":null,"effort":null,"summary":null},"safety_identifier":null,"service_tier":"auto","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tool_usage":{"image_gen":{"input_tokens":0,"input_tokens_details":{"image_tokens":0,"text_tokens":0},"output_tokens":0,"output_tokens_details":{"image_tokens":0,"text_tokens":0},"total_tokens":0},"web_search":{"num_requests":0}},"tools":[{"type":"function","description":"Echo text for Codex cassette recording.","name":"agentic_plain_echo","parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}},"sequence_number":0})j",
  R"j({"type":"response.in_progress","response":{"id":"resp_0f440443492051e9006a46403dc7308198b9f18ed5a1c4ed18","object":"response","created_at":1782988861,"status":"in_progress","background":false,"completed_at":null,"error":null,"frequency_penalty":0.0,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4o-2024-08-06","moderation":null,"output":[],"parallel_tool_calls":true,"presence_penalty":0.0,"previous_response_id":null,"prompt_cache_key":null,"prompt_cache_retention":"in_memory","reasoning":{"context":null,"effort":null,"summary":null},"safety_identifier":null,"service_tier":"auto","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tool_usage":{"image_gen":{"input_tokens":0,"input_tokens_details":{"image_tokens":0,"text_tokens":0},"output_tokens":0,"output_tokens_details":{"image_tokens":0,"text_tokens":0},"total_tokens":0},"web_search":{"num_requests":0}},"tools":[{"type":"function","description":"Echo text for Codex cassette recording.","name":"agentic_plain_echo","parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null,"metadata":{}},"sequence_number":1})j",
  R"j({"type":"response.output_item.added","item":{"id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","type":"function_call","status":"in_progress","arguments":"","call_id":"call_sZGlA43qovZccnHqzXe9NEQC","name":"agentic_plain_echo"},"output_index":0,"sequence_number":2})j",
  R"j({"type":"response.function_call_arguments.delta","delta":"{\"","item_id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","obfuscation":"99Z3JChIOxFSW9","output_index":0,"sequence_number":3})j",
  R"j({"type":"response.function_call_arguments.delta","delta":"text","item_id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","obfuscation":"i9EfL7M3Qy2R","output_index":0,"sequence_number":4})j",
  R"j({"type":"response.function_call_arguments.delta","delta":"\":\"","item_id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","obfuscation":"ebFn5zR5WfrVe","output_index":0,"sequence_number":5})j",
  R"j({"type":"response.function_call_arguments.delta","delta":"plain","item_id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","obfuscation":"Ojr53Pz7OoK","output_index":0,"sequence_number":6})j",
  R"j({"type":"response.function_call_arguments.delta","delta":" fixture","item_id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","obfuscation":"lksNlAQz","output_index":0,"sequence_number":7})j",
  R"j({"type":"response.function_call_arguments.delta","delta":"\"}","item_id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","obfuscation":"IMsQ2CYobF3Huj","output_index":0,"sequence_number":8})j",
  R"j({"type":"response.function_call_arguments.done","arguments":"{\"text\":\"plain fixture\"}","item_id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","output_index":0,"sequence_number":9})j",
  R"j({"type":"response.output_item.done","item":{"id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","type":"function_call","status":"completed","arguments":"{\"text\":\"plain fixture\"}","call_id":"call_sZGlA43qovZccnHqzXe9NEQC","name":"agentic_plain_echo"},"output_index":0,"sequence_number":10})j",
  R"j({"type":"response.completed","response":{"id":"resp_0f440443492051e9006a46403dc7308198b9f18ed5a1c4ed18","object":"response","created_at":1782988861,"status":"completed","background":false,"completed_at":1782988862,"error":null,"frequency_penalty":0.0,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-4o-2024-08-06","moderation":null,"output":[{"id":"fc_0f440443492051e9006a46403eac748198ac0ec0c62cd36d6c","type":"function_call","status":"completed","arguments":"{\"text\":\"plain fixture\"}","call_id":"call_sZGlA43qovZccnHqzXe9NEQC","name":"agentic_plain_echo"}],"parallel_tool_calls":true,"presence_penalty":0.0,"previous_response_id":null,"prompt_cache_key":null,"prompt_cache_retention":"in_memory","reasoning":{"context":null,"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tool_usage":{"image_gen":{"input_tokens":0,"input_tokens_details":{"image_tokens":0,"text_tokens":0},"output_tokens":0,"output_tokens_details":{"image_tokens":0,"text_tokens":0},"total_tokens":0},"web_search":{"num_requests":0}},"tools":[{"type":"function","description":"Echo text for Codex cassette recording.","name":"agentic_plain_echo","parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false},"strict":true}],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":60,"input_tokens_details":{"cached_tokens":0},"output_tokens":18,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":78},"user":null,"metadata":{}},"sequence_number":11})j",
};

// codex-direct-vllm-http-function-tool-Qwen-Qwen3.6-35B-A3B-streaming.yaml, turn t1: every data payload but reasoning deltas 4..181
const std::vector<std::string> qwen_call_stream = {
  R"j({"type":"response.created","sequence_number":0,"response":{"background":false,"completed_at":null,"conversation":null,"created_at":1782988851,"error":null,"id":"resp_019f226a-caa0-7e31-8d97-6940665cc306","incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"metadata":{},"model":"Qwen/Qwen3.6-35B-A3B","object":"response","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt":null,"prompt_cache_key":null,"prompt_cache_retention":null,"reasoning":{"effort":"medium","summary":null},"safety_identifier":null,"service_tier":"default","store":true,"status":"in_progress","temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"name":"agentic_plain_echo","parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false},"strict":true,"type":"function","description":"Echo text for Codex cassette recording."}],"presence_penalty":0.0,"frequency_penalty":0.0,"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null}})j",
  R"j({"type":"response.in_progress","sequence_number":1,"response":{"background":false,"completed_at":null,"conversation":null,"created_at":1782988851,"error":null,"id":"resp_019f226a-caa0-7e31-8d97-6940665cc306","incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"metadata":{},"model":"Qwen/Qwen3.6-35B-A3B","object":"response","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt":null,"prompt_cache_key":null,"prompt_cache_retention":null,"reasoning":{"effort":"medium","summary":null},"safety_identifier":null,"service_tier":"default","store":true,"status":"in_progress","temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"name":"agentic_plain_echo","parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false},"strict":true,"type":"function","description":"Echo text for Codex cassette recording."}],"presence_penalty":0.0,"frequency_penalty":0.0,"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":null,"user":null}})j",
  R"j({"type":"response.output_item.added","item":{"id":"rs_019f226a-d409-7590-ad03-977deb6d6603","summary":[],"type":"reasoning","content":[]},"output_index":0,"sequence_number":2})j",
  R"j({"type":"response.reasoning_text.delta","content_index":0,"item_id":"rs_019f226a-d409-7590-ad03-977deb6d6603","output_index":0,"sequence_number":3,"delta":"Thinking"})j",
  R"j({"type":"response.reasoning_text.delta","content_index":0,"item_id":"rs_019f226a-d409-7590-ad03-977deb6d6603","output_index":0,"sequence_number":4,"delta":" Process:\n"})j",
  R"j({"type":"response.reasoning_text.delta","content_index":0,"item_id":"rs_019f226a-d409-7590-ad03-977deb6d6603","output_index":0,"sequence_number":5,"delta":"1. "})j",
  R"j({"type":"response.reasoning_text.done","content_index":0,"item_id":"rs_019f226a-d409-7590-ad03-977deb6d6603","output_index":0,"sequence_number":184,"text":"Thinking Process:\n1.  **Analyze the input:** The user wants me to call the `agentic_plain_echo` tool with the text \"plain fixture\" before answering.\n2.  **Identify constraints:** The instruction explicitly requires calling the tool with the exact text \"plain fixture\".\n3.  **Check available tools:** `agentic_plain_echo` is available.\n4.  **Formulate tool call:** `agentic_plain_echo(text=\"plain fixture\")`\n5.  **Construct response:** Call the tool first, then answer. Wait, the prompt says \"before answering\", which usually means I should just execute the tool call and then provide the answer/response after the tool output, or just output the tool call as the first step. Since I'm in a single-turn or multi-turn setup, I will output the tool call now.\n\nAction: Call `agentic_plain_echo` with `text` = \"plain fixture\".\nCheck format: `{\"name\": \"agentic_plain_echo\", \"arguments\": {\"text\": \"plain fixture\"}}`\nProceed. \nWait, let's verify the tool signature: `agentic_plain_echo` takes `text` (string). Matches.\nOutput the tool call.\nNo further thinking needed. Proceed. \nGenerating tool call. \n`agentic_plain_echo` -> `{\"text\": \"plain fixture\"}`\nDone. \nSelf-Correction/Verification during thought: The instruction is strict. I will just call the tool.\nOutput matches the required format.\nProceeds. \n[Tool Call Generation] -> `agentic_plain_echo(text=\"plain fixture\")`\nDone. \nOutput matches expectation. \nProceeds to output. \n*(Self-Correction/Refinement during thought)*: I should make sure I don't add extra text before the tool call. The prompt says \"You must call... before answering.\" I will output the tool call immediately.\nDone. \n[Output Generation] -> Tool call. \nWait, sometimes the system expects just the tool call block. I will generate it. \n`\n"})j",
  R"j({"type":"response.output_item.done","item":{"id":"rs_019f226a-d409-7590-ad03-977deb6d6603","summary":[],"type":"reasoning","content":[{"text":"Thinking Process:\n1.  **Analyze the input:** The user wants me to call the `agentic_plain_echo` tool with the text \"plain fixture\" before answering.\n2.  **Identify constraints:** The instruction explicitly requires calling the tool with the exact text \"plain fixture\".\n3.  **Check available tools:** `agentic_plain_echo` is available.\n4.  **Formulate tool call:** `agentic_plain_echo(text=\"plain fixture\")`\n5.  **Construct response:** Call the tool first, then answer. Wait, the prompt says \"before answering\", which usually means I should just execute the tool call and then provide the answer/response after the tool output, or just output the tool call as the first step. Since I'm in a single-turn or multi-turn setup, I will output the tool call now.\n\nAction: Call `agentic_plain_echo` with `text` = \"plain fixture\".\nCheck format: `{\"name\": \"agentic_plain_echo\", \"arguments\": {\"text\": \"plain fixture\"}}`\nProceed. \nWait, let's verify the tool signature: `agentic_plain_echo` takes `text` (string). Matches.\nOutput the tool call.\nNo further thinking needed. Proceed. \nGenerating tool call. \n`agentic_plain_echo` -> `{\"text\": \"plain fixture\"}`\nDone. \nSelf-Correction/Verification during thought: The instruction is strict. I will just call the tool.\nOutput matches the required format.\nProceeds. \n[Tool Call Generation] -> `agentic_plain_echo(text=\"plain fixture\")`\nDone. \nOutput matches expectation. \nProceeds to output. \n*(Self-Correction/Refinement during thought)*: I should make sure I don't add extra text before the tool call. The prompt says \"You must call... before answering.\" I will output the tool call immediately.\nDone. \n[Output Generation] -> Tool call. \nWait, sometimes the system expects just the tool call block. I will generate it. \n`\n","type":"reasoning_text"}]},"output_index":0,"sequence_number":185})j",
  R"j({"type":"response.output_item.added","item":{"role":"assistant","type":"message","content":[],"id":"msg_019f226a-d45e-7290-8352-51a58b66ebcb","status":"in_progress"},"output_index":1,"sequence_number":186})j",
  R"j({"type":"response.content_part.added","content_index":0,"item_id":"msg_019f226a-d45e-7290-8352-51a58b66ebcb","output_index":1,"sequence_number":187,"part":{"annotations":[],"logprobs":[],"text":"","type":"output_text"}})j",
  R"j({"type":"response.output_text.delta","content_index":0,"item_id":"msg_019f226a-d45e-7290-8352-51a58b66ebcb","output_index":1,"sequence_number":188,"delta":"\n\n","logprobs":[]})j",
  R"j({"type":"response.output_text.done","content_index":0,"item_id":"msg_019f226a-d45e-7290-8352-51a58b66ebcb","output_index":1,"sequence_number":189,"text":"\n\n","logprobs":[]})j",
  R"j({"type":"response.content_part.done","content_index":0,"item_id":"msg_019f226a-d45e-7290-8352-51a58b66ebcb","output_index":1,"sequence_number":190,"part":{"annotations":[],"logprobs":[],"text":"\n\n","type":"output_text"}})j",
  R"j({"type":"response.output_item.done","item":{"role":"assistant","type":"message","content":[{"annotations":[],"logprobs":[],"text":"\n\n","type":"output_text"}],"id":"msg_019f226a-d45e-7290-8352-51a58b66ebcb","status":"completed"},"output_index":1,"sequence_number":191})j",
  R"j({"type":"response.output_item.added","item":{"arguments":"","call_id":"call_d7f2b204e6a04061b787bac7","name":"agentic_plain_echo","type":"function_call","id":"fc_019f226a-d45e-7290-8352-51bcee2e7690","status":"in_progress"},"output_index":2,"sequence_number":192})j",
  R"j({"type":"response.function_call_arguments.delta","content_index":0,"item_id":"fc_019f226a-d45e-7290-8352-51bcee2e7690","output_index":2,"sequence_number":193,"delta":"{}"})j",
  R"j({"type":"response.function_call_arguments.delta","content_index":0,"item_id":"fc_019f226a-d45e-7290-8352-51bcee2e7690","output_index":2,"sequence_number":194,"delta":"{"})j",
  R"j({"type":"response.function_call_arguments.delta","content_index":0,"item_id":"fc_019f226a-d45e-7290-8352-51bcee2e7690","output_index":2,"sequence_number":195,"delta":"\"text\": \"plain fixture\""})j",
  R"j({"type":"response.function_call_arguments.delta","content_index":0,"item_id":"fc_019f226a-d45e-7290-8352-51bcee2e7690","output_index":2,"sequence_number":196,"delta":"}"})j",
  R"j({"type":"response.function_call_arguments.done","content_index":0,"item_id":"fc_019f226a-d45e-7290-8352-51bcee2e7690","output_index":2,"sequence_number":197,"arguments":"{\"text\": \"plain fixture\"}"})j",
  R"j({"type":"response.output_item.done","item":{"arguments":"{\"text\": \"plain fixture\"}","call_id":"call_d7f2b204e6a04061b787bac7","name":"agentic_plain_echo","type":"function_call","id":"fc_019f226a-d45e-7290-8352-51bcee2e7690","status":"completed"},"output_index":2,"sequence_number":198})j",
  R"j({"type":"response.completed","sequence_number":199,"response":{"background":false,"completed_at":1782988854,"conversation":null,"created_at":1782988851,"error":null,"id":"resp_019f226a-caa0-7e31-8d97-6940665cc306","incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"metadata":{},"model":"Qwen/Qwen3.6-35B-A3B","object":"response","output":[{"id":"rs_019f226a-d409-7590-ad03-977deb6d6603","summary":[],"type":"reasoning","content":[{"text":"Thinking Process:\n1.  **Analyze the input:** The user wants me to call the `agentic_plain_echo` tool with the text \"plain fixture\" before answering.\n2.  **Identify constraints:** The instruction explicitly requires calling the tool with the exact text \"plain fixture\".\n3.  **Check available tools:** `agentic_plain_echo` is available.\n4.  **Formulate tool call:** `agentic_plain_echo(text=\"plain fixture\")`\n5.  **Construct response:** Call the tool first, then answer. Wait, the prompt says \"before answering\", which usually means I should just execute the tool call and then provide the answer/response after the tool output, or just output the tool call as the first step. Since I'm in a single-turn or multi-turn setup, I will output the tool call now.\n\nAction: Call `agentic_plain_echo` with `text` = \"plain fixture\".\nCheck format: `{\"name\": \"agentic_plain_echo\", \"arguments\": {\"text\": \"plain fixture\"}}`\nProceed. \nWait, let's verify the tool signature: `agentic_plain_echo` takes `text` (string). Matches.\nOutput the tool call.\nNo further thinking needed. Proceed. \nGenerating tool call. \n`agentic_plain_echo` -> `{\"text\": \"plain fixture\"}`\nDone. \nSelf-Correction/Verification during thought: The instruction is strict. I will just call the tool.\nOutput matches the required format.\nProceeds. \n[Tool Call Generation] -> `agentic_plain_echo(text=\"plain fixture\")`\nDone. \nOutput matches expectation. \nProceeds to output. \n*(Self-Correction/Refinement during thought)*: I should make sure I don't add extra text before the tool call. The prompt says \"You must call... before answering.\" I will output the tool call immediately.\nDone. \n[Output Generation] -> Tool call. \nWait, sometimes the system expects just the tool call block. I will generate it. \n`\n","type":"reasoning_text"}]},{"role":"assistant","type":"message","content":[{"annotations":[],"logprobs":[],"text":"\n\n","type":"output_text"}],"id":"msg_019f226a-d45e-7290-8352-51a58b66ebcb","status":"completed"},{"arguments":"{\"text\": \"plain fixture\"}","call_id":"call_d7f2b204e6a04061b787bac7","name":"agentic_plain_echo","namespace":null,"type":"function_call","id":"fc_019f226a-d45e-7290-8352-51bcee2e7690","status":"completed"}],"parallel_tool_calls":true,"previous_response_id":null,"prompt":null,"prompt_cache_key":null,"prompt_cache_retention":null,"reasoning":{"effort":"medium","summary":null},"safety_identifier":null,"service_tier":"default","store":true,"status":"completed","temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"name":"agentic_plain_echo","parameters":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false},"strict":true,"type":"function","description":"Echo text for Codex cassette recording."}],"presence_penalty":0.0,"frequency_penalty":0.0,"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":290,"input_tokens_details":{"cached_tokens":0},"output_tokens":464,"output_tokens_details":{"reasoning_tokens":417},"total_tokens":754},"user":null}})j",
  R"j([DONE])j",
};

} // namespace

// ---- 1. tool-call arguments split anywhere ----

TEST_CASE("tool-call arguments split at any byte reach the item, the deltas and .done unchanged (chat upstream)",
          "[responses]") { // RS-48, RS-38, RS-37.6
  const std::string arguments = "{\"city\":\"Zürich 東京\"}";
  for (std::size_t k = 0; k <= arguments.size(); ++k) {
    CAPTURE(k);
    auto upstream = read_chat({
      chunk(tool_delta(0, "call_w", "get_weather", arguments.substr(0, k))),
      chunk(tool_delta(0, "", "", arguments.substr(k))),
      chunk("{}", "tool_calls"),
    });
    response_stream s(nullptr, -1);
    begin(s);
    REQUIRE(feed_all(s, upstream));
    REQUIRE(s.round_finished());
    end_as(s, "completed");
    auto events = s.take_events();
    REQUIRE(s.output().size() == 1);
    auto& call = s.output()[0];
    CHECK(call.type == item_kind::function_call);
    CHECK(call.name == "get_weather");
    CHECK(call.call_id == "call_w");
    CHECK(call.status == "completed");
    CHECK(call.arguments == arguments);
    CHECK(joined_deltas(events, "response.function_call_arguments.delta") == arguments);
    auto done = events_of(events, "response.function_call_arguments.done");
    REQUIRE(done.size() == 1);
    CHECK(json::get_string(done[0], "arguments") == arguments);
    CHECK(json::get_string(done[0], "name") == "get_weather");
    CHECK_RS37(events);
  }
}

TEST_CASE("tool-call arguments split at any byte reach the item, the deltas and .done unchanged (responses upstream)",
          "[responses]") { // RS-45, RS-38, RS-37.6
  const std::string arguments = "{\"city\":\"Zürich 東京\"}";
  auto delta = [](const std::string& d) {
    return R"({"type":"response.function_call_arguments.delta","item_id":"fc_up","output_index":0,"delta":)"
           + json::quote(d) + "}";
  };
  for (std::size_t k = 0; k <= arguments.size(); ++k) {
    CAPTURE(k);
    auto upstream = read_responses({
      R"({"type":"response.created","response":{"id":"resp_up","status":"in_progress","output":[]}})",
      R"({"type":"response.output_item.added","output_index":0,"item":{"id":"fc_up","type":"function_call","call_id":"call_w","name":"get_weather","arguments":"","status":"in_progress"}})",
      delta(arguments.substr(0, k)),
      delta(arguments.substr(k)),
      R"({"type":"response.function_call_arguments.done","item_id":"fc_up","output_index":0,"arguments":)"
        + json::quote(arguments) + "}",
      R"({"type":"response.output_item.done","output_index":0,"item":{"id":"fc_up","type":"function_call","call_id":"call_w","name":"get_weather","arguments":)"
        + json::quote(arguments) + R"(,"status":"completed"}})",
      R"({"type":"response.completed","response":{"id":"resp_up","status":"completed","usage":{"input_tokens":5,"output_tokens":3,"total_tokens":8}}})",
    });
    response_stream s(nullptr, -1);
    begin(s);
    REQUIRE(feed_all(s, upstream));
    REQUIRE(s.round_finished());
    end_as(s, "completed");
    auto events = s.take_events();
    REQUIRE(s.output().size() == 1);
    CHECK(s.output()[0].arguments == arguments);
    CHECK(s.output()[0].id != "fc_up"); // re-minted (RS-18)
    CHECK(joined_deltas(events, "response.function_call_arguments.delta") == arguments);
    auto done = events_of(events, "response.function_call_arguments.done");
    REQUIRE(done.size() == 1);
    CHECK(json::get_string(done[0], "arguments") == arguments);
    CHECK_RS37(events);
  }
}

// ---- 2. index and id mismatches ----

TEST_CASE("a chat tool call that changes its id fails the round", "[responses]") { // RS-48
  chat_chunk_reader reader;
  std::vector<upstream_event> out;
  REQUIRE(reader.feed(chunk(tool_delta(0, "call_a", "f", "{")), out));
  CHECK_FALSE(reader.feed(chunk(tool_delta(0, "call_b", "", "}")), out));
  REQUIRE_FALSE(out.empty());
  CHECK(out.back().what == upstream_event::kind::failure);
  CHECK(out.back().text.find("call_b") != std::string::npos);
  response_stream s(nullptr, -1);
  begin(s);
  CHECK_FALSE(feed_all(s, out));
  CHECK_FALSE(s.failure().empty());
  // Nothing more is read once the round failed.
  CHECK_FALSE(reader.feed(chunk("{}", "stop"), out));
}

TEST_CASE("a chat fragment for a tool call that already closed fails the round", "[responses]") { // RS-48
  chat_chunk_reader reader;
  std::vector<upstream_event> out;
  REQUIRE(reader.feed(chunk(tool_delta(0, "call_a", "f", "{}")), out));
  REQUIRE(reader.feed(chunk(tool_delta(1, "call_b", "g", "{}")), out));
  CHECK_FALSE(reader.feed(chunk(tool_delta(0, "", "", "{}")), out));
  REQUIRE_FALSE(out.empty());
  CHECK(out.back().what == upstream_event::kind::failure);
  CHECK(out.back().text.find("closed") != std::string::npos);
}

TEST_CASE("the assembler fails a round that reopens a call or sends arguments for a closed one", "[responses]") {
  auto call = [](int64_t index, std::string id, std::string name) {
    upstream_event e;
    e.what = upstream_event::kind::call;
    e.index = index;
    e.call_id = std::move(id);
    e.name = std::move(name);
    return e;
  };
  auto arguments = [](int64_t index, std::string text) {
    upstream_event e;
    e.what = upstream_event::kind::arguments;
    e.index = index;
    e.text = std::move(text);
    return e;
  };
  SECTION("arguments for an index that closed") {
    response_stream s(nullptr, -1);
    begin(s);
    REQUIRE(s.feed(call(0, "call_a", "f")));
    REQUIRE(s.feed(arguments(0, "{}")));
    REQUIRE(s.feed(call(1, "call_b", "g")));
    CHECK_FALSE(s.feed(arguments(0, "{}")));
    CHECK(s.failure().find("closed") != std::string::npos);
  }
  SECTION("the same index opened twice") {
    response_stream s(nullptr, -1);
    begin(s);
    REQUIRE(s.feed(call(0, "call_a", "f")));
    CHECK_FALSE(s.feed(call(0, "call_a", "f")));
    CHECK_FALSE(s.failure().empty());
  }
  SECTION("arguments for an index never opened") {
    response_stream s(nullptr, -1);
    begin(s);
    CHECK_FALSE(s.feed(arguments(3, "{}")));
    CHECK_FALSE(s.failure().empty());
  }
  SECTION("a call without a name") {
    response_stream s(nullptr, -1);
    begin(s);
    CHECK_FALSE(s.feed(call(0, "call_a", "")));
  }
}

// ---- 3. a second finish, and events after the end ----

TEST_CASE("a second finish or any event after the round finished is rejected", "[responses]") {
  upstream_event text;
  text.what = upstream_event::kind::text;
  text.text = "hi";
  upstream_event finish;
  finish.what = upstream_event::kind::finish;
  finish.finish = "stop";
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(s.feed(text));
  REQUIRE(s.feed(finish));
  CHECK_FALSE(s.feed(finish));
  CHECK(s.failure().find("twice") != std::string::npos);
  CHECK_FALSE(s.feed(text));
  CHECK_FALSE(s.failure().empty());
  // The next round accepts events again; after the terminal event nothing is accepted (RS-37.3).
  s.next_round();
  CHECK(s.failure().empty());
  REQUIRE(s.feed(finish));
  end_as(s, "completed");
  auto before = s.next_sequence();
  s.next_round();
  CHECK_FALSE(s.feed(text));
  CHECK(s.failure().find("ended") != std::string::npos);
  s.terminal("response.completed", response_object(s.output(), "completed"));
  s.error({troupe::errc::internal, "late", {}, {}});
  CHECK(s.next_sequence() == before);
  CHECK_RS37(s.take_events());
}

// ---- 4. a round with gateway and client calls ----

TEST_CASE("a round with text, a gateway call and a client call holds the client call back until the gateway call is "
          "done",
          "[responses]") { // RS-22, RS-29, RS-34, RS-37.7
  auto upstream = read_chat({
    chunk(R"({"role":"assistant","content":"Let me check."})"),
    chunk(tool_delta(0, "call_g", "mcp__srv__echo", "{\"text\":")),
    chunk(tool_delta(0, "", "", "\"hi\"}")),
    chunk(tool_delta(1, "call_c", "get_weather", "{\"city\":\"Paris\"}")),
    chunk("{}", "tool_calls"),
    usage_chunk,
  });
  response_stream s(echo_route, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  REQUIRE(s.round_finished());
  CHECK(s.finish_reason() == "tool_calls");
  CHECK(s.client_actions() == 1);
  CHECK(s.gateway_calls() == 1);
  CHECK(s.round_usage().input_tokens == 11);

  auto first = s.take_events();
  CHECK(types_of(first) == std::vector<std::string>{
                             "response.created",
                             "response.in_progress",
                             "response.output_item.added",
                             "response.content_part.added",
                             "response.output_text.delta",
                             "response.output_text.done",
                             "response.content_part.done",
                             "response.output_item.done",
                             "response.output_item.added",
                             "response.mcp_call.in_progress",
                             "response.mcp_call_arguments.delta",
                             "response.mcp_call_arguments.delta",
                             "response.mcp_call_arguments.done",
                           });
  auto added = events_of(first, "response.output_item.added");
  REQUIRE(added.size() == 2);
  CHECK(json::get_string(added[1]["item"], "type") == "mcp_call");
  CHECK(json::get_string(added[1]["item"], "name") == "echo"); // never the mcp__ name (RS-15)
  CHECK(json::get_string(added[1]["item"], "server_label") == "srv");
  CHECK(json::get_string(added[1]["item"], "arguments").empty());
  CHECK(json::get_string(added[1]["item"], "status") == "in_progress");
  auto args_done = events_of(first, "response.mcp_call_arguments.done");
  CHECK(json::get_string(args_done[0], "arguments") == "{\"text\":\"hi\"}");
  CHECK(s.held_events() > 0);
  CHECK_FALSE(s.has_events());

  auto pending = s.take_pending();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].output_position == 1);
  CHECK(pending[0].server_label == "srv");
  CHECK(pending[0].tool == "echo");
  CHECK(pending[0].arguments == "{\"text\":\"hi\"}");
  CHECK(s.take_pending().empty());

  s.complete_call(pending[0].output_position, "out", "");
  CHECK(s.held_events() == 0);
  CHECK(s.item_done(1));
  auto second = s.take_events();
  CHECK(types_of(second) == std::vector<std::string>{
                              "response.mcp_call.completed",
                              "response.output_item.done",
                              "response.output_item.added",
                              "response.function_call_arguments.delta",
                              "response.function_call_arguments.done",
                              "response.output_item.done",
                            });
  auto done = events_of(second, "response.output_item.done");
  CHECK(json::get_string(done[0]["item"], "type") == "mcp_call");
  CHECK(json::get_string(done[0]["item"], "status") == "completed");
  CHECK(json::get_string(done[0]["item"], "output") == "out");
  CHECK(json::get_string(done[1]["item"], "type") == "function_call");
  CHECK(json::get_string(done[1]["item"], "call_id") == "call_c");

  REQUIRE(s.output().size() == 3);
  CHECK(s.output()[0].type == item_kind::message);
  CHECK(s.output()[1].type == item_kind::mcp_call);
  CHECK(s.output()[2].type == item_kind::function_call);
  end_as(s, "completed");
  auto all = first;
  for (auto& e : second)
    all.push_back(e);
  for (auto& e : s.take_events())
    all.push_back(e);
  CHECK_RS37(all);
}

TEST_CASE("a gateway call that fails ends failed with its error and what it held back follows", "[responses]") {
  // RS-25, RS-34
  auto upstream = read_chat({
    chunk(tool_delta(0, "call_g", "mcp__srv__echo", "{}")),
    chunk(R"({"content":"after"})"),
    chunk("{}", "stop"),
  });
  response_stream s(echo_route, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  auto pending = s.take_pending();
  REQUIRE(pending.size() == 1);
  s.complete_call(pending[0].output_position, "", R"({"type":"mcp_tool_execution_error","content":[]})");
  end_as(s, "completed");
  auto events = s.take_events();
  auto failed = events_of(events, "response.mcp_call.failed");
  CHECK(failed.size() == 1);
  CHECK(s.output()[0].status == "failed");
  CHECK(s.output()[1].type == item_kind::message);
  CHECK_RS37(events);
}

TEST_CASE("a length stop abandons the round's gateway calls as incomplete", "[responses]") { // RS-22.1
  auto upstream = read_chat({
    chunk(tool_delta(0, "call_g", "mcp__srv__echo", "{}")),
    chunk(R"({"content":"cut sho"})"),
    chunk("{}", "length"),
  });
  response_stream s(echo_route, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  CHECK(s.finish_reason() == "length");
  s.abandon_calls();
  end_as(s, "incomplete");
  auto events = s.take_events();
  REQUIRE(s.output().size() == 2);
  CHECK(s.output()[0].status == "incomplete");
  CHECK(s.output()[1].status == "incomplete");
  CHECK(events_of(events, "response.mcp_call.completed").empty());
  CHECK_RS37(events);
}

TEST_CASE("a call that needs approval becomes an mcp_approval_request, added and done with the full item",
          "[responses]") { // RS-33
  response_stream s([](const std::string& name) -> std::optional<gateway_route> {
    if (name == "mcp__srv__rm")
      return gateway_route{"srv", "rm", true};
    return std::nullopt;
  }, -1);
  begin(s);
  REQUIRE(feed_all(s, read_chat({chunk(tool_delta(0, "call_r", "mcp__srv__rm", "{\"path\":\"/x\"}")),
                                 chunk("{}", "tool_calls")})));
  CHECK(s.client_actions() == 1);
  CHECK(s.take_pending().empty());
  end_as(s, "completed");
  auto events = s.take_events();
  auto added = events_of(events, "response.output_item.added");
  auto done = events_of(events, "response.output_item.done");
  REQUIRE(added.size() == 1);
  REQUIRE(done.size() == 1);
  CHECK(json::serialize(added[0]["item"]) == json::serialize(done[0]["item"]));
  CHECK(json::get_string(added[0]["item"], "type") == "mcp_approval_request");
  CHECK(json::get_string(added[0]["item"], "name") == "rm");
  CHECK(json::get_string(added[0]["item"], "arguments") == "{\"path\":\"/x\"}");
  CHECK(starts_with(json::get_string(added[0]["item"], "id"), "mcpr_"));
  CHECK_RS37(events);
}

TEST_CASE("a call to an mcp__ name the request does not offer is a gateway call, never a client function call",
          "[responses]") { // RS-31, RS-25, issue 15 finding 13
  response_stream s(echo_route, -1);
  begin(s);
  REQUIRE(feed_all(s, read_chat({chunk(tool_delta(0, "call_x", "mcp__ghost__wipe", "{\"all\":true}")),
                                 chunk("{}", "tool_calls")})));
  CHECK(s.client_actions() == 0);
  CHECK(s.gateway_calls() == 1);
  auto pending = s.take_pending();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].server_label == "ghost");
  CHECK(pending[0].tool == "wipe");
  CHECK(pending[0].arguments == "{\"all\":true}");
  REQUIRE(s.output().size() == 1);
  CHECK(s.output()[0].type == item_kind::mcp_call);
  s.complete_call(pending[0].output_position, "",
                  R"({"type":"mcp_protocol_error","code":-32602,"message":"Unknown tool 'wipe' on server 'ghost'"})");
  end_as(s, "completed");
  auto events = s.take_events();
  for (auto& e : events) {
    INFO(e.json);
    CHECK(e.json.find("mcp__") == std::string::npos);
    CHECK(e.type.find("function_call") == std::string::npos);
  }
  CHECK(s.output()[0].status == "failed");
  CHECK_RS37(events);
}

TEST_CASE("a call that needs approval but whose arguments are not JSON asks nobody and goes to execution as given",
          "[responses]") { // RS-33, RS-25, issue 15 finding 13
  response_stream s([](const std::string& name) -> std::optional<gateway_route> {
    if (name == "mcp__srv__rm")
      return gateway_route{"srv", "rm", true};
    return std::nullopt;
  }, -1);
  begin(s);
  const std::string broken = "{\"path\": \"/x\"";
  REQUIRE(feed_all(s, read_chat({chunk(tool_delta(0, "call_r", "mcp__srv__rm", broken)), chunk("{}", "tool_calls")})));
  CHECK(s.client_actions() == 0);
  auto pending = s.take_pending();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].arguments == broken);
  REQUIRE(s.output().size() == 1);
  CHECK(s.output()[0].type == item_kind::mcp_call);
  CHECK(s.output()[0].arguments == broken);
  s.complete_call(pending[0].output_position, "", R"({"type":"mcp_protocol_error","code":-32602,"message":"x"})");
  end_as(s, "completed");
  auto events = s.take_events();
  for (auto& e : events)
    CHECK(e.json.find("mcp_approval_request") == std::string::npos);
  CHECK_RS37(events);
}

TEST_CASE("a call that needs approval with no arguments at all still asks for it", "[responses]") { // RS-33
  response_stream s([](const std::string&) -> std::optional<gateway_route> {
    return gateway_route{"srv", "rm", true};
  }, -1);
  begin(s);
  REQUIRE(feed_all(s, read_chat({chunk(tool_delta(0, "call_r", "mcp__srv__rm", "")), chunk("{}", "tool_calls")})));
  CHECK(s.client_actions() == 1);
  CHECK(s.take_pending().empty());
}

// ---- 5. RS-37 on a typical stream, and the canonical replay ----

namespace {

// created, in_progress, reasoning, text and a client call from a chat upstream, completed.
response_stream typical_stream() {
  response_stream s(nullptr, -1);
  begin(s);
  auto upstream = read_chat({
    chunk(R"({"role":"assistant","reasoning_content":"The user"})"),
    chunk(text_delta("reasoning_content", " wants weather.")),
    chunk(text_delta("content", "Checking ")),
    chunk(text_delta("content", "now.")),
    chunk(tool_delta(0, "call_w", "get_weather", "{\"city\":")),
    chunk(tool_delta(0, "", "", "\"Oslo\"}")),
    chunk("{}", "tool_calls"),
    usage_chunk,
  });
  REQUIRE(feed_all(s, upstream));
  REQUIRE(s.round_finished());
  end_as(s, "completed");
  return s;
}

std::vector<stream_event> replay(const std::vector<item>& items) {
  response_stream s(nullptr, -1);
  begin(s);
  for (auto& it : items)
    s.replay_item(it);
  s.terminal("response.completed", response_object(items, "completed"));
  return s.take_events();
}

std::string bytes_of(const std::vector<stream_event>& events) {
  std::string out;
  for (auto& e : events)
    out += "event: " + e.type + "\ndata: " + e.json + "\n\n";
  return out;
}

} // namespace

TEST_CASE("a live stream with reasoning, text and a call keeps every RS-37 invariant", "[responses]") {
  // RS-37, RS-48
  auto s = typical_stream();
  auto events = s.take_events();
  CHECK_RS37(events);
  REQUIRE(s.output().size() == 3);
  CHECK(s.output()[0].type == item_kind::reasoning);
  CHECK(message_text(s.output()[0]) == "The user wants weather.");
  CHECK(s.output()[1].type == item_kind::message);
  CHECK(message_text(s.output()[1]) == "Checking now.");
  CHECK(s.output()[2].arguments == "{\"city\":\"Oslo\"}");
  for (auto& it : s.output())
    CHECK(it.status == "completed");
  // Each upstream delta is one client event (RS-38).
  CHECK(events_of(events, "response.reasoning_text.delta").size() == 2);
  CHECK(events_of(events, "response.output_text.delta").size() == 2);
  CHECK(events_of(events, "response.function_call_arguments.delta").size() == 2);
}

TEST_CASE("the canonical replay of stored items keeps RS-37 and is byte-identical every time", "[responses]") {
  // RS-44, RS-37
  auto live = typical_stream();
  auto items = live.output();
  // An executed MCP call and a refusal join the stored items.
  item mcp;
  mcp.type = item_kind::mcp_call;
  mcp.id = "mcp_0000000000000000000000000000abcd";
  mcp.server_label = "srv";
  mcp.name = "echo";
  mcp.arguments = "{\"text\":\"hi\"}";
  mcp.output = "\"hi\"";
  mcp.status = "completed";
  items.push_back(mcp);
  item refusal;
  refusal.type = item_kind::message;
  refusal.id = "msg_0000000000000000000000000000abcd";
  refusal.role = "assistant";
  refusal.status = "completed";
  refusal.content = {{part_kind::output_text, "Sorry,", {}, "auto"}, {part_kind::refusal, "I can't.", {}, "auto"}};
  items.push_back(refusal);

  auto first = replay(items);
  auto second = replay(items);
  CHECK_RS37(first);
  CHECK(bytes_of(first) == bytes_of(second));

  CHECK(types_of(first) == std::vector<std::string>{
                             "response.created",
                             "response.in_progress",
                             // reasoning
                             "response.output_item.added",
                             "response.content_part.added",
                             "response.reasoning_text.delta",
                             "response.reasoning_text.done",
                             "response.content_part.done",
                             "response.output_item.done",
                             // message
                             "response.output_item.added",
                             "response.content_part.added",
                             "response.output_text.delta",
                             "response.output_text.done",
                             "response.content_part.done",
                             "response.output_item.done",
                             // function call
                             "response.output_item.added",
                             "response.function_call_arguments.delta",
                             "response.function_call_arguments.done",
                             "response.output_item.done",
                             // mcp call
                             "response.output_item.added",
                             "response.mcp_call.in_progress",
                             "response.mcp_call_arguments.delta",
                             "response.mcp_call_arguments.done",
                             "response.mcp_call.completed",
                             "response.output_item.done",
                             // message with two parts
                             "response.output_item.added",
                             "response.content_part.added",
                             "response.output_text.delta",
                             "response.output_text.done",
                             "response.content_part.done",
                             "response.content_part.added",
                             "response.refusal.delta",
                             "response.refusal.done",
                             "response.content_part.done",
                             "response.output_item.done",
                             "response.completed",
                           });
  // Items are added empty and in progress, and done as stored.
  auto added = events_of(first, "response.output_item.added");
  auto done = events_of(first, "response.output_item.done");
  REQUIRE(added.size() == items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    CAPTURE(i);
    CHECK(json::get_string(added[i]["item"], "status") == "in_progress");
    CHECK(json::get_string(added[i]["item"], "arguments").empty());
    if (auto c = json::member(added[i]["item"], "content"))
      CHECK(c->Empty());
    CHECK(json::serialize(done[i]["item"]) == to_json(items[i]));
  }
}

// ---- 6. the chat reader ----

TEST_CASE("chat reasoning_content before content opens a reasoning item, then a message", "[responses]") {
  // RS-48
  auto upstream = read_chat({
    chunk(R"({"role":"assistant","reasoning_content":"think"})"),
    chunk(R"({"reasoning":" more"})"),
    chunk(R"({"content":"answer"})"),
    chunk("{}", "stop"),
  });
  REQUIRE(upstream.size() == 4);
  CHECK(upstream[0].what == upstream_event::kind::reasoning);
  CHECK(upstream[1].what == upstream_event::kind::reasoning);
  CHECK(upstream[2].what == upstream_event::kind::text);
  CHECK(upstream[3].what == upstream_event::kind::finish);
  CHECK(upstream[3].finish == "stop");
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  end_as(s, "completed");
  auto events = s.take_events();
  REQUIRE(s.output().size() == 2);
  CHECK(s.output()[0].type == item_kind::reasoning);
  CHECK(message_text(s.output()[0]) == "think more");
  CHECK(s.output()[1].type == item_kind::message);
  auto added = events_of(events, "response.output_item.added");
  REQUIRE(added.size() == 2);
  CHECK(json::serialize(added[0]["item"]).find(R"("summary":[],"content":[])") != std::string::npos);
  auto parts = events_of(events, "response.content_part.added");
  REQUIRE(parts.size() == 2);
  CHECK(json::serialize(parts[0]["part"]) == R"({"type":"reasoning_text","text":""})");
  CHECK(json::serialize(parts[1]["part"]) == R"({"type":"output_text","text":"","annotations":[],"logprobs":[]})");
  CHECK_RS37(events);
}

TEST_CASE("chat usage comes from the last chunk, mapped to the Responses names", "[responses]") { // RS-48, RS-19
  auto upstream = read_chat({chunk(R"({"content":"hi"})"), chunk("{}", "stop"), usage_chunk});
  REQUIRE(upstream.back().what == upstream_event::kind::finish);
  auto& tokens = upstream.back().tokens;
  CHECK(tokens.input_tokens == 11);
  CHECK(tokens.output_tokens == 7);
  CHECK(tokens.cached_tokens == 3);
  CHECK(tokens.reasoning_tokens == 2);
  response_stream s(nullptr, -1);
  REQUIRE(feed_all(s, upstream));
  CHECK(s.round_usage().input_tokens == 11);
  CHECK(s.round_usage().output_tokens == 7);
}

TEST_CASE("chat finish_reason length ends the open item incomplete; content_filter is its own finish",
          "[responses]") { // RS-48, RS-22.1
  auto upstream = read_chat({chunk(R"({"content":"cut sho"})"), chunk("{}", "length")});
  REQUIRE(upstream.back().what == upstream_event::kind::finish);
  CHECK(upstream.back().finish == "length");
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  CHECK(s.finish_reason() == "length");
  REQUIRE(s.output().size() == 1);
  CHECK(s.output()[0].status == "incomplete");
  end_as(s, "incomplete");
  CHECK_RS37(s.take_events());

  auto filtered = read_chat({chunk(R"({"content":"x"})"), chunk("{}", "content_filter")});
  CHECK(filtered.back().finish == "content_filter");
}

TEST_CASE("a chat stream without a finish_reason, or with an error chunk, fails the round", "[responses]") {
  // RS-48, RS-43
  auto unfinished = read_chat({chunk(R"({"content":"hi"})")});
  REQUIRE(unfinished.back().what == upstream_event::kind::failure);
  CHECK(unfinished.back().text.find("finish_reason") != std::string::npos);

  auto errored = read_chat({chunk(R"({"content":"hi"})"), R"({"error":{"message":"model overloaded","code":503}})"});
  REQUIRE(errored.back().what == upstream_event::kind::failure);
  CHECK(errored.back().text == "model overloaded");
  response_stream s(nullptr, -1);
  begin(s);
  CHECK_FALSE(feed_all(s, errored));
  CHECK(s.failure() == "model overloaded");

  auto garbage = read_chat({"not json"});
  CHECK(garbage.back().what == upstream_event::kind::failure);
}

TEST_CASE("a chat call whose name arrives after some arguments is announced then, with what was buffered",
          "[responses]") { // RS-48, RS-38
  chat_chunk_reader reader;
  std::vector<upstream_event> out;
  REQUIRE(reader.feed(chunk(tool_delta(0, "call_l", "", "{\"a\"")), out));
  REQUIRE(reader.feed(chunk(tool_delta(0, "", "", ":1")), out));
  CHECK(out.empty());
  REQUIRE(reader.feed(chunk(tool_delta(0, "", "late_name", "}")), out));
  REQUIRE(out.size() == 2);
  CHECK(out[0].what == upstream_event::kind::call);
  CHECK(out[0].name == "late_name");
  CHECK(out[0].call_id == "call_l");
  CHECK(out[1].what == upstream_event::kind::arguments);
  CHECK(out[1].text == "{\"a\":1}");
  REQUIRE(reader.feed(chunk("{}", "tool_calls"), out));
  reader.end(out);
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, out));
  end_as(s, "completed");
  CHECK(s.output()[0].arguments == "{\"a\":1}");
  CHECK_RS37(s.take_events());
}

TEST_CASE("a chat call that never gets a name fails the round, and its buffered arguments are bounded",
          "[responses]") { // RS-48, RS-39
  auto nameless = read_chat({chunk(tool_delta(0, "call_n", "", "{}")), chunk("{}", "tool_calls")});
  REQUIRE(nameless.back().what == upstream_event::kind::failure);
  CHECK(nameless.back().text.find("name") != std::string::npos);

  chat_chunk_reader reader;
  std::vector<upstream_event> out;
  const std::string piece(64 * 1024, 'x');
  bool ok = true;
  int fed = 0;
  for (; fed < 5 && ok; ++fed)
    ok = reader.feed(chunk(tool_delta(0, fed == 0 ? "call_n" : "", "", piece)), out);
  CHECK_FALSE(ok);
  CHECK(fed == 5); // 4 × 64 KiB = 256 KiB still fits; the fifth piece exceeds the bound
  REQUIRE_FALSE(out.empty());
  CHECK(out.back().what == upstream_event::kind::failure);
}

TEST_CASE("a non-streamed chat completion yields the events a stream would have", "[responses]") { // RS-48
  auto events = chat_completion_events(
    R"({"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"r","content":"c","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":4,"completion_tokens":2}})");
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, events));
  end_as(s, "completed");
  REQUIRE(s.output().size() == 3);
  CHECK(s.output()[2].arguments == "{}");
  CHECK(s.round_usage().input_tokens == 4);
  CHECK_RS37(s.take_events());
}

// ---- 7. the Responses reader on recorded streams ----

TEST_CASE("an OpenAI text stream becomes one message with its deltas and the terminal usage", "[responses]") {
  // RS-45, RS-19; fixture resp-single-gpt-4o-streaming
  auto upstream = read_responses(openai_text_stream);
  REQUIRE(upstream.size() == 5);
  CHECK(upstream[0].text == "G");
  CHECK(upstream[1].text == "LO");
  CHECK(upstream[2].text == "BE");
  CHECK(upstream[3].what == upstream_event::kind::item_end); // the message's output_item.done
  REQUIRE(upstream[4].what == upstream_event::kind::finish);
  CHECK(upstream[4].finish == "stop");
  CHECK(upstream[4].tokens.input_tokens == 14);
  CHECK(upstream[4].tokens.output_tokens == 4);
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  end_as(s, "completed");
  auto events = s.take_events();
  REQUIRE(s.output().size() == 1);
  CHECK(message_text(s.output()[0]) == "GLOBE");
  CHECK(starts_with(s.output()[0].id, "msg_"));
  CHECK(s.output()[0].id != "msg_0d119a97c73fc7550069e74501f204819389cc6b2751cea611"); // re-minted (RS-18)
  // The same event sequence OpenAI sent, with troupe's own numbering (RS-45).
  CHECK(types_of(events) == std::vector<std::string>{
                              "response.created",
                              "response.in_progress",
                              "response.output_item.added",
                              "response.content_part.added",
                              "response.output_text.delta",
                              "response.output_text.delta",
                              "response.output_text.delta",
                              "response.output_text.done",
                              "response.content_part.done",
                              "response.output_item.done",
                              "response.completed",
                            });
  // No upstream-specific fields leak through (RS-15).
  for (auto& e : events)
    CHECK(e.json.find("obfuscation") == std::string::npos);
  CHECK_RS37(events);
}

TEST_CASE("OpenAI function-call argument deltas are relayed fragment for fragment", "[responses]") {
  // RS-45, RS-38; fixture codex-openai-https-function-tool-gpt-4o-streaming t1
  auto upstream = read_responses(openai_call_stream);
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  end_as(s, "completed");
  auto events = s.take_events();
  std::vector<std::string> deltas;
  for (auto& d : events_of(events, "response.function_call_arguments.delta"))
    deltas.push_back(json::get_string(d, "delta"));
  CHECK(deltas == std::vector<std::string>{"{\"", "text", "\":\"", "plain", " fixture", "\"}"});
  REQUIRE(s.output().size() == 1);
  CHECK(s.output()[0].arguments == "{\"text\":\"plain fixture\"}");
  CHECK(s.output()[0].call_id == "call_sZGlA43qovZccnHqzXe9NEQC"); // upstream call_ids are kept (RS-18)
  CHECK(s.output()[0].name == "agentic_plain_echo");
  CHECK(s.round_usage().input_tokens == 60);
  CHECK(s.round_usage().output_tokens == 18);
  CHECK_RS37(events);
}

TEST_CASE("a vLLM forced function call yields its arguments and usage", "[responses]") {
  // RS-45; fixture function-call-vllm-gemma4
  auto upstream = read_responses(gemma_call_stream);
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  end_as(s, "completed");
  auto events = s.take_events();
  REQUIRE(s.output().size() == 1);
  auto& call = s.output()[0];
  CHECK(call.name == "get_weather");
  CHECK(call.arguments == "{\"city\": \"San Francisco\"}");
  CHECK(call.call_id == "call_92fd766dcc21a19c");
  CHECK(starts_with(call.id, "fc_")); // the upstream id 8c5375b5b08d666c is not exposed (RS-18)
  CHECK(events_of(events, "response.function_call_arguments.delta").size() == 8);
  CHECK(s.round_usage().input_tokens == 66);
  CHECK(s.round_usage().output_tokens == 21);
  CHECK_RS37(events);
}

TEST_CASE("a vLLM reasoning stream with its placeholder argument delta yields the call's real arguments",
          "[responses]") {
  // RS-45, RS-37.6; fixture codex-direct-vllm-http-function-tool-Qwen: its deltas "{}", "{", "\"text\":
  // \"plain fixture\"", "}" do not join to the arguments that .done and output_item.done carry.
  auto upstream = read_responses(qwen_call_stream);
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  REQUIRE(s.round_finished());
  end_as(s, "completed");
  auto events = s.take_events();
  REQUIRE(s.output().size() == 3);
  CHECK(s.output()[0].type == item_kind::reasoning);
  CHECK(message_text(s.output()[0]) == "Thinking Process:\n1. ");
  CHECK(s.output()[1].type == item_kind::message);
  CHECK(message_text(s.output()[1]) == "\n\n");
  CHECK(s.output()[2].type == item_kind::function_call);
  CHECK(s.output()[2].arguments == "{\"text\": \"plain fixture\"}");
  CHECK(json::parse(s.output()[2].arguments));
  CHECK(s.output()[2].call_id == "call_d7f2b204e6a04061b787bac7");
  CHECK(s.round_usage().input_tokens == 290);
  CHECK(s.round_usage().output_tokens == 464);
  CHECK(s.round_usage().reasoning_tokens == 417);
  // vLLM sends no content_part events for reasoning: troupe adds its reasoning_text part itself.
  auto parts = events_of(events, "response.content_part.added");
  REQUIRE(parts.size() == 2);
  CHECK(json::get_string(parts[0]["part"], "type") == "reasoning_text");
  CHECK_RS37(events);
}

TEST_CASE("vLLM reasoning items added with content null and reasoning_part events become a reasoning_text part",
          "[responses]") { // RS-45
  auto upstream = read_responses({
    R"({"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}})",
    R"({"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_up","type":"reasoning","summary":[],"content":null,"status":"in_progress"}})",
    R"({"type":"response.reasoning_part.added","sequence_number":2,"item_id":"rs_up","output_index":0,"content_index":0,"part":{"type":"reasoning_text","text":""}})",
    R"({"type":"response.reasoning_text.delta","sequence_number":3,"item_id":"rs_up","output_index":0,"content_index":0,"delta":"hmm"})",
    R"({"type":"response.reasoning_text.done","sequence_number":4,"item_id":"rs_up","output_index":0,"content_index":0,"text":"hmm"})",
    R"({"type":"response.reasoning_part.done","sequence_number":5,"item_id":"rs_up","output_index":0,"content_index":0,"part":{"type":"reasoning_text","text":"hmm"}})",
    R"({"type":"response.output_item.done","sequence_number":6,"output_index":0,"item":{"id":"rs_up","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"hmm"}],"status":"completed"}})",
    R"({"type":"response.output_item.added","sequence_number":7,"output_index":1,"item":{"id":"msg_up","type":"message","role":"assistant","content":[],"status":"in_progress"}})",
    R"({"type":"response.output_text.delta","sequence_number":8,"item_id":"msg_up","output_index":1,"content_index":0,"delta":"ok"})",
    R"({"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","status":"completed","usage":{"input_tokens":3,"output_tokens":2}}})",
    "[DONE]",
  });
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  end_as(s, "completed");
  auto events = s.take_events();
  REQUIRE(s.output().size() == 2);
  CHECK(message_text(s.output()[0]) == "hmm");
  auto added = events_of(events, "response.output_item.added");
  CHECK(json::serialize(added[0]["item"]["content"]) == "[]");
  auto parts = events_of(events, "response.content_part.added");
  REQUIRE_FALSE(parts.empty());
  CHECK(json::serialize(parts[0]["part"]) == R"({"type":"reasoning_text","text":""})");
  for (auto& e : events)
    CHECK(e.type.find("reasoning_part") == std::string::npos); // not in the closed set (RS-36)
  CHECK_RS37(events);
}

TEST_CASE("an upstream response.incomplete finishes the round as length or content_filter", "[responses]") {
  // RS-45, RS-22.1
  auto length = read_responses({
    R"({"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"par"})",
    R"({"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":9,"output_tokens":16}}})",
  });
  REQUIRE(length.back().what == upstream_event::kind::finish);
  CHECK(length.back().finish == "length");
  CHECK(length.back().tokens.output_tokens == 16);
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, length));
  CHECK(s.output()[0].status == "incomplete");

  auto filtered = read_responses({
    R"({"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"content_filter"}}})",
  });
  CHECK(filtered.back().finish == "content_filter");
}

TEST_CASE("RS-49 a Responses upstream cut for length ends its last item incomplete with the chat adapter's events",
          "[responses]") { // RS-49, RS-22.1, RS-48
  // The same reasoning and text, cut by the output cap, once per protocol: the upstream says the
  // message ended (output_item.done) before its response.incomplete, and the item still ends cut.
  auto chat = read_chat({chunk(R"({"reasoning_content":"think"})"), chunk(R"({"content":"cut sho"})"),
                         chunk("{}", "length")});
  auto responses = read_responses({
    R"({"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_up1","summary":[],"content":[]}})",
    R"({"type":"response.reasoning_text.delta","output_index":0,"content_index":0,"delta":"think"})",
    R"({"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_up1","status":"completed"}})",
    R"({"type":"response.output_item.added","output_index":1,"item":{"type":"message","id":"msg_up1","content":[]}})",
    R"({"type":"response.output_text.delta","output_index":1,"content_index":0,"delta":"cut sho"})",
    R"({"type":"response.output_item.done","output_index":1,"item":{"type":"message","id":"msg_up1","status":"incomplete"}})",
    R"({"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}})",
  });
  auto run = [](const std::vector<upstream_event>& upstream) {
    response_stream s(nullptr, -1);
    begin(s);
    REQUIRE(feed_all(s, upstream));
    std::vector<std::string> statuses;
    for (auto& it : s.output())
      statuses.push_back(it.status);
    CHECK(statuses == std::vector<std::string>{"completed", "incomplete"}); // the cut message is incomplete
    CHECK(s.finish_reason() == "length");
    end_as(s, "incomplete");
    auto events = s.take_events();
    CHECK_RS37(events);
    return types_of(events);
  };
  CHECK(run(responses) == run(chat));

  // Not streamed: the object's last item is likewise left to the cut.
  auto whole = responses_object_events(
    R"({"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","id":"msg_up2","status":"incomplete","content":[{"type":"output_text","text":"cut sho"}]}]})");
  response_stream s(nullptr, -1);
  begin(s);
  REQUIRE(feed_all(s, whole));
  REQUIRE(s.output().size() == 1);
  CHECK(s.output()[0].status == "incomplete");
}

TEST_CASE("an upstream response.failed or error event fails the round with its message", "[responses]") {
  // RS-45, RS-43
  auto failed = read_responses({
    R"({"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"x"})",
    R"({"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"engine crashed"}}})",
  });
  REQUIRE(failed.back().what == upstream_event::kind::failure);
  CHECK(failed.back().text == "engine crashed");
  response_stream s(nullptr, -1);
  begin(s);
  CHECK_FALSE(feed_all(s, failed));
  CHECK(s.failure() == "engine crashed");

  auto error = read_responses({
    R"({"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null,"sequence_number":3})",
  });
  REQUIRE(error.back().what == upstream_event::kind::failure);
  CHECK(error.back().text == "slow down");
}

TEST_CASE("an upstream stream without a terminal event fails when it ends", "[responses]") { // RS-43, RS-45
  std::vector<std::string> truncated(openai_text_stream.begin(), openai_text_stream.end() - 1);
  auto events = read_responses(truncated);
  REQUIRE(events.back().what == upstream_event::kind::failure);
  CHECK(events.back().text.find("terminal") != std::string::npos);
  // vLLM's [DONE] is not a terminal event either.
  truncated.push_back("[DONE]");
  auto with_done = read_responses(truncated);
  REQUIRE(with_done.back().what == upstream_event::kind::failure);
  CHECK(with_done.back().text.find("terminal") != std::string::npos);
}

// ---- 8. max_tool_calls ----

TEST_CASE("calls beyond max_tool_calls leave no client-visible trace and get a hidden limit output",
          "[responses]") { // RS-24
  auto upstream = read_chat({
    chunk(tool_delta(0, "call_1", "mcp__srv__echo", "{\"text\":\"a\"}")),
    chunk(tool_delta(1, "call_2", "mcp__srv__echo", "{\"text\":\"b\"}")),
    chunk("{}", "tool_calls"),
  });
  response_stream s(echo_route, 1);
  begin(s);
  REQUIRE(feed_all(s, upstream));
  CHECK(s.gateway_calls() == 2);
  CHECK(s.gateway_budget() == 0);
  CHECK(s.client_actions() == 0);
  auto pending = s.take_pending();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].arguments == "{\"text\":\"a\"}");
  s.complete_call(pending[0].output_position, "a", "");
  end_as(s, "completed");
  auto events = s.take_events();
  CHECK(events_of(events, "response.output_item.added").size() == 1);
  for (auto& e : events)
    CHECK(e.json.find("call_2") == std::string::npos);
  REQUIRE(s.output().size() == 1);
  CHECK(s.output()[0].type == item_kind::mcp_call);

  auto model = s.model_items();
  REQUIRE(model.size() == 3);
  CHECK(model[0].type == item_kind::mcp_call);
  CHECK(model[1].type == item_kind::function_call);
  CHECK(model[1].call_id == "call_2");
  CHECK(model[1].name == "mcp__srv__echo");
  CHECK(model[1].arguments == "{\"text\":\"b\"}");
  CHECK(model[2].type == item_kind::function_call_output);
  CHECK(model[2].call_id == "call_2");
  auto output = parse_doc(model[2].output);
  REQUIRE(output.IsString());
  CHECK(std::string(output.GetString()) == R"({"error":"Reached tool call limit of 1"})");
  CHECK_RS37(events);
}

TEST_CASE("an approved call beyond max_tool_calls gets only the limit output, under its approval request's id",
          "[responses]") { // RS-24, RS-33, RS-46
  response_stream s(echo_route, 1);
  begin(s);
  s.open_approved_call("srv", "rm", "{\"path\":\"/a\"}", "mcpr_a");
  s.open_approved_call("srv", "rm", "{\"path\":\"/b\"}", "mcpr_b");
  auto pending = s.take_pending();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].arguments == "{\"path\":\"/a\"}");
  REQUIRE(s.output().size() == 1);
  CHECK(s.output()[0].approval_request_id == "mcpr_a");
  s.complete_call(pending[0].output_position, "removed", "");
  end_as(s, "completed");
  auto events = s.take_events();
  CHECK_RS37(events);
  for (auto& e : events)
    CHECK(e.json.find("mcpr_b") == std::string::npos);

  // The history the next round renders: each call once, each with one output.
  std::vector<item> history;
  for (auto id : {"mcpr_a", "mcpr_b"}) {
    item req;
    req.type = item_kind::mcp_approval_request;
    req.id = id;
    req.server_label = "srv";
    req.name = "rm";
    req.arguments = "{}";
    history.push_back(req);
    item answer;
    answer.type = item_kind::mcp_approval_response;
    answer.id = mint_item_id(item_kind::mcp_approval_response);
    answer.approval_request_id = id;
    answer.approve = true;
    history.push_back(answer);
  }
  for (auto& it : s.model_items())
    history.push_back(it);
  std::map<std::string, int> calls;
  std::map<std::string, int> outputs;
  for (auto& it : model_view(history)) {
    if (it.type == item_kind::function_call)
      ++calls[it.call_id];
    if (it.type == item_kind::function_call_output)
      ++outputs[it.call_id];
  }
  CHECK(calls == std::map<std::string, int>{{"mcpr_a", 1}, {"mcpr_b", 1}});
  CHECK(outputs == std::map<std::string, int>{{"mcpr_a", 1}, {"mcpr_b", 1}});
}

TEST_CASE("two upstream messages in a row stay two client messages (RS-45)", "[responses]") {
  response_stream s(nullptr, -1);
  begin(s);
  auto text = [](std::string t) {
    upstream_event e;
    e.what = upstream_event::kind::text;
    e.text = std::move(t);
    return e;
  };
  upstream_event end;
  end.what = upstream_event::kind::item_end;
  upstream_event finish;
  finish.what = upstream_event::kind::finish;
  REQUIRE(s.feed(text("first")));
  REQUIRE(s.feed(end));
  REQUIRE(s.feed(text("second")));
  REQUIRE(s.feed(finish));
  REQUIRE(s.output().size() == 2);
  CHECK(message_text(s.output()[0]) == "first");
  CHECK(message_text(s.output()[1]) == "second");
}

TEST_CASE("a non-streamed Responses body yields the events a stream would have", "[responses]") {
  // RS-45; the body of fixture resp-single-gpt-4o-nonstreaming, written as JSON
  auto events = responses_object_events(
    R"j({"background":false,"billing":{"payer":"developer"},"completed_at":1776764143,"created_at":1776764142,"error":null,"frequency_penalty":0.0,"id":"resp_0508721937e20de90069e744ee9018819394c8e011dc6d7818","incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"metadata":{},"model":"gpt-4o-2024-08-06","object":"response","output":[{"content":[{"annotations":[],"logprobs":[],"text":"HI","type":"output_text"}],"id":"msg_0508721937e20de90069e744ef1b2881939596753c5951691e","role":"assistant","status":"completed","type":"message"}],"parallel_tool_calls":true,"presence_penalty":0.0,"previous_response_id":null,"prompt_cache_key":null,"prompt_cache_retention":"in_memory","reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","status":"completed","store":true,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":{"input_tokens":15,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":17},"user":null})j");
  REQUIRE(events.size() == 3);
  CHECK(events[0].text == "HI");
  CHECK(events[1].what == upstream_event::kind::item_end);
  CHECK(events[2].finish == "stop");
  CHECK(events[2].tokens.input_tokens == 15);
  CHECK(events[2].tokens.output_tokens == 2);
  auto failed = responses_object_events(R"({"status":"failed","error":{"code":"server_error","message":"no"}})");
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].what == upstream_event::kind::failure);
  CHECK(failed[0].text == "no");
}

TEST_CASE("an error event carries the same values flat and nested and ends the stream", "[responses]") { // RS-40
  response_stream s(nullptr, -1);
  begin(s);
  s.error({troupe::errc::internal, "The store is unavailable.", {}, "server_error"});
  auto events = s.take_events();
  REQUIRE(events.size() == 3);
  CHECK(events[2].json
        == R"({"type":"error","sequence_number":2,"code":"server_error","message":"The store is unavailable.","param":null,)"
           R"("error":{"type":"server_error","code":"server_error","message":"The store is unavailable.","param":null}})");
  s.terminal("response.completed", response_object({}, "completed"));
  CHECK_FALSE(s.has_events());
  CHECK_RS37(events);
}

TEST_CASE("abandoning calls also ends the ones already taken for execution, so the terminal event follows",
          "[responses]") { // RS-9, RS-22.1, RS-37.3
  response_stream s(echo_route, -1);
  begin(s);
  REQUIRE(feed_all(s, read_chat({chunk(tool_delta(0, "call_g", "mcp__srv__echo", "{}")),
                                 chunk(tool_delta(1, "call_c", "get_weather", "{}")), chunk("{}", "tool_calls")})));
  auto pending = s.take_pending(); // the executor runs it...
  REQUIRE(pending.size() == 1);
  s.abandon_calls();               // ...and the run is cancelled before it returns
  end_as(s, "incomplete");
  auto events = s.take_events();
  REQUIRE_FALSE(events.empty());
  CHECK(events.back().type == "response.incomplete");
  CHECK(s.output()[0].status == "incomplete");
  CHECK(s.held_events() == 0);
  CHECK_RS37(events);
  // A late result changes nothing.
  s.complete_call(pending[0].output_position, "late", "");
  CHECK_FALSE(s.has_events());
  CHECK(s.output()[0].status == "incomplete");
}

// ---- upstream failures (RS-43, RS-16) ----

TEST_CASE("RS-43 an upstream's error answer is told by its own error.message, bounded and without control "
          "characters, never by its raw body",
          "[responses]") {
  CHECK(upstream_error_message(R"({"error":{"message":"Rate limit reached for requests","type":"requests"}})")
        == "Rate limit reached for requests");
  CHECK(upstream_error_message(R"({"error":"model is loading"})") == "model is loading");
  CHECK(upstream_error_message(R"({"message":"overloaded"})") == "overloaded");
  CHECK(upstream_error_message(R"({"error":{"message":"line one\nline\u0000two\u001b[31m"}})")
        == "line one line two [31m");
  CHECK(upstream_error_message("<html>502 Bad Gateway</html>").empty());
  CHECK(upstream_error_message(R"({"error":{"code":429}})").empty());
  auto long_message = upstream_error_message("{\"error\":{\"message\":\"" + std::string(600, 'x') + "\u00e9\"}}");
  CHECK(long_message.size() == 512);
  // A cut never splits a character.
  auto accented = upstream_error_message("{\"error\":{\"message\":\"" + std::string(511, 'x') + "\u00e9\"}}");
  CHECK(accented == std::string(511, 'x'));
}

TEST_CASE("RS-43 a Retry-After is read as delay-seconds or an IMF-fixdate HTTP-date, and anything else is "
          "refused rather than repeated",
          "[responses]") {
  const int64_t now = 784111777; // Sun, 06 Nov 1994 08:49:37 GMT
  CHECK(retry_after_seconds("0", now) == 0);
  CHECK(retry_after_seconds(" 20 ", now) == 20);
  CHECK(retry_after_seconds("Sun, 06 Nov 1994 08:50:07 GMT", now) == 30);
  CHECK(retry_after_seconds("Sun, 06 Nov 1994 08:49:00 GMT", now) == 0); // in the past: now
  CHECK(retry_after_seconds("99999999999999999999", now) == 86400);      // at most a day
  CHECK(retry_after_seconds("Thu, 01 Jan 2037 00:00:00 GMT", now) == 86400);
  for (std::string_view bad : {"", "-1", "1.5", "soon", "20\r\nSet-Cookie: a=b", "Sunday, 06-Nov-94 08:49:37 GMT",
                               "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Foo 1994 08:49:37 GMT",
                               "Sun, 32 Nov 1994 08:49:37 GMT"})
    CHECK_FALSE(retry_after_seconds(bad, now));
}

TEST_CASE("RS-43 an upstream failure's kind says what a client is answered: 429 rate limited with its "
          "Retry-After, 503/529 unavailable, a first-round 4xx a bad request, the rest an upstream failure",
          "[responses]") {
  auto limited = upstream_failure("slow down", 429, false, 7);
  CHECK(limited.code == troupe::errc::rate_limited);
  CHECK(limited.kind == "rate_limit_exceeded");
  CHECK(limited.retry_after_seconds == 7);
  CHECK(troupe::protocol::render_error(troupe::protocol::dialect::openai, limited).body
        == R"({"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}})");
  for (int status : {503, 529}) {
    auto busy = upstream_failure("busy", status, true, -1);
    CHECK(busy.code == troupe::errc::unavailable);
    CHECK(busy.kind == "server_error");
  }
  auto bad = upstream_failure("context too long", 400, true);
  CHECK(bad.code == troupe::errc::bad_request);
  CHECK(bad.kind == "invalid_prompt");
  CHECK(bad.retry_after_seconds == -1);
  CHECK(upstream_failure("context too long", 400, false).code == troupe::errc::upstream_failed);
  auto broken = upstream_failure("boom", 500, true, 5);
  CHECK(broken.code == troupe::errc::upstream_failed);
  CHECK(broken.kind == "server_error");
  CHECK(broken.retry_after_seconds == -1); // only an answer that asks a client back says when
  CHECK(upstream_failure("reset", 0, true).code == troupe::errc::upstream_failed);
}

// ---- logprobs (RS-14, RS-17) ----

TEST_CASE("RS-14 token logprobs from either upstream reach output_text, its deltas, its done events and the "
          "stored item when asked for, and are [] otherwise",
          "[responses]") {
  const std::string lp_a =
    R"([{"token":"Hel","logprob":-0.1,"bytes":[72,101,108],"top_logprobs":[{"token":"Hel","logprob":-0.1,"bytes":[72,101,108]},{"token":"Hi","logprob":-2.5,"bytes":[72,105]}],"extra":"dropped"}])";
  const std::string lp_b = R"([{"token":"lo","logprob":-0.2,"bytes":[108,111],"top_logprobs":[]}])";
  auto chat = read_chat({
    R"({"choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":{"content":)" + lp_a + R"(},"finish_reason":null}]})",
    R"({"choices":[{"index":0,"delta":{"content":"lo"},"logprobs":{"content":)" + lp_b + R"(},"finish_reason":null}]})",
    chunk("{}", "stop"),
  });
  auto responses = read_responses({
    R"({"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"Hel","logprobs":)" + lp_a + "}",
    R"({"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"lo","logprobs":)" + lp_b + "}",
    R"({"type":"response.completed","response":{"status":"completed"}})",
  });
  const std::string first =
    R"([{"token":"Hel","logprob":-0.1,"bytes":[72,101,108],"top_logprobs":[{"token":"Hel","logprob":-0.1,"bytes":[72,101,108]},{"token":"Hi","logprob":-2.5,"bytes":[72,105]}]}])";
  const std::string second = R"([{"token":"lo","logprob":-0.2,"bytes":[108,111],"top_logprobs":[]}])";
  const std::string all = first.substr(0, first.size() - 1) + "," + second.substr(1);
  for (auto* upstream : {&chat, &responses}) {
    REQUIRE((*upstream)[0].logprobs == first); // only the members a client reads
    response_stream s(nullptr, -1);
    s.keep_logprobs(true);
    begin(s);
    REQUIRE(feed_all(s, *upstream));
    end_as(s, "completed");
    REQUIRE(s.output().size() == 1);
    CHECK(s.output()[0].content[0].logprobs == all);
    std::vector<std::string> deltas, dones;
    for (auto& e : s.take_events()) {
      auto doc = json::parse(e.json);
      REQUIRE(doc);
      if (e.type == "response.output_text.delta")
        deltas.push_back(json::serialize((*doc)["logprobs"]));
      if (e.type == "response.output_text.done")
        dones.push_back(json::serialize((*doc)["logprobs"]));
      if (e.type == "response.content_part.done")
        dones.push_back(json::serialize((*doc)["part"]["logprobs"]));
      if (e.type == "response.output_item.done")
        dones.push_back(json::serialize((*doc)["item"]["content"][0]["logprobs"]));
    }
    CHECK(deltas == std::vector<std::string>{first, second});
    CHECK(dones == std::vector<std::string>{all, all, all});
    // Stored and read back, the item keeps them; its canonical replay gives them in one delta.
    auto stored = item_from_json(*json::parse(to_json(s.output()[0])));
    CHECK(stored.content[0].logprobs == all);

    response_stream unasked(nullptr, -1);
    begin(unasked);
    REQUIRE(feed_all(unasked, *upstream));
    end_as(unasked, "completed");
    CHECK(unasked.output()[0].content[0].logprobs.empty());
    for (auto& e : unasked.take_events())
      if (e.type == "response.output_text.delta" || e.type == "response.output_text.done")
        CHECK(e.json.find("\"logprobs\":[]") != std::string::npos);
  }
}

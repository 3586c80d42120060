// Responses streaming (responses.md §7, §8): what an upstream round says, read from either upstream
// protocol, and the assembler that turns it into the client's event stream and output items.
#pragma once

#include "protocol/responses_items.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::protocol::responses {

// One step of an upstream round, whatever protocol carried it (RS-45, RS-48).
struct upstream_event {
  // `item_end`: the upstream's current item ended; what follows opens a new one (RS-45: one client
  // item per upstream item).
  enum class kind { reasoning, text, refusal, call, arguments, item_end, finish, failure };
  kind what = kind::text;
  int64_t index = 0;    // call, arguments: the call's index within the round
  std::string text;     // a delta, an arguments fragment, or the failure's message
  std::string call_id;  // call
  std::string name;     // call
  std::string finish;   // finish: stop | tool_calls | length | content_filter
  usage tokens;         // finish
  int http_status = 0;  // failure: the upstream's HTTP status, 0 for transport and stream failures
  bool retryable = false; // failure: transient (AS-17), so a background run may try again (AS-53)
};

// Reads `chat.completion.chunk` payloads (RS-48). A call's events wait until its name is known.
class chat_chunk_reader {
public:
  // Appends what one SSE data payload says; false (and a failure event) when the round fails.
  bool feed(std::string_view payload, std::vector<upstream_event>& out);
  // The end of the upstream body: the finish event, or a failure when no finish_reason came.
  void end(std::vector<upstream_event>& out);

private:
  struct call_state {
    std::string id;
    std::string name;
    std::string pending; // arguments received before the name
    bool announced = false;
  };
  bool fail(std::string message, std::vector<upstream_event>& out);
  void close_current();
  int64_t call_index(const json::value& piece) const;

  std::map<int64_t, call_state> calls_;
  std::set<int64_t> closed_;
  int64_t current_ = -1;
  std::string finish_;
  usage tokens_;
  bool failed_ = false;
};

// Reads a `/v1/responses` upstream's stream events (RS-45).
class responses_event_reader {
public:
  bool feed(std::string_view payload, std::vector<upstream_event>& out);
  void end(std::vector<upstream_event>& out);

private:
  bool fail(std::string message, std::vector<upstream_event>& out);
  void finish(const json::value& response, std::string reason, std::vector<upstream_event>& out);
  void release_held(std::vector<upstream_event>& out);

  // By upstream output_index: the arguments given out so far, and how many deltas came.
  struct call_arguments {
    std::string relayed;
    std::size_t deltas = 0;
  };
  std::map<int64_t, call_arguments> arguments_;
  // A call's first delta waits for its second: vLLM streams a placeholder "{}" before the real
  // arguments, and only the next delta shows that it was one.
  std::optional<std::pair<int64_t, std::string>> held_;
  bool finished_ = false;
  bool failed_ = false;
};

// A non-streamed upstream answer as the events a stream would have carried (RS-48, last point).
std::vector<upstream_event> chat_completion_events(std::string_view body);
std::vector<upstream_event> responses_object_events(std::string_view body);

// Where a model-facing tool name leads, when it is a gateway tool (RS-31, RS-33). A name shaped
// `mcp__<server>__<tool>` that the lookup does not know is a gateway call too, to a tool this
// request does not offer: it ends failed, never reaching the client as a function call.
struct gateway_route {
  std::string server_label;
  std::string tool;
  bool needs_approval = false;
};
using route_lookup = std::function<std::optional<gateway_route>(const std::string& name)>;

// One client event: its type (the SSE `event:`) and its one-line JSON payload.
struct stream_event {
  std::string type;
  std::string json;
  int64_t sequence = 0;
};

// An event with its type and sequence number first, then `members` (a JSON object's text without
// its braces).
stream_event make_event(int64_t sequence, std::string type, std::string_view members);
// The members of an `error` event (RS-40).
std::string error_members(const problem& e);

// A gateway call the round produced, waiting for its execution (RS-25).
struct pending_call {
  std::size_t output_position = 0; // its item in output()
  std::string server_label;
  std::string tool;
  std::string arguments;
};

// Assembles one response's event stream across rounds (RS-36..RS-38): sequence numbers from 0,
// response-wide output indexes, one open item at a time, items after a gateway call held back until
// that call's item is done (RS-37.7). Events become available in order through take_events().
class response_stream {
public:
  // Calls to names `lookup` routes are gateway calls. `gateway_budget` < 0: no max_tool_calls.
  response_stream(route_lookup lookup, int64_t gateway_budget);

  // response.created, then response.queued (background) — the response object as it stands.
  void created(const std::string& response_json, bool queued);
  void in_progress(const std::string& response_json);
  // The terminal event (RS-41) or an `error` event; nothing may follow.
  void terminal(std::string_view type, const std::string& response_json);
  void error(const problem& e);

  // One upstream event of the current round. False, with failure() set, when it breaks the round
  // (an index/id mismatch, a fragment for a closed call, a second finish, an upstream failure).
  bool feed(const upstream_event& e);
  bool round_finished() const { return round_finished_; }
  const std::string& finish_reason() const { return finish_; }
  const std::string& failure() const { return failure_; }
  // Starts the next round.
  void next_round();

  // Gateway calls closed since the last take, in model order; the output holds them open.
  std::vector<pending_call> take_pending();
  // Ends a gateway call's item: completed with `output`, or failed with `error_json` (RS-25, RS-34).
  void complete_call(std::size_t output_position, std::string output, std::string error_json);
  // Ends every gateway call still open as incomplete, unexecuted (RS-22.1).
  void abandon_calls();
  // The run stops mid-round (cancelled, failed): the open item and open calls end incomplete (RS-9).
  void interrupt();
  // An approved call executed before round 1 (RS-33): opened as an mcp_call, then pending.
  void open_approved_call(const std::string& server_label, const std::string& tool,
                          const std::string& arguments, const std::string& approval_request_id);
  // A whole item the loop made (mcp_list_tools, compaction), with its lifecycle events. A list
  // item's `error` set means its listing failed.
  void add_item(item it);
  // A stored item replayed with its lifecycle events (RS-44).
  void replay_item(const item& it);

  // Calls of this round: client function calls and approval requests (RS-22.2).
  int client_actions() const { return client_actions_; }
  // Gateway calls this round asked for, hidden ones included.
  int gateway_calls() const { return gateway_calls_; }
  int64_t gateway_budget() const { return budget_; }
  usage round_usage() const { return round_usage_; }

  // Client-visible items, the open one with what it has so far.
  const std::vector<item>& output() const { return output_; }
  // The model-facing items of the response so far, in order: output() plus the hidden pairs of
  // calls beyond max_tool_calls (RS-24), which only the current response's rounds see.
  std::vector<item> model_items() const;
  // Positions in output() whose output_item.done was emitted.
  bool item_done(std::size_t position) const { return done_.count(position) > 0; }

  std::vector<stream_event> take_events();
  bool has_events() const { return !ready_.empty(); }
  // Events held back behind a gateway call, and their bytes (RS-39 bounds).
  std::size_t held_events() const { return queue_.size(); }
  std::size_t held_bytes() const { return queue_bytes_; }
  int64_t next_sequence() const { return sequence_; }

private:
  struct queued {
    std::string type;
    std::string body;             // the payload's members after type and sequence_number
    std::size_t barrier = SIZE_MAX; // a gateway call's position: stop here until it completes
  };

  void push(std::string type, std::string body);
  void push_barrier(std::size_t position);
  void release();
  // Ends a gateway call's barrier: `emit_end` writes its last events where the barrier stood.
  void resolve_barrier(std::size_t position, const std::function<void()>& emit_end);

  std::size_t open_item(item it);
  void close_open(const std::string& status);
  void close_item(std::size_t position, const std::string& status);
  void emit_item(const char* type, std::size_t position);
  void emit_scoped(const char* type, std::size_t position, const std::function<void(json::writer&)>& fill);
  void add_part(std::size_t position, const std::string& part_type);
  void append_part(std::size_t position, const std::string& delta);
  void close_part(std::size_t position);
  void ensure_text_part(const std::string& item_type, const std::string& part_type);
  std::string unique_call_id(const std::string& proposed);
  void hide_call(const std::string& call_id, const std::string& name, const std::string& arguments);
  // Opens an mcp_call whose arguments are all known, its events through arguments.done, pending.
  void open_whole_call(const std::string& server_label, const std::string& tool, const std::string& arguments,
                       const std::string& approval_request_id);

  route_lookup lookup_;
  int64_t budget_;
  int64_t limit_; // max_tool_calls as given
  int64_t sequence_ = 0;
  std::deque<queued> queue_;
  std::size_t queue_bytes_ = 0;
  std::vector<stream_event> ready_;
  std::set<std::size_t> barriers_open_;

  std::vector<item> output_;
  std::set<std::size_t> done_;
  std::vector<std::pair<std::size_t, std::vector<item>>> hidden_; // hidden pairs after output_[n-1]
  std::set<std::string> call_ids_;
  std::vector<pending_call> pending_;

  // The round.
  std::optional<std::size_t> open_;
  struct round_call {
    std::optional<std::size_t> position; // its visible item; none when hidden
    std::string name;
    std::string call_id;
    bool approval = false;
    bool gateway = false;
    gateway_route route;
    std::string arguments;
  };
  std::map<int64_t, round_call> round_calls_;
  std::set<int64_t> closed_calls_;
  std::optional<int64_t> current_call_;
  bool round_finished_ = false;
  std::string finish_;
  std::string failure_;
  int client_actions_ = 0;
  int gateway_calls_ = 0;
  usage round_usage_;
  bool ended_ = false;
};

} // namespace troupe::protocol::responses

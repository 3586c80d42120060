// Responses streaming (responses.md §7): the assembler that turns what the model's rounds say
// (protocol/model_round.hpp's upstream_event) into the client's event stream and output items.
#pragma once

#include "protocol/model_round.hpp"
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

// Where a model-facing tool name leads, when it is a gateway tool (RS-31, RS-33). A name shaped
// `mcp__<server>__<tool>` that the lookup does not know is a gateway call too, to a tool this
// request does not offer: it ends failed, never reaching the client as a function call.
struct gateway_route {
  std::string server_label;
  std::string tool;
  bool needs_approval = false;
  item_kind search = item_kind::unknown; // a search tool's call type (RS-27): web_search_call, file_search_call
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

  // Whether text deltas keep the token logprobs the upstream sent (RS-14: only when asked for).
  void keep_logprobs(bool on) { logprobs_ = on; }

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
  // Ends a search call's item (RS-27): completed with the item's optional `results` (JSON array
  // text, "" when not included), or failed; `model_text` is what the model reads for it.
  void complete_search(std::size_t output_position, bool failed, std::string results, std::string model_text);
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
  void add_part(std::size_t position, part_kind part_type);
  void append_part(std::size_t position, const std::string& delta, const std::string& logprobs = {});
  void close_part(std::size_t position);
  void ensure_text_part(item_kind item_type, part_kind part_type);
  std::string unique_call_id(const std::string& proposed);
  void hide_call(const std::string& call_id, const std::string& name, const std::string& arguments);
  // Opens an mcp_call whose arguments are all known, its events through arguments.done, pending.
  void open_whole_call(const std::string& server_label, const std::string& tool, const std::string& arguments,
                       const std::string& approval_request_id);

  route_lookup lookup_;
  bool logprobs_ = false;
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

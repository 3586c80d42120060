// What a workspace log holds (workspace-stream.md §2): envelopes, the registry of event types that
// checks events while parsing, and the REST read of a log (WS-64).
#pragma once

#include "protocol/json.hpp"
#include "protocol/json_schema.hpp"
#include "protocol/workspace_config.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol::reflexr {

// WS-14. JSON members are kept as compact text; "" stands for null.
struct envelope {
  int64_t seq = 0;
  std::string id;
  std::string ts;
  std::string workspace_id;
  std::string actor;     // JSON object
  std::string causation; // JSON object or ""
  std::string correlation_id;
  std::string traceparent; // or ""
  std::string event;       // JSON object, as published
  std::string type;        // the event's type
  int64_t depth = 0;       // causation.depth, or 0 (WS-19)
};

// The envelope as stored and served over REST, members in WS-14's order.
std::string envelope_json(const envelope& e);

// The WebSocket's `event` frame (WS-51): the envelope's JSON with `"type":"event"` first.
std::string event_frame(std::string_view envelope_json);

// WS-17: `evt_` and 16 random lowercase hex digits.
std::string new_event_id();

// WS-20: the W3C trace context of an append's span, a child of `incoming` (a request's `traceparent`
// header); "" (null) when the request carries no valid version-00 context, as troupe starts no traces.
std::string append_traceparent(std::string_view incoming);

// Declared event types (WS-12) and troupe's facts (WS-98), with the schemas that check their fields
// while a frame is parsed (WS-13).
class event_registry {
public:
  struct declared {
    std::string name;
    std::shared_ptr<const json_schema::schema> fields; // configured types: the event without `type`
    std::string fact_def;                               // facts: their reflexr.v1 definition
    bool published_by_runs = false;
    bool fact() const { return !fact_def.empty(); }
  };
  struct feedback {
    std::string name;
    std::vector<std::string> targets; // sorted
    std::shared_ptr<const json_schema::schema> value;
  };

  // Compiles the configured schemas; each error names its configuration path.
  static std::variant<std::shared_ptr<const event_registry>, std::vector<std::string>>
  build(const workspaces_config& config);

  const declared* find(std::string_view type) const;
  const feedback* find_feedback(std::string_view name) const;
  // Every type the process knows, sorted: the WS-9 hint searches it.
  const std::vector<std::string>& known_types() const { return known_; }

  // WS-13: why an event is not one (not an object, no string type), or the problems of a declared
  // type's fields; empty for a valid or undeclared event. Problems' `loc` is within the event.
  std::vector<json_schema::problem> check(const json::value& event) const;

private:
  std::map<std::string, declared, std::less<>> types_;
  std::map<std::string, feedback, std::less<>> feedback_;
  std::vector<std::string> known_;
};

// WS-13's one-line summary of an invalid event: `invalid <type> event: <problems>`, or the message
// for an event without a string type.
std::string invalid_event_message(const json::value& event, const std::vector<json_schema::problem>& problems);

// WS-64's query of a log.
struct event_query {
  int64_t after_seq = 0;
  std::optional<int64_t> before_seq;
  std::vector<std::string> types; // empty: every type
  std::optional<int64_t> limit;
  std::optional<int64_t> last;
};

// A refused query: a `validation_failed` message (`detail` is the rejection), or a pydantic-style
// problem list for a value that is not an integer (`detail` is the list).
struct query_error {
  std::string message;
  std::vector<json_schema::problem> problems;
};

// Parses the raw query string (`type` may repeat), checking in WS-64's order.
std::variant<event_query, query_error> parse_event_query(std::string_view raw_query,
                                                         const std::vector<std::string>& known_types);

} // namespace troupe::protocol::reflexr

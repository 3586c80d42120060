// The upstream readers (responses.md §8, RS-45, RS-48): an upstream's chat-completions chunks or
// Responses stream events, or a non-streamed answer of either, read into the protocol-neutral
// upstream_events of a model round (protocol/model_round.hpp).
#pragma once

#include "protocol/json.hpp"
#include "protocol/model_round.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::protocol::responses {

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
  // An item's end waits for what follows: a round that then stops for length or a filter leaves
  // that item open, so it ends `incomplete` as the chat adapter's last item does (RS-48, RS-49).
  bool end_held_ = false;
  bool finished_ = false;
  bool failed_ = false;
};

// A non-streamed upstream answer as the events a stream would have carried (RS-48, last point).
std::vector<upstream_event> chat_completion_events(std::string_view body);
std::vector<upstream_event> responses_object_events(std::string_view body);

// What an upstream's error answer says of itself (RS-43): its `error.message` (or a string `error`,
// or a top-level `message`), control characters turned to spaces, cut to at most 512 bytes on a
// character boundary; "" when the body is no JSON object or names no message. Never the raw body.
std::string upstream_error_message(std::string_view body);

// A Retry-After value as the seconds to wait (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date
// (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`) measured from `now` (epoch seconds; a past date is 0).
// At most a day. nullopt for anything else, so no raw value is ever repeated in a header.
std::optional<int64_t> retry_after_seconds(std::string_view value, int64_t now);

} // namespace troupe::protocol::responses

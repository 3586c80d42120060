// A model round as the agent service reads it: the upstream events of one round folded into one whole
// reply, and back. The agent loop reads rounds through the same port as the Responses executor.
#pragma once

#include "protocol/chat_types.hpp"
#include "protocol/model_round.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

// AS-18: JSON object text for model-written arguments. `raw` itself when it is an object; else the
// object left after stripping ``` code fences and trailing commas before } or ]; else "{}".
std::string repair_arguments(std::string_view raw);

// AS-18: "call_" followed by 12 random lowercase hex characters, for a tool call without an id.
std::string make_tool_call_id();

// The events a whole reply streams as: its text, its calls (each announced, then its arguments), the
// finish with usage.
std::vector<responses::upstream_event> reply_events(const model_reply& reply);

// Folds a round's events into the outcome the agent loop acts on. Call arguments are repaired and
// missing call ids minted (AS-18).
class reply_assembler {
public:
  // False once the round has ended (a finish or a failure was fed).
  bool feed(const responses::upstream_event& e);
  bool ended() const { return ended_; }
  model_outcome outcome() const;

private:
  struct call {
    std::string id;
    std::string name;
    std::string arguments;
  };
  std::string content_;
  std::map<int64_t, call> calls_;
  model_outcome end_;
  bool ended_ = false;
};

} // namespace troupe::protocol

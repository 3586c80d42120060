// A carried-out reflexr.v1 command as a store keeps it (WS-39): rendered here, so a store adapter
// writes what it is given and renders nothing itself.
#pragma once

#include "protocol/workspace_commands.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::protocol::reflexr {

// The answer remembered for the command's key — the `command_result` frame, or for a publish body
// the outcomes array or the `{"detail": …}` of its rejection, with the rejection's code (the edge
// renders its status, WS-27) — and the appended envelopes, each with its JSON text.
struct command_record {
  errc code = errc::none;
  bool ok = true;
  int64_t max_seq = 0; // WS-132
  std::string body;
  std::vector<envelope> appended;
  std::vector<std::string> appended_json;
};

command_record record_of(const command_request& request, effect e);

} // namespace troupe::protocol::reflexr

// Server-sent-events framing of what troupe sends: event frames, the terminal frame, heartbeats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::protocol {

// `id: <id>\nevent: <event>\ndata: <line>\n...\n\n`; a multi-line `data` becomes several data lines.
std::string sse_frame(std::optional<int64_t> id, std::string_view event, std::string_view data);

// The agent service's terminal frame (AS-11): no id.
std::string sse_done_frame();

// A comment that keeps idle connections open (AS-75); not an event.
std::string sse_heartbeat();

} // namespace troupe::protocol

// The canonical replay of a stored response (RS-44): the same snapshot always yields the same bytes.
#pragma once

#include "protocol/responses_stream.hpp"

#include <string_view>
#include <vector>

namespace troupe::protocol::responses {

// The terminal event type of a response status (RS-41): cancelled ends with response.incomplete.
const char* terminal_type(std::string_view status);

// Every event of a stored response object, numbered from 0; empty when it is not an object.
std::vector<stream_event> canonical_replay(std::string_view snapshot_json);

} // namespace troupe::protocol::responses

// The canonical replay of a stored response (RS-44): the same snapshot always yields the same bytes.
#pragma once

#include "protocol/responses_request.hpp"
#include "protocol/responses_stream.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol::responses {

// The terminal event type of a response status (RS-41): cancelled ends with response.incomplete.
const char* terminal_type(response_status status);

// Every event of a stored response object, numbered from 0; empty when it is not an object.
std::vector<stream_event> canonical_replay(std::string_view snapshot_json);

// RS-55, RS-62: the end of a response whose run died. `logged` are its stored events in order (each
// one's JSON); the answer holds what still has to follow them — every item left open closed
// `incomplete`, then response.failed carrying the folded output — and `final_snapshot` the object.
std::vector<stream_event> failed_ending(const std::vector<std::string>& logged, std::string_view snapshot_json,
                                        const std::string& error_json, std::string& final_snapshot);

} // namespace troupe::protocol::responses

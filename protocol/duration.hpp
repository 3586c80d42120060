// Durations as workspace-stream.md writes them (WS-2): ISO 8601 (`PT1S`, `P1DT2H`) or a number of seconds.
#pragma once

#include "protocol/json.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace troupe::protocol {

// Seconds named by `P[nD][T[nH][nM][n[.f]S]]` (no years, months or weeks: their length varies); nullopt
// for any other text.
std::optional<double> parse_duration(std::string_view text);

// A JSON duration: an ISO 8601 string or a non-negative number of seconds.
std::optional<double> duration_value(const json::value& v);

// The ISO 8601 text of `seconds`, zero parts omitted (`PT0S` for zero).
std::string format_duration(double seconds);

} // namespace troupe::protocol

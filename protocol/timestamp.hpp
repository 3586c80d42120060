// Timestamps in the agent service's one format (AS-78): UTC, microseconds, "+00:00".
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::protocol {

std::string iso_timestamp(std::chrono::system_clock::time_point t);
std::string iso_now();

// The workspace log's form (WS-2): UTC, microseconds, "Z". Equal-length texts, so they order as strings.
std::string utc_timestamp(std::chrono::system_clock::time_point t);

// The time an iso_timestamp names; nullopt for any other text.
std::optional<std::chrono::system_clock::time_point> parse_iso_timestamp(const std::string& text);

// An RFC 3339 date-time (`2025-03-01T09:00:00Z`, `…T10:00:00.5+01:00`; `T` or `t`, `Z` or `z`), read
// strictly: fields in range, 1 to 9 fraction digits (microseconds kept), an offset within ±23:59.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

// Milliseconds between two steady times, rounded to 2 decimals (the spec's `*_ms`).
double elapsed_ms(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to);

} // namespace troupe::protocol

// Timestamps in the agent service's one format (AS-78): UTC, microseconds, "+00:00".
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace troupe::protocol {

std::string iso_timestamp(std::chrono::system_clock::time_point t);
std::string iso_now();

// The workspace log's form (WS-2): UTC, microseconds, "Z". Equal-length texts, so they order as strings.
std::string utc_timestamp(std::chrono::system_clock::time_point t);

// The time an iso_timestamp names; nullopt for any other text.
std::optional<std::chrono::system_clock::time_point> parse_iso_timestamp(const std::string& text);

// Milliseconds between two steady times, rounded to 2 decimals (the spec's `*_ms`).
double elapsed_ms(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to);

} // namespace troupe::protocol

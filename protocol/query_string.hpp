// URL decoding for request targets: percent-decoding and a query string's pairs in order (a key may
// repeat, as `type` does in workspace-stream.md WS-64).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::protocol {

// `%XX` decoded; `+` is a space only in a query (form encoding), never in a path.
std::string percent_decode(std::string_view s, bool plus_is_space);

// The decoded `key=value` pairs of a raw query string, in order; empty parts are skipped.
std::vector<std::pair<std::string, std::string>> query_pairs(std::string_view raw);

} // namespace troupe::protocol

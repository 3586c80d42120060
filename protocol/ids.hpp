// Identifiers: UUIDv4 strings, prefixed UUIDv7 hex ids and random lowercase hex.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace troupe::protocol {

std::string uuid4();
std::string random_hex(std::size_t chars);

// `prefix` + the 32 lowercase hex digits of a UUIDv7 (time-ordered: ids sort by creation).
std::string uuid7_id(std::string_view prefix);

} // namespace troupe::protocol

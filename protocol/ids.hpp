// Identifiers: UUIDv4 strings, prefixed UUIDv7 hex ids, random lowercase hex and SHA-256 digests.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace troupe::protocol {

std::string uuid4();
std::string random_hex(std::size_t chars);

// `prefix` + the 32 lowercase hex digits of a UUIDv7 (time-ordered: ids sort by creation).
std::string uuid7_id(std::string_view prefix);

// The SHA-256 of `text` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view text);

} // namespace troupe::protocol

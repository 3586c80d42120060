// Identifiers: UUIDv4 strings, prefixed UUIDv7 hex ids, random lowercase hex, SHA-256 digests and
// HMAC-SHA256 macs.
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

// `bytes` as lowercase hex, two digits a byte.
std::string lower_hex(std::string_view bytes);

// The 32 raw bytes of HMAC-SHA256(key, message).
std::string hmac_sha256(std::string_view key, std::string_view message);

// Whether `a` and `b` are equal, in time that depends on their lengths only, so a mac or proof
// compared with it leaks no prefix to a caller who can time the answer.
bool equal_in_constant_time(std::string_view a, std::string_view b);

// A caller-chosen id (session, run): 1 to 128 printable ASCII characters other than `/`, with no
// leading or trailing space, so that it is one URL path segment and a response header value as it is
// (AS-79 carries it byte for byte, so nothing is rewritten to fit).
bool is_id_text(std::string_view s);
extern const char* const id_text_rule; // the rule in words, for a 422

// A caller-chosen name (user key, tenant key): 1 to 256 bytes with no control character (CR, LF, NUL
// and the rest of C0, DEL).
bool is_name_text(std::string_view s);
extern const char* const name_text_rule;

} // namespace troupe::protocol

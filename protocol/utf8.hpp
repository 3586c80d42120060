// UTF-8 well-formedness, for text that goes into JSON and for counting characters.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace troupe::protocol {

// Length of the well-formed UTF-8 sequence starting at s[i] (1 for ASCII), or 0 when the byte
// there does not start one (overlong forms, surrogates and values above U+10FFFF included).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i);

// The longest prefix of `s` of at most `max_bytes` that does not split a UTF-8 sequence.
std::string_view utf8_prefix(std::string_view s, std::size_t max_bytes);

// `s` with every byte that starts no well-formed sequence replaced by U+FFFD, as a lenient decoder
// shows it: text from a tool or server is stored and served as valid UTF-8, whatever it sent.
std::string utf8_repaired(std::string_view s);

} // namespace troupe::protocol

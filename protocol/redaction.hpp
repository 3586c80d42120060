// Whole-word redaction of stored records and emitted events (AS-85).
#pragma once

#include "protocol/json.hpp"

#include <string>
#include <string_view>

namespace troupe::protocol {

// A key whose value is masked: one of its words (split on `_`, `-`, `.` and camelCase, lower-cased) is
// token, pat, password, secret, authorization or apikey, or `api` is followed by `key`. `path`,
// `pattern_matched`, `prompt_tokens` and `max_tokens` are not.
bool sensitive_key(std::string_view key);

// The JSON text with sensitive values as "***", strings starting with `sk-` or `Bearer ` as "***",
// and other strings over 1200 characters cut to their first 600 plus `[... truncated ...]`.
// Text that is not JSON is returned unchanged.
std::string redact_json(std::string_view json_text);

} // namespace troupe::protocol

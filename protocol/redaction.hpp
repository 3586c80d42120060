// Whole-word redaction of stored records and emitted events (AS-85).
#pragma once

#include "protocol/json.hpp"

#include <initializer_list>
#include <string>
#include <string_view>

namespace troupe::protocol {

// A key whose value is masked: one of its words (split on `_`, `-`, `.` and camelCase, lower-cased) is
// token, pat, password, secret, authorization or apikey, or `api` is followed by `key`. `path`,
// `pattern_matched`, `prompt_tokens` and `max_tokens` are not.
bool sensitive_key(std::string_view key);

// Free text with every secret inside it masked: `Bearer <credential>` becomes `Bearer ***` and an
// `sk-` key (a word of at least 16 key characters after `sk-`) becomes `***`. Tool output, model text
// and messages carry such secrets in the middle of a sentence, where AS-85's value rule never looks.
std::string redact_text(std::string_view text);

// The JSON text with sensitive values as "***", strings starting with `sk-` or `Bearer ` as "***",
// secrets inside other strings masked as by redact_text, and strings over 1200 characters cut to
// their first 600 plus `[... truncated ...]`. Text that is not JSON is returned unchanged.
std::string redact_json(std::string_view json_text);

// The same masking for a stored record (run metadata, a run's request, an approval's arguments),
// which AS-85 exempts from truncation. Top-level members named in `verbatim` are kept as they are.
std::string redact_record_json(std::string_view json_text, std::initializer_list<std::string_view> verbatim = {});

} // namespace troupe::protocol

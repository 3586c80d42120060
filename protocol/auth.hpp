// Service-token checks (AS-3): which header carries the token, compared in constant time.
#pragma once

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

// The token a request presents: `Authorization: Bearer <t>`, else `X-FastReAct-Service-Token`.
std::string presented_token(std::string_view authorization, std::string_view service_token_header);

// `s` without the optional whitespace (spaces, tabs) HTTP allows around a header value.
std::string_view trim_ows(std::string_view s);

// True when `presented` equals one of `accepted`; the comparison time does not depend on where
// the strings differ.
bool token_accepted(const std::vector<std::string>& accepted, std::string_view presented);

// The tenant a user key implies: the part before the first ':' (AS-7), else "".
std::string infer_tenant(std::string_view user_key);

} // namespace troupe::protocol

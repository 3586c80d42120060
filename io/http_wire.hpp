// The edge's own words on the wire, with no stream and no Beast: a request's target and header names as
// handlers see them, the answers the edge gives on its own account, and an event stream's head and chunks.
#pragma once

#include "io/http_types.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::io {

// The target's path (percent-decoded) and query parameters, into `req`.
void split_target(std::string_view target, http_request& req);
// Header names reach handlers in lower case.
std::string header_name(std::string_view name);

// A body over `limit` bytes, in each dialect's own words: AS-1's detail, RS-2's request_too_large.
http_response body_too_large(protocol::dialect d, int64_t limit);
// Bytes that are no HTTP request.
http_response malformed_request();

// No header value reaches the wire with a CR, LF or NUL: a value that would split the head makes the
// answer a 500 (unsafe_header_answer) instead. Ids are checked where they are admitted; this is the
// edge's last word.
bool safe_headers(const header_list& headers);
http_response unsafe_header_answer();

// The head of a server-sent-events answer (200, chunked), with the handler's `headers`.
std::string event_stream_head(const header_list& headers);
// One chunk of a chunked body; an empty payload would end the body, so finish() writes that itself.
std::string chunk(std::string_view payload);

} // namespace troupe::io

#include "io/http_wire.hpp"

#include "protocol/http_edge.hpp"
#include "protocol/query_string.hpp"

#include <cctype>
#include <cstdio>
#include <utility>

namespace troupe::io {

void split_target(std::string_view target, http_request& req) {
  auto q = target.find('?');
  req.path = protocol::percent_decode(target.substr(0, q), false);
  if (q != std::string_view::npos)
    for (auto& [key, value] : protocol::query_pairs(target.substr(q + 1)))
      req.query[std::move(key)] = std::move(value);
}

std::string header_name(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

http_response body_too_large(protocol::dialect d, int64_t limit) {
  auto said = d == protocol::dialect::openai
                ? problem{errc::payload_too_large, "Request body exceeds " + std::to_string(limit) + " bytes.", {},
                          "request_too_large"}
                : problem{errc::payload_too_large, "Request body too large"};
  return error_response(d, said);
}

http_response malformed_request() {
  return json_response(400, protocol::error_body(protocol::dialect::agent, errc::bad_request, "Malformed HTTP request"));
}

bool safe_headers(const header_list& headers) {
  for (auto& [name, value] : headers)
    if (!protocol::is_header_value(name) || !protocol::is_header_value(value))
      return false;
  return true;
}

http_response unsafe_header_answer() {
  return json_response(500, protocol::error_body(protocol::dialect::agent, errc::internal,
                                                 "Internal server error: a response header held a line break"));
}

std::string event_stream_head(const header_list& headers) {
  std::string head = "HTTP/1.1 200 OK\r\nServer: troupe\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
                     "Cache-Control: no-cache\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n";
  for (auto& [name, value] : headers)
    head += name + ": " + value + "\r\n";
  head += "\r\n";
  return head;
}

std::string chunk(std::string_view payload) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", payload.size());
  std::string out(size);
  out.append(payload);
  out += "\r\n";
  return out;
}

} // namespace troupe::io

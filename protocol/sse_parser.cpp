#include "protocol/sse_parser.hpp"

#include <utility>

namespace troupe::protocol {

namespace {

// Where the first line break (CR or LF) is. string_view::find_first_of calls memchr once per byte
// of the chunk; two memchr scans do it in a fraction of the time.
std::size_t line_end(std::string_view chunk) {
  auto lf = chunk.find('\n');
  auto cr = chunk.substr(0, lf).find('\r');
  return cr != std::string_view::npos ? cr : lf;
}

} // namespace

sse_parser::sse_parser(std::size_t max_line_bytes, std::size_t max_event_bytes)
  : max_line_bytes_(max_line_bytes), max_event_bytes_(max_event_bytes) {
}

void sse_parser::fail(std::string message) {
  if (error_.empty())
    error_ = std::move(message);
}

bool sse_parser::feed(std::string_view chunk, std::vector<sse_event>& out) {
  if (failed())
    return false;
  if (skip_lf_ && !chunk.empty()) {
    skip_lf_ = false;
    if (chunk.front() == '\n')
      chunk.remove_prefix(1);
  }
  while (!chunk.empty() && !failed()) {
    auto end = line_end(chunk);
    if (end == std::string_view::npos) {
      if (line_.size() + chunk.size() > max_line_bytes_) {
        fail("sse line longer than " + std::to_string(max_line_bytes_) + " bytes");
        break;
      }
      line_.append(chunk);
      break;
    }
    if (line_.size() + end > max_line_bytes_) {
      fail("sse line longer than " + std::to_string(max_line_bytes_) + " bytes");
      break;
    }
    // Most lines arrive whole; only a line split across chunks goes through `line_`.
    if (line_.empty()) {
      take_line(chunk.substr(0, end), out);
    } else {
      line_.append(chunk.substr(0, end));
      std::string line = std::move(line_);
      line_.clear();
      take_line(line, out);
    }
    bool cr = chunk[end] == '\r';
    chunk.remove_prefix(end + 1);
    if (cr) {
      if (chunk.empty())
        skip_lf_ = true;
      else if (chunk.front() == '\n')
        chunk.remove_prefix(1);
    }
  }
  return !failed();
}

void sse_parser::take_line(std::string_view line, std::vector<sse_event>& out) {
  if (at_stream_start_) {
    at_stream_start_ = false;
    if (line.substr(0, 3) == "\xEF\xBB\xBF") // a UTF-8 byte order mark is not part of the field
      line.remove_prefix(3);
  }
  if (line.empty()) {
    // A blank line dispatches; an event without data is dropped, as browsers do.
    if (has_data_)
      out.push_back(sse_event{event_type_, std::move(data_), last_id_});
    has_data_ = false;
    data_.clear();
    event_type_.clear();
    return;
  }
  if (line.front() == ':')
    return; // a comment, typically a keep-alive
  auto colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ')
      value.remove_prefix(1);
  }
  if (field == "data") {
    if (data_.size() + value.size() + 1 > max_event_bytes_) {
      fail("sse event data longer than " + std::to_string(max_event_bytes_) + " bytes");
      return;
    }
    if (has_data_)
      data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_type_.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos)
      last_id_.assign(value);
  }
  // `retry` and unknown fields are ignored: the client decides its own reconnection policy.
}

} // namespace troupe::protocol

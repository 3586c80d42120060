// Incremental parser of a server-sent-events byte stream, as an upstream model server sends it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

struct sse_event {
  std::string event; // the `event:` field; empty means the default type "message"
  std::string data;  // every `data:` line of the event, joined by \n
  std::string id;    // the last `id:` seen on the stream so far (it persists across events)
};

// Feed bytes as they arrive, in chunks of any size; complete events come out. Lines end in \n, \r\n
// or \r, even when split across chunks. A line longer than `max_line_bytes`, or an event whose data
// exceeds `max_event_bytes`, puts the parser in a failed state instead of growing without bound.
class sse_parser {
public:
  explicit sse_parser(std::size_t max_line_bytes = std::size_t{1} << 20,
                      std::size_t max_event_bytes = std::size_t{16} << 20);

  // Parses `chunk` and appends every event it completes to `out`. Returns false once failed; the
  // events completed before the failure are still appended.
  bool feed(std::string_view chunk, std::vector<sse_event>& out);

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

private:
  void take_line(std::string_view line, std::vector<sse_event>& out);
  void fail(std::string message);

  std::size_t max_line_bytes_;
  std::size_t max_event_bytes_;
  std::string line_;          // the unfinished line carried over from the previous chunk
  bool skip_lf_ = false;      // the previous chunk ended in \r: a leading \n belongs to it
  bool at_stream_start_ = true;
  bool has_data_ = false;     // a `data:` field was seen, even an empty one
  std::string event_type_;
  std::string data_;
  std::string last_id_;
  std::string error_;
};

} // namespace troupe::protocol

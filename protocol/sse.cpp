#include "protocol/sse.hpp"

namespace troupe::protocol {

std::string sse_frame(std::optional<int64_t> id, std::string_view event, std::string_view data) {
  std::string out;
  out.reserve(data.size() + event.size() + 32);
  if (id) {
    out += "id: ";
    out += std::to_string(*id);
    out += '\n';
  }
  if (!event.empty()) {
    out += "event: ";
    out += event;
    out += '\n';
  }
  std::size_t start = 0;
  while (true) {
    auto nl = data.find('\n', start);
    out += "data: ";
    out += data.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    out += '\n';
    if (nl == std::string_view::npos)
      break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

std::string sse_done_frame() {
  return "event: done\ndata: [DONE]\n\n";
}

std::string sse_heartbeat() {
  return ": keepalive\n\n";
}

} // namespace troupe::protocol

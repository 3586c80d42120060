// How the MCP transports run their owner's handlers on their own threads.
#pragma once

#include <spdlog/spdlog.h>

#include <exception>
#include <string>

namespace troupe::io {

// Runs a handler; a throwing one must not end the transport's thread (std::terminate) nor skip the
// child's or the session's cleanup, so its exception is logged and dropped.
template <class F>
void call_handler(const std::string& server, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    spdlog::error("mcp: server={} transport handler threw: {}", server, e.what());
  } catch (...) {
    spdlog::error("mcp: server={} transport handler threw", server);
  }
}

} // namespace troupe::io

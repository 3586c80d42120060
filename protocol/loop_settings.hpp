// The agent loop's settings: one parameter set for every surface, each with its own defaults
// (DESIGN.md: one agent loop, three dialects). The configuration fills them (protocol/config.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::protocol {

struct loop_settings {
  int max_rounds = 10;              // the round cap: AS-20 max_iterations, RS-22/RS-23 max_rounds
  std::size_t parallel_calls = 1;   // AS-18: one at a time; RS-25: up to 5
  double call_timeout_seconds = 0;  // 0: the tool's own bound applies
  std::size_t max_tool_output_bytes = 20000; // AS-22 max_tool_output_chars, RS-26 max_tool_output_bytes
  int64_t summary_tokens = 4096;    // a compaction summary's output cap (RS-51)
  // What a Responses round may hold back behind a gateway call before it fails (RS-39).
  std::size_t held_back_events = 1024;
  std::size_t held_back_bytes = 256 * 1024;
  double client_stall_timeout_seconds = 60; // stream.client_stall_timeout (RS-39)
  // The agent service's context budget (AS-23): react.max_context_tokens, react.sliding_window_size.
  int64_t max_context_tokens = 128000;
  std::size_t sliding_window_size = 15;

  // The agent service's defaults: react.* (AS-18, AS-20, AS-22).
  static loop_settings agent_service() { return {20, 1, 0, 20000}; }
  // The Responses executor's defaults: executor.*, compaction.*, stream.* (RS-23..RS-26, RS-39, RS-51).
  static loop_settings responses() { return {10, 5, 60, std::size_t{1} << 20}; }
};

} // namespace troupe::protocol

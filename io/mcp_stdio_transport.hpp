// The MCP transport over a child process's stdin and stdout, one JSON-RPC message per line (AS-62).
#pragma once

#include "actors/mcp_transport.hpp"

#include <cstddef>
#include <memory>

namespace troupe::io {

class exec_sandbox;

inline constexpr std::size_t mcp_stdio_default_max_line_bytes = std::size_t{4} << 20;

// Starts `config.command` with `config.args`, without a shell, in a process group of its own. Its
// environment is troupe's PATH, HOME and LANG plus `config.env`, nothing else (troupe's secrets
// stay home). One thread per transport reads stdout (each non-blank line is a message), logs
// stderr at debug level and writes what send() queued; a stdout line longer than `max_line_bytes`
// kills the child and closes the transport ("line over <n> bytes"), as does the child's exit
// ("exited with code N", "killed by signal N"). close() must not be called from a handler.
// With a `sandbox` that can contain (tools.exec.sandbox "bwrap" and bwrap starts), the server runs
// in a PID namespace of its own, so nothing it starts outlives it or troupe (the orphan rule);
// without, only the server itself is sure to die with troupe.
std::unique_ptr<mcp_transport> make_mcp_stdio_transport(
  const protocol::mcp_server_config& config, std::shared_ptr<const exec_sandbox> sandbox = nullptr,
  std::size_t max_line_bytes = mcp_stdio_default_max_line_bytes);

} // namespace troupe::io

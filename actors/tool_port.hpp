// The tool port: how a tool_call actor executes a tool, whatever provides it.
#pragma once

#include "actors/cancel_handle.hpp"
#include "protocol/chat_types.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

struct tool_invocation {
  std::string run_id;
  std::string call_id;
  std::string name;
  std::string arguments = "{}"; // JSON object text
  std::string workspace_dir;    // the caller's confined workspace (AS-26)
  std::string tenant_key;       // the caller, for per-user tool servers (AS-63)
  std::string user_key;
};

struct tool_outcome {
  std::string output; // what the model sees: a result, or an "[ERROR] ..." marker
  bool cancelled = false;
};

class tool_port {
public:
  using completion = std::function<void(tool_outcome)>;

  virtual ~tool_port() = default;

  virtual std::vector<protocol::tool_schema> tools() const = 0;

  // Runs one call off the caller's thread. `done` runs exactly once on any thread, also after
  // cancel() (then with `cancelled` set). Must not call `done` before returning.
  virtual std::shared_ptr<cancel_handle> execute(tool_invocation call, completion done) = 0;
};

} // namespace troupe

// The five built-in tools (exec, read_file, write_file, edit_file, list_dir) confined to the caller's workspace.
#pragma once

#include "actors/tool_port.hpp"
#include "io/exec_sandbox.hpp"

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace troupe::io {

// Bounds fixed by AS-28 and AS-29.
inline constexpr std::size_t exec_output_max_chars = 10000;
inline constexpr std::size_t read_file_max_bytes = 1048576;
// How much of each of stdout and stderr an exec keeps; the rest is read and discarded so a
// chatty command can neither block on a full pipe nor grow troupe's memory.
inline constexpr std::size_t exec_stream_keep_bytes = 64 * 1024;

struct builtin_tools_options {
  double exec_timeout_seconds = 30;            // tools.exec.timeout_seconds (AS-28)
  std::map<std::string, std::string> exec_env; // tools.exec.env: added to the minimal environment
  // tools.exec.sandbox: where every exec runs; bubblewrap unless the operator opted out.
  std::shared_ptr<const exec_sandbox> sandbox = std::make_shared<exec_sandbox>();
  std::size_t worker_threads = 4;              // calls that run at once
  std::size_t max_queued = 64; // calls waiting while every worker is taken; one more is "busy"
};

// Runs every call on its own worker threads; the caller's thread only enqueues. A call that finds
// every worker taken and `max_queued` calls already waiting answers `[ERROR] tool executor is busy`.
// Messages name paths as the model gave them, never the host's absolute workspace path.
class builtin_tools final : public tool_port {
public:
  explicit builtin_tools(builtin_tools_options options = {});
  // Cancels the calls in flight, answers every pending `done` (cancelled), joins the threads.
  // So it must not run inside a `done`, which runs on those threads.
  ~builtin_tools() override;

  builtin_tools(const builtin_tools&) = delete;
  builtin_tools& operator=(const builtin_tools&) = delete;

  std::vector<protocol::tool_schema> tools() const override;

  std::shared_ptr<cancel_handle> execute(tool_invocation call, completion done) override;

  class executor; // the worker pool; public only so the .cpp's helpers can name it

private:
  bool exec_sandboxed_; // the exec description tells the model what the sandbox allows
  std::shared_ptr<executor> executor_;
};

} // namespace troupe::io

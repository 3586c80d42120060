// What the built-in tools share (io/builtin_tools.cpp runs them): the error a tool reports to the
// model, text made safe for JSON, the call's arguments, the workspace a call is confined to, and the
// tools themselves (io/builtin_file_tools.cpp, io/builtin_exec.cpp). Private to those files.
#pragma once

#include "io/builtin_tools.hpp"

#include "protocol/json.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace troupe::io::builtin {

namespace fs = std::filesystem;
namespace json = protocol::json;

inline constexpr const char* cancelled_output = "[ERROR] Tool call cancelled";

// A failure a tool reports to the model; caught once by the executor and turned into "[ERROR] ...".
struct tool_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string errno_text(int err);

// Tool output goes into JSON for the model and the event stream, so it must be valid UTF-8: every
// invalid byte becomes U+FFFD, as a lenient decoder would show it. At most `max_chars` characters are kept.
std::string to_text(std::string_view bytes, std::size_t max_chars = SIZE_MAX);

// The call's arguments as an object; text that is not a JSON object reads as {} so that the
// required-argument checks name what is missing.
json::document parse_arguments(const std::string& text);
std::string required_string(const json::value& args, const char* tool, const char* name);
std::optional<std::string> optional_string(const json::value& args, const char* tool, const char* name);

// One call's workspace (AS-26, AS-27): created (mkdir -p) on first use, and the only place its paths may go.
class workspace_box {
public:
  explicit workspace_box(const std::string& workspace_dir);

  const fs::path& root() const { return root_; }

  // The physical path `user_path` names, relative to the workspace; refused with no side effect
  // when it leaves the workspace by `..`, an absolute path or a symlink.
  fs::path resolve(const std::string& user_path) const;

private:
  fs::path root_;
};

// The file tools (AS-29). Messages name paths as the model gave them, never the host's workspace path.
std::string run_read_file(const json::value& args, const std::string& workspace);
std::string run_write_file(const json::value& args, const std::string& workspace);
std::string run_edit_file(const json::value& args, const std::string& workspace);
std::string run_list_dir(const json::value& args, const std::string& workspace);

// How a running exec learns that its call was cancelled: the call's flag, and an eventfd that wakes
// its wait (-1 when there is none; the wait then checks the flag in short slices).
struct cancel_signal {
  const std::atomic<bool>& requested;
  int wake_fd;
};

// exec (AS-28).
tool_outcome run_exec(const json::value& args, const std::string& workspace, const builtin_tools_options& options,
                      const cancel_signal& cancel);

} // namespace troupe::io::builtin

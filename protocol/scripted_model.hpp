// The built-in `scripted` model: deterministic replies that follow a script of turns.
//
// A script is a JSON array of turns: {"content": "...", "tool_calls": [{"name", "arguments": {...}}],
// "delay_ms": N}. The turn played is the number of assistant messages after the last user message, so
// a run walks the script step by step; past the end the last turn repeats. In content, `{{query}}`
// becomes the last user message and `{{last_tool_result}}` the latest tool message.
#pragma once

#include "protocol/chat_types.hpp"

#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol {

struct script_turn {
  std::string content;
  std::vector<tool_call> tool_calls; // ids are assigned per step when played
  int64_t delay_ms = 0;
};

using script = std::vector<script_turn>;

// Parses a script; the error names the index and field at fault (`[1].tool_calls[0].name: ...`).
std::variant<script, std::string> parse_script(std::string_view json_array_text);

// The default script and the named ones; model "scripted:<name>" picks a named script.
class script_book {
public:
  // Errors name their config path (model.script, model.scripts.<name>...).
  static std::variant<script_book, std::string> parse(std::string_view default_script,
                                                      std::string_view named_scripts);

  // The script for a model name, or nullptr when it names an unknown script.
  const script* find(std::string_view model) const;

private:
  script default_;
  std::map<std::string, script, std::less<>> named_;
};

// The turn of `s` that answers `request`, with its templates filled in and its usage estimated.
script_turn scripted_turn(const script& s, const model_request& request);
model_reply scripted_reply(const script& s, const model_request& request);

} // namespace troupe::protocol

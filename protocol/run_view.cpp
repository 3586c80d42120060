#include "protocol/run_view.hpp"

#include "protocol/utf8.hpp"

#include <algorithm>
#include <cstdio>

namespace troupe::protocol::run_view {

namespace {

// "\x1b" for a byte, "\u202e" for a code point: visible, and inert on any terminal.
std::string escaped_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  return buf;
}

std::string unicode_escape(uint32_t cp) {
  char buf[12];
  std::snprintf(buf, sizeof buf, "\\u%04x", cp);
  return buf;
}

// The code point of the well-formed sequence of `n` bytes at s[i].
uint32_t code_point(std::string_view s, std::size_t i, std::size_t n) {
  auto b = [&](std::size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i + k])); };
  if (n == 1)
    return b(0);
  if (n == 2)
    return ((b(0) & 0x1f) << 6) | (b(1) & 0x3f);
  if (n == 3)
    return ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3f) << 12) | ((b(2) & 0x3f) << 6) | (b(3) & 0x3f);
}

// C1 controls act as escape sequences on some terminals; bidirectional overrides reorder what
// follows them on screen, so a tool result could show text other than what it holds.
bool hidden_control(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

// `text` as well-formed UTF-8, each code point replaced by what `shown` returns for it, if anything.
template <class Shown>
std::string rewritten(std::string_view text, Shown shown) {
  auto repaired = utf8_repaired(text);
  std::string_view s = repaired;
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    auto n = std::max<std::size_t>(1, utf8_sequence_length(s, i));
    if (auto replacement = shown(code_point(s, i, n)))
      out += *replacement;
    else
      out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (;;) {
    auto nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos)
      break;
    start = nl + 1;
  }
  while (lines.size() > 1 && lines.back().empty())
    lines.pop_back();
  return lines;
}

std::string string_of(const json::value& event, const char* key) {
  auto* v = json::member(event, key);
  return v && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : std::string();
}

const json::value* metadata_of(const json::value& event) {
  auto* m = json::member(event, "metadata");
  return m && m->IsObject() ? m : nullptr;
}

std::string metadata_string(const json::value& event, const char* key) {
  auto* m = metadata_of(event);
  return m ? string_of(*m, key) : std::string();
}

std::optional<bool> metadata_bool(const json::value& event, const char* key) {
  auto* m = metadata_of(event);
  return m ? json::get_bool(*m, key) : std::nullopt;
}

std::string arguments_of(const json::value& event) {
  auto* args = json::member(event, "tool_args");
  return args && !args->IsNull() ? json::serialize(*args) : std::string();
}

// `label` and the first line of `text`, the next lines indented under it: at most `max_lines`
// (then a count of the rest), each cut at the width, or folded into several when `fold`.
void add_block(std::vector<std::string>& out, const std::string& raw_label, std::string_view text, std::size_t max_lines,
               const view_limits& limits, bool fold = false) {
  std::size_t width = std::max<std::size_t>(limits.width, 32);
  auto label = bounded_line(split_lines(terminal_safe(raw_label)).front(), width / 2);
  auto lines = split_lines(terminal_safe(text));
  std::string indent(std::min<std::size_t>(label.size() + 1, 12), ' ');
  std::size_t shown = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!fold && shown == max_lines) {
      out.push_back(indent + "... (" + std::to_string(lines.size() - i) + " more lines)");
      return;
    }
    std::string head = i == 0 ? label + (lines[i].empty() ? "" : " ") : indent;
    std::string_view rest = lines[i];
    if (!fold) {
      out.push_back(bounded_line(head + std::string(rest), width));
      ++shown;
      continue;
    }
    do { // folded: every byte shown, no line over the width
      auto piece = utf8_prefix(rest, width - head.size());
      if (piece.empty() && !rest.empty())
        piece = rest.substr(0, std::max<std::size_t>(1, utf8_sequence_length(rest, 0)));
      out.push_back(head + std::string(piece));
      rest.remove_prefix(piece.size());
      head = indent;
    } while (!rest.empty());
  }
}

std::string tool_and_arguments(const json::value& event) {
  auto name = string_of(event, "tool_name");
  auto args = arguments_of(event);
  return args.empty() ? name : name + " " + args;
}

} // namespace

std::optional<int> exit_code_of(std::string_view status) {
  if (status == "completed")
    return exit_completed;
  if (status == "failed")
    return exit_failed;
  if (status == "cancelled")
    return exit_cancelled;
  return std::nullopt;
}

std::string terminal_safe(std::string_view text) {
  return rewritten(text, [](uint32_t cp) -> std::optional<std::string> {
    if (cp == '\n')
      return std::nullopt;
    if (cp == '\t')
      return std::string(" ");
    if (cp < 0x20 || cp == 0x7f)
      return escaped_byte(static_cast<unsigned char>(cp));
    if (hidden_control(cp))
      return unicode_escape(cp);
    return std::nullopt;
  });
}

std::string terminal_safe_json(std::string_view json_text) {
  // Such code points occur only inside strings (JSON's own whitespace is absent from compact text),
  // where \u escapes keep the value.
  return rewritten(json_text, [](uint32_t cp) -> std::optional<std::string> {
    if (cp < 0x20 || cp == 0x7f || hidden_control(cp))
      return unicode_escape(cp);
    return std::nullopt;
  });
}

std::string bounded_line(std::string_view line, std::size_t width) {
  if (line.size() <= width)
    return std::string(line);
  static constexpr std::string_view ellipsis = "\xe2\x80\xa6"; // …
  auto keep = utf8_prefix(line, width > ellipsis.size() ? width - ellipsis.size() : 0);
  return std::string(keep) + std::string(ellipsis);
}

std::vector<std::string> event_lines(const json::value& event, const view_limits& limits) {
  std::vector<std::string> out;
  auto type = string_of(event, "type");
  auto content = string_of(event, "content");
  if (type == "session_start") {
    auto attempt = metadata_of(event) ? json::get_int(*metadata_of(event), "attempt") : std::nullopt;
    auto model = metadata_string(event, "model");
    std::string line = "[start] run " + string_of(event, "run_id") +
                       (attempt ? ", attempt " + std::to_string(*attempt) : std::string()) +
                       (model.empty() ? std::string() : ", model " + model);
    add_block(out, line, "", 1, limits);
    add_block(out, "[query]", content, limits.think_lines, limits);
  } else if (type == "think") {
    add_block(out, "[think]", content, limits.think_lines, limits);
  } else if (type == "tool_call") {
    std::string text = tool_and_arguments(event);
    if (metadata_bool(event, "tool_policy_denied").value_or(false))
      text += " (denied: " + metadata_string(event, "denial_reason") + ")";
    add_block(out, "[tool]", text, 1, limits);
  } else if (type == "step_end") {
    auto step = metadata_of(event) ? json::get_int(*metadata_of(event), "step") : std::nullopt;
    add_block(out, "[step " + (step ? std::to_string(*step) : std::string("?")) + " done]", "", 1, limits);
  } else if (type == "ask_user") {
    add_block(out, "[approval]",
              string_of(event, "approval_request_id") + " asks to run " + tool_and_arguments(event) + ": " + content, 3,
              limits);
  } else if (type == "tool_result") {
    auto approved = metadata_bool(event, "approved");
    std::string label = "[result] " + string_of(event, "tool_name");
    if (approved)
      label += *approved ? " (approved)" : " (not approved)";
    add_block(out, label + ":", content, limits.result_lines, limits);
  } else if (type == "session_end") {
    add_block(out, "[answer]", content, 0, limits, true);
  } else if (type == "error") {
    auto kind = metadata_string(event, "error_type");
    add_block(out, "[error]", kind.empty() ? content : content + " (" + kind + ")", limits.think_lines, limits);
  } else {
    add_block(out, "[" + bounded_line(terminal_safe(type), 40) + "]", content, limits.think_lines, limits);
  }
  return out;
}

std::optional<approval_request> approval_of(const json::value& event) {
  if (string_of(event, "type") != "ask_user")
    return std::nullopt;
  auto id = string_of(event, "approval_request_id");
  if (id.empty())
    id = metadata_string(event, "request_id");
  if (id.empty())
    return std::nullopt;
  return approval_request{id, string_of(event, "tool_name")};
}

std::string progress_line(const json::value& run, int64_t steps_seen) {
  std::string line = "[run] " + string_of(run, "run_id") + ": " + string_of(run, "status");
  if (auto attempts = json::get_int(run, "attempts"))
    line += ", attempt " + std::to_string(*attempts);
  if (auto events = json::get_int(run, "event_count"))
    line += ", " + std::to_string(*events) + " events";
  line += ", " + std::to_string(steps_seen) + (steps_seen == 1 ? " step" : " steps");
  auto error = string_of(run, "error");
  if (error.empty())
    error = string_of(run, "last_error");
  if (!error.empty())
    line += ": " + error;
  return bounded_line(split_lines(terminal_safe(line)).front(), view_limits{}.width);
}

bool retryable_status(int status) {
  return status == 408 || status == 429 || status >= 500;
}

int64_t reconnect_delay_ms(int attempt) {
  int64_t delay = 250;
  for (int i = 1; i < attempt && delay < 4000; ++i)
    delay *= 2;
  return std::min<int64_t>(delay, 4000);
}

} // namespace troupe::protocol::run_view

// Pure pieces of the agent loop: history clean-up, tool-output bounds, citations. The system message
// is protocol/skills.hpp's, the context budget protocol/context_window.hpp's.
#pragma once

#include "protocol/chat_types.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

// Drops orphan tool messages and tool calls that were never answered (AS-19), so the upstream
// never sees an unanswered call.
std::vector<chat_message> clean_history(std::vector<chat_message> history);

// Cuts tool output to `max_bytes` (never inside a UTF-8 sequence); the bytes it dropped. The loop
// applies it to every surface; each dialect words the notice that follows the cut text.
std::size_t cut_tool_output(std::string& output, std::size_t max_bytes);
// The agent service's notice after cut output (AS-22).
std::string truncation_notice(std::size_t dropped);

// Source ids named in JSON tool output, in order, de-duplicated, at most 100 (AS-77).
std::vector<std::string> harvest_citations(std::string_view tool_output);

// Adds `more` to `into`, keeping first-seen order and the cap of 100 (AS-77).
void merge_citations(std::vector<std::string>& into, const std::vector<std::string>& more);

} // namespace troupe::protocol

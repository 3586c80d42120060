#include "protocol/agent_loop.hpp"

#include "protocol/json.hpp"
#include "protocol/utf8.hpp"

#include <algorithm>
#include <set>

namespace troupe::protocol {

namespace {

constexpr std::size_t max_citations = 100;
constexpr int max_citation_depth = 8;

void walk(const json::value& v, int depth, std::vector<std::string>& out) {
  if (depth > max_citation_depth || out.size() >= max_citations)
    return;
  auto add = [&](const json::value& s) {
    if (s.IsString())
      merge_citations(out, {std::string(s.GetString(), s.GetStringLength())});
  };
  if (v.IsArray()) {
    for (auto& x : v.GetArray())
      walk(x, depth + 1, out);
    return;
  }
  if (!v.IsObject())
    return;
  for (auto& m : v.GetObject()) {
    std::string_view key(m.name.GetString(), m.name.GetStringLength());
    if (key == "source_id" || key == "source_item_id" || key == "citation_id")
      add(m.value);
    else if ((key == "source_ids" || key == "cited_source_ids" || key == "citation_ids") && m.value.IsArray())
      for (auto& x : m.value.GetArray())
        add(x);
    else if (key != "source_item_ids")
      walk(m.value, depth + 1, out);
  }
}

} // namespace

std::vector<chat_message> clean_history(std::vector<chat_message> history) {
  std::set<std::string> answered;
  for (auto& m : history)
    if (m.role == "tool")
      answered.insert(m.tool_call_id);
  std::set<std::string> offered;
  std::vector<chat_message> out;
  for (auto& m : history) {
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      auto& calls = m.tool_calls;
      calls.erase(std::remove_if(calls.begin(), calls.end(),
                                 [&](const tool_call& c) { return answered.count(c.id) == 0; }),
                  calls.end());
      for (auto& c : calls)
        offered.insert(c.id);
      if (calls.empty() && (m.content_null || m.content.empty()))
        continue;
    } else if (m.role == "tool" && offered.count(m.tool_call_id) == 0) {
      continue;
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::size_t cut_tool_output(std::string& output, std::size_t max_bytes) {
  if (output.size() <= max_bytes)
    return 0;
  auto cut = utf8_prefix(output, max_bytes).size();
  auto dropped = output.size() - cut;
  output.resize(cut);
  return dropped;
}

std::string truncation_notice(std::size_t dropped) {
  return "\n... [truncated " + std::to_string(dropped) + " chars]";
}

std::vector<std::string> harvest_citations(std::string_view tool_output) {
  std::vector<std::string> out;
  auto first = tool_output.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || (tool_output[first] != '{' && tool_output[first] != '['))
    return out;
  if (auto doc = json::parse(tool_output))
    walk(*doc, 0, out);
  return out;
}

void merge_citations(std::vector<std::string>& into, const std::vector<std::string>& more) {
  for (auto& id : more) {
    if (into.size() >= max_citations)
      return;
    if (std::find(into.begin(), into.end(), id) == into.end())
      into.push_back(id);
  }
}

} // namespace troupe::protocol

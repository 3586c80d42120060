#include "protocol/workspace_names.hpp"

#include <algorithm>

namespace troupe::protocol {

namespace {

constexpr std::size_t max_rule_name = 100;

bool lower_or_digit_or_underscore(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// `[a-z][a-z0-9_]*`
bool identifier(std::string_view s) {
  return !s.empty() && s[0] >= 'a' && s[0] <= 'z' && std::all_of(s.begin() + 1, s.end(), lower_or_digit_or_underscore);
}

} // namespace

bool is_event_type(std::string_view name) {
  auto colon = name.find(':');
  if (colon == std::string_view::npos || !identifier(name.substr(0, colon)))
    return false;
  auto local = name.substr(colon + 1);
  // One or more dot-separated identifiers; an empty part (leading, trailing or double dot) fails.
  std::size_t start = 0;
  for (;;) {
    auto dot = local.find('.', start);
    if (!identifier(local.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start)))
      return false;
    if (dot == std::string_view::npos)
      return true;
    start = dot + 1;
  }
}

std::string_view namespace_of(std::string_view name) {
  auto colon = name.find(':');
  return colon == std::string_view::npos ? std::string_view() : name.substr(0, colon);
}

std::optional<std::string> rule_name_rejection(std::string_view name) {
  auto colon = name.find(':');
  bool shaped = colon != std::string_view::npos && identifier(name.substr(0, colon)) && colon + 1 < name.size();
  if (shaped) {
    auto local = name.substr(colon + 1);
    auto first = local[0];
    shaped = ((first >= 'a' && first <= 'z') || (first >= '0' && first <= '9'))
             && std::all_of(local.begin(), local.end(), [](char c) {
                  return lower_or_digit_or_underscore(c) || c == '.' || c == '-';
                });
  }
  if (!shaped)
    return "'" + std::string(name) + "' is not a rule name: a namespace, a ':' and a name, in lowercase, such as "
           + "'oncall:page_on_error'";
  if (name.size() > max_rule_name)
    return std::string("a rule name must be at most 100 characters");
  if (namespace_of(name) == reserved_namespace)
    return std::string(reserved_namespace_message);
  return std::nullopt;
}

std::optional<std::string> type_name_rejection(std::string_view name, const std::vector<std::string>& known_types) {
  if (is_event_type(name))
    return std::nullopt;
  std::string x(name);
  if (name.find(':') != std::string_view::npos)
    return "'" + x + "' is not an event type name: a namespace, a ':' and a local name, in lowercase, such as "
           + "'oncall:alert.fired'";
  std::vector<std::string> hints;
  for (auto& t : known_types) {
    auto colon = t.find(':');
    if (colon != std::string::npos && t.compare(colon + 1, std::string::npos, x) == 0)
      hints.push_back(t);
  }
  std::sort(hints.begin(), hints.end());
  hints.erase(std::unique(hints.begin(), hints.end()), hints.end());
  auto head = "event type '" + x + "' has no namespace; ";
  if (hints.empty())
    return head + "a name is a namespace, a ':' and a local name, such as 'oncall:alert.fired'";
  if (hints.size() == 1)
    return head + "did you mean '" + hints[0] + "'?";
  std::string list;
  for (auto& h : hints)
    list += (list.empty() ? "'" : ", '") + h + "'";
  return head + "did you mean one of " + list + "?";
}

} // namespace troupe::protocol

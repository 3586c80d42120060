// reflexr.v1 names (workspace-stream.md §1): qualified event types, rule names, the reserved
// `reflexr` namespace, and the exact rejection of a string that is not a type name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

inline constexpr std::string_view reserved_namespace = "reflexr";
inline constexpr const char* reserved_namespace_message = "the reflexr namespace is reserved";

// WS-6: `ns:local.name`, lowercase, one namespace and one ':'.
bool is_event_type(std::string_view name);

// The namespace of a qualified name (before the first ':'), or "".
std::string_view namespace_of(std::string_view name);

// WS-7: why a rule name is refused (a bad shape, over 100 characters, or the reserved namespace), or
// nullopt when it is a valid rule name.
std::optional<std::string> rule_name_rejection(std::string_view name);

// WS-9: the message refusing `name` when it is not a qualified type name, with the hint searched in
// `known_types` (any order; configured types and facts), or nullopt when it is one.
std::optional<std::string> type_name_rejection(std::string_view name, const std::vector<std::string>& known_types);

} // namespace troupe::protocol

#include "protocol/workspace_path.hpp"

#include "protocol/utf8.hpp"

#include <cstddef>
#include <vector>

namespace troupe::protocol {

namespace {

bool is_allowed_ascii(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '@' || c == '-';
}

// The components of an absolute path after lexical normalization; `..` at the root stays there.
std::vector<std::string_view> normal_components(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/')
      ++i;
    std::size_t start = i;
    while (i < path.size() && path[i] != '/')
      ++i;
    std::string_view part = path.substr(start, i - start);
    if (part.empty() || part == ".")
      continue;
    if (part == "..") {
      if (!parts.empty())
        parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  return parts;
}

} // namespace

std::string sanitize_segment(std::string_view segment) {
  if (segment.empty() || segment == "." || segment == "..")
    return "_default";
  std::string out;
  out.reserve(segment.size());
  std::size_t i = 0;
  while (i < segment.size()) {
    auto c = static_cast<unsigned char>(segment[i]);
    if (c < 0x80) {
      out.push_back(is_allowed_ascii(c) ? static_cast<char>(c) : '_');
      ++i;
      continue;
    }
    std::size_t len = utf8_sequence_length(segment, i);
    out.push_back('_');
    i += len == 0 ? 1 : len;
  }
  return out;
}

std::string user_workspace_dir(std::string_view workspaces_root, std::string_view tenant_key,
                               std::string_view user_key) {
  std::string out;
  if (!workspaces_root.empty()) {
    std::size_t end = workspaces_root.find_last_not_of('/');
    // An all-slash root is "/": keep nothing so the appended "/tenants" starts at the root.
    out.assign(end == std::string_view::npos ? std::string_view{} : workspaces_root.substr(0, end + 1));
    out += '/';
  }
  out += "tenants/";
  out += sanitize_segment(tenant_key);
  out += "/users/";
  out += sanitize_segment(user_key);
  return out;
}

bool is_within(std::string_view root, std::string_view path) {
  if (root.empty() || path.empty() || root.front() != '/' || path.front() != '/')
    return false;
  auto root_parts = normal_components(root);
  auto path_parts = normal_components(path);
  if (path_parts.size() < root_parts.size())
    return false;
  for (std::size_t i = 0; i < root_parts.size(); ++i)
    if (root_parts[i] != path_parts[i])
      return false;
  return true;
}

} // namespace troupe::protocol

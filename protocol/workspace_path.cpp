#include "protocol/workspace_path.hpp"

#include "protocol/ids.hpp"

#include <cstddef>
#include <vector>

namespace troupe::protocol {

namespace {

bool is_allowed_ascii(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '@' || c == '-';
}

constexpr char upper_hex[] = "0123456789ABCDEF";
// Encoded segments longer than this keep a prefix and end in a digest of the whole key.
constexpr std::size_t max_segment = 128;
constexpr std::size_t kept_prefix = max_segment - 2 - 64;

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

std::string encode_segment(std::string_view key) {
  if (key.empty())
    return "%none";
  std::string out;
  out.reserve(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) {
    auto c = static_cast<unsigned char>(key[i]);
    // A leading dot is encoded too: no segment is `.`, `..` or hidden.
    if (is_allowed_ascii(c) && !(i == 0 && c == '.')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(upper_hex[c >> 4]);
      out.push_back(upper_hex[c & 0xf]);
    }
  }
  if (out.size() <= max_segment)
    return out;
  // Cut between escapes, never inside one, then name the whole key by its digest.
  auto cut = kept_prefix;
  while (cut > 0 && (out[cut - 1] == '%' || (cut > 1 && out[cut - 2] == '%')))
    --cut;
  return out.substr(0, cut) + "%~" + sha256_hex(key);
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
  out += encode_segment(tenant_key);
  out += "/users/";
  out += encode_segment(user_key);
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

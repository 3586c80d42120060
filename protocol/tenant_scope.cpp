#include "protocol/tenant_scope.hpp"

#include <vector>

namespace troupe::protocol {

namespace {

// The path's segments after the leading "/v1"; an empty segment (a doubled or trailing slash)
// matches no route.
std::optional<std::vector<std::string_view>> v1_segments(std::string_view path) {
  constexpr std::string_view prefix = "/v1/";
  if (path.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  std::vector<std::string_view> out;
  path.remove_prefix(prefix.size());
  while (true) {
    auto slash = path.find('/');
    auto segment = path.substr(0, slash);
    if (segment.empty() || out.size() == 3)
      return std::nullopt;
    out.push_back(segment);
    if (slash == std::string_view::npos)
      return out;
    path.remove_prefix(slash + 1);
  }
}

} // namespace

tenant_scope scope_of(const identity& id) {
  if (id.service_token)
    return {};
  return {id.tenant_key};
}

bool is_control_endpoint(std::string_view method, std::string_view path) {
  auto s = v1_segments(path);
  if (!s)
    return false;
  auto n = s->size();
  auto& collection = (*s)[0];
  auto tail = n == 3 ? (*s)[2] : std::string_view();
  if (method == "GET") {
    if (collection == "runs")
      return n < 3 || tail == "events" || tail == "stream";
    if (collection == "traces")
      return n < 3 || tail == "events";
    if (collection == "approvals")
      return n < 3;
    return collection == "metrics" && n == 1;
  }
  if (method == "POST" && n == 3) {
    if (collection == "runs")
      return tail == "cancel";
    if (collection == "approvals")
      return tail == "approve" || tail == "deny";
  }
  return false;
}

} // namespace troupe::protocol

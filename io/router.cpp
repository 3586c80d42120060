#include "io/router.hpp"

#include "protocol/errors.hpp"

namespace troupe::io {

namespace {

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    auto slash = path.find('/', start);
    auto seg = path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (!seg.empty())
      out.emplace_back(seg);
    if (slash == std::string_view::npos)
      break;
    start = slash + 1;
  }
  return out;
}

// A last pattern segment `{name...}` takes one or more path segments, joined again by '/'.
bool match_rest(const std::vector<std::string>& pattern, const std::vector<std::string>& path,
                std::map<std::string, std::string>& params, bool& matched) {
  constexpr std::string_view rest = "...}";
  auto& last = pattern.back();
  if (last.size() <= rest.size() + 1 || last.front() != '{' || last.compare(last.size() - rest.size(), rest.size(), rest) != 0)
    return false;
  matched = false;
  auto fixed = pattern.size() - 1;
  if (path.size() <= fixed)
    return true;
  for (std::size_t i = 0; i < fixed; ++i) {
    auto& p = pattern[i];
    if (p.size() > 2 && p.front() == '{' && p.back() == '}')
      params[p.substr(1, p.size() - 2)] = path[i];
    else if (p != path[i])
      return true;
  }
  std::string value = path[fixed];
  for (auto i = fixed + 1; i < path.size(); ++i)
    value += "/" + path[i];
  params[last.substr(1, last.size() - rest.size() - 1)] = std::move(value);
  matched = true;
  return true;
}

bool match(const std::vector<std::string>& pattern, const std::vector<std::string>& path,
           std::map<std::string, std::string>& params) {
  if (bool matched = false; !pattern.empty() && match_rest(pattern, path, params, matched))
    return matched;
  if (pattern.size() != path.size())
    return false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    auto& p = pattern[i];
    if (p.size() > 2 && p.front() == '{' && p.back() == '}')
      params[p.substr(1, p.size() - 2)] = path[i];
    else if (p != path[i])
      return false;
  }
  return true;
}

} // namespace

const std::string& http_request::header(const std::string& name) const {
  static const std::string empty;
  auto it = headers.find(name);
  return it == headers.end() ? empty : it->second;
}

http_response json_response(int status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http_response error_response(protocol::dialect d, const problem& p) {
  auto rendered = protocol::render_error(d, p);
  auto r = json_response(rendered.status, std::move(rendered.body));
  // When to try again, as the problem says (an upstream's Retry-After, RS-43); a store or service that
  // cannot take the request now (CJ-4's store_unavailable): soon.
  if (p.retry_after_seconds >= 0)
    r.headers.emplace_back("Retry-After", std::to_string(p.retry_after_seconds));
  else if (p.code == errc::unavailable)
    r.headers.emplace_back("Retry-After", "1");
  return r;
}

void router::add(std::string method, std::string pattern, http_handler handler) {
  routes_.push_back({std::move(method), split_path(pattern), std::move(handler)});
}

void router::dispatch(http_request& request, const std::shared_ptr<http_exchange>& exchange) const {
  auto segments = split_path(request.path);
  bool path_known = false;
  for (auto& r : routes_) {
    std::map<std::string, std::string> params;
    if (!match(r.segments, segments, params))
      continue;
    path_known = true;
    if (r.method != request.method)
      continue;
    request.params = std::move(params);
    r.handler(request, exchange);
    return;
  }
  auto d = protocol::dialect_for_path(request.path);
  auto code = path_known ? errc::method_not_allowed : errc::not_found;
  exchange->respond(json_response(protocol::http_status(code),
                                  protocol::error_body(d, code, path_known ? "Method Not Allowed" : "Not Found")));
}

} // namespace troupe::io

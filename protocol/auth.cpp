#include "protocol/auth.hpp"

namespace troupe::protocol {

namespace {

bool equal_constant_time(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

} // namespace

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

std::string presented_token(std::string_view authorization, std::string_view service_token_header) {
  auto auth = trim_ows(authorization);
  if (auth.size() > 7) {
    auto scheme = auth.substr(0, 7);
    bool bearer = true;
    for (std::size_t i = 0; i < 7; ++i)
      bearer = bearer && std::tolower(static_cast<unsigned char>(scheme[i])) == "bearer "[i];
    if (bearer)
      return std::string(trim_ows(auth.substr(7)));
  }
  return std::string(trim_ows(service_token_header));
}

bool token_accepted(const std::vector<std::string>& accepted, std::string_view presented) {
  bool ok = false;
  for (auto& t : accepted)
    ok |= !presented.empty() && equal_constant_time(t, presented);
  return ok;
}

std::string infer_tenant(std::string_view user_key) {
  auto colon = user_key.find(':');
  return colon == std::string_view::npos ? std::string() : std::string(user_key.substr(0, colon));
}

} // namespace troupe::protocol

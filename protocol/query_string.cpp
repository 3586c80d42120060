#include "protocol/query_string.hpp"

#include <cctype>

namespace troupe::protocol {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

} // namespace

std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> query_pairs(std::string_view raw) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t start = 0;
  while (start < raw.size()) {
    auto amp = raw.find('&', start);
    auto pair = raw.substr(start, amp == std::string_view::npos ? std::string_view::npos : amp - start);
    auto eq = pair.find('=');
    if (!pair.empty())
      out.emplace_back(percent_decode(pair.substr(0, eq), true),
                       eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1), true));
    if (amp == std::string_view::npos)
      break;
    start = amp + 1;
  }
  return out;
}

} // namespace troupe::protocol

#include "protocol/duration.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace troupe::protocol {

std::optional<double> parse_duration(std::string_view text) {
  if (text.size() < 3 || text[0] != 'P')
    return std::nullopt;
  double total = 0;
  bool in_time = false, any = false;
  // Units in the order they may appear; each at most once.
  const std::string_view date_units = "D", time_units = "HMS";
  std::size_t next_unit = 0;
  std::size_t i = 1;
  while (i < text.size()) {
    if (text[i] == 'T') {
      if (in_time || i + 1 == text.size())
        return std::nullopt;
      in_time = true;
      next_unit = 0;
      ++i;
      continue;
    }
    std::size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
      ++i;
    if (i == start || i == text.size())
      return std::nullopt;
    auto number = std::string(text.substr(start, i - start));
    if (number.front() == '.' || number.back() == '.' || number.find('.') != number.rfind('.'))
      return std::nullopt;
    double n = std::stod(number);
    char unit = text[i++];
    auto units = in_time ? time_units : date_units;
    auto at = units.find(unit);
    if (at == std::string_view::npos || at < next_unit)
      return std::nullopt;
    if (number.find('.') != std::string::npos && unit != 'S')
      return std::nullopt;
    next_unit = at + 1;
    static constexpr double date_scale[] = {86400};
    static constexpr double time_scale[] = {3600, 60, 1};
    total += n * (in_time ? time_scale[at] : date_scale[at]);
    any = true;
  }
  if (!any)
    return std::nullopt;
  return total;
}

std::optional<double> duration_value(const json::value& v) {
  if (v.IsNumber()) {
    auto d = v.GetDouble();
    return std::isfinite(d) && d >= 0 ? std::optional<double>(d) : std::nullopt;
  }
  if (v.IsString())
    return parse_duration(std::string_view(v.GetString(), v.GetStringLength()));
  return std::nullopt;
}

std::string format_duration(double seconds) {
  if (!(seconds > 0))
    return "PT0S";
  auto whole = static_cast<int64_t>(std::floor(seconds));
  double fraction = seconds - static_cast<double>(whole);
  auto days = whole / 86400, hours = whole % 86400 / 3600, minutes = whole % 3600 / 60, secs = whole % 60;
  std::string out = "P";
  if (days)
    out += std::to_string(days) + "D";
  if (hours || minutes || secs || fraction > 0) {
    out += "T";
    if (hours)
      out += std::to_string(hours) + "H";
    if (minutes)
      out += std::to_string(minutes) + "M";
    if (fraction > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6f", static_cast<double>(secs) + fraction);
      std::string s(buf);
      while (s.back() == '0')
        s.pop_back();
      out += s + "S";
    } else if (secs) {
      out += std::to_string(secs) + "S";
    }
  }
  return out;
}

} // namespace troupe::protocol

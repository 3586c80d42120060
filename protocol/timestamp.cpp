#include "protocol/timestamp.hpp"

#include <cmath>
#include <cstdio>
#include <ctime>

namespace troupe::protocol {

namespace {

std::string utc_text(std::chrono::system_clock::time_point t, const char* zone) {
  using namespace std::chrono;
  auto us = duration_cast<microseconds>(t.time_since_epoch()).count();
  auto secs = static_cast<std::time_t>(us / 1000000);
  auto frac = static_cast<long>(us % 1000000);
  if (frac < 0) {
    frac += 1000000;
    secs -= 1;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ld%s", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac, zone);
  return buf;
}

} // namespace

std::string iso_timestamp(std::chrono::system_clock::time_point t) {
  return utc_text(t, "+00:00");
}

std::string utc_timestamp(std::chrono::system_clock::time_point t) {
  return utc_text(t, "Z");
}

std::string iso_now() {
  return iso_timestamp(std::chrono::system_clock::now());
}

std::optional<std::chrono::system_clock::time_point> parse_iso_timestamp(const std::string& text) {
  std::tm tm{};
  long frac = 0;
  int consumed = 0;
  if (text.size() != 32
      || std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%6ld+00:00%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &frac, &consumed) != 7
      || consumed != 32)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  auto secs = timegm(&tm);
  return std::chrono::system_clock::from_time_t(secs) + std::chrono::microseconds(frac);
}

namespace {

// `n` digits at `at` as a number, or -1.
int digits(std::string_view s, std::size_t at, std::size_t n) {
  if (at + n > s.size())
    return -1;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

bool leap(int year) {
  return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

int days_in(int year, int month) {
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && leap(year) ? 29 : days[month - 1];
}

} // namespace

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s) {
  int year = digits(s, 0, 4), month = digits(s, 5, 2), day = digits(s, 8, 2);
  int hour = digits(s, 11, 2), minute = digits(s, 14, 2), second = digits(s, 17, 2);
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':'
      || year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59
      || second < 0 || second > 59 || day > days_in(year, month))
    return std::nullopt;
  std::size_t at = 19;
  long micros = 0;
  if (s[at] == '.') {
    std::size_t first = ++at;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9' && at - first < 9)
      ++at;
    if (at == first || (at < s.size() && s[at] >= '0' && s[at] <= '9'))
      return std::nullopt;
    for (std::size_t i = 0; i < 6; ++i)
      micros = micros * 10 + (first + i < at ? s[first + i] - '0' : 0);
  }
  long offset = 0; // seconds east of UTC
  if (at + 1 == s.size() && (s[at] == 'Z' || s[at] == 'z')) {
    offset = 0;
  } else if (at + 6 == s.size() && (s[at] == '+' || s[at] == '-') && s[at + 3] == ':') {
    int oh = digits(s, at + 1, 2), om = digits(s, at + 4, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59)
      return std::nullopt;
    offset = (s[at] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
  } else {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  auto secs = timegm(&tm) - offset;
  return std::chrono::system_clock::from_time_t(secs) + std::chrono::microseconds(micros);
}

double elapsed_ms(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
  return std::round(static_cast<double>(us) / 10.0) / 100.0;
}

} // namespace troupe::protocol

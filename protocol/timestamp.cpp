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

double elapsed_ms(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
  return std::round(static_cast<double>(us) / 10.0) / 100.0;
}

} // namespace troupe::protocol

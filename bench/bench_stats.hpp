// The statistics every benchmark reports, and how they are written.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace troupe::bench {

// Seconds since `t` on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The nearest-rank p-th percentile (p in 0..100); -1 for no samples.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return -1;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(p / 100.0 * static_cast<double>(v.size()))));
  return v[std::min(rank, v.size()) - 1];
}

// The median (the mean of the middle two for an even count); 0 for no samples.
inline double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A JSON array of the samples, each printed with `fmt`.
inline std::string json_list(const std::vector<double>& v, const char* fmt = "%.1f") {
  std::string out = "[";
  char buf[64];
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, fmt, v[i]);
    out += (i ? "," : "") + std::string(buf);
  }
  return out + "]";
}

} // namespace troupe::bench

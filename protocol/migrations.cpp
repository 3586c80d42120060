#include "protocol/migrations.hpp"

#include "protocol/ids.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

namespace troupe::protocol {

namespace {

constexpr std::string_view min_reader_marker = "-- troupe-min-reader:";

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<int64_t> number(std::string_view s) {
  if (!all_digits(s) || s.size() > 9)
    return std::nullopt;
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

} // namespace

std::variant<migration_file, std::string> read_migration(std::string_view file_name, std::string sql) {
  auto where = std::string("migration file ") + std::string(file_name);
  auto underscore = file_name.find('_');
  auto dot = file_name.rfind(".sql");
  if (underscore == std::string_view::npos || dot == std::string_view::npos || dot + 4 != file_name.size()
      || underscore + 1 >= dot)
    return where + ": the name must be NNNN_what.sql";
  auto version = number(file_name.substr(0, underscore));
  if (!version || *version == 0)
    return where + ": the name must start with its version, a number from 1";
  migration_file f;
  f.version = *version;
  f.name = std::string(file_name);
  std::string_view text = sql;
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    auto line = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (line.substr(0, min_reader_marker.size()) == min_reader_marker) {
      auto v = number(trim(line.substr(min_reader_marker.size())));
      if (!v)
        return where + ": `-- troupe-min-reader:` must be followed by a version number";
      f.min_reader = *v;
    }
    if (end == std::string_view::npos)
      break;
    at = end + 1;
  }
  f.sha256 = sha256_hex(sql);
  f.sql = std::move(sql);
  return f;
}

std::string check_migration_set(const std::vector<migration_file>& files) {
  for (std::size_t i = 0; i < files.size(); ++i) {
    auto expected = static_cast<int64_t>(i + 1);
    if (files[i].version != expected)
      return "migration files must be numbered 1, 2, 3... without gaps or repeats: expected version "
             + std::to_string(expected) + ", found " + files[i].name;
  }
  return {};
}

std::variant<migration_plan, std::string> plan_migrations(const std::vector<migration_file>& files,
                                                          const std::vector<applied_migration>& applied) {
  if (auto err = check_migration_set(files); !err.empty())
    return err;
  auto reader = static_cast<int64_t>(files.size());
  std::map<int64_t, const applied_migration*> done;
  for (auto& a : applied) {
    done[a.version] = &a;
    if (a.min_reader > reader)
      return "the database needs troupe schema reader " + std::to_string(a.min_reader) + " (migration "
             + std::to_string(a.version) + " is applied) and this troupe reads schema " + std::to_string(reader)
             + ": upgrade troupe";
  }
  migration_plan plan;
  for (auto& f : files) {
    auto it = done.find(f.version);
    if (it == done.end()) {
      plan.pending.push_back(&f);
    } else if (it->second->sha256.empty()) {
      plan.adopt.push_back(f.version);
    } else if (it->second->sha256 != f.sha256) {
      return "migration " + std::to_string(f.version) + " was changed after it was applied";
    }
  }
  return plan;
}

} // namespace troupe::protocol

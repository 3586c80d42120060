#include "io/migration_files.hpp"

#include <unistd.h>

namespace troupe::io {

std::variant<std::vector<protocol::migration_file>, std::string> shipped_migrations(const embedded::sql_file* files) {
  std::vector<protocol::migration_file> out;
  for (auto f = files; f->name != nullptr; ++f) {
    auto read = protocol::read_migration(f->name, f->text);
    if (auto err = std::get_if<std::string>(&read))
      return *err;
    out.push_back(std::get<protocol::migration_file>(std::move(read)));
  }
  if (auto err = protocol::check_migration_set(out); !err.empty())
    return err;
  return out;
}

std::string migration_node() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0)
    return "embedded";
  return name;
}

} // namespace troupe::io
